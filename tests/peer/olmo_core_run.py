#!/usr/bin/env python3
"""Train a tiny OLMo2-style model with OLMo-core itself and write what a parity test needs.

This is a reference run for comparing Lathe against the trainer it ports (OLMo-core 3.0.0). It
trains on CPU, in one process, in fp32, deterministically, and writes into --work DIR:

    tokens.u16          the training data: raw little-endian uint16 token ids, no header (the format
                        OLMo-core's NumpyFSLDataset memory-maps); instance i is tokens[i*S:(i+1)*S]
    init.lathe          the model's weights after OLMo-core's initialization, before any step,
                        as a Lathe tensor file (format below); names are "model." + state_dict key
    init_names.json     the names and shapes in init.lathe, in file order
    final.lathe         the weights after the last optimizer step (same format)
    order.json          epoch 1's global instance order and the instance ids of every step's batch
    olmo_metrics.json   {"steps": {"1": {metric: value, ...}, ...}, "config": {...}}: every metric
                        OLMo-core handed to its loggers for every step, plus the hyper-parameters
                        actually in effect (OLMo-core and PyTorch defaults included)
    work/, olmo/        OLMo-core's own working files (dataset index, global indices, trainer dir)

Lathe tensor file ("LATHETS1"):
    bytes 0..7   magic b"LATHETS1"
    bytes 8..15  header length H, uint64 little-endian
    16..16+H     JSON {"tensors": [{"name", "dtype", "shape", "offset", "nbytes", "crc32c"}, ...]},
                 padded with spaces so that 16+H is a multiple of 64
    then         each tensor's raw little-endian bytes at 16+H+offset; offsets are multiples of 64
                 (gaps filled with zero bytes); crc32c is CRC-32C (Castagnoli) of those bytes

Usage:
    python olmo_core_run.py --work DIR [--steps 20] [--seed 0] [--d-model 128] [--layers 2]
        [--heads 4] [--vocab 512] [--seq 64] [--batch-instances 8] [--microbatch-instances M]
        [--lr 1e-3] [--warmup 5] [--weight-decay 0.1] [--z-loss 0] [--tokens N]
        [--data uniform|markov] [--embeddings-no-wd] [--init-seed 0] [--threads 1] [--nproc 1]

--nproc N > 1 trains data-parallel: the script re-runs itself under
`python -m torch.distributed.run --standalone --nproc_per_node N` (a local rendezvous on a free
port), each rank calls prepare_training_environment(backend="gloo") and wraps the model with
OLMo-core's DDP (TransformerDataParallelConfig(name=DataParallelType.ddp), which applies
torch.distributed._composable.replicate). The global batch stays --batch-instances instances;
each rank gets batch/N of them: OLMo-core's NumpyFSLDataLoader gives rank r the rows
r, r+N, r+2N, ... of every global batch (global_indices[b*B:(b+1)*B][r::N]). --microbatch-instances
is per rank and defaults to the whole rank batch (batch/N). The weights, data and order are the
same as with --nproc 1; rank 0 writes every output, and the metrics are the ones the trainer hands
its loggers on rank 0 (already reduced over the ranks). order.json's "steps" are the global batches
(all ranks' instances, in global batch order); "rank_steps" says which rank trained which.

Runs with the Python environment that has torch 2.13.0 and ai2-olmo-core 3.0.0 installed. Exits 0
on success, non-zero when the run (with --nproc N: any rank) fails, after printing the error.
Timing metrics ("throughput/device/...") are wall-clock measurements and differ from run to run;
every other number is reproducible for the same flags, --nproc and thread count.
"""

import argparse
import hashlib
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

# Token ids used for EOS and padding. The data never contains them (tokens are drawn from
# [1, vocab)); NumpyFSLDataset only needs them for its fingerprint and (unused here) padding /
# document-length features, so 0 is as good as any id below the vocabulary size.
EOS_TOKEN_ID = 0
PAD_TOKEN_ID = 0
# Seed of the token stream, independent of --seed so that changing the training seed only changes
# the data order and not the data.
TOKEN_SEED = 1234
# Successors per token for --data markov.
MARKOV_FANOUT = 4
# Metrics that are wall-clock measurements (not reproducible).
TIMING_METRIC_PREFIX = "throughput/device/"
# Set in the environment of the ranks that --nproc N > 1 launches, to the JSON list of the
# script's arguments: a rank reads its arguments from it (torch.distributed.run's own argparse
# would take an argument such as --nproc for an abbreviation of its --nproc-per-node) and trains
# instead of launching again.
WORKER_ENV = "OLMO_CORE_RUN_RANK_ARGV"
# The distributed backend of --nproc N > 1 (CPU only).
DIST_BACKEND = "gloo"

LATHE_MAGIC = b"LATHETS1"
LATHE_ALIGN = 64


# --------------------------------------------------------------------------------------------
# Arguments and the --nproc launcher (standard library only).


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="output directory (created if missing)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0,
                    help="seed for prepare_training_environment and the data loader")
    ap.add_argument("--init-seed", type=int, default=0,
                    help="TransformerConfig.init_seed (OLMo-core default 0)")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--kv-heads", type=int, default=None,
                    help="n_kv_heads (grouped-query attention); default n_heads")
    ap.add_argument("--block", choices=("reordered_norm", "default"), default="reordered_norm",
                    help="block_name: OLMo2's reordered_norm, or the Llama pre-norm default")
    ap.add_argument("--no-qk-norm", action="store_true", help="qk_norm=False (Llama)")
    ap.add_argument("--label-mask", action="store_true",
                    help="write mask.bool beside tokens.u16 (spans of 1 to 40 tokens, alternately "
                         "trained on and not, like prompts and answers) and train with it as "
                         "NumpyFSLDatasetConfig.label_mask_paths")
    ap.add_argument("--sliding-window", default=None,
                    help="comma-separated SlidingWindowAttentionConfig pattern (-1: full), with "
                         "OLMo3's force_full_attention_on_first_layer=False and _last_layer=True")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch-instances", type=int, default=8, help="global batch, in instances")
    ap.add_argument("--microbatch-instances", type=int, default=None,
                    help="rank micro-batch, in instances (default: the whole rank batch, "
                         "batch-instances / nproc)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=5, help="CosWithWarmup warm-up, in steps")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--z-loss", type=float, default=0.0,
                    help="z-loss multiplier; 0 disables z-loss (z_loss_multiplier=None)")
    ap.add_argument("--embeddings-no-wd", action="store_true",
                    help="put embeddings.weight in its own group with weight_decay 0 (what "
                         "OLMo-core's example train.py does; not the AdamWConfig default)")
    ap.add_argument("--optim", choices=("adamw", "skip_step_adamw", "lion"), default="adamw",
                    help="AdamWConfig, SkipStepAdamWConfig or LionConfig (betas 0.9/0.95)")
    ap.add_argument("--rolling-interval-length", type=int, default=128,
                    help="skip_step_adamw: its rolling_interval_length")
    ap.add_argument("--sigma-factor", type=int, default=6, help="skip_step_adamw: sigma_factor")
    ap.add_argument("--group-overrides", default=None,
                    help='JSON list of {"params": [globs], "opts": {...}}: the optimizer\'s '
                         "group_overrides")
    ap.add_argument("--data", choices=("uniform", "markov", "repeats"), default="uniform",
                    help="uniform: i.i.d. tokens (loss stays near ln(vocab-1)); markov: each "
                         "token has %d possible successors (loss can fall); repeats: uniform, "
                         "with a repeated unit in about half of the 64-token windows"
                         % MARKOV_FANOUT)
    ap.add_argument("--instance-filter", default=None,
                    help="MAX_PERIOD,MIN_PERIOD,MAX_COUNT: NumpyFSLDatasetConfig's "
                         "instance_filter_config (the repetition filter)")
    ap.add_argument("--tokens", type=int, default=None,
                    help="length of the token file (default steps*batch*seq*2)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads per rank (fixed so that results are reproducible)")
    ap.add_argument("--nproc", type=int, default=1,
                    help="data-parallel ranks: N > 1 runs OLMo-core's DDP over N CPU processes "
                         "(gloo), launched by this script through torch.distributed.run")
    args = ap.parse_args(argv)
    if args.nproc < 1:
        ap.error("--nproc must be at least 1")
    if args.batch_instances % args.nproc:
        ap.error("--batch-instances must be a multiple of --nproc")
    rank_batch = args.batch_instances // args.nproc
    if args.microbatch_instances is None:
        args.microbatch_instances = rank_batch
    if args.microbatch_instances < 1 or rank_batch % args.microbatch_instances:
        ap.error("--batch-instances / --nproc (the rank batch) must be a multiple of "
                 "--microbatch-instances")
    if args.tokens is None:
        args.tokens = args.steps * args.batch_instances * args.seq * 2
    if args.tokens // args.seq < args.steps * args.batch_instances:
        ap.error("--tokens is too small for --steps full batches in one epoch")
    if not 1 < args.vocab <= 65536:
        ap.error("--vocab must be in (1, 65536] for uint16 tokens")
    return args


def launch(args, argv):
    """--nproc N > 1: run this script on N local ranks through torch.distributed.run.

    `--standalone` makes torchrun start its rendezvous store on a free local port (no fixed port
    that concurrent runs could collide on); it sets RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every rank. With --max-restarts 0, when one
    rank fails torchrun stops the others and exits non-zero; the failed rank's traceback is on
    stderr (and, through @record, in torchrun's failure summary). Returns the exit code.
    """
    Path(args.work).resolve().mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env[WORKER_ENV] = json.dumps(argv)
    env["OMP_NUM_THREADS"] = str(args.threads)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", str(args.nproc), "--max-restarts", "0",
           str(Path(__file__).resolve())]
    t0 = time.time()
    rc = subprocess.run(cmd, env=env).returncode
    if rc != 0:
        print(f"olmo_core_run: the {args.nproc}-rank run failed (torch.distributed.run exit "
              f"{rc}) after {time.time() - t0:.1f}s; the failing rank's error is above",
              file=sys.stderr)
        return rc if rc > 0 else 1
    return 0


# --nproc N > 1 from the command line launches its ranks right here, before torch and OLMo-core
# are imported: this process only waits for torch.distributed.run, so it skips those imports
# (over ten seconds on a busy machine). The ranks (WORKER_ENV set) and --nproc 1 go on.
if __name__ == "__main__" and WORKER_ENV not in os.environ:
    _launcher_args = parse_args(sys.argv[1:])
    if _launcher_args.nproc > 1:
        sys.exit(launch(_launcher_args, sys.argv[1:]))

# The rest needs numpy, torch and OLMo-core.
import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from olmo_core.data import NumpyDataLoaderConfig, NumpyFSLDatasetConfig, TokenizerConfig
from olmo_core.data.numpy_dataset import InstanceFilterConfig
from olmo_core.distributed.parallel import DataParallelType
from olmo_core.distributed.utils import barrier, get_rank, get_world_size
from olmo_core.nn.attention import SlidingWindowAttentionConfig
from olmo_core.nn.transformer import TransformerBlockType, TransformerConfig
from olmo_core.optim import (
    AdamWConfig,
    CosWithWarmup,
    LionConfig,
    OptimGroupOverride,
    SkipStepAdamWConfig,
)
from olmo_core.train import (
    Duration,
    TrainerConfig,
    prepare_training_environment,
    teardown_training_environment,
)
from olmo_core.train.callbacks import Callback
from olmo_core.train.train_module import (
    TransformerDataParallelConfig,
    TransformerTrainModuleConfig,
)
from olmo_core.version import VERSION as OLMO_CORE_VERSION


# --------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, initial value ~0, final complement.


def _make_crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_CRC32C_TABLE = _make_crc32c_table()


def crc32c(data, crc=0):
    """CRC-32C of `data` (bytes-like); pass a previous result as `crc` to continue a stream."""
    table = _CRC32C_TABLE
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC-32C table is wrong"


# --------------------------------------------------------------------------------------------
# Lathe tensor files.


def _round_up(n, multiple):
    return (n + multiple - 1) // multiple * multiple


def tensor_bytes(t):
    """Raw little-endian bytes of a float32 CPU tensor, in row-major order."""
    if t.dtype != torch.float32:
        raise ValueError(f"only float32 is written, got {t.dtype}")
    return t.detach().to("cpu").contiguous().numpy().astype("<f4", copy=False).tobytes()


def write_lathe(path, named_tensors):
    """Write [(name, tensor), ...] as a Lathe tensor file; returns the header's entry list."""
    entries, blobs, offset = [], [], 0
    for name, t in named_tensors:
        data = tensor_bytes(t)
        offset = _round_up(offset, LATHE_ALIGN)
        entries.append({
            "name": name,
            "dtype": "float32",
            "shape": list(t.shape),
            "offset": offset,
            "nbytes": len(data),
            "crc32c": crc32c(data),
        })
        blobs.append((offset, data))
        offset += len(data)

    header = json.dumps({"tensors": entries}, separators=(",", ":")).encode("utf-8")
    header += b" " * (_round_up(16 + len(header), LATHE_ALIGN) - 16 - len(header))
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(LATHE_MAGIC)
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        pos = 0
        for off, data in blobs:
            f.write(b"\0" * (off - pos))
            f.write(data)
            pos = off + len(data)
    os.replace(tmp, path)
    return entries


def read_lathe(path):
    """Read a Lathe tensor file back (used to check what was written): {name: np.ndarray}."""
    raw = Path(path).read_bytes()
    if raw[:8] != LATHE_MAGIC:
        raise ValueError(f"{path}: bad magic")
    (hlen,) = struct.unpack("<Q", raw[8:16])
    if (16 + hlen) % LATHE_ALIGN:
        raise ValueError(f"{path}: data section not {LATHE_ALIGN}-byte aligned")
    base = 16 + hlen
    out = {}
    for e in json.loads(raw[16:base].decode("utf-8"))["tensors"]:
        data = raw[base + e["offset"]: base + e["offset"] + e["nbytes"]]
        if e["offset"] % LATHE_ALIGN or crc32c(data) != e["crc32c"]:
            raise ValueError(f"{path}: tensor {e['name']} misaligned or corrupt")
        out[e["name"]] = np.frombuffer(data, dtype="<f4").reshape(e["shape"])
    return out


def model_tensors(model):
    """The model's state dict as [("model." + key, tensor)], in state_dict order."""
    return [("model." + k, v) for k, v in model.state_dict().items()]


# --------------------------------------------------------------------------------------------
# The recording callback.


class ParityRecorder(Callback):
    """Records, without changing anything, what the parity test compares.

    - every metric the trainer passes to its loggers, per step (log_metrics gets every step even
      when metrics are flushed in groups; with metrics_collect_interval=1 they come each step);
    - epoch 1's global instance order (available once the trainer has called reshuffle());
    - the instance ids ("index") of each step's batch, checked against the token file;
    - that the weights the first step starts from are the ones saved as init.lathe.
    """

    def __init__(self, tokens, seq_len, init_state):
        self.tokens = tokens
        self.seq_len = seq_len
        self.init_state = init_state
        self.metrics = {}
        self.epoch_orders = {}
        self.step_instances = {}
        self.step1_weights_match_init = None

    def pre_epoch(self):
        order = self.trainer.data_loader.get_global_indices()
        self.epoch_orders[self.trainer.epoch] = [int(i) for i in order]

    def pre_step(self, batch):
        ids = [int(i) for i in batch["index"]]
        self.step_instances[self.step] = ids
        # The batch holds exactly the token windows the ids name.
        input_ids = batch["input_ids"].cpu().numpy()
        for row, idx in zip(input_ids, ids):
            want = self.tokens[idx * self.seq_len:(idx + 1) * self.seq_len]
            if not np.array_equal(row, want):
                raise RuntimeError(f"step {self.step}: batch row for instance {idx} is not "
                                   "the token file's window")
        if self.step == 1:
            # The dry-run batch before step 1 runs forward/backward but no optimizer step.
            now = self.trainer.train_module.model.state_dict()
            self.step1_weights_match_init = all(
                torch.equal(now[k], v) for k, v in self.init_state.items())

    def log_metrics(self, step, metrics):
        self.metrics[int(step)] = {k: float(v) for k, v in metrics.items()}


# --------------------------------------------------------------------------------------------


def make_tokens(n, vocab, kind):
    """Deterministic tokens in [1, vocab), as little-endian uint16."""
    rng = np.random.Generator(np.random.PCG64(TOKEN_SEED))
    if kind in ("uniform", "repeats"):
        tokens = rng.integers(1, vocab, size=n, dtype=np.int64)
        if kind == "repeats":
            inject_repeats(tokens, rng)
    else:
        # A first-order Markov chain: token t is followed by one of successors[t], uniformly.
        successors = rng.integers(1, vocab, size=(vocab, MARKOV_FANOUT), dtype=np.int64)
        choice = rng.integers(0, MARKOV_FANOUT, size=n, dtype=np.int64)
        tokens = np.empty(n, dtype=np.int64)
        t = int(rng.integers(1, vocab))
        for i in range(n):
            tokens[i] = t
            t = int(successors[t, choice[i]])
    return tokens.astype("<u2")


def inject_repeats(tokens, rng, seq=64):
    """Degenerate spans for the repetition filter: in about half of the seq-token windows, a unit
    of 1 to 12 tokens repeated 2 to 9 times in a row, at a random place (seeded)."""
    for start in range(0, len(tokens) - seq + 1, seq):
        if rng.random() < 0.5:
            continue
        period = int(rng.integers(1, 13))
        count = int(rng.integers(2, 10))
        span = min(period * count, seq)
        at = start + int(rng.integers(0, seq - span + 1))
        unit = tokens[at:at + period].copy()
        tokens[at:at + span] = np.resize(unit, span)


def write_tokens(path, n, vocab, kind):
    """make_tokens(), written raw to `path`."""
    tokens = make_tokens(n, vocab, kind)
    tokens.tofile(path)
    return tokens


def write_label_mask(path, n):
    """Alternating spans of 1 to 40 tokens, masked out and trained on (seeded: the same file for
    the same length), as one byte per token: OLMo-core's label mask file format."""
    rng = np.random.default_rng(1234)
    mask = np.zeros(n, dtype=np.bool_)
    pos, on = 0, False
    while pos < n:
        span = int(rng.integers(1, 41))
        mask[pos:pos + span] = on
        pos, on = pos + span, not on
    mask.tofile(path)


def state_digest(model):
    """SHA-256 over the model's state dict (names, shapes and bytes), to compare across ranks."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode("utf-8"))
        h.update(str(tuple(v.shape)).encode("utf-8"))
        h.update(tensor_bytes(v))
    return h.hexdigest()


def param_group_report(optim, model):
    """Every optimizer param group's settings, with parameter names instead of tensors."""
    names = {id(p): n for n, p in model.named_parameters()}
    groups = []
    for g in optim.param_groups:
        entry = {k: (list(v) if isinstance(v, tuple) else v)
                 for k, v in g.items() if k not in ("params", "lr")}
        entry["lr_after_last_step"] = g["lr"]  # the scheduler rewrites "lr" every step
        entry["params"] = [names[id(p)] for p in g["params"]]
        groups.append(entry)
    return groups


def build_config_report(args, model_config, model, train_module, trainer, data_loader,
                        dataset, optim_config, scheduler, z_loss, recorder, dp_report):
    block0 = model.blocks["0"]
    att = block0.attention
    dims = {
        "d_model": model.d_model,
        "vocab_size": model.vocab_size,
        "n_layers": model.n_layers,
        "n_heads": att.n_heads,
        "n_kv_heads": att.n_kv_heads,
        "head_dim": att.head_dim,
        "hidden_size": block0.feed_forward.w1.out_features,
        "hidden_size_formula": "256 * ceil(int(8 * d_model / 3) / 256)",
        "num_params": model.num_params,
        "num_non_embedding_params": model.num_non_embedding_params,
    }
    model_report = {
        "block": model_config.block.name,  # reordered_norm = OLMo2 (norm after each sublayer)
        "block_formula": "h = x + attention_norm(attention(x)); out = h + "
                         "feed_forward_norm(feed_forward(h))",
        "layer_norm": "RMSNorm, no bias, weight init 1, computed in fp32",
        "layer_norm_eps": block0.attention_norm.eps,
        "qk_norm": att.q_norm is not None,
        "qk_norm_scope": "whole projection (n_heads*head_dim), before the head split"
                         if not model_config.block.sequence_mixer.use_head_qk_norm else "per head",
        "qk_norm_eps": att.q_norm.eps if att.q_norm is not None else None,
        "rope_theta": att.rope.theta,
        "rope_full_precision": att.rope.full_precision,
        "rope_style": "rotate_half (NeoX, not interleaved)",
        "attention_backend": type(att.backend).__name__,
        "softmax_scale": "1/sqrt(head_dim) (SDPA default), causal",
        "attention_bias": att.w_q.bias is not None,
        "feed_forward": "SwiGLU: w2(silu(w1(x)) * w3(x)), no bias",
        "lm_head_norm": model.lm_head.norm is not None,
        "lm_head_bias": model.lm_head.w_out.bias is not None,
        "tie_word_embeddings": model_config.tie_word_embeddings,
        "embedding_norm": model_config.embedding_norm is not None,
        "embed_scale": model_config.embed_scale,
        "dtype": str(model_config.dtype),
        "init_method": str(model_config.init_method),
        "init_std": model_config.init_std,
        "embedding_init_std": model_config.embedding_init_std,
        "init_seed": model_config.init_seed,
        "init_distribution": "trunc_normal_(mean 0, std, a=-3*std, b=3*std) for every Linear and "
                             "the embedding (InitMethod.normal), norms = 1",
        "init_generator": "one torch.Generator('cpu').manual_seed(init_seed) used in order: "
                          "embeddings; per block w_q, w_k, w_v, w_out, w1, w3, w2; lm_head.w_out",
    }
    optim = train_module.optim
    optim_report = {
        "class": type(optim).__name__,
        "config": optim_config.as_dict(json_safe=True),
        "param_groups": param_group_report(optim, train_module.model),
        "update": "torch single-tensor Adam, decoupled_weight_decay=True: p *= 1 - lr*wd; "
                  "m.lerp_(g, 1-beta1); v = beta2*v + (1-beta2)*g*g; bc1 = 1-beta1^t; "
                  "bc2 = 1-beta2^t; p.addcdiv_(m, sqrt(v)/sqrt(bc2) + eps, value=-lr/bc1)",
        "cpu_implementation": "single-tensor (foreach/fused default off for CPU tensors)",
    }
    warm = scheduler.warmup
    t_max = scheduler.t_max if scheduler.t_max is not None else trainer.max_steps
    sched_report = {
        "class": type(scheduler).__name__,
        "config": scheduler.as_dict(json_safe=True),
        "units": str(scheduler.units),
        "warmup": warm,
        "alpha_f": scheduler.alpha_f,
        "t_max_effective": t_max,
        "t_max_source": "trainer.max_steps" if scheduler.t_max is None else "config",
        "warmup_min_lr": scheduler.warmup_min_lr,
        "eta_min": "initial_lr * alpha_f",
        "formula": "step s (1-based global_step, set before each optimizer step): s < warmup: "
                   "warmup_min_lr + (lr - warmup_min_lr) * s / warmup; s >= t_max: lr*alpha_f; "
                   "else eta_min + (lr - eta_min) * (1 + cos(pi*(s-warmup)/(t_max-warmup))) / 2",
        "lr_step1": scheduler.get_lr(args.lr, 1, t_max),
    }
    dl = data_loader
    data_report = {
        "token_file": "tokens.u16",
        "num_tokens": args.tokens,
        "token_dtype": "uint16 little-endian",
        "token_seed": TOKEN_SEED,
        "token_distribution": args.data,
        "token_generator": "numpy Generator(PCG64(token_seed)): uniform = integers(1, vocab, n); "
                           "markov = successors integers(1, vocab, (vocab, fanout)), choices "
                           "integers(0, fanout, n), start integers(1, vocab)",
        "markov_fanout": MARKOV_FANOUT if args.data == "markov" else None,
        "eos_token_id": EOS_TOKEN_ID,
        "pad_token_id": PAD_TOKEN_ID,
        "sequence_length": args.seq,
        "num_instances": len(dataset),
        "global_batch_size_tokens": dl.global_batch_size,
        "global_batch_size_instances": dl.global_batch_size // args.seq,
        "rank_microbatch_size_tokens": train_module.rank_microbatch_size,
        "rank_microbatch_size_instances": train_module.rank_microbatch_size // args.seq,
        "dp_world_size": dl.dp_world_size,
        "rank_batch_size_instances": dl.rank_batch_size // args.seq,
        "rank_batch_slicing": "rank r gets rows r, r+W, r+2W, ... of each global batch: "
                              "global_indices[b*B:(b+1)*B][r::W] (NumpyFSLDataLoader."
                              "_get_local_instance_indices), in that order",
        "total_batches_per_epoch": dl.total_batches,
        "seed": dl.seed,
        "shuffle": dl.shuffle,
        "epoch_rng": "numpy Generator(PCG64(seed + epoch)).shuffle(arange(N, uint32))",
        "num_workers": dl.num_workers,
        "labels": "input_ids shifted left by one; last position = -100 (ignored)",
        "loss_tokens_per_instance": args.seq - 1,
    }
    loss_report = {
        "z_loss_multiplier": z_loss,
        "label_ignore_index": train_module.label_ignore_index,
        "ce": "F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction='sum')",
        "z_loss": "z_loss_multiplier * sum over non-ignored tokens of logsumexp(logits)^2"
                  if z_loss is not None else None,
        "normalization": "each micro-batch's summed (CE + z) loss is divided by the number of "
                         "non-ignored label tokens in the whole rank batch, then backward; "
                         "gradients accumulate over micro-batches; train/CE loss is the sum of "
                         "the divided micro-batch CE losses (the token mean over the batch)",
        "normalization_across_ranks": "with W > 1 ranks: the rank's token mean; DDP averages the "
                                      "gradients over ranks and train/CE loss is the mean of the "
                                      "ranks' values (ReduceType.mean), i.e. the global token mean "
                                      "when every rank has as many loss tokens",
    }
    clip_report = {
        "max_grad_norm": train_module.max_grad_norm,
        "norm_type": 2.0,
        "method": "total = ||all grads||_2 (nn.utils.get_total_norm); grads *= "
                  "min(max_norm / (total + 1e-6), 1) (clip_grads_with_norm_); "
                  "optim/total grad norm is the pre-clip total",
        "order": "clip -> set LR from scheduler -> optim.step() -> zero_grad(set_to_none=True)",
    }
    trainer_report = {
        "max_steps": trainer.max_steps,
        "metrics_collect_interval": trainer.metrics_collect_interval,
        # In callback order; no_checkpoints=True keeps the CheckpointerCallback from running.
        "callbacks": {name: type(cb).__name__ for name, cb in trainer.callbacks.items()},
        "active_callbacks": [type(cb).__name__ for cb in trainer._iter_callbacks()],
        "dry_run_batch": "one mock batch (random ids, seed = data seed + rank) forward/backward "
                         "before step 1, no optimizer step",
        "async_bookkeeping": trainer.async_bookkeeping,
        "step1_weights_match_init": recorder.step1_weights_match_init,
    }
    return {
        "args": vars(args),
        "dims": dims,
        "model": model_report,
        "optimizer": optim_report,
        "scheduler": sched_report,
        "grad_clipping": clip_report,
        "loss": loss_report,
        "data": data_report,
        "trainer": trainer_report,
        "data_parallel": dp_report,
        "olmo_model_config": model_config.as_config_dict(),
        "environment": {
            "torch": torch.__version__,
            "olmo_core": OLMO_CORE_VERSION,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
            "torch_num_threads": torch.get_num_threads(),
            "device": "cpu",
            "distributed": dist.is_initialized(),
            "backend": dist.get_backend() if dist.is_initialized() else None,
            "world_size": get_world_size(),
        },
    }


def gather(obj):
    """[obj of rank 0, obj of rank 1, ...] (just [obj] when not distributed)."""
    if not dist.is_initialized():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


@record
def run(args):
    """Train on this process (one rank of --nproc N, or the only one); rank 0 writes the outputs."""
    t0 = time.time()
    distributed = args.nproc > 1
    work = Path(args.work).resolve()

    if distributed:
        # One rank of a torch.distributed.run launch (see launch()).
        if int(os.environ.get("WORLD_SIZE", "0")) != args.nproc:
            raise RuntimeError(f"--nproc {args.nproc} but WORLD_SIZE is "
                               f"{os.environ.get('WORLD_SIZE')!r}: run the script directly, it "
                               "launches its ranks itself")
        prepare_training_environment(seed=args.seed, backend=DIST_BACKEND)
    else:
        # Non-distributed, CPU only: no process group, no async bookkeeping.
        prepare_training_environment(seed=args.seed, backend=None)
    # No W&B/Comet callback is configured (OLMo-core adds only console logger, speed monitor, GC
    # and the checkpointer, which no_checkpoints switches off), so nothing touches the network.
    rank, world = get_rank(), get_world_size()
    torch.set_num_threads(args.threads)

    # 1. Data. OLMo-core caches index files and may resume from a trainer folder: rank 0 starts
    # both afresh (the other ranks wait for it) and writes the token file.
    if rank == 0:
        work.mkdir(parents=True, exist_ok=True)
        for sub in ("work", "olmo"):
            shutil.rmtree(work / sub, ignore_errors=True)
        tokens = write_tokens(work / "tokens.u16", args.tokens, args.vocab, args.data)
        if args.label_mask:
            write_label_mask(work / "mask.bool", args.tokens)
    else:
        tokens = make_tokens(args.tokens, args.vocab, args.data)
    barrier()

    # 2. Model: OLMo2 block (reordered norm, QK-norm over the full projection, RoPE theta 500k,
    # RMSNorm eps 1e-6, SwiGLU) at the requested size, exactly as the olmo2_* presets build it.
    z_loss = args.z_loss if args.z_loss > 0 else None
    # --block, --no-qk-norm, --kv-heads and --sliding-window make it a Llama-like or OLMo3 model.
    sliding = None
    if args.sliding_window:
        sliding = SlidingWindowAttentionConfig(
            pattern=[int(w) for w in args.sliding_window.split(",")],
            force_full_attention_on_first_layer=False, force_full_attention_on_last_layer=True)
    model_config = TransformerConfig.llama_like(
        d_model=args.d_model,
        vocab_size=args.vocab,
        n_layers=args.layers,
        n_heads=args.heads,
        n_kv_heads=args.kv_heads,
        block_name=TransformerBlockType(args.block),
        qk_norm=not args.no_qk_norm,
        rope_theta=500_000,
        layer_norm_eps=1e-6,
        init_seed=args.init_seed,
        sliding_window=sliding,
    )
    model = model_config.build(init_device="cpu")

    # 3. Train module: builds the world mesh and, with several ranks, applies DDP (OLMo-core's
    # Transformer.apply_ddp: torch's composable replicate()); then runs OLMo-core's weight init
    # (init_weights, the same generator seeded with init_seed on every rank) and builds the
    # optimizer.
    overrides = None
    if args.embeddings_no_wd:
        overrides = [OptimGroupOverride(params=["embeddings.weight"], opts=dict(weight_decay=0.0))]
    if args.group_overrides:
        overrides = [OptimGroupOverride(params=g["params"], opts=g["opts"])
                     for g in json.loads(args.group_overrides)]
    common = dict(lr=args.lr, betas=(0.9, 0.95), weight_decay=args.weight_decay,
                  group_overrides=overrides)
    if args.optim == "adamw":
        optim_config = AdamWConfig(eps=1e-8, **common)
    elif args.optim == "skip_step_adamw":
        optim_config = SkipStepAdamWConfig(eps=1e-8,
                                           rolling_interval_length=args.rolling_interval_length,
                                           sigma_factor=args.sigma_factor, **common)
    else:
        optim_config = LionConfig(**common)
    scheduler = CosWithWarmup(warmup=args.warmup)
    dp_config = TransformerDataParallelConfig(name=DataParallelType.ddp) if distributed else None
    train_module = TransformerTrainModuleConfig(
        rank_microbatch_size=args.microbatch_instances * args.seq,
        max_sequence_length=args.seq,
        optim=optim_config,
        max_grad_norm=1.0,
        scheduler=scheduler,
        z_loss_multiplier=z_loss,
        dp_config=dp_config,
    ).build(model, device=torch.device("cpu"))
    model = train_module.model

    # Initial weights, before any step (the same on every rank: checked below).
    init_named = model_tensors(model)
    if rank == 0:
        entries = write_lathe(work / "init.lathe", init_named)
        (work / "init_names.json").write_text(json.dumps(
            [{"name": e["name"], "shape": e["shape"]} for e in entries], indent=1) + "\n")
        back = read_lathe(work / "init.lathe")
        assert all(np.array_equal(back[n], t.numpy()) for n, t in init_named), "init.lathe readback"
    init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    init_digests = gather(state_digest(model))
    if len(set(init_digests)) != 1:
        raise RuntimeError(f"the ranks initialized different weights: {init_digests}")

    # 4. Dataset and data loader (each rank loads its slice of every global batch).
    instance_filter = None
    if args.instance_filter:
        max_period, min_period, max_count = (int(x) for x in args.instance_filter.split(","))
        instance_filter = InstanceFilterConfig(repetition_max_period=max_period,
                                               repetition_min_period=min_period,
                                               repetition_max_count=max_count)
    dataset = NumpyFSLDatasetConfig(
        tokenizer=TokenizerConfig(vocab_size=args.vocab, eos_token_id=EOS_TOKEN_ID,
                                  pad_token_id=PAD_TOKEN_ID),
        paths=[str(work / "tokens.u16")],
        label_mask_paths=[str(work / "mask.bool")] if args.label_mask else None,
        instance_filter_config=instance_filter,
        sequence_length=args.seq,
        dtype="uint16",
        work_dir=str(work / "work"),
    ).build()
    data_loader = NumpyDataLoaderConfig(
        global_batch_size=args.batch_instances * args.seq,
        seed=args.seed,
        num_workers=0,
        work_dir=str(work / "work"),
    ).build(dataset, dp_process_group=train_module.dp_process_group)

    # 5. Trainer.
    recorder = ParityRecorder(tokens, args.seq, init_state)
    trainer = TrainerConfig(
        save_folder=str(work / "olmo"),
        max_duration=Duration.steps(args.steps),
        metrics_collect_interval=1,
        no_checkpoints=True,
        callbacks={"parity_recorder": recorder},
    ).build(train_module, data_loader)
    trainer.fit()

    # What every rank saw: its instances per step, its step-1 weights, its final weights.
    final_digests = gather(state_digest(model))
    rank_records = gather({"steps": recorder.step_instances,
                           "step1_weights_match_init": recorder.step1_weights_match_init})
    if rank != 0:
        return end_rank(distributed)

    # Outputs (rank 0).
    write_lathe(work / "final.lathe", model_tensors(model))

    order = recorder.epoch_orders.get(1)
    if order is None:
        raise RuntimeError("the trainer never started epoch 1")
    want = np.arange(len(dataset), dtype=np.uint32)
    np.random.Generator(np.random.PCG64(args.seed + 1)).shuffle(want)
    ipb = args.batch_instances
    # The global batch of a step: position j was trained by rank j % world, as that rank's
    # (j // world)-th instance (NumpyFSLDataLoader gives rank r the rows [r::world]).
    rank_steps = [rec["steps"] for rec in rank_records]
    global_steps = {}
    for s in sorted(rank_steps[0]):
        per_rank = [rs.get(s) for rs in rank_steps]
        if any(ids is None or len(ids) != ipb // world for ids in per_rank):
            counts = [None if ids is None else len(ids) for ids in per_rank]
            raise RuntimeError(f"step {s}: the ranks trained {counts} instances, expected "
                               f"{ipb // world} each")
        global_steps[s] = [per_rank[j % world][j // world] for j in range(ipb)]
    order_doc = {
        "seed": args.seed,
        "epoch": 1,
        "rng_seed": args.seed + 1,
        "num_instances": len(dataset),
        "instances_per_batch": ipb,
        "total_batches": data_loader.total_batches,
        "matches_numpy_pcg64_shuffle": bool(np.array_equal(np.array(order, np.uint32), want)),
        "global_indices": order,
        "steps": {str(s): ids for s, ids in sorted(global_steps.items())},
    }
    if world > 1:
        order_doc["dp_world_size"] = world
        order_doc["rank_slicing"] = ("rank r trained positions r, r+W, r+2W, ... of each "
                                     "step's batch")
        order_doc["rank_steps"] = {str(r): {str(s): ids for s, ids in sorted(rs.items())}
                                   for r, rs in enumerate(rank_steps)}
    (work / "order.json").write_text(json.dumps(order_doc) + "\n")
    for s, ids in global_steps.items():
        if ids != order[(s - 1) * ipb: s * ipb]:
            raise RuntimeError(f"step {s}'s batch is not rows {(s - 1) * ipb}.. of the order")

    step1_match = all(rec["step1_weights_match_init"] for rec in rank_records)
    recorder.step1_weights_match_init = step1_match
    dp_report = {
        "world_size": world,
        "type": "ddp" if distributed else None,
        "backend": DIST_BACKEND if distributed else None,
        "launcher": f"python -m torch.distributed.run --standalone --nnodes 1 "
                    f"--nproc-per-node {world} --max-restarts 0" if distributed else None,
        "wrapper": "TransformerDataParallelConfig(name=ddp) -> Transformer.apply_ddp -> "
                   "torch.distributed._composable.replicate(bucket_cap_mb=100); its "
                   "DistributedDataParallel is built lazily at the first forward (the dry-run "
                   "batch), after init_weights, and then broadcasts rank 0's parameters"
                   if distributed else None,
        "gradient_reduction": "each rank's gradient is multiplied by 1/W as it is copied into "
                              "DDP's buckets, then all-reduced (sum); clipping, the grad norm "
                              "and AdamW then run on the same averaged gradient on every rank"
                              if distributed else None,
        "microbatch_sync": "TransformerTrainModule only enters no_sync() for "
                           "torch.nn.parallel.DistributedDataParallel models, not for "
                           "replicate(), so every micro-batch's backward all-reduces"
                           if distributed else None,
        "metric_reduction": "ReduceType.mean metrics (train/CE loss, train/Z loss, train/masked "
                            "labels) are the mean over ranks (values / f, all_reduce sum, * f / W, "
                            "f = get_reduce_divide_factor(W)); optim/total grad norm "
                            "(reduce_type None) and the LR are rank 0's, equal on every rank"
                            if distributed else None,
        "init_weights_identical_across_ranks": len(set(init_digests)) == 1,
        "final_weights_identical_across_ranks": len(set(final_digests)) == 1,
        "step1_weights_match_init_per_rank": [rec["step1_weights_match_init"]
                                              for rec in rank_records],
    }

    # Step 0 holds what the dry-run batch recorded before its early return ("train/masked
    # labels (%)"); OLMo-core logs it as step 0. Kept apart from the real steps.
    steps = {str(s): m for s, m in sorted(recorder.metrics.items()) if s > 0}
    dry_run = {str(s): m for s, m in sorted(recorder.metrics.items()) if s <= 0}
    config = build_config_report(args, model_config, model, train_module, trainer, data_loader,
                                 dataset, optim_config, scheduler, z_loss, recorder, dp_report)
    config["timing_metric_prefix"] = TIMING_METRIC_PREFIX
    (work / "olmo_metrics.json").write_text(
        json.dumps({"steps": steps, "dry_run_steps": dry_run, "config": config}, indent=1)
        + "\n")

    # 6. Summary.
    if len(steps) != args.steps:
        raise RuntimeError(f"expected metrics for {args.steps} steps, got {len(steps)}")
    if not step1_match:
        raise RuntimeError("step 1 did not start from the saved initial weights")
    if len(set(final_digests)) != 1:
        raise RuntimeError("the ranks ended with different weights")
    names = sorted({k for m in steps.values() for k in m})
    print(f"olmo_core_run: {args.steps} steps on {world} rank(s) in {time.time() - t0:.1f}s "
          f"-> {work}")
    print(f"  dims: {json.dumps(config['dims'])}")
    print(f"  metrics: {', '.join(names)}")
    shown = sorted(int(s) for s in steps)
    for s in shown[:5] + shown[-1:]:
        m = steps[str(s)]
        print(f"  step {s:3d}: CE {m['train/CE loss']:.6f}  grad norm "
              f"{m['optim/total grad norm']:.6f}  LR {m['optim/LR (group 0)']:.6g}")
    print(f"  order[:16] = {order[:16]}")
    return end_rank(distributed)


def end_rank(distributed):
    """Ends this rank once every output is written; returns 0 or does not return.

    One rank: tears down normally. Several: the ranks first wait for each other (rank 0 writes
    the outputs after the others are done with collectives), destroy the process groups while
    the interpreter is fully alive, then leave through os._exit without finalizing it. With
    torch 2.13 and OLMo-core 3.0 a rank sometimes aborted at exit ("terminate called without an
    active exception", then SIGSEGV) after training and all its outputs were complete, which
    failed the whole launch (CI, 2026-12-02): Gloo's worker threads can still hold work whose
    tensors reach into Python while the interpreter is torn down (pytorch/pytorch#179291).
    Nothing is lost by skipping finalization: every file is written and closed, no collective
    is in flight, and the store and Gloo connections end with the process.
    """
    if not distributed:
        teardown_training_environment()
        return 0
    barrier()
    teardown_training_environment()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv=None):
    rank_argv = os.environ.get(WORKER_ENV)
    if rank_argv is not None:
        # One rank of a launch(): train with the launcher's arguments.
        args = parse_args(json.loads(rank_argv))
        if args.nproc < 2:
            raise RuntimeError(f"{WORKER_ENV} is set but --nproc is {args.nproc}")
        return run(args)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.nproc > 1:
        return launch(args, argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
