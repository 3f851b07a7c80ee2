#!/usr/bin/env bash
# Everything one GPU session measures, in one call (about 6 minutes on an H200):
#
#   bash tests/gpu/device_run.sh [--cpu-rehearsal] BUNDLE OUT
#
# BUNDLE holds bin/lathe-engine (packaging/gpu_bundle.sh makes one; a build folder works too) and,
# optionally, peers/: copies of ../shared/gpu's pytorch_gpu_ref.py, olmo_core_gpu.py and shim/,
# plus wheels/ (ai2-olmo-core and the three packages it needs that the device lacks).
# 1. correctness: CUDA against the CPU (tiny, fp32), bf16 autocast, bitwise resume, and the fused
#    paths (model.fused.*, optim.fused) against the reference ones;
#    document masking's varlen route against its mask route;
# 2. speed: `lathe-engine bench` with fusions on and off, and the peers, on the same shapes
#    (bf16 autocast, fp32 master weights; olmo2_30M at seq 512, olmo2_190M and olmo2_1B at 4096;
#    65,536 tokens per step in micro-batches of 16,384).
# OUT receives summary.json (every check and figure, and the ratios), summary.md (the table) and
# logs.tar.gz. Exit 1 when a check fails (the figures are still written).
# --cpu-rehearsal runs the same steps on the CPU with tiny shapes, so that CI keeps the script
# itself working (tests/gpu/CMakeLists.txt); peers are skipped when BUNDLE has none.
set -uo pipefail
DEV=cuda
if [ "${1:-}" = "--cpu-rehearsal" ]; then DEV=cpu; shift; fi
[ $# -eq 2 ] || { echo "usage: bash tests/gpu/device_run.sh [--cpu-rehearsal] BUNDLE OUT" >&2; exit 2; }
BUNDLE=$(cd "$1" && pwd)
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
E=$BUNDLE/bin/lathe-engine
[ -x "$E" ] || { echo "no $E (make a bundle with packaging/gpu_bundle.sh)" >&2; exit 2; }
PEERS=${LATHE_PEERS:-$BUNDLE/peers}
PY=${LATHE_PYTHON:-python3}
LOGS=$OUT/logs
RES=$LOGS/results.jsonl
rm -rf "$LOGS"
mkdir -p "$LOGS"
: >"$RES"
export LATHE_RUNS_DIR=$LOGS/runs
T0=$(date +%s)
say() { printf '[device_run %3ss] %s\n' "$(($(date +%s) - T0))" "$*"; }

if [ "$DEV" = cuda ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  MODELS=(olmo2_30M olmo2_190M olmo2_1B)
  seq_of() { [ "$1" = olmo2_30M ] && echo 512 || echo 4096; }
  BATCH=65536 MICRO=16384 STEPS=6 WARMUP=2 DTYPE=train_module.autocast_precision=bfloat16
  CHECK_STEPS=10
  VOCAB=100352  # OLMo-core's olmo2_* vocabulary (Lathe's presets have 50,304)
  PEER_EXTRA=()
else
  MODELS=(tiny)
  seq_of() { echo 64; }
  BATCH=512 MICRO=256 STEPS=2 WARMUP=1 DTYPE=train_module.autocast_precision=bfloat16
  CHECK_STEPS=6
  VOCAB=256
  PEER_EXTRA=(--device cpu)
fi
say "$("$E" --version) on $DEV"
# The kernels that are off by default until this script has passed with them on a GPU: every
# "fused" run and bench below turns them on, and the end says which passed.
UNPROVEN=(model.fused.swiglu=true model.fused.residual_norm=true model.fused.qk_norm_rope=true
          model.fused.varlen_attention=true)
if [ "$DEV" = cpu ]; then
  say "CPU rehearsal: this checks the script's plumbing only. The fused kernels run on CUDA only,"
  say "so here 'fused = unfused' runs the same reference code on both sides and cannot fail."
fi
# Every fusion off: the reference path the fused one is checked and timed against.
UNFUSED=(model.fused.rms_norm=false model.fused.rope=false model.fused.qk_norm_rope=false
         model.fused.swiglu=false model.fused.residual_norm=false train_module.optim.fused=false)
# bf16 compute copies of fp32 master weights (dp_config.param_dtype) instead of autocast.
COPIES=(train_module.autocast_precision=null train_module.dp_config.param_dtype=bfloat16)

record() { # record KIND JSON-FIELDS: one line of results
  printf '{"kind": "%s", %s}\n' "$1" "$2" >>"$RES"
}
losses() { # losses RUN: "step loss" per line from a run's metrics.jsonl
  "$PY" - "$LATHE_RUNS_DIR/$1/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "train/CE loss" in r["values"]:
        print(r["step"], repr(r["values"]["train/CE loss"]))
PY
}
compare() { # compare NAME RUN_A RUN_B TOLERANCE [FROM_STEP]: relative loss difference per step
  local name=$1 a=$2 b=$3 tol=$4 from=${5:-0}
  losses "$a" >"$LOGS/$a.losses" && losses "$b" >"$LOGS/$b.losses" || { record check "\"name\": \"$name\", \"ok\": false, \"detail\": \"no losses\""; return; }
  local out
  out=$("$PY" - "$LOGS/$a.losses" "$LOGS/$b.losses" "$tol" "$from" <<'PY'
import sys
a = dict(l.split() for l in open(sys.argv[1])); b = dict(l.split() for l in open(sys.argv[2]))
tol, start = float(sys.argv[3]), int(sys.argv[4])
keys = [k for k in a if int(k) > start and k in b]
if not keys: print("false no common steps"); sys.exit()
worst = max(abs(float(a[k]) - float(b[k])) / max(abs(float(a[k])), 1e-30) for k in keys)
print(("true" if worst <= tol else "false"), f"{worst:.3e}", len(keys))
PY
)
  set -- $out
  record check "\"name\": \"$name\", \"ok\": $1, \"max_rel_diff\": \"$2\", \"steps\": \"${3:-0}\", \"tolerance\": $tol"
  say "check $name: ok=$1 max relative difference ${2} over ${3:-0} steps (tolerance $tol)"
}
train() { # train NAME ARGS...: a run, its output in logs/NAME.log
  local name=$1; shift
  if ! "$E" train "$@" run_name="$name" >"$LOGS/$name.log" 2>&1; then
    say "FAILED: train $name (tail of logs/$name.log follows)"; tail -15 "$LOGS/$name.log"
    record check "\"name\": \"run $name\", \"ok\": false"
    return 1
  fi
}

# ---- 1. correctness ------------------------------------------------------------------------------
common=(tiny trainer.max_duration=${CHECK_STEPS}steps trainer.metrics_collect_interval=1 launch.num_threads=2)
say "correctness"
train ref_cpu "${common[@]}" launch.device=cpu
if [ "$DEV" = cuda ]; then
  train fp32 "${common[@]}" launch.device=cuda "${UNPROVEN[@]}" && compare "cuda fp32 = cpu" ref_cpu fp32 1e-5
else
  train fp32 "${common[@]}" launch.device=cpu "${UNFUSED[@]}" \
    && compare "cpu run = cpu run" ref_cpu fp32 0
fi
train fp32_unfused "${common[@]}" launch.device=$DEV "${UNFUSED[@]}" \
  && compare "fused = unfused (fp32)" fp32_unfused fp32 1e-5
train bf16 "${common[@]}" launch.device=$DEV $DTYPE "${UNPROVEN[@]}" \
  && compare "bf16 autocast ~ fp32" fp32 bf16 3e-2
train bf16_unfused "${common[@]}" launch.device=$DEV $DTYPE "${UNFUSED[@]}" \
  && compare "fused = unfused (bf16)" bf16_unfused bf16 1e-2
train copies "${common[@]}" launch.device=$DEV "${COPIES[@]}" \
  && compare "bf16 compute copies ~ fp32" fp32 copies 3e-2
# CUDA graphs replay the eager kernels: the same losses (on the CPU they are not used at all).
train graphs "${common[@]}" launch.device=$DEV train_module.cuda_graphs=true \
  && compare "cuda graphs = eager (fp32)" fp32 graphs 1e-6
if [ "$DEV" = cuda ]; then
  if grep -q "captured the later micro-batch graph" "$LOGS/graphs.log" \
     && grep -q "captured the optimizer step's graph" "$LOGS/graphs.log"; then
    record check '"name": "cuda graphs captured (micro-batches, optimizer step)", "ok": true'
  else
    say "FAILED: a CUDA graph was not captured (logs/graphs.log)"; grep -i "cuda_graphs" "$LOGS/graphs.log" | tail -3
    record check '"name": "cuda graphs captured (micro-batches, optimizer step)", "ok": false'
  fi
fi
train graphs_copies "${common[@]}" launch.device=$DEV "${COPIES[@]}" train_module.cuda_graphs=true \
  && compare "cuda graphs = eager (bf16 copies)" copies graphs_copies 1e-6
# Document masking (issue 32): on CUDA flash attention over each document's span against SDPA
# with the (T, T) mask, documents at every space of the built-in corpus (on the CPU both are the
# mask route).
DOCS=(dataset.generate_doc_lengths=true dataset.eos_token_id=32)
train docs_mask "${common[@]}" launch.device=$DEV $DTYPE "${DOCS[@]}" model.fused.varlen_attention=false \
  && train docs_varlen "${common[@]}" launch.device=$DEV $DTYPE "${DOCS[@]}" "${UNPROVEN[@]}" \
  && compare "document masking: varlen = mask (bf16)" docs_mask docs_varlen 1e-2
half=$((CHECK_STEPS / 2))
if train resume "${common[@]}" launch.device=$DEV $DTYPE trainer.callbacks.checkpointer.save_interval=$half; then
  rm -rf "$LATHE_RUNS_DIR/resumed"
  if "$E" train "$LATHE_RUNS_DIR/resume/config.json" run_name=resumed \
       trainer.save_folder="$LATHE_RUNS_DIR/resumed" --resume-from "$LATHE_RUNS_DIR/resume/step$half" >"$LOGS/resumed.log" 2>&1; then
    compare "resume is bitwise" resume resumed 0 "$half"
  else
    say "FAILED: resume (logs/resumed.log)"; tail -15 "$LOGS/resumed.log"
    record check '"name": "resume is bitwise", "ok": false'
  fi
fi

# ---- 2. speed ------------------------------------------------------------------------------------
bench() { # bench WHO MODEL ARGS...: lathe-engine bench, one result line
  local who=$1 model=$2; shift 2
  local seq; seq=$(seq_of "$model")
  local line
  line=$("$E" bench "$model" launch.device=$DEV dataset.sequence_length="$seq" \
           train_module.max_sequence_length="$seq" data_loader.global_batch_size=$BATCH \
           train_module.rank_microbatch_size=$MICRO model.vocab_size=$VOCAB $DTYPE --steps $STEPS --warmup $WARMUP --memory "$@" \
           2>"$LOGS/bench-$who-$model.err" | grep '^{' | tail -1)
  if [ -z "$line" ]; then
    say "bench $who $model: FAILED (logs/bench-$who-$model.err)"; tail -5 "$LOGS/bench-$who-$model.err"
    record bench "\"who\": \"$who\", \"model\": \"$model\", \"ok\": false"
    return
  fi
  record bench "\"who\": \"$who\", \"model\": \"$model\", \"ok\": true, \"result\": $line"
  say "bench $who $model: $(echo "$line" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); m=r.get("memory",{}).get("ranks",[{}])[0]; print(round(r["tokens_per_s"]), "tok/s, peak", round(m.get("peak_cuda_gib", m.get("peak_rss_gib", 0)), 1), "GiB")')"
}
peer() { # peer WHO MODEL SCRIPT ARGS...: a peer's JSON line
  local who=$1 model=$2 script=$3; shift 3
  [ -f "$PEERS/$script" ] || { say "peer $who: no $PEERS/$script, skipped"; return; }
  local seq; seq=$(seq_of "$model")
  local line
  line=$(cd "$LOGS" && PYTHONPATH="$PEERS/shim:$PEERS/site${PYTHONPATH:+:$PYTHONPATH}" timeout "${LATHE_PEER_TIMEOUT_S:-240}" "$PY" "$PEERS/$script" "$@" \
           --seq "$seq" --batch-tokens $BATCH --micro-tokens $MICRO --steps $STEPS --warmup $WARMUP --vocab $VOCAB "${PEER_EXTRA[@]}" \
           2>"$LOGS/peer-$who-$model.err" | grep '^{' | tail -1)
  if [ -z "$line" ]; then
    say "peer $who $model: FAILED (logs/peer-$who-$model.err)"; tail -5 "$LOGS/peer-$who-$model.err"
    record peer "\"who\": \"$who\", \"model\": \"$model\", \"ok\": false"
    return
  fi
  record peer "\"who\": \"$who\", \"model\": \"$model\", \"ok\": true, \"result\": $line"
  say "peer $who $model: $(echo "$line" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print(round(r["tokens_per_s"]), "tok/s, peak", r.get("peak_mem_gib"))')"
}
# OLMo-core from its wheels (pure Python: unpacked onto PYTHONPATH; the device has no network).
if [ -d "$PEERS/wheels" ] && [ ! -d "$PEERS/site/olmo_core" ]; then
  for w in "$PEERS"/wheels/*.whl; do
    "$PY" -m zipfile -e "$w" "$PEERS/site" >>"$LOGS/wheels.log" 2>&1 \
      || say "could not unpack $(basename "$w") (logs/wheels.log): OLMo-core's peer will fail"
  done
fi
say "speed"
for m in "${MODELS[@]}"; do
  bench lathe "$m" "${UNPROVEN[@]}"
  bench lathe-unfused "$m" "${UNFUSED[@]}"
  bench lathe-bf16-copies "$m" "${COPIES[@]}"
  bench lathe-graphs "$m" train_module.cuda_graphs=true
  bench lathe-bf16-copies-graphs "$m" "${COPIES[@]}" train_module.cuda_graphs=true
done
# The peers last, each only while the call's time allows (LATHE_DEVICE_BUDGET_S, default 6
# minutes from the start): a slow compile must not cost the figures above.
BUDGET=${LATHE_DEVICE_BUDGET_S:-360}
for m in "${MODELS[@]}"; do
  if (($(date +%s) - T0 > BUDGET)); then say "peers for $m skipped: past the ${BUDGET} s budget"; continue; fi
  if [ "$m" = olmo2_30M ] || [ "$DEV" = cpu ]; then
    peer pytorch-eager "$m" pytorch_gpu_ref.py --preset "$m"
  fi
  if [ "$m" != olmo2_30M ]; then
    if [ "$DEV" = cuda ]; then
      peer olmo-core-compile "$m" olmo_core_gpu.py --model "$m" --compile
    else
      peer olmo-core-eager "$m" olmo_core_gpu.py --model "$m"
    fi
  fi
done

# fp32 last (bf16 must beat it at every size), while the budget allows.
for m in "${MODELS[@]}"; do
  if (($(date +%s) - T0 > BUDGET)); then say "fp32 bench of $m skipped: past the ${BUDGET} s budget"; continue; fi
  bench lathe-fp32 "$m" train_module.autocast_precision=null
done

# What document masking costs (issue 32): paragraphs as documents (about 250 tokens, some 16 to a
# row of 4096), through flash varlen attention and through the mask, against no masking (`lathe`).
for m in "${MODELS[@]}"; do
  [ "$m" = olmo2_30M ] && continue
  if (($(date +%s) - T0 > BUDGET)); then say "document masking bench of $m skipped: past the ${BUDGET} s budget"; continue; fi
  bench lathe-docs-varlen "$m" dataset.generate_doc_lengths=true dataset.eos_token_id=10 "${UNPROVEN[@]}"
  bench lathe-docs-mask "$m" dataset.generate_doc_lengths=true dataset.eos_token_id=10 model.fused.varlen_attention=false
done

# ---- summary -------------------------------------------------------------------------------------
"$PY" - "$RES" "$OUT" "$DEV" "$(date -u +%Y-%m-%d)" "$("$E" --version 2>/dev/null)" <<'PY'
import json, sys
res, out, dev, day, version = sys.argv[1:6]
rows = [json.loads(l) for l in open(res)]
checks = [r for r in rows if r["kind"] == "check"]
speed = {}
for r in rows:
    if r["kind"] in ("bench", "peer") and r.get("ok"):
        res_ = r["result"]
        mem = None
        if r["kind"] == "bench":
            ranks = res_.get("memory", {}).get("ranks", [{}])
            mem = ranks[0].get("peak_cuda_gib") if dev == "cuda" else ranks[0].get("peak_rss_gib")
        else:
            mem = res_.get("peak_mem_gib")
        speed.setdefault(r["model"], {})[r["who"]] = {"tokens_per_s": res_["tokens_per_s"], "peak_gib": mem}
ratios = {}
for model, who in speed.items():
    if "lathe" not in who: continue
    base = who["lathe"]["tokens_per_s"]
    ratios[model] = {f"lathe / {k}": base / v["tokens_per_s"] for k, v in who.items() if k != "lathe"}
summary = {"date": day, "device": dev, "lathe": version, "checks": checks,
           "all_checks_ok": all(c.get("ok") for c in checks), "speed": speed, "ratios": ratios}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
whos = sorted({w for m in speed.values() for w in m})
lines = [f"device_run {day} on {dev}: {version}", "",
         "| model | " + " | ".join(whos) + " |", "| --- |" + " --- |" * len(whos)]
for model, who in speed.items():
    cells = []
    for w in whos:
        v = who.get(w)
        cells.append("–" if v is None else f"{v['tokens_per_s']:,.0f} tok/s" + (f", {v['peak_gib']:.1f} GiB" if v.get("peak_gib") else ""))
    lines.append(f"| {model} | " + " | ".join(cells) + " |")
# The default-off kernels whose checks passed here: only a GPU run proves anything.
ok = {c["name"]: c.get("ok") for c in checks}
proven = []
if dev == "cuda":
    if ok.get("fused = unfused (fp32)") and ok.get("fused = unfused (bf16)"):
        proven += ["model.fused.swiglu", "model.fused.residual_norm", "model.fused.qk_norm_rope"]
    if ok.get("document masking: varlen = mask (bf16)"):
        proven.append("model.fused.varlen_attention")
summary["passed_default_off_kernels"] = proven
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
lines += ["", "ratios: " + json.dumps(ratios, indent=None), "",
          "checks: " + ", ".join(f"{c['name']} {'ok' if c.get('ok') else 'FAILED'}" for c in checks),
          "", "default-off kernels that passed on this GPU (candidates to turn on): " +
          (", ".join(proven) if proven else "none" + (" (a CPU rehearsal proves none)" if dev != "cuda" else ""))]
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if summary["all_checks_ok"] else 1)
PY
rc=$?
rm -rf "$LATHE_RUNS_DIR"
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"
say "done (rc $rc): $OUT/summary.json, summary.md, logs.tar.gz"
exit $rc
