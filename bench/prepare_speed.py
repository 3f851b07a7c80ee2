#!/usr/bin/env python3
"""prepare-data throughput against Hugging Face `tokenizers`' encode_batch, on the same cores.

    python bench/prepare_speed.py LATHE_ENGINE [ROUNDS] [THREADS]

Run with the test environment's Python. Trains the GPT-2-style byte-level BPE of
tests/peer/check_tokenizers.py (vocabulary 3000) on its generated multilingual corpus, writes
the corpus (7.7 MB of text; 16.9 MB of JSONL, as json.dumps escapes non-ASCII) as one JSONL file, then times, in alternated rounds, with THREADS
threads each (default: every core):
  - tokenizers: reading the JSONL and Tokenizer.encode_batch over the documents
    (RAYON_NUM_THREADS=THREADS, in-process; nothing written);
  - Lathe: the whole `lathe-engine prepare-data` process (start-up, reading, tokenizing, writing
    the shards and the manifest, fsync), into a fresh folder each round.
Prints MB/s of text per round and the median ratio (above 1: Lathe is faster).
"""
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
os.environ["RAYON_NUM_THREADS"] = str(THREADS)
HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("ct", HERE.parent / "tests/peer/check_tokenizers.py")
ct = importlib.util.module_from_spec(spec)
ENGINE = sys.argv[1] if len(sys.argv) > 1 else "lathe-engine"
sys.argv = [sys.argv[0], ENGINE]
spec.loader.exec_module(ct)


def main(rounds):
    texts = ct.corpus(random.Random(1234), 18000)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        tok, path = ct.train("gpt2", texts[:3000], work)
        docs = work / "docs.jsonl"
        docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
        mb = sum(len(t.encode()) for t in texts) / 1e6
        ratios = []
        for r in range(rounds):
            t0 = time.perf_counter()
            with open(docs) as f:
                batch = [json.loads(line)["text"] for line in f]
            tok.encode_batch(batch)
            hf = time.perf_counter() - t0
            out = work / "out"
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run([ENGINE, "prepare-data", str(docs), "--tokenizer", str(path), "--out",
                            str(out), "--threads", str(THREADS), "--progress", "none"],
                           stdout=subprocess.DEVNULL, check=True)
            lathe = time.perf_counter() - t0
            ratios.append(hf / lathe)
            print(f"round {r + 1}: tokenizers {mb / hf:.1f} MB/s, Lathe prepare-data "
                  f"{mb / lathe:.1f} MB/s, Lathe/tokenizers {hf / lathe:.2f}x", flush=True)
        print(f"{mb:.1f} MB of text, {THREADS} thread(s), median Lathe/tokenizers speed ratio "
              f"{statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main(ROUNDS)
