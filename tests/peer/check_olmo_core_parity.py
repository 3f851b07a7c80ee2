#!/usr/bin/env python3
"""Lathe trains like OLMo-core: the same model, weights, data and hyper-parameters, step by step.

    python check_olmo_core_parity.py LATHE_ENGINE [--case NAME ...] [--steps 20] [--keep DIR]

For each case, OLMo-core 3.0.0 itself trains a small OLMo2 model on CPU (olmo_core_run.py, in this
folder, run with this same Python); its initial weights become a Lathe checkpoint that Lathe
starts from (load_strategy=always, fresh trainer and optimizer state), Lathe trains on the same
token file with the same settings, and every step's `train/CE loss`, `optim/total grad norm` and
`optim/LR (group 0)` must agree within --rtol (default 1e-5, relative).

Cases:
    base        AdamW (betas 0.9/0.95, weight decay 0.1 on every parameter), clipping at 1.0,
                cosine with 5 warm-up steps, one micro-batch per step
    zloss       the same with z_loss_multiplier 1e-4 (train/Z loss compared as well)
    microbatch  micro-batches of 2 instances (4 per step)
    ddp         2 ranks, data-parallel in both trainers (OLMo-core: torchrun, Gloo, its DDP;
                Lathe: `launch --nproc 2`, dp_config ddp), each rank taking every 2nd instance
    skip_step   SkipStepAdamW (OLMo-core's foreach path) with a rolling interval of 4 and a sigma
                factor of 1, so that steps are skipped; optim/step skipped compared as well
    lion        Lion (betas 0.9/0.95, LR 1e-4, its OLMo-core default), within 1e-4: its update is the
                sign of the momentum, so an element within rounding of zero moves by +-LR either
                way and the forwards' 1e-6 differences grow
    groups      AdamW with group overrides: no weight decay on the embeddings, the norms at twice
                the LR; both groups' LRs compared
    llama_like  a Llama-style model: pre-norm blocks (block_name default), no QK-norm, grouped-query
                attention with 2 key/value heads for 4 query heads
    olmo3       an OLMo3-style model: 3 layers, windows of 16 tokens on the first two, the last
                attending fully (OLMo3's pattern rule), on sequences of 64
    instance_filter
                OLMo-core's repetition filter (instance_filter_config, periods 1 to 13, 5 repeats)
                over tokens with a repeated unit in about half of the instances: masked
                instances train on nothing yet count in the loss's divisor; the shares of masked
                instances and labels are compared as well
    label_mask  a label mask file beside the token file (label_mask_paths: spans of 1 to 40 tokens
                alternately masked out), as supervised fine-tuning trains on answers only; the
                share of masked labels is compared as well

Exits 0 when every case agrees, 1 naming the case, metric, step and both values otherwise, 2 when a
trainer fails to run. Nothing here is a number copied from either trainer: both run every time.
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Settings shared by both trainers (olmo_core_run.py's defaults, spelled out for Lathe).
D_MODEL, LAYERS, HEADS, VOCAB, SEQ, BATCH, LR, WARMUP, WD = 128, 2, 4, 512, 64, 8, 1e-3, 5, 0.1

CASES = {
    "base": {"z_loss": 0.0, "microbatch": BATCH},
    "zloss": {"z_loss": 1e-4, "microbatch": BATCH},
    "microbatch": {"z_loss": 0.0, "microbatch": 2},
    "ddp": {"z_loss": 0.0, "microbatch": BATCH // 2, "nproc": 2},
    "skip_step": {
        "z_loss": 0.0, "microbatch": BATCH,
        "olmo": ["--optim", "skip_step_adamw", "--rolling-interval-length", "4",
                 "--sigma-factor", "1", "--data", "markov"],
        "lathe": ["train_module.optim.name=skip_step_adamw",
                  "train_module.optim.rolling_interval_length=4",
                  "train_module.optim.sigma_factor=1"],
        "compared": ["optim/step skipped"],
        "must_skip": True,
    },
    "lion": {
        "z_loss": 0.0, "microbatch": BATCH, "olmo": ["--optim", "lion", "--lr", "1e-4"],
        "lathe": ["train_module.optim.name=lion", "train_module.optim.lr=0.0001"],
        # Lion steps every element by +-lr, the sign of its momentum: an element within rounding
        # of zero steps either way, so the two forwards' 1e-6 differences grow step by step.
        "rtol": 1e-4,
    },
    "groups": {
        "z_loss": 0.0, "microbatch": BATCH,
        "olmo": ["--group-overrides", json.dumps([
            {"params": ["embeddings.*"], "opts": {"weight_decay": 0.0}},
            {"params": ["*norm*"], "opts": {"lr": 2 * LR}}])],
        "lathe": ['train_module.optim.group_overrides=[{"params": ["embeddings.*"], '
                  '"weight_decay": 0}, {"params": ["*norm*"], "lr": %r}]' % (2 * LR)],
        "compared": ["optim/LR (group 1)", "optim/LR (group 2)"],
    },
    "llama_like": {
        "z_loss": 0.0, "microbatch": BATCH,
        "olmo": ["--block", "default", "--no-qk-norm", "--kv-heads", "2"],
        "lathe": ["model.block_name=default", "model.qk_norm=false", "model.n_kv_heads=2"],
    },
    "label_mask": {
        "z_loss": 0.0, "microbatch": 2,
        "olmo": ["--label-mask"],
        "lathe": ["dataset.label_mask_paths=[{ref}/mask.bool]"],
        "compared": ["train/masked labels (%)"],
    },
    "instance_filter": {
        "z_loss": 0.0, "microbatch": 2,
        "olmo": ["--data", "repeats", "--instance-filter", "13,1,5"],
        "lathe": ['dataset.instance_filter_config={"repetition_max_period": 13, '
                  '"repetition_min_period": 1, "repetition_max_count": 5}'],
        "compared": ["train/masked instances (%)", "train/masked labels (%)"],
        "must_mask": True,
    },
    "olmo3": {
        "z_loss": 0.0, "microbatch": BATCH,
        "olmo": ["--layers", "3", "--sliding-window", "16,16,-1"],
        "lathe": ["model.n_layers=3", "model.sliding_window.pattern=[16,16,-1]",
                  "model.sliding_window.force_full_attention_on_first_layer=false",
                  "model.sliding_window.force_full_attention_on_last_layer=true"],
    },
}

COMPARED = ["train/CE loss", "optim/total grad norm", "optim/LR (group 0)"]

# OLMo-core parameter names (its state_dict) that Lathe spells differently.
RENAMES = {
    "model.lm_head.norm.weight": "model.lm_head_norm.weight",
    "model.lm_head.w_out.weight": "model.lm_head.weight",
}


def read_tensor_file(path):
    data = Path(path).read_bytes()
    if data[:8] != b"LATHETS1":
        raise SystemExit(f"{path}: not a Lathe tensor file")
    (hlen,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16:16 + hlen])
    return data, 16 + hlen, header["tensors"]


def write_tensor_file(path, entries, blobs):
    """`entries`: header entries with offsets recomputed here; `blobs`: each tensor's bytes."""
    offset = 0
    out_entries = []
    for e, b in zip(entries, blobs):
        e = dict(e, offset=offset, nbytes=len(b))
        out_entries.append(e)
        offset += (len(b) + 63) // 64 * 64
    header = json.dumps({"tensors": out_entries}).encode()
    header += b" " * ((-(16 + len(header))) % 64)
    with open(path, "wb") as f:
        f.write(b"LATHETS1" + struct.pack("<Q", len(header)) + header)
        for b in blobs:
            f.write(b)
            f.write(b"\0" * ((-len(b)) % 64))


def make_lathe_checkpoint(init_lathe, folder):
    """A complete Lathe checkpoint (step 0) holding OLMo-core's initial weights under Lathe's names."""
    data, start, tensors = read_tensor_file(init_lathe)
    entries, blobs = [], []
    for t in tensors:
        blobs.append(data[start + t["offset"]:start + t["offset"] + t["nbytes"]])
        entries.append(dict(t, name=RENAMES.get(t["name"], t["name"])))
    (folder / "model_and_optim").mkdir(parents=True)
    (folder / "train").mkdir()
    write_tensor_file(folder / "model_and_optim" / "rank0.lathe", entries, blobs)
    (folder / "train" / "rank0.json").write_text(json.dumps({"global_step": 0}))
    (folder / ".metadata.json").write_text(
        json.dumps({"ephemeral": False, "world_size": 1, "format": "lathe-checkpoint-v1"}))


def run(cmd, what):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(f"{what} failed (exit {r.returncode}):\n{r.stdout[-4000:]}", file=sys.stderr)
        sys.exit(2)
    return r.stdout


def lathe_metrics(run_folder):
    steps = {}
    with open(run_folder / "metrics.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            steps.setdefault(int(rec["step"]), {}).update(
                {k: v for k, v in rec["values"].items() if isinstance(v, (int, float))})
    return steps


def close(a, b, rtol):
    return a is not None and b is not None and math.isfinite(a) and abs(a - b) <= rtol * abs(b)


def run_case(name, case, engine, steps, work, rtol):
    rtol = max(rtol, case.get("rtol", 0.0))
    ref = work / "olmo"
    nproc = case.get("nproc", 1)
    run([sys.executable, str(HERE / "olmo_core_run.py"), "--work", str(ref), "--steps", str(steps),
         "--microbatch-instances", str(case["microbatch"]), "--z-loss", str(case["z_loss"]),
         "--nproc", str(nproc), *case.get("olmo", [])],
        f"{name}: OLMo-core")
    olmo = json.loads((ref / "olmo_metrics.json").read_text())["steps"]
    ckpt = work / "init" / "step0"
    make_lathe_checkpoint(ref / "init.lathe", ckpt)
    overrides = [
        f"run_name=parity-{name}", f"trainer.save_folder={work / 'lathe'}",
        f"model.d_model={D_MODEL}", f"model.n_layers={LAYERS}", f"model.n_heads={HEADS}",
        f"model.vocab_size={VOCAB}", "dataset.source=numpy", f"dataset.paths={ref / 'tokens.u16'}",
        "dataset.token_dtype=uint16", f"dataset.sequence_length={SEQ}",
        f"data_loader.global_batch_size={BATCH * SEQ}", "data_loader.seed=0",
        f"train_module.rank_microbatch_size={case['microbatch'] * SEQ}",
        f"train_module.max_sequence_length={SEQ}", f"train_module.optim.lr={LR}",
        "train_module.optim.beta1=0.9", "train_module.optim.beta2=0.95",
        "train_module.optim.eps=1e-8", f"train_module.optim.weight_decay={WD}",
        "train_module.optim.decay_embeddings=true", "train_module.optim.decay_norms=true",
        "train_module.max_grad_norm=1.0", "train_module.scheduler.name=cos_with_warmup",
        "train_module.scheduler.units=steps", f"train_module.scheduler.warmup={WARMUP}",
        "train_module.scheduler.alpha_f=0.1", "train_module.scheduler.warmup_min_lr=0",
        f"train_module.z_loss_multiplier={case['z_loss'] if case['z_loss'] else 'null'}",
        f"trainer.max_duration={steps}steps", "trainer.metrics_collect_interval=1",
        f"trainer.load_path={ckpt}", "trainer.load_strategy=always",
        "trainer.load_trainer_state=false", "trainer.load_optim_state=false",
        "trainer.callbacks.checkpointer.enabled=false", "launch.num_threads=1",
        *[o.replace("{ref}", str(ref)) for o in case.get("lathe", [])],
    ]
    if nproc > 1:
        overrides.append("train_module.dp_config.name=ddp")
        command = [engine, "launch", "--nproc", str(nproc), "tiny", *overrides]
    else:
        command = [engine, "train", "tiny", *overrides]
    run(command, f"{name}: lathe-engine")
    lathe = lathe_metrics(work / "lathe")
    compared = COMPARED + (["train/Z loss", "train/Z loss unscaled"] if case["z_loss"] else [])
    compared += case.get("compared", [])
    worst = {}
    for step in range(1, steps + 1):
        for metric in compared:
            want = olmo.get(str(step), {}).get(metric)
            got = lathe.get(step, {}).get(metric)
            if want is None:
                print(f"FAIL {name}: OLMo-core logged no '{metric}' at step {step}")
                return False
            if not close(got, want, rtol):
                print(f"FAIL {name}: step {step} '{metric}': Lathe {got!r}, OLMo-core {want!r} "
                      f"(rtol {rtol})")
                return False
            worst[metric] = max(worst.get(metric, 0.0), abs(got - want) / max(abs(want), 1e-30))
    if case.get("must_skip") and not any(olmo.get(str(s), {}).get("optim/step skipped")
                                         for s in range(1, steps + 1)):
        print(f"FAIL {name}: OLMo-core skipped no step, so the case proves nothing; retune it")
        return False
    if case.get("must_mask") and not any(
            0 < olmo.get(str(s), {}).get("train/masked instances (%)", 0) < 1
            for s in range(1, steps + 1)):
        print(f"FAIL {name}: OLMo-core's filter masked no batch in part, so the case proves "
              "little; retune it")
        return False
    detail = ", ".join(f"{m} {w:.1e}" for m, w in worst.items())
    print(f"ok   {name}: {steps} steps x {len(compared)} metrics agree within {rtol:g} "
          f"(largest relative differences: {detail})")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", help="path of lathe-engine")
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--keep", help="write into this folder and keep it (default: a temporary one)")
    args = ap.parse_args()
    ok = True
    for name in args.case or list(CASES):
        if args.keep:
            work = Path(args.keep) / name
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            ok = run_case(name, CASES[name], args.engine, args.steps, work, args.rtol) and ok
        else:
            with tempfile.TemporaryDirectory(prefix="lathe-parity-") as d:
                ok = run_case(name, CASES[name], args.engine, args.steps, Path(d), args.rtol) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
