#!/usr/bin/env python3
"""Encoding speed: `lathe-engine tokenizer encode --jsonl` against Hugging Face `tokenizers`.

    python bench/tokenizer_speed.py LATHE_ENGINE [ROUNDS]

Run with the test environment's Python. Trains the GPT-2-style byte-level BPE of
tests/peer/check_tokenizers.py (vocabulary 3000) on its generated multilingual corpus (about
4.5 MB here: three times the test's), then times, in alternated rounds, on one thread each:
  - tokenizers: Tokenizer.encode_batch over the documents (RAYON_NUM_THREADS=1, in-process);
  - Lathe: the whole `lathe-engine tokenizer encode --jsonl` process, minus the same process on
    one document (start-up and file load), so both figures are encoding only.
Prints MB/s per round and the median ratio.
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


def main():
    engine = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    texts = ct.corpus(random.Random(1234), 9000)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        tok, path = ct.train("gpt2", texts[:3000], work)
        docs = work / "docs.jsonl"
        docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
        one = work / "one.jsonl"
        one.write_text(json.dumps({"text": texts[0]}) + "\n")

        def lathe_seconds(f):
            t0 = time.perf_counter()
            subprocess.run([engine, "tokenizer", "encode", str(path), "--jsonl", str(f)],
                           stdout=subprocess.DEVNULL, check=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
            return time.perf_counter() - t0

        ratios = []
        for r in range(rounds):
            t0 = time.perf_counter()
            tok.encode_batch(texts)
            hf = time.perf_counter() - t0
            lathe = lathe_seconds(docs) - lathe_seconds(one)
            ratios.append(hf / lathe)
            print(f"round {r + 1}: tokenizers {mb / hf:.1f} MB/s, Lathe {mb / lathe:.1f} MB/s, "
                  f"Lathe/tokenizers {hf / lathe:.2f}x", flush=True)
        print(f"{mb:.1f} MB, median Lathe/tokenizers speed ratio {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
