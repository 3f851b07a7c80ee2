#!/usr/bin/env bash
# What grouped-query attention and sliding windows save, on the CPU: `lathe-engine bench --memory`
# on one model shape (d_model 512, 8 layers, 8 heads, sequences of 2,048, one 8,192-token
# micro-batch per step) in four forms, alternated over ROUNDS rounds:
#   olmo2        full attention, 8 key/value heads (the reference)
#   llama_gqa    Llama's pre-norm block with 2 key/value heads (GQA 4:1)
#   olmo3_w256   OLMo3: windows of 256 tokens on 3 of 4 layers (the last layer of the pattern full)
#   olmo3_w2048  the same pattern with windows as long as the sequence (no saving expected)
# Prints each form's median tokens/s and peak RSS with its ratio to olmo2.
#
#   bash bench/attention_variants.sh [ENGINE] [ROUNDS] [THREADS]
set -euo pipefail
ENGINE=${1:-build/ci/bin/lathe-engine}
ROUNDS=${2:-3}
THREADS=${3:-2}
common=(tiny --steps 2 --warmup 1 --memory model.d_model=512 model.n_layers=8 model.n_heads=8
        model.vocab_size=256 dataset.sequence_length=2048 train_module.max_sequence_length=2048
        train_module.rank_microbatch_size=8192 data_loader.global_batch_size=8192
        "launch.num_threads=$THREADS")
declare -A forms=(
  [olmo2]=""
  [llama_gqa]="model.block_name=default model.qk_norm=false model.n_kv_heads=2"
  [olmo3_w256]="model.sliding_window.pattern=[256,256,256,-1] model.sliding_window.force_full_attention_on_first_layer=false"
  [olmo3_w2048]="model.sliding_window.pattern=[2048,2048,2048,-1] model.sliding_window.force_full_attention_on_first_layer=false"
)
order=(olmo2 llama_gqa olmo3_w256 olmo3_w2048)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  for f in "${order[@]}"; do
    # shellcheck disable=SC2086
    line=$("$ENGINE" bench "${common[@]}" ${forms[$f]} 2>/dev/null | grep '"memory"' | sed 's/^\[rank 0\] //')
    python3 -c 'import json,sys; d=json.loads(sys.argv[2]); print(sys.argv[1], d["tokens_per_s"], d["memory"]["ranks"][0]["peak_rss_gib"])' "$f" "$line" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, tps, rss = line.split()
    rows.setdefault(name, []).append((float(tps), float(rss)))
ref_t = statistics.median(t for t, _ in rows["olmo2"])
ref_m = statistics.median(m for _, m in rows["olmo2"])
print("| form | tokens/s (median) | vs olmo2 | peak RSS GiB (median) | vs olmo2 |")
print("| --- | --- | --- | --- | --- |")
for name in ["olmo2", "llama_gqa", "olmo3_w256", "olmo3_w2048"]:
    t = statistics.median(x for x, _ in rows[name]); m = statistics.median(y for _, y in rows[name])
    print(f"| {name} | {t:.0f} | {t / ref_t:.2f}x | {m:.2f} | {m / ref_m:.2f}x |")
PY
