#!/usr/bin/env bash
# CUDA checks for a machine with NVIDIA GPUs (not part of CTest: CI has no GPU). About 3 minutes.
#   bash tests/gpu/run_cuda_checks.sh [build/release/bin]
# On a machine without a GPU, `--cpu-rehearsal` runs the same steps on two CPU ranks (tiny instead
# of olmo2_14M for throughput, process memory instead of gpu_memory/*), to check the script itself.
# 1. one GPU trains tiny with NCCL-free single-rank CUDA and reports gpu_memory/* metrics;
# 2. all local GPUs: DDP and FSDP over NCCL give the losses of one GPU (to 1e-3 in bf16 autocast,
#    1e-5 in fp32);
# 3. throughput of olmo2_14M on one GPU and on all (bench).
set -euo pipefail
DEV=cuda
if [ "${1:-}" = "--cpu-rehearsal" ]; then DEV=cpu; shift; fi
BIN=${1:-build/release/bin}
E="$BIN/lathe-engine"
[ -x "$E" ] || { echo "no lathe-engine at $E (give the bin folder of a build)"; exit 1; }
RUNS=$(mktemp -d)
export LATHE_RUNS_DIR=$RUNS
trap 'rm -rf "$RUNS"' EXIT
if [ "$DEV" = cuda ]; then
  command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: no NVIDIA driver here"; exit 1; }
  NGPU=$(nvidia-smi -L | grep -c '^GPU' || true)
  [ "$NGPU" -ge 1 ] || { echo "no GPU found (nvidia-smi -L)"; exit 1; }
  MEMORY_METRIC='"gpu_memory/GPU active mem (GiB)"'
  BENCH=olmo2_14M
  extra=()
else
  NGPU=2  # CPU ranks standing in for GPUs
  MEMORY_METRIC='"memory/RSS (GiB)"'
  BENCH=tiny
  extra=(launch.num_threads=1)
fi
echo "== $("$E" --version); $NGPU $DEV device(s)"
common=(tiny launch.device=$DEV trainer.max_duration=30steps trainer.metrics_collect_interval=1 "${extra[@]}")

losses() {  # step -> CE loss of a run, one per line
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(line)
    if "train/CE loss" in r["values"]:
        print(r["step"], r["values"]["train/CE loss"])
PY
}
compare() {  # compare two runs' losses with a relative tolerance
  python3 - "$1" "$2" "$3" <<'PY'
import sys
a = dict(l.split() for l in open(sys.argv[1])); b = dict(l.split() for l in open(sys.argv[2]))
tol = float(sys.argv[3]); assert a.keys() == b.keys(), "different steps"
worst = max(abs(float(a[k]) - float(b[k])) / abs(float(a[k])) for k in a)
print(f"   max relative difference {worst:.2e} (tolerance {tol})"); sys.exit(0 if worst <= tol else 1)
PY
}

run() {  # run NAME ARGS...: lathe-engine ARGS, its output kept in NAME.log and shown on failure
  local name=$1; shift
  if ! "$E" "$@" >"$RUNS/$name.log" 2>&1; then
    tail -30 "$RUNS/$name.log"; echo "FAILED: lathe-engine $*"; exit 1
  fi
}

echo "== 1 device"
run one train "${common[@]}" run_name=one
grep -q "$MEMORY_METRIC" "$RUNS/one/metrics.jsonl" || { echo "FAILED: no $MEMORY_METRIC in metrics.jsonl"; exit 1; }
echo "   $MEMORY_METRIC recorded"
losses "$RUNS/one" >"$RUNS/one.txt"
if [ "$NGPU" -ge 2 ]; then
  for dp in ddp fsdp; do
    echo "== $NGPU devices, $dp ($([ "$DEV" = cuda ] && echo NCCL || echo Gloo))"
    run "$dp" launch --nproc "$NGPU" "${common[@]}" run_name="$dp" train_module.dp_config.name=$dp \
      "data_loader.global_batch_size=$((1024 * NGPU * 2))"
    run "${dp}1" train "${common[@]}" run_name="${dp}1" "data_loader.global_batch_size=$((1024 * NGPU * 2))"
    losses "$RUNS/$dp" >"$RUNS/$dp.txt"; losses "$RUNS/${dp}1" >"$RUNS/${dp}1.txt"
    compare "$RUNS/${dp}1.txt" "$RUNS/$dp.txt" 1e-5
  done
fi
echo "== throughput ($BENCH)"
"$E" bench $BENCH launch.device=$DEV --steps 20 "${extra[@]}" 2>/dev/null | tail -1
"$E" bench $BENCH launch.device=$DEV train_module.autocast_precision=bfloat16 --steps 20 "${extra[@]}" 2>/dev/null | tail -1
if [ "$NGPU" -ge 2 ]; then
  "$E" bench $BENCH launch.device=$DEV --nproc "$NGPU" --steps 20 "${extra[@]}" 2>/dev/null | grep '{' | tail -1
fi
echo "all $DEV checks passed"
