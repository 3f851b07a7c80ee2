#!/usr/bin/env python3
"""Chat data in (label peer, issue 32): chat templates, assistant-only label masks, prepare-data --chat.

Run with the test environment's Python; argument: lathe-engine.

For three released chat templates (chat_templates/: Qwen2.5, Llama 3.2, OLMo 2), each with a
byte-level BPE tokenizer trained here on its special tokens and saved by transformers:
  - `lathe-engine chat --text` renders every conversation as transformers'
    apply_chat_template(tokenize=False) does, with and without the generation prompt;
  - `lathe-engine chat` gives `tokenizers`' ids of that text, and a mask that is 1 exactly on the
    assistant's turns as computed here (each turn from the end of the conversation rendered up
    to it with the generation prompt to the end of the conversation rendered up to and including
    it, on token boundaries), and 1 everywhere with --train-on all;
  - `lathe-engine prepare-data --chat` writes those ids (EOS after each conversation that does
    not end with it, not trained) and masks, back to back, padded and packed, and OLMo-core's
    NumpyFSLDataset with label_mask_paths reads the padded folder's instances and masks as written;
  - training reads the masks from the folder (`lathe-engine dataset` reports them) and runs;
  - bad data (no assistant turn, an unknown role, a template that raises, a line that is not
    JSON) is refused naming the file and line, and a folder prepared before is left as it was.
"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).parent))
# The check log, the engine runner and the Llama-3 split regex are check_tokenizers.py's.
from check_tokenizers import FAILURES, LLAMA3, check, lathe  # noqa: E402

HERE = Path(__file__).parent

# name -> (template file, special tokens, bos, eos, pad)
TEMPLATES = {
    "qwen2_5": ("qwen2_5.jinja", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                None, "<|im_end|>", "<|endoftext|>"),
    "llama3_2": ("llama3_2.jinja", ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                    "<|end_header_id|>", "<|eot_id|>"],
                 "<|begin_of_text|>", "<|eot_id|>", None),
    "olmo2": ("olmo2.jinja", ["<|endoftext|>", "<|pad|>"], "<|endoftext|>", "<|endoftext|>",
              "<|pad|>"),
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "I am fine."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "how are you?"},
     {"role": "assistant", "content": "fine"}, {"role": "user", "content": "The fox?"},
     {"role": "assistant", "content": " jumps over\nthe lazy dog  "}],
    [{"role": "user", "content": "Écris «bonjour» en 中文, s'il te plaît 🙂"},
     {"role": "assistant", "content": "你好！\n\n- bonjour\n- 2+2=4"}],
    [{"role": "system", "content": "  You answer in lists.\n"},
     {"role": "user", "content": "List 3 colours."},
     {"role": "assistant", "content": "1. red\n2. green\n3. blue"},
     {"role": "user", "content": "And two more?"},
     {"role": "assistant", "content": "4. cyan\n5. magenta"},
     {"role": "user", "content": "Thanks"},
     {"role": "assistant", "content": "You're welcome!"}],
]


def make_tokenizer(name, work):
    """A byte-level BPE (Llama-3 split) trained on the conversations' text, saved by transformers
    with the template, as a model's tokenizer folder."""
    file, specials, bos, eos, pad = TEMPLATES[name]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    texts = [m["content"] for c in CONVERSATIONS for m in c] * 20
    texts += ["system user assistant Cutting Knowledge Date: December Today You are Qwen"] * 20
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    kwargs = {k: v for k, v in (("bos_token", bos), ("eos_token", eos), ("pad_token", pad)) if v}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    fast.chat_template = (HERE / "chat_templates" / file).read_text()
    folder = work / name
    fast.save_pretrained(str(folder))
    return fast, folder


def turn_mask(fast, messages, text, ids, render):
    """The assistant-only mask, computed here: each assistant turn spans from the end of the
    conversation rendered up to it with the generation prompt to the end of the conversation
    rendered up to and including it (`render(head, add_generation_prompt)`); boundaries go to the
    tokens the prefix shares with the whole. Raises ValueError where a prefix rendering is not a
    prefix of `text`."""
    def tokens_before(prefix):
        if prefix is None or not text.startswith(prefix):
            raise ValueError("a prefix renders differently from the start of the whole")
        if len(prefix) == len(text):
            return len(ids)
        p = fast(prefix, add_special_tokens=False)["input_ids"]
        k = 0
        while k < min(len(p), len(ids)) and p[k] == ids[k]:
            k += 1
        return k

    mask = [0] * len(ids)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        begin = 0 if i == 0 else tokens_before(render(messages[:i], True))
        end = tokens_before(render(messages[:i + 1], False))
        for t in range(begin, end):
            mask[t] = 1
    return mask


def trained_mask(fast, messages, ids):
    """turn_mask with the tokenizer's own template."""
    return turn_mask(fast, messages, fast.apply_chat_template(messages, tokenize=False), ids,
                     lambda head, gen: fast.apply_chat_template(head, tokenize=False,
                                                                add_generation_prompt=gen))

def write_jsonl(path, conversations):
    with open(path, "w") as f:
        for c in conversations:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")


def check_template(name, work):
    fast, folder = make_tokenizer(name, work)
    tokenizer_file = folder / "tokenizer.json"
    data = work / f"{name}.jsonl"
    write_jsonl(data, CONVERSATIONS)

    # Text, with and without the generation prompt (the prompt: all but the last reply).
    for gen in (False, True):
        convs = [c[:-1] if gen else c for c in CONVERSATIONS]
        prompts = work / f"{name}-prompts.jsonl"
        write_jsonl(prompts, convs)
        args = ["chat", prompts, "--tokenizer", tokenizer_file, "--text"]
        got = lathe(*(args + (["--generation-prompt"] if gen else []))).stdout
        want = "".join(fast.apply_chat_template(c, tokenize=False, add_generation_prompt=gen)
                       for c in convs)
        check(got == want, f"{name}: rendered text equals apply_chat_template "
                           f"(add_generation_prompt={gen}, {len(want)} characters)"
              + ("" if got == want else f"\n  lathe: {got[:300]!r}\n  hf:    {want[:300]!r}"))

    # Ids and masks.
    rows = [json.loads(l) for l in lathe("chat", data, "--tokenizer", tokenizer_file).stdout.splitlines()]
    all_rows = [json.loads(l) for l in
                lathe("chat", data, "--tokenizer", tokenizer_file, "--train-on", "all").stdout.splitlines()]
    expected = []
    for c, row, row_all in zip(CONVERSATIONS, rows, all_rows):
        text = fast.apply_chat_template(c, tokenize=False)
        ids = fast(text, add_special_tokens=False)["input_ids"]
        check(row["ids"] == ids, f"{name}: ids equal tokenizers' ({len(ids)} tokens)")
        mask = trained_mask(fast, c, ids)
        check(row["mask"] == mask, f"{name}: the mask is the assistant turns "
                                   f"({sum(mask)} of {len(ids)} tokens)"
              + ("" if row["mask"] == mask else f"\n  lathe {row['mask']}\n  want  {mask}"))
        check(row_all["mask"] == [1] * len(ids), f"{name}: --train-on all trains on every token")
        expected.append((ids, mask))

    # prepare-data --chat: back to back, padded, packed.
    eos = fast.convert_tokens_to_ids(fast.eos_token)
    pad = fast.convert_tokens_to_ids(fast.pad_token) if fast.pad_token else eos
    docs = []
    for ids, mask in expected:
        if ids[-1] != eos:
            ids, mask = ids + [eos], mask + [0]
        docs.append((ids, mask))
    out = work / f"{name}-prepared"
    lathe("prepare-data", data, "--tokenizer", tokenizer_file, "--out", out, "--chat",
          "--progress", "none")
    manifest = json.loads((out / "manifest.json").read_text())
    tokens = np.concatenate([np.fromfile(out / s["file"], dtype=manifest["dtype"])
                             for s in manifest["shards"]])
    masks = np.concatenate([np.fromfile(out / s["label_mask"], dtype=np.uint8)
                            for s in manifest["shards"]])
    want_ids = [t for ids, _ in docs for t in ids]
    want_mask = [m for _, mask in docs for m in mask]
    check(tokens.tolist() == want_ids and masks.tolist() == want_mask,
          f"{name}: prepare-data --chat writes the ids and masks ({len(want_ids)} tokens)")
    check(manifest["trained_tokens"] == sum(want_mask), f"{name}: manifest's trained_tokens")

    seq = 64
    padded = work / f"{name}-padded"
    lathe("prepare-data", data, "--tokenizer", tokenizer_file, "--out", padded, "--chat",
          "--instances", "padded", "--sequence-length", seq, "--progress", "none")
    m = json.loads((padded / "manifest.json").read_text())
    t = np.fromfile(padded / m["shards"][0]["file"], dtype=m["dtype"]).reshape(-1, seq)
    k = np.fromfile(padded / m["shards"][0]["label_mask"], dtype=np.uint8).reshape(-1, seq)
    rows_ids, rows_mask = [], []
    for ids, mask in docs:  # OLMo-core's padded instances: pieces of `seq`, the last padded
        for at in range(0, len(ids), seq):
            piece, pm = ids[at:at + seq], mask[at:at + seq]
            rows_ids.append(piece + [pad] * (seq - len(piece)))
            rows_mask.append(pm + [0] * (seq - len(pm)))
    check(t.tolist() == rows_ids and k.tolist() == rows_mask,
          f"{name}: padded instances ({len(rows_ids)} of {seq})")
    # OLMo-core reads the folder as it is: NumpyFSLDataset with label_mask_paths gives the same
    # instances and label masks.
    from olmo_core.data import NumpyFSLDataset
    ds = NumpyFSLDataset(*[padded / sh["file"] for sh in m["shards"]], sequence_length=seq,
                         pad_token_id=pad, eos_token_id=eos,
                         vocab_size=m["tokenizer"]["padded_vocab_size"], dtype=np.uint16,
                         label_mask_paths=[padded / sh["label_mask"] for sh in m["shards"]])
    ds.work_dir = work / f"{name}-olmo-work"
    ds.prepare()
    theirs = [(ds[i]["input_ids"].tolist(), ds[i]["label_mask"].int().tolist()) for i in range(len(ds))]
    check(theirs == list(zip(rows_ids, rows_mask)),
          f"{name}: OLMo-core's NumpyFSLDataset reads the padded folder's {len(theirs)} instances "
          f"and label masks as written")

    packed = work / f"{name}-packed"
    lathe("prepare-data", data, "--tokenizer", tokenizer_file, "--out", packed, "--chat",
          "--instances", "packed", "--sequence-length", 2 * seq, "--progress", "none")
    m = json.loads((packed / "manifest.json").read_text())
    t = np.fromfile(packed / m["shards"][0]["file"], dtype=m["dtype"]).reshape(-1, 2 * seq)
    k = np.fromfile(packed / m["shards"][0]["label_mask"], dtype=np.uint8).reshape(-1, 2 * seq)
    # Every document (truncated to the instance) is in exactly one instance, whole, and the rest
    # is masked padding.
    found = 0
    for ids, mask in docs:
        ids, mask = ids[:2 * seq], mask[:2 * seq]
        hits = [(r, j) for r in range(len(t)) for j in range(2 * seq - len(ids) + 1)
                if t[r, j:j + len(ids)].tolist() == ids and k[r, j:j + len(ids)].tolist() == mask]
        found += 1 if hits else 0
    used = sum(min(len(ids), 2 * seq) for ids, _ in docs)
    check(found == len(docs) and int(k.sum()) == sum(sum(mk[:2 * seq]) for _, mk in docs)
          and len(t) * 2 * seq - used == int((t == pad).sum() - sum(
              ids[:2 * seq].count(pad) for ids, _ in docs)),
          f"{name}: packed instances hold every conversation whole ({len(t)} instances)")
    return out, fast, tokenizer_file


def check_errors(work, tokenizer_file, prepared):
    before = {p.name: p.read_bytes() for p in prepared.iterdir()}
    cases = {
        "no assistant turn": ([{"role": "user", "content": "hi"}], "no assistant turn"),
        "an unknown role": ([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"},
                             {"role": "assistant", "content": "y"}], 'unknown role "robot"'),
        "a content that is not a string": ([{"role": "user", "content": 3},
                                            {"role": "assistant", "content": "y"}],
                                           "is neither a string, null nor a list of parts"),
    }
    for what, (conv, message) in cases.items():
        bad = work / "bad.jsonl"
        write_jsonl(bad, CONVERSATIONS[:2] + [conv])
        r = lathe("prepare-data", bad, "--tokenizer", tokenizer_file, "--out", work / "bad-out",
                  "--chat", "--progress", "none", ok=False)
        check(r.returncode != 0 and f"{bad}:3" in r.stderr and message in r.stderr,
              f"{what} is refused naming {bad.name}:3: {r.stderr.strip()[-200:]}")
        check(not (work / "bad-out").exists(), f"{what}: the failed run leaves no folder behind")
    bad = work / "bad.jsonl"
    bad.write_text(json.dumps({"messages": CONVERSATIONS[0]}) + "\n{not json\n")
    r = lathe("prepare-data", bad, "--tokenizer", tokenizer_file, "--out", work / "bad-out2",
              "--chat", "--progress", "none", ok=False)
    check(r.returncode != 0 and f"{bad}:2" in r.stderr, f"a line that is not JSON: {r.stderr.strip()[-160:]}")
    # A template that raises (Gemma's alternation rule, as such templates do).
    raising = work / "raising.jinja"
    raising.write_text("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
                       "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
                       "{% endif %}{{ m['content'] }}{% endfor %}")
    write_jsonl(work / "two.jsonl", [CONVERSATIONS[0], CONVERSATIONS[1]])
    r = lathe("prepare-data", work / "two.jsonl", "--tokenizer", tokenizer_file, "--out",
              work / "bad-out3", "--chat", "--chat-template", raising, "--progress", "none", ok=False)
    check(r.returncode != 0 and "two.jsonl:2" in r.stderr and "roles must alternate" in r.stderr
          and "raising.jinja" in r.stderr, f"a template error names the line and the template: "
                                            f"{r.stderr.strip()[-220:]}")
    broken = work / "broken.jinja"
    broken.write_text("{% for m in messages %}{{ m['content'] }")
    r = lathe("prepare-data", work / "two.jsonl", "--tokenizer", tokenizer_file, "--out",
              work / "bad-out4", "--chat", "--chat-template", broken, "--progress", "none", ok=False)
    check(r.returncode != 0 and "broken.jinja" in r.stderr and "does not parse" in r.stderr,
          f"a template that does not parse is named: {r.stderr.strip()[-200:]}")
    # Preparing into the finished folder again with other data is refused; nothing there changes.
    r = lathe("prepare-data", work / "bad.jsonl", "--tokenizer", tokenizer_file, "--out", prepared,
              "--chat", "--progress", "none", ok=False)
    after = {p.name: p.read_bytes() for p in prepared.iterdir()}
    check(r.returncode != 0 and before == after, "a prepared folder is left as it was")


def check_training(work, prepared, fast, tokenizer_file):
    vocab = (len(fast) + 127) // 128 * 128
    args = ["dataset.source=numpy", f"dataset.paths=[\"{prepared}\"]", f"model.vocab_size={vocab}",
            "dataset.sequence_length=32", f"dataset.tokenizer={tokenizer_file}"]
    r = lathe("dataset", "tiny", *args)
    check("with label masks" in r.stdout, f"the dataset reads the folder's masks: {r.stdout.strip()[:200]}")
    run = work / "run"
    r = lathe("train", "tiny", *args, "trainer.max_duration=2steps", "trainer.save_folder=" + str(run),
              "data_loader.global_batch_size=64", "train_module.rank_microbatch_size=64", ok=False)
    check(r.returncode == 0, "training on the chat folder runs" + ("" if r.returncode == 0 else r.stderr[-800:]))
    # generate --chat on the run: the prompt is the user's message in the model's template (carried
    # in the checkpoint with the tokenizer), ready for the reply.
    r = lathe("generate", run, "--chat", "--system", "Be brief.", "--prompt", "how are you?",
              "--max-new-tokens", "3", "--json")
    got = json.loads(r.stdout.splitlines()[0])
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "how are you?"}]
    want = fast(fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False)["input_ids"]
    check(got["prompt_ids"] == want, f"generate --chat prompts as apply_chat_template does ({len(want)} tokens)")
    # A multi-turn conversation (the workbench's chat mode): --messages FILE, the new user turn
    # as --prompt.
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    (work / "history.json").write_text(json.dumps(history))
    r = lathe("generate", run, "--chat", "--system", "Be brief.", "--messages", work / "history.json",
              "--prompt", "and now?", "--max-new-tokens", "2", "--json")
    got = json.loads(r.stdout.splitlines()[0])
    messages = [{"role": "system", "content": "Be brief."}] + history + [{"role": "user", "content": "and now?"}]
    want = fast(fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False)["input_ids"]
    check(got["prompt_ids"] == want, f"generate --chat --messages prompts as apply_chat_template does ({len(want)} tokens)")
    want_reply = fast.decode(got["ids"][:-1] if got["finish_reason"] == "stop_id" else got["ids"])
    check(got["reply"] == want_reply, f"the reply is the text without its stop token: {got['reply']!r}")
    (work / "bad.json").write_text(json.dumps(history + [{"role": "bot", "content": "x"}]))
    r = lathe("generate", run, "--chat", "--messages", work / "bad.json", "--max-new-tokens", "1", ok=False)
    check(r.returncode != 0 and "bad.json: message 3: unknown role \"bot\"" in r.stderr,
          f"a bad turn is named with its file and place: {r.stderr.strip()[-200:]}")
    r = lathe("generate", run, "--chat", "--messages", work / "history.json", "--max-new-tokens", "1", ok=False)
    check(r.returncode != 0 and "it must be the user's" in r.stderr,
          f"a conversation must end with the user's turn: {r.stderr.strip()[-200:]}")
    padded = work / "olmo2-padded"
    r = lathe("dataset", "tiny", "dataset.source=numpy", f"dataset.paths=[\"{padded}\"]",
              f"model.vocab_size={vocab}", "dataset.sequence_length=32", ok=False)
    check(r.returncode != 0 and "dataset.sequence_length=64" in r.stderr,
          f"padded instances need their length: {r.stderr.strip()[-200:]}")


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"unit": {"type": "string"}, "city": {"type": "string"}}}}}]
TOOL_CONVERSATION = [
    {"role": "developer", "content": "Use the tools."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {
        "name": "get_weather", "arguments": {"zeta": 1, "city": "Zürich", "alpha": [2, 1]}}}]},
    {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "21 °C and clear."},
]


def check_line_reaches_template(work, fast, tokenizer_file):
    """What a line holds reaches the template as transformers hands it over: key order (tool-call
    arguments, tool schemas), the top-level `tools`, `content: null`, content parts and the
    developer role, and --template-arg variables."""
    data = work / "tools.jsonl"
    with open(data, "w") as f:
        f.write(json.dumps({"messages": TOOL_CONVERSATION, "tools": TOOLS}, ensure_ascii=False) + "\n")
    got = lathe("chat", data, "--tokenizer", tokenizer_file, "--text", ok=False)
    want = fast.apply_chat_template(TOOL_CONVERSATION, tools=TOOLS, tokenize=False)
    check(got.returncode == 0 and got.stdout == want,
          f"tools, key order, content null and parts render as apply_chat_template ({len(want)} characters)"
          + ("" if got.stdout == want else f"\n  lathe: {(got.stdout or got.stderr)[-400:]!r}\n  hf:    {want[-400:]!r}"))
    rows = lathe("chat", data, "--tokenizer", tokenizer_file, ok=False)
    check(rows.returncode == 0 and json.loads(rows.stdout)["ids"] == fast(want, add_special_tokens=False)["input_ids"],
          "the tool conversation tokenizes and masks: " + rows.stderr.strip()[-200:])
    # Content as a list of parts, with a template that reads them (as multimodal templates do).
    parts = work / "parts.jinja"
    parts.write_text("{% for m in messages %}<{{ m.role }}>{% if m.content is string %}{{ m.content }}"
                     "{% else %}{% for p in m.content %}{{ p.type }}:{{ p.text }};{% endfor %}{% endif %}"
                     "{% endfor %}")
    conv = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "c"}]
    write_jsonl(work / "parts.jsonl", [conv])
    got = lathe("chat", work / "parts.jsonl", "--tokenizer", tokenizer_file, "--chat-template", parts,
                "--text", ok=False)
    want = fast.apply_chat_template(conv, tokenize=False, chat_template=parts.read_text())
    check(got.stdout == want, f"content parts reach the template: {got.stdout or got.stderr[-200:]!r}")
    # A template variable, as apply_chat_template(**kwargs) passes it.
    styled = work / "styled.jinja"
    styled.write_text("{% if house_style is defined %}[{{ house_style }}|{{ limit * 2 }}]{% endif %}"
                      + (HERE / "chat_templates" / "qwen2_5.jinja").read_text())
    convs = work / "convs.jsonl"
    write_jsonl(convs, CONVERSATIONS[:2])
    got = lathe("chat", convs, "--tokenizer", tokenizer_file, "--chat-template", styled, "--text",
                "--template-arg", "house_style=terse", "--template-arg", "limit=21").stdout
    want = "".join(fast.apply_chat_template(c, tokenize=False, chat_template=styled.read_text(),
                                            house_style="terse", limit=21) for c in CONVERSATIONS[:2])
    check(got == want, "--template-arg reaches the template (a string and a number)")
    r = lathe("chat", convs, "--tokenizer", tokenizer_file, "--text", "--template-arg", "nonsense", ok=False)
    check(r.returncode != 0 and "NAME=VALUE" in r.stderr, f"a bad --template-arg is named: {r.stderr.strip()[-160:]}")


def check_unmaskable(work, tokenizer_file):
    """A template that rewrites an assistant turn when it is not the last (here: reversed) leaves
    that turn nowhere to be found: prepare-data stops naming the line, or with --unmaskable skip
    leaves it out and counts it."""
    rewriting = work / "rewriting.jinja"
    rewriting.write_text("{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' and not loop.last %}"
                         "{{ m.content|reverse }}{% else %}{{ m.content }}{% endif %}<|im_end|>{% endfor %}"
                         "{% if add_generation_prompt %}<assistant>{% endif %}")
    data = work / "unmaskable.jsonl"
    write_jsonl(data, [CONVERSATIONS[0], CONVERSATIONS[1], CONVERSATIONS[2]])
    r = lathe("prepare-data", data, "--tokenizer", tokenizer_file, "--out", work / "unmaskable-stop",
              "--chat", "--chat-template", rewriting, "--progress", "none", ok=False)
    check(r.returncode != 0 and f"{data}:2" in r.stderr and "--unmaskable skip" in r.stderr,
          f"a line whose turns cannot be told apart stops the run, naming it: {r.stderr.strip()[-240:]}")
    out = work / "unmaskable-skip"
    r = lathe("prepare-data", data, "--tokenizer", tokenizer_file, "--out", out, "--chat",
              "--chat-template", rewriting, "--unmaskable", "skip", "--progress", "none")
    manifest = json.loads((out / "manifest.json").read_text())
    check(manifest["documents"] == 2 and manifest["chat"]["skipped_lines"] == 1
          and f"{data}:2" in manifest["chat"]["skipped"][0] and "1 line(s) left out" in r.stdout,
          "--unmaskable skip leaves the line out and counts it")


def check_template_travels(work, fast, tokenizer_file):
    """The template (and its variables) travel from prepare-data to the run, generate --chat and
    the Hugging Face export: a tokenizer without a template beside it, an override template
    with its own special tokens, a --template-arg."""
    import shutil
    from transformers import AutoTokenizer
    bare = work / "bare"
    bare.mkdir()
    shutil.copy(tokenizer_file, bare / "tokenizer.json")
    house = work / "house"
    house.mkdir()
    source = ("{% if house_style is defined %}[{{ house_style }}]{% endif %}"
              + (HERE / "chat_templates" / "qwen2_5.jinja").read_text())
    (house / "house.jinja").write_text(source)
    (house / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>",
                                                             "pad_token": "<|endoftext|>"}))
    data = work / "travel.jsonl"
    write_jsonl(data, CONVERSATIONS * 40)
    out = work / "travel"
    lathe("prepare-data", data, "--tokenizer", bare / "tokenizer.json", "--out", out, "--chat",
          "--chat-template", house / "house.jinja", "--template-arg", "house_style=terse",
          "--progress", "none")
    manifest = json.loads((out / "manifest.json").read_text())
    check((out / "chat_template.jinja").read_text() == source
          and manifest["chat"]["file"] == "chat_template.jinja"
          and manifest["chat"]["kwargs"] == {"house_style": "terse"}
          and json.loads((out / "tokenizer_config.json").read_text())["eos_token"] == "<|im_end|>",
          "prepare-data keeps the template, its special tokens and variables beside the tokenizer copy")
    vocab = (len(fast) + 127) // 128 * 128
    run = work / "travel-run"
    r = lathe("train", "tiny", "dataset.source=numpy", f"dataset.paths=[\"{out}\"]",
              f"model.vocab_size={vocab}", "dataset.sequence_length=32",
              f"dataset.tokenizer={bare / 'tokenizer.json'}", "trainer.max_duration=2steps",
              "trainer.save_folder=" + str(run), "data_loader.global_batch_size=64",
              "train_module.rank_microbatch_size=64", ok=False)
    check(r.returncode == 0, "training from the prepared folder runs" + ("" if r.returncode == 0 else r.stderr[-600:]))
    check((run / "step2" / "chat_template.jinja").read_text() == source,
          "the checkpoint carries the template the data was rendered with")
    messages = [{"role": "user", "content": "how are you?"}]
    r = lathe("generate", run, "--chat", "--prompt", "how are you?", "--max-new-tokens", "2", "--json", ok=False)
    want = fast(fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         chat_template=source, house_style="terse"),
                add_special_tokens=False)["input_ids"]
    check(r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["prompt_ids"] == want,
          "generate --chat on the run uses the data's template and variables" + r.stderr[-300:])
    hf = work / "travel-hf"
    lathe("export", run / "step2", hf)
    exported = AutoTokenizer.from_pretrained(str(hf))
    got = lathe("chat", data, "--tokenizer", out / "tokenizer.json", "--text").stdout
    want = "".join(exported.apply_chat_template(c, tokenize=False, house_style="terse")
                   for c in CONVERSATIONS * 40)
    check(got == want and exported.eos_token == "<|im_end|>",
          "transformers' apply_chat_template on the export renders what Lathe trained on")


def main():
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        results = {name: check_template(name, work) for name in TEMPLATES}
        prepared, fast, tokenizer_file = results["olmo2"]
        check_errors(work, tokenizer_file, prepared)
        check_training(work, prepared, fast, tokenizer_file)
        _, qwen, qwen_tokenizer = results["qwen2_5"]
        check_line_reaches_template(work, qwen, qwen_tokenizer)
        check_template_travels(work, qwen, qwen_tokenizer)
        check_unmaskable(work, qwen_tokenizer)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("all chat checks passed")


if __name__ == "__main__":
    main()
