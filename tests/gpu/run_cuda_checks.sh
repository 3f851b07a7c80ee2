#!/usr/bin/env bash
# CUDA checks for a machine with NVIDIA GPUs (not part of CTest: CI has no GPU). About 3 minutes.
#   bash tests/gpu/run_cuda_checks.sh [build/release/bin]
# 1. one GPU trains tiny with NCCL-free single-rank CUDA and reports gpu_memory/* metrics;
# 2. all local GPUs: DDP and FSDP over NCCL give the losses of one GPU (to 1e-3 in bf16 autocast,
#    1e-5 in fp32);
# 3. throughput of olmo2_14M on one GPU and on all (bench).
set -euo pipefail
BIN=${1:-build/release/bin}
E="$BIN/lathe-engine"
RUNS=$(mktemp -d)
export LATHE_RUNS_DIR=$RUNS
trap 'rm -rf "$RUNS"' EXIT
NGPU=$(nvidia-smi -L | wc -l)
[ "$NGPU" -ge 1 ] || { echo "no GPU found (nvidia-smi -L)"; exit 1; }
echo "== $("$E" --version); $NGPU GPU(s)"
common=(tiny launch.device=cuda trainer.max_duration=30steps trainer.metrics_collect_interval=1)

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

echo "== 1 GPU"
"$E" train "${common[@]}" run_name=one >"$RUNS/one.log" 2>&1
grep -q '"gpu_memory/GPU active mem (GiB)"' "$RUNS/one/metrics.jsonl" && echo "   gpu_memory/* recorded"
losses "$RUNS/one" >"$RUNS/one.txt"
if [ "$NGPU" -ge 2 ]; then
  for dp in ddp fsdp; do
    echo "== $NGPU GPUs, $dp over NCCL"
    "$E" launch --nproc "$NGPU" "${common[@]}" run_name="$dp" train_module.dp_config.name=$dp \
      "data_loader.global_batch_size=$((1024 * NGPU * 2))" >"$RUNS/$dp.log" 2>&1
    "$E" train "${common[@]}" run_name="${dp}1" "data_loader.global_batch_size=$((1024 * NGPU * 2))" >"$RUNS/${dp}1.log" 2>&1
    losses "$RUNS/$dp" >"$RUNS/$dp.txt"; losses "$RUNS/${dp}1" >"$RUNS/${dp}1.txt"
    compare "$RUNS/${dp}1.txt" "$RUNS/$dp.txt" 1e-5
  done
fi
echo "== throughput"
"$E" bench olmo2_14M launch.device=cuda --steps 20 2>/dev/null | tail -1
"$E" bench olmo2_14M launch.device=cuda train_module.autocast_precision=bfloat16 --steps 20 2>/dev/null | tail -1
[ "$NGPU" -ge 2 ] && "$E" bench olmo2_14M launch.device=cuda --nproc "$NGPU" --steps 20 2>/dev/null | grep '{' | tail -1
echo "all CUDA checks passed"
