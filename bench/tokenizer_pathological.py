#!/usr/bin/env python3
"""BPE on long runs of one character: `lathe-engine tokenizer encode --jsonl` against Hugging Face
`tokenizers` (issue 34: 200,000 x "a" took 56.6 s in Lathe, 0.13 s in `tokenizers`).

    python bench/tokenizer_pathological.py LATHE_ENGINE [ROUNDS]

Run with the test environment's Python. Trains the GPT-2-style byte-level BPE of
tests/peer/check_tokenizers.py (vocabulary 3000) on its generated corpus plus runs of "a" and of
spaces (so that the vocabulary merges runs, as real ones do). Each case is 10 documents, the run
and the run less 1 to 9 characters (distinct, so that no per-word cache helps; ten of them so that
encoding outweighs the noise of process start-up), timed in alternated rounds, on one thread:
  - tokenizers: Tokenizer.encode of each document (RAYON_NUM_THREADS=1, in-process, a freshly
    loaded tokenizer each round so that no cache carries over);
  - Lathe: the whole `lathe-engine tokenizer encode --jsonl` process on the documents, minus the
    same process on a one-word document (start-up and file load), so both figures are encoding
    only.
Checks that both give the same ids, and prints seconds per document and the median ratio
Lathe/tokenizers of the times per case (the goal: at most 2x).
"""
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("ct", HERE.parent / "tests/peer/check_tokenizers.py")
ct = importlib.util.module_from_spec(spec)
sys.argv = [sys.argv[0], *sys.argv[1:]] if len(sys.argv) > 1 else [sys.argv[0], "lathe-engine"]
spec.loader.exec_module(ct)

CASES = [("200,000 x 'a'", "a" * 200_000), ("100,000 spaces", " " * 100_000)]


def main():
    engine = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rng = random.Random(1234)
    texts = ct.corpus(rng, 3000)
    texts += ["a" * rng.randint(1, 300) for _ in range(300)]
    texts += [" " * rng.randint(1, 300) + "x" for _ in range(300)]
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        _, path = ct.train("gpt2", texts, work)
        one = work / "one.jsonl"
        one.write_text(json.dumps({"text": "a"}) + "\n")

        def lathe_run(f):
            t0 = time.perf_counter()
            r = subprocess.run([engine, "tokenizer", "encode", str(path), "--jsonl", str(f)],
                               stdout=subprocess.PIPE, check=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
            return time.perf_counter() - t0, r.stdout

        for name, text in CASES:
            texts = [text[:len(text) - k] for k in range(10)]
            doc = work / "doc.jsonl"
            doc.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
            hf_times, lathe_times = [], []
            for r in range(rounds):
                tok = ct.Tokenizer.from_file(str(path))
                t0 = time.perf_counter()
                want = [tok.encode(t).ids for t in texts]
                hf = (time.perf_counter() - t0) / len(texts)
                total, out = lathe_run(doc)
                lathe = max(total - lathe_run(one)[0], 1e-6) / len(texts)
                got = [json.loads(line)["ids"] for line in out.decode().splitlines()]
                if got != want:
                    sys.exit(f"{name}: Lathe's ids differ from tokenizers'")
                hf_times.append(hf)
                lathe_times.append(lathe)
                print(f"{name}, round {r + 1}: per document tokenizers {hf:.3f} s, Lathe "
                      f"{lathe:.3f} s, Lathe/tokenizers {lathe / hf:.2f}x "
                      f"({len(want[0])} tokens)", flush=True)
            ratio = statistics.median(lt / ht for lt, ht in zip(lathe_times, hf_times))
            print(f"{name}: median per document tokenizers {statistics.median(hf_times):.3f} s, "
                  f"Lathe {statistics.median(lathe_times):.3f} s; median Lathe/tokenizers time "
                  f"ratio {ratio:.2f}x", flush=True)

if __name__ == "__main__":
    main()
