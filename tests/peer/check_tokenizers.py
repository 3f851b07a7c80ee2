#!/usr/bin/env python3
"""BPE parity (label peer): Lathe's tokenizer.json reader against Hugging Face `tokenizers` itself.

Run with the test environment's Python; argument: lathe-engine.

Nothing can be downloaded here, so the test trains byte-level BPE tokenizers with `tokenizers` on
a generated corpus of about 1.5 MB: Latin with accents, Cyrillic, Greek, Arabic, Devanagari, CJK
without spaces, emoji (with joiners and skin tones), numbers of every length, contractions,
punctuation runs, and runs of spaces, tabs, newlines, no-break and ideographic spaces. Two kinds:

  gpt2    the ByteLevel pre-tokenizer with its own regex (GPT-2, OLMo2's dolma2);
  llama3  a Split regex (Llama-3's, with case-insensitive contractions and 1-3 digit groups),
          then ByteLevel without regex, ignore_merges, and a TemplateProcessing BOS.

For every document, Lathe's ids equal `tokenizers`' ids (without and with special tokens, and
with special tokens inside the text), and Lathe's decode(encode(x)) == x. Bad tokenizer files
get their error. A numpy run with dataset.tokenizer samples, generates and exports text through
it (transformers' AutoTokenizer reads the export).
"""
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

ENGINE = sys.argv[1]
FAILURES = []

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def corpus(rng, docs):
    scripts = {
        "latin": "abcdefghijklmnopqrstuvwxyzéèêàçñöüßø",
        "cyrillic": "абвгдежзийклмнопрстуфхцчшщыэюя",
        "greek": "αβγδεζηθικλμνξοπρστυφχψω",
        "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
        "devanagari": "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह़ािीुूेैोौ्",
        "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明",
    }
    emoji = ["😀", "🚀", "👍🏽", "👩‍💻", "🇫🇷", "❤️", "🧪"]
    spaces = [" ", "  ", "\t", "\n", "\n\n", " \n", "\u00a0", "\u3000", "   \t "]
    punct = [".", ",", "!?", "...", "—", "(", ")", "\"", "'", ":-)", "#", "$", "%", "&&", "->"]
    out = []
    for _ in range(docs):
        parts = []
        for _ in range(rng.randint(5, 60)):
            r = rng.random()
            if r < 0.55:
                name = rng.choice(list(scripts))
                letters = scripts[name]
                word = "".join(rng.choice(letters) for _ in range(rng.randint(1, 12 if name != "cjk" else 30)))
                if rng.random() < 0.2:
                    word = word.capitalize()
                if rng.random() < 0.1:
                    word += rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL"])
                parts.append(word)
            elif r < 0.65:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif r < 0.72:
                parts.append(rng.choice(emoji))
            elif r < 0.85:
                parts.append(rng.choice(punct))
            else:
                parts.append(rng.choice(spaces))
            parts.append(rng.choice([" ", " ", " ", "", "\n", "  "]))
        out.append("".join(parts))
    return out


def train(kind, texts, work):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "qwen":
        # Qwen2/Qwen3's tokenizer.json: NFC before a Llama-3-style split.
        tok.normalizer = normalizers.NFC()
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|begin_of_text|>", "<|pad|>"]
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    if kind == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    path = work / f"{kind}.json"
    tok.save(str(path))
    return tok, path


def lathe(*args, ok=True):
    r = subprocess.run([ENGINE, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if ok and r.returncode != 0:
        print(f"lathe-engine {' '.join(map(str, args))} failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        sys.exit(2)
    return r


def train_with_tokenizer(work, texts):
    """dataset.tokenizer: a numpy run made with the gpt2 tokenizer; its samples, generate and
    export speak text through it, and its checkpoints carry it."""
    import numpy as np
    import transformers
    tok = Tokenizer.from_file(str(work / "gpt2.json"))
    eos = tok.token_to_id("<|endoftext|>")
    ids = []
    for e in tok.encode_batch(texts[:1500]):
        ids += e.ids + [eos]
    np.array(ids, dtype=np.uint16).tofile(work / "tokens.u16")
    common = ["model.vocab_size=3072", "dataset.source=numpy",
              f"dataset.paths=[{work / 'tokens.u16'}]", "dataset.sequence_length=64",
              f"dataset.tokenizer={work / 'gpt2.json'}", "launch.num_threads=1",
              "trainer.max_duration={value: 10, unit: steps}"]
    run = work / "run"
    lathe("train", "tiny", "run_name=tok", f"trainer.save_folder={run}", *common,
          "trainer.callbacks.sampler.enabled=true", "trainer.callbacks.sampler.interval=5",
          "trainer.callbacks.sampler.max_new_tokens=12", 'trainer.callbacks.sampler.prompts=["Hello"]')
    lines = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    check(len(lines) == 2 and all(x["prompt_ids"] == tok.encode("Hello").ids and
                                  x["text"] == tok.decode(x["ids"], skip_special_tokens=True)
                                  for x in lines),
          "dataset.tokenizer: the sampler encodes its text prompt and decodes its samples with it")
    check((run / "step10" / "tokenizer.json").read_bytes() == (work / "gpt2.json").read_bytes(),
          "dataset.tokenizer: every checkpoint carries the tokenizer file")
    out = lathe("generate", run, "--prompt", "Hello world", "--max-new-tokens", "8",
                "--temperature", "0", "--json").stdout.splitlines()
    g = json.loads(out[0])
    check(g["prompt_ids"] == tok.encode("Hello world").ids and
          g["text"] == tok.decode(g["ids"], skip_special_tokens=True),
          "generate on the run: prompt and text through the checkpoint's tokenizer")
    lathe("export", run / "step10", work / "tok-hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(work / "tok-hf")
    cfg = json.loads((work / "tok-hf" / "config.json").read_text())
    check(all(hf_tok(t)["input_ids"] == tok.encode(t).ids for t in texts[:100]) and
          cfg["eos_token_id"] == eos,
          "export: transformers' AutoTokenizer loads the exported tokenizer, same ids, EOS in config.json")
    r = lathe("train", "tiny", "run_name=small", f"trainer.save_folder={work / 'small'}",
              *common, "model.vocab_size=2048", ok=False)
    check(r.returncode != 0 and "dataset.tokenizer" in r.stderr and "more than model.vocab_size" in r.stderr,
          "a tokenizer larger than the model's vocabulary is refused naming dataset.tokenizer")
    r = lathe("train", "tiny", "run_name=bytes", f"dataset.tokenizer={work / 'gpt2.json'}", ok=False)
    check(r.returncode == 2 and "dataset.tokenizer: the builtin source's tokens are bytes" in r.stderr,
          "a tokenizer on a byte source is a config error")


def main():
    rng = random.Random(1234)
    texts = corpus(rng, 3000)
    size = sum(len(t.encode()) for t in texts)
    print(f"corpus: {len(texts)} documents, {size / 1e6:.2f} MB", flush=True)
    with tempfile.TemporaryDirectory(prefix="lathe-tok-") as d:
        work = Path(d)
        # Documents that also hold special tokens inside the text.
        docs = texts + [t[:40] + "<|endoftext|>" + t[40:80] + "<|pad|><|endoftext|>" for t in texts[:200]]
        # Long runs, which Lathe once merged in quadratic time (issue 34).
        docs += ["a" * 20000, " " * 20000, "ab" * 10000, "\n" * 5000 + "x", "é" * 10000]
        # Decomposed and compatibility forms, which a normalizer changes (Qwen's NFC).
        docs += ["Cafe\u0301 cre\u0300me bru\u0302le\u0301e", "n\u0303 a\u030a \u1100\u1161\u11a8",
                 "\u212b \u2126 \ufb01 \u00bd x\u00b2", "e\u0301" * 500]
        jsonl = work / "docs.jsonl"
        jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
        for kind in ["gpt2", "llama3", "qwen"]:
            tok, path = train(kind, texts, work)
            for special in [False, True]:
                want = [e.ids for e in tok.encode_batch(docs, add_special_tokens=special)]
                out = lathe("tokenizer", "encode", path, "--jsonl", jsonl, "--decode",
                            *(["--special"] if special else [])).stdout.splitlines()
                rows = [json.loads(line) for line in out]
                got = [row["ids"] for row in rows]
                bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
                detail = ""
                if bad:
                    i = bad[0]
                    detail = f" (first: doc {i} {docs[i][:60]!r}: {got[i][:20]} vs {want[i][:20]})"
                check(len(got) == len(want) and not bad,
                      f"{kind}{' +special' if special else ''}: ids equal tokenizers' for "
                      f"{len(want) - len(bad)}/{len(want)} documents{detail}")
                if not special:
                    # decode(encode(x)) == x through Lathe alone, and as tokenizers decodes.
                    back = [row["decoded"] for row in rows]
                    wrong = [i for i, (b, t) in enumerate(zip(back, docs)) if b != t]
                    ref_back = tok.decode_batch(want, skip_special_tokens=False)
                    # (A normalizer changes the text it encodes: there, only tokenizers'
                    # decoding is the reference.)
                    check((kind == "qwen" or not wrong) and back == ref_back,
                          f"{kind}: decode(encode(x)) == x for {len(docs) - len(wrong)}/"
                          f"{len(docs)} documents, as tokenizers decodes")
            r = lathe("tokenizer", "decode", path, "--ids", ",".join(map(str, tok.encode(docs[-1]).ids)),
                      "--skip-special")
            check(r.stdout[:-1] == tok.decode(tok.encode(docs[-1]).ids, skip_special_tokens=True),
                  f"{kind}: decode --skip-special drops the special tokens as tokenizers does")
            info = json.loads(lathe("tokenizer", "info", path).stdout)
            check(info["vocab_size"] == tok.get_vocab_size() and
                  info["eos_id"] == tok.token_to_id("<|endoftext|>"),
                  f"{kind}: info gives the vocabulary size and EOS id")
        train_with_tokenizer(work, texts)
        # Bad files.
        bad_cases = {
            "not json": ("{", "not a tokenizer file"),
            "no model": ("{}", "no \"model\" object"),
            "wordpiece": (json.dumps({"model": {"type": "WordPiece", "vocab": {}}}), "model.type is \"WordPiece\""),
            "bad merge": (json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]},
                                      "pre_tokenizer": {"type": "ByteLevel"}}), "merge 0"),
            "bad regex": (json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []},
                                      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["},
                                                        "behavior": "Isolated"}}), "does not compile"),
        }
        for name, (text, expected) in bad_cases.items():
            p = work / f"bad-{name.replace(' ', '-')}.json"
            p.write_text(text)
            r = lathe("tokenizer", "info", p, ok=False)
            check(r.returncode != 0 and str(p) in r.stderr and expected in r.stderr,
                  f"a tokenizer file with {name} is refused naming it ({r.stderr.strip()[-120:]})")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
