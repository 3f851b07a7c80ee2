#!/usr/bin/env python3
"""Text in (label peer): SentencePiece parity, prepare-data, and OLMo-core reading the result.

Run with the test environment's Python; argument: lathe-engine.

  - `lathe-engine tokenizer train` makes SentencePiece BPE and unigram models from a generated
    multilingual corpus; Lathe's ids equal Python `sentencepiece`'s for every document (with and
    without BOS) and decode(encode(x)) == x.
  - `lathe-engine prepare-data` over a folder of text, JSONL, JSONL.gz and JSONL.zst files (one
    with invalid UTF-8): the shards hold exactly a Python re-tokenization (documents in order,
    each followed by EOS, the bad bytes replaced and reported with file and offset), no shard
    passes the size limit, and manifest.json says what is there. The same with a SentencePiece
    model.
  - Interrupted with SIGINT after its first shard, the same command goes on and gives the files
    of an uninterrupted run, byte for byte.
  - Every bad input gets its error.
  - OLMo-core's NumpyFSLDataset reads the shards as they are, and its instances equal
    `lathe-engine dataset`'s.
  - Training on the folder checks the tokenizer against the manifest, samples text, and carries
    a SentencePiece model in its checkpoints.
"""
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sentencepiece as spm
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).parent))
# The corpus, the check log and the engine runner are check_tokenizers.py's.
from check_tokenizers import FAILURES, check, corpus, lathe, train as train_hf  # noqa: E402

ENGINE = sys.argv[1]


def sentencepiece_parity(work, texts):
    (work / "sp-text").mkdir()
    for i in range(0, len(texts), 500):
        (work / "sp-text" / f"part{i // 500}.txt").write_text("\n".join(texts[i:i + 500]))
    jsonl = work / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    models = {}
    for kind in ["bpe", "unigram"]:
        model = work / f"sp-{kind}.model"
        info = json.loads(lathe("tokenizer", "train", work / "sp-text", "--vocab-size", "2000",
                                "--type", kind, "--out", model, "--threads", "2").stdout)
        sp = spm.SentencePieceProcessor(model_file=str(model))
        check(info["vocab_size"] == sp.get_piece_size() == 2000 and info["eos_id"] == sp.eos_id()
              and info["bos_id"] == sp.bos_id() and info["padded_vocab_size"] == 2048,
              f"sentencepiece {kind}: trained; info gives its size, BOS, EOS and the padded size")
        for special in [False, True]:
            want = sp.encode(texts, add_bos=special)
            rows = [json.loads(x) for x in lathe("tokenizer", "encode", model, "--jsonl", jsonl,
                                                 "--decode", *(["--special"] if special else [])
                                                 ).stdout.splitlines()]
            got = [r["ids"] for r in rows]
            bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
            # Unigram: sentencepiece 0.2.3 (PyPI) compares path scores in float in
            # Model::EncodeOptimized, where 0.1.97 (Debian, Lathe's) to 0.2.1 compare a double
            # candidate with the float-stored best; so between two segmentations of equal score
            # (a run of one character, "▁▁▁▁"+"▁" or "▁"+"▁▁▁▁") 0.2.3 keeps the earlier start and
            # 0.1.97 the later (docs/data.md). Such a document must still be a best segmentation:
            # the same text, and total scores (summed in double) within float rounding, 1e-3.
            # Anything else is a failure; BPE has no ties and must be equal.
            ties = []
            if kind == "unigram":
                def score(ids):
                    return sum(float(sp.get_score(i)) for i in ids)
                ties = [i for i in bad if sp.decode(got[i]) == sp.decode(want[i]) and
                        abs(score(got[i]) - score(want[i])) < 1e-3]
            wrong_ids = [i for i in bad if i not in ties]
            detail = (f" (first: doc {wrong_ids[0]}: {got[wrong_ids[0]][:12]} vs "
                      f"{want[wrong_ids[0]][:12]})" if wrong_ids else "")
            check(len(got) == len(want) and not wrong_ids,
                  f"sentencepiece {kind}{' +bos' if special else ''}: ids equal sentencepiece's for "
                  f"{len(want) - len(bad)}/{len(want)} documents"
                  f"{f', and {len(ties)} are an equally scored segmentation (a tie)' if ties else ''}"
                  f"{detail}")
            if not special:
                wrong = [i for i, (r, t) in enumerate(zip(rows, texts)) if r["decoded"] != t]
                check(not wrong and [r["decoded"] for r in rows] == sp.decode(want),
                      f"sentencepiece {kind}: decode(encode(x)) == x for "
                      f"{len(texts) - len(wrong)}/{len(texts)} documents, as sentencepiece decodes")
        models[kind] = model
    r = lathe("tokenizer", "train", work / "sp-text", "--vocab-size", "2000", "--type", "wordpiece",
              "--out", work / "x.model", ok=False)
    check(r.returncode != 0 and "bpe or unigram" in r.stderr, "tokenizer train refuses an unknown --type")
    return models


def write_inputs(folder, texts):
    """A folder of every input kind; returns the documents in the order prepare-data reads them
    (sorted paths; a text file is one document, a JSONL line another), with their sources."""
    folder.mkdir()
    (folder / "a-notes").mkdir()
    for i in range(3):
        (folder / "a-notes" / f"note{i}.txt").write_text(texts[i])
    head, tail = texts[3][:20].encode(), texts[3][20:].encode()
    bad = head + b"\xff\xfe" + tail + b"\xc3"
    (folder / "a-notes" / "note3.txt").write_bytes(bad)
    (folder / "a-notes" / ".hidden.txt").write_text("never read")
    (folder / "b.jsonl").write_text("".join(json.dumps({"text": t, "id": i}) + "\n"
                                            for i, t in enumerate(texts[4:1500])) + "\n")
    with gzip.open(folder / "c.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps({"text": t}) + "\n" for t in texts[1500:2200]))
    raw = "".join(json.dumps({"text": t}) + "\n" for t in texts[2200:])
    subprocess.run(["zstd", "-q", "-o", str(folder / "d.jsonl.zst")], input=raw.encode(), check=True)
    docs = texts[:3] + [bad.decode("utf-8", errors="replace")] + texts[4:]
    note3 = str(folder / "a-notes" / "note3.txt")
    problems = [(note3, len(head)), (note3, len(head) + 1), (note3, len(bad) - 1)]
    return docs, problems


def read_shards(out):
    m = json.loads((out / "manifest.json").read_text())
    dtype = np.uint16 if m["dtype"] == "uint16" else np.uint32
    arrays = [np.fromfile(out / s["file"], dtype=dtype) for s in m["shards"]]
    return m, arrays


def prepare_parity(work, inputs, docs, problems, tokenizer, encode, eos, label, shard_size=65536):
    out = work / f"prepared-{label}"
    lathe("prepare-data", inputs, "--tokenizer", tokenizer, "--out", out, "--shard-size",
          str(shard_size), "--threads", "2", "--progress", "none")
    m, arrays = read_shards(out)
    want = []
    doc_tokens = []
    for ids in encode(docs):
        doc_tokens.append(len(ids) + 1)
        want += list(ids) + [eos]
    got = np.concatenate(arrays).tolist()
    check(got == want, f"prepare-data ({label}): the shards hold the Python re-tokenization, "
                       f"{len(want)} tokens of {len(docs)} documents, each followed by EOS")
    check(all(a.nbytes <= shard_size for a in arrays) and len(arrays) > 3,
          f"prepare-data ({label}): {len(arrays)} shards, none past --shard-size")
    counts = [(s["tokens"], s["documents"]) for s in m["shards"]]
    check([a.size for a in arrays] == [c[0] for c in counts] and sum(c[1] for c in counts) == len(docs)
          and m["tokens"] == len(want) and m["documents"] == len(docs) and m["eos_id"] == eos,
          f"prepare-data ({label}): manifest.json counts tokens and documents per shard")
    # Documents never cross shards: every shard ends with EOS.
    check(all(a[-1] == eos for a in arrays), f"prepare-data ({label}): every shard ends at a document's EOS")
    srcs = [(Path(s["path"]).name, s["documents"]) for s in m["sources"]]
    check(srcs == [("note0.txt", 1), ("note1.txt", 1), ("note2.txt", 1), ("note3.txt", 1),
                   ("b.jsonl", 1496), ("c.jsonl.gz", 700), ("d.jsonl.zst", len(docs) - 2200)],
          f"prepare-data ({label}): sources in path order, hidden files skipped, documents per file")
    got_problems = [(p["file"], p["offset"]) for p in m["invalid_utf8"]["first"]]
    check(m["invalid_utf8"]["count"] == len(problems) and got_problems == problems,
          f"prepare-data ({label}): invalid UTF-8 reported with file and byte offset {got_problems}")
    check(m["tokenizer"]["id"] == json.loads(lathe("tokenizer", "info", tokenizer).stdout)["id"]
          and (out / m["tokenizer"]["file"]).read_bytes() == Path(tokenizer).read_bytes(),
          f"prepare-data ({label}): the manifest names the tokenizer by hash; a copy sits in the folder")
    return out, m


def interrupt_and_resume(work, inputs, tokenizer):
    common = [inputs, "--tokenizer", tokenizer, "--shard-size", "4096", "--threads", "1",
              "--progress", "none"]
    lathe("prepare-data", *common, "--out", work / "whole")
    part = work / "interrupted"
    p = subprocess.Popen([ENGINE, "prepare-data", *map(str, common), "--out", str(part)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (part / ".prepare-state.json").exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate()
    kept = sorted(x.name for x in part.iterdir())
    check(p.returncode == 130 and "interrupted" in err and "manifest.json" not in kept
          and not any(x.endswith(".partial") for x in kept),
          f"prepare-data: SIGINT stops it with exit 130, finished shards kept, no partial shard "
          f"({len([k for k in kept if k.startswith('part-')])} shards kept)")
    r = lathe("prepare-data", *common, "--out", part)
    same = sorted(x.name for x in part.iterdir()) == sorted(x.name for x in (work / "whole").iterdir())
    same = same and all((part / x.name).read_bytes() == x.read_bytes() for x in (work / "whole").iterdir())
    check(r.returncode == 0 and same, "prepare-data: the same command resumes and gives the files "
                                      "of an uninterrupted run, byte for byte")
    r = lathe("prepare-data", *common, "--out", part)
    check(r.returncode == 0, "prepare-data: a finished folder with the same settings is left as it is")
    r = lathe("prepare-data", *common[:4], "8192", *common[5:], "--out", part, ok=False)
    check(r.returncode != 0 and "other settings (shard_bytes)" in r.stderr,
          "prepare-data: a finished folder with other settings is refused, naming them")


def bad_inputs(work, tokenizer):
    def expect(args, text, what):
        r = lathe("prepare-data", *args, ok=False)
        check(r.returncode != 0 and text in r.stderr, f"prepare-data refuses {what} ({r.stderr.strip()[-150:]})")
    (work / "empty").mkdir()
    expect([work / "empty", "--tokenizer", tokenizer, "--out", work / "o1"], "folder holds no files",
           "an empty folder")
    expect([work / "nothing-here", "--tokenizer", tokenizer, "--out", work / "o2"], "no such file or folder",
           "a missing path")
    (work / "bad.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n' * 1000)[:-40])
    expect([work / "bad.jsonl.gz", "--tokenizer", tokenizer, "--out", work / "o3"], "bad.jsonl.gz",
           "a truncated .gz file, naming it")
    (work / "bad.jsonl").write_text('{"text": "ok"}\n{"txt": "no"}\n')
    expect([work / "bad.jsonl", "--tokenizer", tokenizer, "--out", work / "o4"], "bad.jsonl:2: no \"text\"",
           "a JSONL line without the field, naming file and line")
    (work / "not-a-tokenizer.model").write_bytes(b"\x00\x01hello")
    (work / "t.txt").write_text("some text")
    expect([work / "t.txt", "--tokenizer", work / "not-a-tokenizer.model", "--out", work / "o5"],
           "neither a Hugging Face tokenizer.json nor a SentencePiece model", "a file that is not a tokenizer")
    big = {"model": {"type": "BPE", "vocab": {f"t{i}": i for i in range(70000)}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
           "added_tokens": [{"id": 70000, "content": "<eos>", "special": True}]}
    (work / "big.json").write_text(json.dumps(big))
    expect([work / "t.txt", "--tokenizer", work / "big.json", "--out", work / "o6", "--dtype", "uint16",
            "--eos-id", "70000"], "do not fit uint16", "a vocabulary the chosen dtype cannot hold")
    (work / "o7").mkdir()
    (work / "o7" / "mine.txt").write_text("keep me")
    expect([work / "t.txt", "--tokenizer", tokenizer, "--out", work / "o7"], "not empty",
           "an output folder holding other files")
    check((work / "o7" / "mine.txt").read_text() == "keep me", "prepare-data leaves a foreign folder's files alone")


def olmo_core_reads(work, out, m, eos, seq=64):
    from olmo_core.data import NumpyFSLDataset
    ds = NumpyFSLDataset(*[out / s["file"] for s in m["shards"]], sequence_length=seq,
                         pad_token_id=eos, eos_token_id=eos, vocab_size=m["tokenizer"]["padded_vocab_size"],
                         dtype=np.uint16)
    ds.work_dir = work / "olmo-work"
    ds.prepare()
    theirs = [ds[i]["input_ids"].tolist() for i in range(len(ds))]
    lines = lathe("dataset", "tiny", "dataset.source=numpy", f"dataset.paths=[{out}]",
                  f"dataset.sequence_length={seq}", f"model.vocab_size={m['tokenizer']['padded_vocab_size']}",
                  "--instances", f"0:{len(theirs) + 10}").stdout.splitlines()
    summary = json.loads(lines[0])
    ours = [json.loads(x)["ids"] for x in lines[1:]]
    check(len(theirs) > 100 and summary["instances"] == len(theirs) and ours == theirs,
          f"OLMo-core's NumpyFSLDataset reads the shards; its {len(theirs)} instances equal Lathe's")


def train_on_it(work, out, m, sp_model):
    padded = m["tokenizer"]["padded_vocab_size"]
    tok_copy = out / m["tokenizer"]["file"]
    common = ["dataset.source=numpy", f"dataset.paths=[{out}]", "dataset.sequence_length=64",
              f"model.vocab_size={padded}", "launch.num_threads=1", "trainer.max_duration={value: 6, unit: steps}"]
    run = work / "run-data"
    lathe("train", "tiny", "run_name=data", f"trainer.save_folder={run}", *common,
          f"dataset.tokenizer={tok_copy}", "trainer.callbacks.sampler.enabled=true",
          "trainer.callbacks.sampler.interval=6", "trainer.callbacks.sampler.max_new_tokens=8")
    tok = Tokenizer.from_file(str(tok_copy))
    s = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    check(len(s) == 1 and s[0]["text"] == tok.decode(s[0]["ids"], skip_special_tokens=True),
          "training on a prepare-data folder: the samples are text through its tokenizer")
    r = lathe("train", "tiny", "run_name=wrong", f"trainer.save_folder={work / 'wrong'}", *common,
              f"dataset.tokenizer={sp_model}", ok=False)
    check(r.returncode != 0 and "is not the tokenizer" in r.stderr and str(out) in r.stderr,
          "a dataset.tokenizer other than the manifest's is refused, naming both")
    r = lathe("train", "tiny", "run_name=small", f"trainer.save_folder={work / 'small'}", *common[:3],
              "model.vocab_size=256", ok=False)
    check(r.returncode != 0 and f"set model.vocab_size={padded}" in r.stderr,
          "a model.vocab_size below the manifest's vocabulary is refused, offering the padded size")


def sentencepiece_run(work, inputs, sp_model, texts):
    sp = spm.SentencePieceProcessor(model_file=str(sp_model))
    out = work / "prepared-sp-run"
    lathe("prepare-data", inputs, "--tokenizer", sp_model, "--out", out, "--progress", "none")
    run = work / "run-sp"
    lathe("train", "tiny", "run_name=sp", f"trainer.save_folder={run}", "dataset.source=numpy",
          f"dataset.paths=[{out}]", f"dataset.tokenizer={out / 'tokenizer.model'}", "model.vocab_size=2048",
          "dataset.sequence_length=64", "launch.num_threads=1", "trainer.max_duration={value: 4, unit: steps}",
          # The sampler on a padded vocabulary, hot enough to reach the padded ids if it could.
          "trainer.callbacks.sampler.enabled=true", "trainer.callbacks.sampler.interval=4",
          "trainer.callbacks.sampler.max_new_tokens=64", "trainer.callbacks.sampler.temperature=5")
    check((run / "step4" / "tokenizer.model").read_bytes() == sp_model.read_bytes(),
          "a SentencePiece run's checkpoints carry tokenizer.model")
    g = json.loads(lathe("generate", run, "--prompt", texts[0][:30], "--max-new-tokens", "6",
                         "--temperature", "0", "--json").stdout.splitlines()[0])
    check(g["prompt_ids"] == sp.encode(texts[0][:30]) and g["text"] == sp.decode(g["ids"]),
          "generate on a SentencePiece run: prompt and text through its tokenizer.model")
    n = sp.get_piece_size()
    check(n < 2048, f"the run's vocabulary is padded ({n} SentencePiece ids, model.vocab_size 2048)")
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    check(samples and all(i < n for x in samples for i in x["ids"]),
          "the sampler on a padded vocabulary chooses only the tokenizer's ids")
    r = lathe("generate", run, "--prompt", texts[1][:30], "--max-new-tokens", "200", ok=False)
    check(r.returncode != 0 and "past the model's context of 64" in r.stderr
          and "--max-context" in r.stderr,
          "generate past the context the run was trained at is refused, naming --max-context")
    g = json.loads(lathe("generate", run, "--prompt", texts[1][:30], "--max-new-tokens", "200",
                         "--max-context", "512", "--temperature", "5", "--seed", "3",
                         "--json").stdout.splitlines()[0])
    check(len(g["ids"]) > 0 and all(i < n for i in g["ids"]),
          "generate on a padded vocabulary chooses only the tokenizer's ids")
    r = lathe("generate", run, "--prompt", "a", "--temperature", "nan", ok=False)
    check(r.returncode == 2 and "--temperature" in r.stderr and "Assert" not in r.stderr,
          "generate --temperature nan is refused with a usage message")
    r = lathe("generate", run / "config.json", "--prompt", "a", ok=False)
    check(r.returncode != 0 and "is a file" in r.stderr, "generate on a file says it is a file")


def main():
    import random
    rng = random.Random(99)
    texts = corpus(rng, 3000)
    print(f"corpus: {len(texts)} documents, {sum(len(t.encode()) for t in texts) / 1e6:.2f} MB", flush=True)
    with tempfile.TemporaryDirectory(prefix="lathe-data-") as d:
        work = Path(d)
        models = sentencepiece_parity(work, texts)
        hf, hf_path = train_hf("gpt2", texts, work)
        eos = hf.token_to_id("<|endoftext|>")
        inputs = work / "inputs"
        docs, problems = write_inputs(inputs, texts)
        out, m = prepare_parity(work, inputs, docs, problems, hf_path,
                                lambda ds: [e.ids for e in hf.encode_batch(ds, add_special_tokens=False)],
                                eos, "tokenizer.json")
        check(m["dtype"] == "uint16" and m["tokenizer"]["padded_vocab_size"] == 3072,
              "prepare-data chooses uint16 for a small vocabulary; the padded size is a multiple of 128")
        sp = spm.SentencePieceProcessor(model_file=str(models["bpe"]))
        prepare_parity(work, inputs, docs, problems, models["bpe"], lambda ds: sp.encode(ds),
                       sp.eos_id(), "sentencepiece")
        interrupt_and_resume(work, inputs, hf_path)
        bad_inputs(work, hf_path)
        olmo_core_reads(work, out, m, eos)
        train_on_it(work, out, m, models["bpe"])
        sentencepiece_run(work, inputs, models["bpe"], texts)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
