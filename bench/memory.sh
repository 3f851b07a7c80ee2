#!/usr/bin/env bash
# Peak memory per rank by parallel layout: `lathe-engine bench --memory` on a model (default
# olmo2_60M) with one 8,192-token micro-batch per data-parallel rank and step. `ONLY=<regex>` runs
# the matching layouts only. Prints one line per layout: the layout, each rank's peak RSS (GiB), tokens/s.
#
#   bash bench/memory.sh [ENGINE] [PRESET] [STEPS]
set -euo pipefail
ENGINE=${1:-build/ci/bin/lathe-engine}
PRESET=${2:-olmo2_60M}
STEPS=${3:-2}
common=(--steps "$STEPS" --warmup 1 --memory train_module.rank_microbatch_size=8192)
one=(data_loader.global_batch_size=8192 launch.num_threads=2)
two=(--nproc 2 data_loader.global_batch_size=16384 launch.num_threads=1)
# Tensor parallelism: the ranks of a TP group share one micro-batch, so 2-rank TP reads 8,192
# tokens a step in all and 4-rank TP x FSDP (dp 2 x tp 2) 16,384.
tp2=(--nproc 2 data_loader.global_batch_size=8192 launch.num_threads=1 train_module.tp_config.degree=2)
tp2fsdp=(--nproc 4 data_loader.global_batch_size=16384 launch.num_threads=1 train_module.tp_config.degree=2
         train_module.dp_config.name=fsdp)
run() {
  local name=$1
  shift
  [[ -z "${ONLY:-}" || "$name" =~ $ONLY ]] || return 0
  local line
  line=$("$ENGINE" bench "$PRESET" "${common[@]}" "$@" 2>/dev/null | grep '"memory"' | sed 's/^\[rank 0\] //')
  python3 - "$name" "$line" <<'PY'
import json, sys
name, line = sys.argv[1], json.loads(sys.argv[2])
ranks = " / ".join(f"{r['peak_rss_gib']:.2f}" for r in line["memory"]["ranks"])
print(f"| {name} | {ranks} | {line['tokens_per_s']:.0f} |", flush=True)
PY
}
echo "| layout | peak RSS per rank (GiB) | tokens/s |"
echo "| --- | --- | --- |"
run "1 rank" "${one[@]}"
run "1 rank, full AC" "${one[@]}" train_module.ac_config.mode=full
run "2-rank DDP" "${two[@]}" train_module.dp_config.name=ddp
run "2-rank DDP, full AC" "${two[@]}" train_module.dp_config.name=ddp train_module.ac_config.mode=full
run "2-rank FSDP" "${two[@]}" train_module.dp_config.name=fsdp
run "2-rank FSDP, full AC" "${two[@]}" train_module.dp_config.name=fsdp train_module.ac_config.mode=full
run "2-rank TP" "${tp2[@]}"
run "4-rank TP x FSDP" "${tp2fsdp[@]}"
