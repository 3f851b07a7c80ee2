#!/usr/bin/env bash
# Lathe against OLMo-core 3.0.0's own Trainer: the same model, batch, data file and thread count,
# fp32 on the CPU, timed the same way (warm-up steps left out), in alternating rounds in one run.
#
#   bash bench/peer_speed.sh [LATHE_ENGINE] [PRESET ...]
#
# Environment: PYTHON (the Python with torch 2.13.0 and ai2-olmo-core 3.0.0; default the test
# environment under ~/.cache/lathe), ROUNDS (default 3), THREADS (default 2), STEPS (timed steps;
# default per preset), WARMUP (default 3).
# Prints each round's tokens/s for both and their ratio, then per preset the median of each and
# the median of the rounds' ratios (Lathe / OLMo-core; above 1 is Lathe faster). Pairing each
# round's two runs keeps the ratio honest when the machine's speed drifts.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
engine="${1:-$here/../build/ci/bin/lathe-engine}"
shift || true
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(tiny olmo2_14M olmo2_30M)
python="${PYTHON:-$HOME/.cache/lathe/torch-2.13.0/bin/python}"
rounds="${ROUNDS:-3}" threads="${THREADS:-2}" warmup="${WARMUP:-3}"
work="$(mktemp -d -t lathe-peer-speed-XXXXXX)"
trap 'rm -rf "$work"' EXIT

field() {  # field JSON_LINE KEY
  "$python" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for preset in "${presets[@]}"; do
  cfg="$("$engine" config "$preset")"
  get() { "$python" -c 'import json,sys; c=json.loads(sys.argv[1]); v=c
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$cfg" "$1"; }
  d=$(get model.d_model) l=$(get model.n_layers) h=$(get model.n_heads) v=$(get model.vocab_size)
  s=$(get dataset.sequence_length) gbs=$(get data_loader.global_batch_size)
  mb=$(get train_module.rank_microbatch_size) lr=$(get train_module.optim.lr)
  b=$((gbs / s)) m=$((mb / s))
  case "$preset" in tiny) steps="${STEPS:-60}" ;; olmo2_14M) steps="${STEPS:-8}" ;; *) steps="${STEPS:-4}" ;; esac
  # One token file for both: enough instances for every step, uniform random ids.
  tokens="$work/$preset.u16"
  "$python" -c 'import numpy as np,sys; n=int(sys.argv[2]); v=int(sys.argv[3])
np.random.default_rng(0).integers(2, v, size=n, dtype=np.uint16).tofile(sys.argv[1])' \
    "$tokens" $(( (steps + warmup + 2) * gbs * 2 )) "$v"
  lathe_tps=() olmo_tps=() ratios=()
  for r in $(seq 1 "$rounds"); do
    out="$("$engine" bench "$preset" --steps "$steps" --warmup "$warmup" \
      launch.num_threads="$threads" dataset.source=numpy dataset.paths="$tokens" \
      dataset.token_dtype=uint16 2>/dev/null | tail -1)"
    lathe_tps+=("$(field "$out" tokens_per_s)")
    out="$("$python" "$here/olmo_core_bench.py" --tokens "$tokens" --d-model "$d" --layers "$l" \
      --heads "$h" --vocab "$v" --seq "$s" --batch-instances "$b" --microbatch-instances "$m" \
      --steps "$steps" --warmup "$warmup" --threads "$threads" --lr "$lr" 2>/dev/null | tail -1)"
    olmo_tps+=("$(field "$out" tokens_per_s)")
    ratios+=("$(awk -v a="${lathe_tps[-1]}" -v b="${olmo_tps[-1]}" 'BEGIN {print a / b}')")
    printf '%-10s round %d: lathe %10.0f tok/s   olmo-core %10.0f tok/s   ratio %.2fx\n' \
      "$preset" "$r" "${lathe_tps[-1]}" "${olmo_tps[-1]}" "${ratios[-1]}"
  done
  printf '%-10s median: lathe %.0f, olmo-core %.0f tok/s, ratio %.2fx (median of the rounds; %d timed steps x %d rounds, %d threads)\n' \
    "$preset" "$(median "${lathe_tps[@]}")" "$(median "${olmo_tps[@]}")" "$(median "${ratios[@]}")" \
    "$steps" "$rounds" "$threads"
done
