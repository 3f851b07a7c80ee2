#!/usr/bin/env bash
# New tokens per second of `lathe-engine generate`, with and without the KV cache, in alternated
# rounds; prints each round and the medians.
#
#   bash bench/generate_speed.sh LATHE_ENGINE MODEL [ROUNDS] [NEW_TOKENS] [BATCH] [THREADS]
#
# MODEL: a checkpoint, a run folder or a Hugging Face folder. The prompts are 32 token ids each
# (greedy decoding, so both modes do the same work and give the same ids).
set -euo pipefail
ENGINE=${1:?usage: generate_speed.sh LATHE_ENGINE MODEL [ROUNDS] [NEW_TOKENS] [BATCH] [THREADS]}
MODEL=${2:?model folder}
ROUNDS=${3:-5}
NEW=${4:-256}
BATCH=${5:-1}
THREADS=${6:-2}
prompts=()
for ((b = 0; b < BATCH; b++)); do
  prompts+=(--prompt-ids "$(python3 -c "print(','.join(str((i * 37 + $b * 101) % 250) for i in range(32)))")")
done
run() {  # $1: extra flag; prints tokens/s
  "$ENGINE" generate "$MODEL" "${prompts[@]}" --max-new-tokens "$NEW" --temperature 0 \
    --threads "$THREADS" --json $1 | python3 -c 'import json,sys
for line in sys.stdin:
    d = json.loads(line)
    if "summary" in d: print("%.1f" % d["summary"]["tokens_per_second"])'
}
with=() without=()
for ((r = 1; r <= ROUNDS; r++)); do
  a=$(run "") ; b=$(run --no-kv-cache)
  with+=("$a"); without+=("$b")
  echo "round $r: KV cache $a tok/s, no cache $b tok/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mw=$(median "${with[@]}"); mo=$(median "${without[@]}")
echo "median: KV cache $mw tok/s, no cache $mo tok/s, ratio $(python3 -c "print(round($mw/$mo, 2))")x (batch $BATCH, $NEW new tokens, $THREADS threads)"
