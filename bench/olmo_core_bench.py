#!/usr/bin/env python3
"""Time OLMo-core 3.0.0's own Trainer on a Lathe preset's model and batch, as `lathe-engine bench`
times Lathe's, and print one JSON line.

    python olmo_core_bench.py --tokens FILE --d-model D --layers L --heads H --vocab V --seq S
        --batch-instances B --microbatch-instances M --steps N --warmup W --threads T

fp32 on the CPU, one process, AdamW and CosWithWarmup (as the presets), metrics_collect_interval
large so that no step waits for a metrics flush (Lathe's bench runs no callbacks at all), no
checkpoints. The clock runs from the end of the W-th step to the end of the (W+N)-th (the
trainer's pre_step/post_step hooks), so start-up, data indexing and warm-up are left out, as
Lathe's bench leaves them out. tokens/s = N x B x S / elapsed.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", required=True, help="uint16 or uint32 token file")
    ap.add_argument("--dtype", default="uint16", choices=("uint16", "uint32"))
    for k in ("d-model", "layers", "heads", "vocab", "seq", "batch-instances",
              "microbatch-instances", "steps", "warmup", "threads"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    from olmo_core.data import NumpyDataLoaderConfig, NumpyFSLDatasetConfig, TokenizerConfig
    from olmo_core.nn.transformer import TransformerBlockType, TransformerConfig
    from olmo_core.optim import AdamWConfig, CosWithWarmup
    from olmo_core.train import Duration, TrainerConfig, prepare_training_environment
    from olmo_core.train.callbacks import Callback
    from olmo_core.train.train_module import TransformerTrainModuleConfig

    class Clock(Callback):
        start = end = None

        def post_step(self):
            if self.step == args.warmup:
                self.start = time.perf_counter()
            if self.step == args.warmup + args.steps:
                self.end = time.perf_counter()

    prepare_training_environment(seed=0, backend=None)
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="olmo-core-bench-"))
    model = TransformerConfig.llama_like(
        d_model=args.d_model, vocab_size=args.vocab, n_layers=args.layers, n_heads=args.heads,
        block_name=TransformerBlockType.reordered_norm, qk_norm=True, rope_theta=500_000,
        layer_norm_eps=1e-6).build(init_device="cpu")
    train_module = TransformerTrainModuleConfig(
        rank_microbatch_size=args.microbatch_instances * args.seq,
        max_sequence_length=args.seq,
        optim=AdamWConfig(lr=args.lr),
        max_grad_norm=1.0,
        scheduler=CosWithWarmup(warmup=min(100, args.warmup + args.steps)),
    ).build(model, device=torch.device("cpu"))
    dataset = NumpyFSLDatasetConfig(
        tokenizer=TokenizerConfig(vocab_size=args.vocab, eos_token_id=0, pad_token_id=1),
        paths=[args.tokens], sequence_length=args.seq, dtype=args.dtype,
        work_dir=str(work / "work")).build()
    loader = NumpyDataLoaderConfig(global_batch_size=args.batch_instances * args.seq, seed=0,
                                   num_workers=0, work_dir=str(work / "work")).build(dataset)
    clock = Clock()
    trainer = TrainerConfig(save_folder=str(work / "run"),
                            max_duration=Duration.steps(args.warmup + args.steps),
                            metrics_collect_interval=args.warmup + args.steps + 1,
                            no_checkpoints=True,
                            callbacks={"clock": clock}).build(train_module, loader)
    trainer.fit()
    secs = clock.end - clock.start
    print(json.dumps({"trainer": "olmo-core", "steps": args.steps, "step_time_s": secs / args.steps,
                      "tokens_per_s": args.steps * args.batch_instances * args.seq / secs,
                      "threads": torch.get_num_threads()}))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (see tests/peer/olmo_core_run.py, end_rank)


if __name__ == "__main__":
    main()
