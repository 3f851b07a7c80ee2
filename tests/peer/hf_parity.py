"""What the Hugging Face parity tests share (check_hf_olmo2.py, check_hf_families.py): running
lathe-engine, recording checks, and comparing Lathe's logits and greedy generations with a
transformers model's. The engine is the script's first argument."""
import json
import subprocess
import sys
from pathlib import Path

import safetensors.torch
import torch
import transformers

ENGINE = sys.argv[1]
FAILURES = []
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def engine(*args, ok=True):
    r = subprocess.run([ENGINE, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if ok and r.returncode != 0:
        print(f"lathe-engine {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr[-3000:]}",
              file=sys.stderr)
        sys.exit(2)
    return r


def lathe_generate(model, prompts, new_tokens, *extra):
    """`lathe-engine generate --json` (greedy) on each prompt: one dict per prompt."""
    args = ["generate", model, "--max-new-tokens", new_tokens, "--temperature", "0", "--json",
            "--threads", "1", *extra]
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))]
    lines = engine(*args).stdout.splitlines()
    return [json.loads(line) for line in lines if not line.startswith('{"summary"')]


def hf_generate(model, prompt, new_tokens):
    """transformers' greedy continuation of `prompt` and each new token's log-probability."""
    out = model.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False,
                         output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    ids = out.sequences[0, len(prompt):].tolist()
    logprobs = [torch.log_softmax(l[0].double(), -1)[t].item() for l, t in zip(out.logits, ids)]
    return ids, logprobs


def compare_generation(what, lathe_model, hf_model, prompts, new_tokens=20, *extra):
    """Greedy ids equal, log-probabilities within 1e-4."""
    lathe = lathe_generate(lathe_model, prompts, new_tokens, *extra)
    worst = 0.0
    same = len(lathe) == len(prompts)
    for p, g in zip(prompts, lathe):
        ids, logprobs = hf_generate(hf_model, p, new_tokens)
        same = same and g["ids"] == ids
        if g["ids"] == ids:
            worst = max(worst, max(abs(a - b) for a, b in zip(g["logprobs"], logprobs)))
    check(same and worst <= 1e-4,
          f"{what}: greedy ids equal transformers', log-probs within {worst:.1e} (<= 1e-4)")


def compare_logits(what, lathe_model, hf_model, prompts):
    """Lathe's forward (generate --logits) against transformers' on each prompt: the largest
    difference relative to the largest logit, within 1e-5."""
    rows = lathe_generate(lathe_model, prompts, 1, "--logits")
    worst = 0.0
    for p, row in zip(prompts, rows):
        with torch.no_grad():
            ref = hf_model(torch.tensor([p])).logits[0].double()
        got = torch.tensor(row["logits"], dtype=torch.float64)
        if got.shape != ref.shape:
            worst = float("inf")
            break
        worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    check(len(rows) == len(prompts) and worst <= 1e-5,
          f"{what}: logits equal transformers' within {worst:.1e} relative (<= 1e-5)")


def tensors_of(folder):
    """Every tensor of a folder's safetensors files, by name."""
    out = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        out.update(safetensors.torch.load_file(str(f)))
    return out


def first_loss(metrics):
    """Step 1's train/CE loss in a run's metrics.jsonl; None when it has none."""
    for line in Path(metrics).read_text().splitlines():
        rec = json.loads(line)
        if rec["step"] == 1 and "train/CE loss" in rec["values"]:
            return rec["values"]["train/CE loss"]
    return None


def finish():
    """Exit 1 naming how many checks failed, else say all passed."""
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("all checks passed")
