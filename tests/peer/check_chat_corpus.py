#!/usr/bin/env python3
"""Chat templates of released models (label peer): Lathe's rendering and assistant masks against
transformers' apply_chat_template, over the real templates in ../shared/reference/chat_templates/.

Run with the test environment's Python; argument: lathe-engine [--report-only]
(or LATHE_CHAT_CORPUS_REPORT_ONLY=1): --report-only prints the table and exits 0;
LATHE_CHAT_CORPUS_ONLY=REGEX takes only the templates whose names match.
Exits 77 (skipped) when the template corpus is not there.

Every template of `render/` (22) and the released templates of `pairs/` (whose `_training`
variants, with `{% generation %}` markers, serve only as the reference for the masks) gets a model
folder made here: a byte-level BPE (Llama-3 split, as check_chat.py's) trained on the
conversations' text and the template's source, whose special tokens are the template's literal
markers (`<|im_start|>`, `<｜User｜>`, `<start_of_turn>`, `[INST]` ...) and the bos, eos and pad
chosen for that family; saved by transformers, with the template as `chat_template.jinja`.

Over about fifteen conversations (one turn; a system prompt and three turns; CJK, emoji and
accents; empty replies; newlines and spaces at both ends; markup; tools listed; an OpenAI-style
tool call with `content: null` and dict arguments, keys not in alphabetical order, then the tool's
answer; parallel calls with JSON-string and odd-number arguments; the `developer` role; content as
a list of text parts; `reasoning_content` and `thinking` on the assistant's turns; `<think>`
inside the content), with and without the generation prompt, and with `enable_thinking=false` /
`reasoning_effort=high` where the template reads them (`--template-arg`):
  - where transformers renders, `lathe-engine chat --text` gives the same bytes;
  - where transformers refuses (the template raises), Lathe refuses too;
  - with a pair's training variant (`{% generation %}` blocks) as `--chat-template`, Lathe's mask
    equals transformers' `return_assistant_tokens_mask` exactly;
  - a mask Lathe derives from a released template (no blocks: transformers gives none) never
    trains a token the reference leaves out (the pair's training variant, or for the others the
    turn spans made from prefix renderings as check_chat.py's trained_mask does, when those
    prefixes are consistent); how often it equals the reference, differs only by a turn's header
    (at most 3 tokens at the turn's leading edge: Lathe does not train the generation prompt,
    docs/data.md, "Label masks"), trains less, or refuses the line, is counted in the summary.
Every expected value comes from transformers at test time. Conversations go to Lathe in one file
per template and mode; a line Lathe refuses (it names FILE:LINE) or renders differently is run
again on its own, so each failure is its own.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPORT_ONLY = "--report-only" in sys.argv[1:] or os.environ.get("LATHE_CHAT_CORPUS_REPORT_ONLY") == "1"
sys.argv = [a for a in sys.argv if a != "--report-only"]

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
# The check log, the engine and the Llama-3 split regex are check_tokenizers.py's. The engine is run
# here on bytes (check_tokenizers' lathe() decodes text mode, which turns "\r" into "\n"), on one
# file of conversations at a time.
from check_tokenizers import ENGINE, FAILURES, LLAMA3, check  # noqa: E402
from check_chat import turn_mask  # noqa: E402

HERE = Path(__file__).parent
CORPUS = Path(os.environ.get("LATHE_CHAT_TEMPLATES",
                             HERE.resolve().parents[2] / "shared" / "reference" / "chat_templates"))

# Literal special markers in a template's source: <|...|>, <｜...｜> (DeepSeek), <start_of_turn>,
# [INST], [TOOL_CALLS], [gMASK], <sop> ..., and <think>, <tool_call>, <tool_response> with their ends.
SPECIAL_PATTERNS = [r"<\|[A-Za-z0-9_./-]{1,40}\|>", r"<｜[^｜\s'\"]{1,40}｜>",
                    r"<(?:start|end)_of_[a-z]+>", r"\[/?[A-Z][A-Z_]{2,}\]", r"\[gMASK\]", r"<sop>",
                    # added tokens of the reasoning and tool-calling models (one token each there)
                    r"</?(?:think|tool_call|tool_response)>"]

# Family (prefix of the template's name) -> bos, eos, pad, as the released tokenizer configs give them.
FAMILIES = {
    "cohere": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<PAD>"),
    "deepseek": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "gemma": ("<bos>", "<eos>", "<pad>"),
    "glm4moe": (None, "<|endoftext|>", "<|endoftext|>"),
    "gptoss": ("<|startoftext|>", "<|return|>", "<|endoftext|>"),
    "lfm2": ("<|startoftext|>", "<|im_end|>", "<|pad|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>"),
    "mistral": ("<s>", "</s>", "<pad>"),
    "nemotron": ("<s>", "<|im_end|>", "<unk>"),
    "olmo3": (None, "<|endoftext|>", "<|pad|>"),
    "phi3": ("<s>", "<|endoftext|>", "<|endoftext|>"),
    "qwen": (None, "<|im_end|>", "<|endoftext|>"),
}

# Template variables given where the template's source reads them (Lathe: --template-arg KEY=JSON).
KWARG_VARIANTS = {"enable_thinking": False, "reasoning_effort": "high"}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web for a query.",
        "parameters": {"type": "object", "properties": {
            "zeta": {"type": "integer", "description": "How many results"},
            "alpha": {"type": "string", "description": "The query"}},
            "required": ["alpha"]}}},
]

# name -> {"messages": [...], "tools": [...] (optional)}
CONVERSATIONS = {
    "single": {"messages": [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi! How can I help?"}]},
    "system-3turns": {"messages": [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Fine, thanks."},
        {"role": "user", "content": "List 3 colours."},
        {"role": "assistant", "content": "1. red\n2. green\n3. blue"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome!"}]},
    "unicode": {"messages": [
        {"role": "user", "content": "Écris «bonjour» en 中文, s'il te plaît 🙂 — naïve café"},
        {"role": "assistant", "content": "你好！🇫🇷👩‍💻\n\n- bonjour\n- Grüße, ñandú"}]},
    "empty-reply": {"messages": [
        {"role": "user", "content": "Say nothing."},
        {"role": "assistant", "content": ""}]},
    "empty-middle": {"messages": [
        {"role": "user", "content": "Say nothing."},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Now say ok."},
        {"role": "assistant", "content": "ok"}]},
    "whitespace": {"messages": [
        {"role": "system", "content": "\n  Be exact.  \n"},
        {"role": "user", "content": "  leading and trailing  \n\n"},
        {"role": "assistant", "content": "\n\nfirst line\n  indented\n\ttab\r\nlast  "},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "  spaced out  "}]},
    "markup": {"messages": [
        {"role": "user", "content": "Use <b>bold</b> & \"quotes\" 'single' {{ not jinja }} {% raw %} \\n"},
        {"role": "assistant", "content": "<b>done</b> & {{ x }} \\ \"ok\""}]},
    "tools-listed": {"messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Just say hi."},
        {"role": "assistant", "content": "hi"}], "tools": TOOLS},
    "tool-call": {"messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Search for fish and chips."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function", "function": {
                "name": "search",
                "arguments": {"zeta": 1, "alpha": "fish & chips", "nested": {"b": [1, 2.5, True, None], "a": "é"}}}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "search", "content": "{\"result\": \"3 shops\"}"},
        {"role": "assistant", "content": "I found 3 shops."}], "tools": TOOLS},
    "tool-call-json": {"messages": [
        {"role": "user", "content": "Weather in Paris, and search it."},
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [
            {"id": "call0000A", "type": "function", "function": {
                "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
            {"id": "call0000B", "type": "function", "function": {
                "name": "search",
                "arguments": {"zeta": 9007199254740993, "alpha": "line\nbreak \"q\" <tag> & 'apos' é 🙂 \u0001",
                              "small": 1e-05, "tenth": 0.1, "huge": 1e100, "neg": -0.0, "empty": {}, "list": []}}}]},
        {"role": "tool", "tool_call_id": "call0000A", "name": "get_weather", "content": "18 C, cloudy"},
        {"role": "tool", "tool_call_id": "call0000B", "name": "search", "content": "Paris: 18 C"},
        {"role": "assistant", "content": "18 C and cloudy in Paris."}], "tools": TOOLS},
    "developer": {"messages": [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Bonjour"}]},
    "parts": {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is a short text."}]}]},
    "reasoning": {"messages": [
        {"role": "system", "content": "Think step by step."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "reasoning_content": "Add two and two.\nThat is 4.", "content": "4"},
        {"role": "user", "content": "And times 3?"},
        {"role": "assistant", "reasoning_content": "4 * 3 = 12.", "content": "It is 12."}]},
    "thinking-field": {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "thinking": "Add two and two.", "content": "4"},
        {"role": "user", "content": "And times 3?"},
        {"role": "assistant", "thinking": "4 * 3 = 12.", "content": "12"}]},
    "inline-think": {"messages": [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "<think>\nIt is Paris.\n</think>\n\nParis."},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "<think>\nRome.\n</think>\n\nRome."}]},
}


def templates():
    """name -> (released source, training source or None); render/ and the released of pairs/."""
    out = {}
    for f in sorted((CORPUS / "render").glob("*.jinja")):
        out[f.stem] = [f.read_text(), None]
    for f in sorted((CORPUS / "pairs").glob("*.jinja")):
        if f.stem.endswith("_training"):
            continue
        training = CORPUS / "pairs" / f"{f.stem}_training.jinja"
        name = f.stem if out.setdefault(f.stem, [f.read_text(), None])[0] == f.read_text() else f.stem + "@pairs"
        out.setdefault(name, [f.read_text(), None])
        if training.exists():
            out[name][1] = training.read_text()
    for name, (source, training) in out.items():
        if training is None and re.search(r"{%-?\s*generation\s*-?%}", source):
            out[name][1] = source  # a training variant itself: its own markers give the mask
    return out


def strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield k
            yield from strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from strings(v)


def family(name):
    key = max((k for k in FAMILIES if name.startswith(k)), key=len, default=None)
    return FAMILIES[key] if key else (None, "<|endoftext|>", None)


def make_tokenizer(name, source, work):
    """A byte-level BPE (Llama-3 split) trained on the conversations and the template, its special
    tokens the template's markers, saved by transformers with the template as chat_template.jinja;
    read back as transformers reads a model folder."""
    bos, eos, pad = family(name)
    specials = []
    for pattern in SPECIAL_PATTERNS:
        for m in re.findall(pattern, source):
            if m not in specials:
                specials.append(m)
    for t in (bos, eos, pad):
        if t and t not in specials:
            specials.append(t)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    texts = list(strings(list(CONVERSATIONS.values()))) * 20 + [source] * 5
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    kwargs = {k: v for k, v in (("bos_token", bos), ("eos_token", eos), ("pad_token", pad)) if v}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    folder = work / name
    fast.save_pretrained(str(folder))
    (folder / "chat_template.jinja").write_text(source)
    return AutoTokenizer.from_pretrained(str(folder)), folder, specials


def hf_render(fast, conv, gen, kwargs, template=None):
    """(text, None) or (None, the exception's message)."""
    try:
        return fast.apply_chat_template(conv["messages"], tools=conv.get("tools"), tokenize=False,
                                        add_generation_prompt=gen, chat_template=template,
                                        **kwargs), None
    except Exception as e:  # noqa: BLE001 - the template refuses the conversation
        return None, f"{type(e).__name__}: {str(e)[:160]}"


def hf_training_mask(fast, conv, kwargs, training):
    try:
        out = fast.apply_chat_template(conv["messages"], tools=conv.get("tools"), tokenize=True,
                                       return_dict=True, return_assistant_tokens_mask=True,
                                       chat_template=training, **kwargs)
        return list(out["input_ids"]), list(out["assistant_masks"]), None
    except Exception as e:  # noqa: BLE001
        return None, None, f"{type(e).__name__}: {str(e)[:160]}"


def prefix_mask(fast, conv, kwargs, text, ids):
    """check_chat.py's turn_mask with the line's tools and template variables; None when a prefix
    rendering is not a prefix of the whole (or raises)."""
    try:
        return turn_mask(fast, conv["messages"], text, ids,
                         lambda head, gen: hf_render(fast, dict(conv, messages=head), gen, kwargs)[0])
    except ValueError:
        return None

# ---------------------------------------------------------------------------------------------
# The engine, on a file of conversations at a time.

def engine(args, timeout=120):
    for _ in range(90):  # the binary may be replaced under us by a rebuild: wait for it
        try:
            r = subprocess.run([ENGINE, *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=timeout)
            return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return 124, b"", f"timed out after {timeout} s"
        except OSError:
            time.sleep(2)
    return 127, b"", f"{ENGINE} cannot be run"


def jsonl_line(conv):
    line = {"messages": conv["messages"]}
    if conv.get("tools"):
        line["tools"] = conv["tools"]
    return json.dumps(line, ensure_ascii=False)


CALLS = [0]
CALLS_LOCK = threading.Lock()


def short_error(rc, err, work):
    """The engine's error line (its first line naming an error), without the temporary folder."""
    lines = [l for l in err.splitlines() if l.strip()]
    line = next((l for l in lines if "error" in l), lines[0] if lines else "")
    line = line.replace(str(work) + "/", "").replace("lathe-engine chat: error: ", "")
    line = re.sub(r"^(\S+\.jsonl:\d+: )\1", r"\1", line)  # the place, once
    return f"rc={rc}: {line[:260]}"


def run_lines(path, convs, args, mode, expected):
    """Runs `lathe-engine chat` on the conversations, one file, again from after a line it refuses
    (FILE:LINE in its error) or renders differently (that line alone). Returns per conversation
    ("ok", text or row) or ("refused", message) or ("bad-output", message)."""
    results = [None] * len(convs)
    start = 0
    work = path.parent

    def call():
        with CALLS_LOCK:
            CALLS[0] += 1
        return engine(["chat", path, *args])

    def one(i):
        path.write_text(jsonl_line(convs[i]) + "\n", encoding="utf-8")
        rc, out, err = call()
        if rc != 0:
            return ("refused", short_error(rc, err, work))
        try:
            s = out.decode("utf-8")
            return ("ok", s if mode == "text" else json.loads(s.splitlines()[0]))
        except (UnicodeDecodeError, ValueError, IndexError) as e:
            return ("bad-output", f"{type(e).__name__}: {out[:200]!r}")

    while start < len(convs):
        path.write_text("".join(jsonl_line(c) + "\n" for c in convs[start:]), encoding="utf-8")
        rc, out, err = call()
        m = re.search(re.escape(str(path)) + r":(\d+):", err) if rc != 0 else None
        if rc != 0 and not m:
            # Not a line's fault (an unknown argument ...), or a crash: the first line alone tells.
            first = one(start)
            if first[0] == "refused" and (first[1] == short_error(rc, err, work) or start + 1 == len(convs)):
                for i in range(start, len(convs)):
                    results[i] = first
                break
            results[start] = first
            start += 1
            continue
        printed = int(m.group(1)) - 1 if m else len(convs) - start
        try:
            text = out.decode("utf-8")
        except UnicodeDecodeError:
            results[start] = one(start)
            start += 1
            continue
        j = 0
        if mode == "text":
            pos = 0
            while j < printed:
                want = expected[start + j]
                if want is None or not text.startswith(want, pos):
                    break
                results[start + j] = ("ok", want)
                pos += len(want)
                j += 1
            if j == printed and pos != len(text) and j > 0:  # more text than expected: whose?
                j -= 1
        else:
            rows = text.splitlines()
            while j < printed and j < len(rows):
                try:
                    results[start + j] = ("ok", json.loads(rows[j]))
                except ValueError:
                    break
                j += 1
        if j < printed:  # this line's output is not the expected one: alone, to see it
            results[start + j] = one(start + j)
            start += j + 1
            continue
        if m:
            results[start + printed] = ("refused", short_error(rc, err, work))
            start += printed + 1
        else:
            start = len(convs)
    return results


# ---------------------------------------------------------------------------------------------
# Comparisons.

def text_diff(got, want, width=70):
    p = 0
    while p < min(len(got), len(want)) and got[p] == want[p]:
        p += 1
    a = max(0, p - 30)
    return (f"at char {p} (lathe {len(got)}, hf {len(want)} chars)\n"
            f"      lathe: {got[a:a + width]!r}\n      hf:    {want[a:a + width]!r}")


def runs(a, b):
    out, i = [], 0
    while i < len(a):
        if a[i] != b[i]:
            j = i
            while j < len(a) and a[j] != b[j]:
                j += 1
            out.append((i, j))
            i = j
        else:
            i += 1
    return out


HEADER_TOKENS = 3  # the longest difference at a turn's start taken for the header convention


def classify_mask(lathe, ref):
    """equal; header-convention (every differing run at most HEADER_TOKENS tokens, at an assistant
    turn's leading edge: neither mask set just before it, both set just after it); under-trains
    (Lathe trains a subset of the reference's tokens); or over-trains (Lathe trains a token the
    reference does not)."""
    if lathe == ref:
        return "equal"
    if any(a == 1 and b == 0 for a, b in zip(lathe, ref)):
        return "over-trains"
    n = len(ref)
    for a, b in runs(lathe, ref):
        edge = a == 0 or (lathe[a - 1] == 0 and ref[a - 1] == 0)
        then_both = b < n and lathe[b] == 1 and ref[b] == 1
        if not (b - a <= HEADER_TOKENS and edge and then_both):
            return "under-trains"
    return "header-convention"


def mask_diff(fast, ids, lathe, ref, limit=4):
    parts = []
    for a, b in runs(lathe, ref)[:limit]:
        toks = fast.decode(ids[a:b])
        parts.append(f"[{a}:{b}) lathe={lathe[a]} ref={ref[a]} {toks!r}")
    more = len(runs(lathe, ref)) - limit
    return "; ".join(parts) + (f"; +{more} more runs" if more > 0 else "")


# ---------------------------------------------------------------------------------------------

def check_template(name, source, training, work, table, details):
    fast, folder, specials = make_tokenizer(name, source, work)
    tokenizer_file = folder / "tokenizer.json"
    variants = [({}, "")]
    for key, value in KWARG_VARIANTS.items():
        if re.search(r"\b" + key + r"\b", source):
            variants.append(({key: value}, f" [{key}={json.dumps(value)}]"))
    for kwargs, suffix in variants:
        targs = [a for k, v in kwargs.items() for a in ("--template-arg", f"{k}={json.dumps(v)}")]
        names = list(CONVERSATIONS)
        rows = {n + suffix: {} for n in names}

        # Text, without and with the generation prompt (the prompt: all but the last reply).
        for gen in (False, True):
            col = "gen" if gen else "text"
            convs = {n: dict(c, messages=c["messages"][:-1]) if gen else c for n, c in CONVERSATIONS.items()}
            want = {n: hf_render(fast, convs[n], gen, kwargs) for n in names}
            for refuses in (False, True):
                part = [n for n in names if (want[n][0] is None) == refuses]
                if not part:
                    continue
                args = ["--tokenizer", tokenizer_file, "--text", *(["--generation-prompt"] if gen else []), *targs]
                got = run_lines(work / f"{name}-{col}.jsonl", [convs[n] for n in part], args, "text",
                                [want[n][0] for n in part])
                for n, (kind, value) in zip(part, got):
                    row = rows[n + suffix]
                    if refuses:
                        row[col] = "hf-refuses" if kind == "refused" else "hf-refuses/lathe-renders"
                        if kind != "refused":
                            details.append((name, n + suffix, col, f"hf: {want[n][1]}\n      lathe rendered "
                                            f"{str(value)[:120]!r}"))
                    elif kind == "ok" and value == want[n][0]:
                        row[col] = "ok"
                    elif kind == "ok":
                        row[col] = "differs"
                        details.append((name, n + suffix, col, text_diff(value, want[n][0])))
                    else:
                        row[col] = "lathe-refuses" if kind == "refused" else kind
                        details.append((name, n + suffix, col, value))

        # Masks: the conversations transformers renders (and Lathe renders: a conversation Lathe
        # refuses to render is not run again for its mask).
        full = {n: hf_render(fast, CONVERSATIONS[n], False, kwargs)[0] for n in names}
        for n in names:
            if full[n] is None:
                rows[n + suffix]["mask"] = "hf-refuses"
        part = [n for n in names if full[n] is not None and rows[n + suffix].get("text") != "lathe-refuses"]
        got = dict(zip(part, run_lines(work / f"{name}-mask.jsonl", [CONVERSATIONS[n] for n in part],
                                       ["--tokenizer", tokenizer_file, *targs], "mask", [None] * len(part))))
        for n in names:
            if full[n] is None:
                continue
            kind, value = got.get(n, ("refused", "refuses the text"))
            row = rows[n + suffix]
            conv = CONVERSATIONS[n]
            text = full[n]
            ids = fast(text, add_special_tokens=False)["input_ids"]
            ref, how, notes = None, "", []
            prefix = prefix_mask(fast, conv, kwargs, text, ids)
            if training is not None:
                t_ids, t_mask, err = hf_training_mask(fast, conv, kwargs, training)
                if err:
                    notes.append(f"training variant refuses: {err}")
                elif t_ids != ids:
                    notes.append("training variant renders other text")
                else:
                    ref, how = t_mask, "training"
            if ref is None and prefix is not None:
                ref, how = prefix, "prefix"
            if prefix is None:
                notes.append("prefix renderings inconsistent")
            if kind != "ok":
                status = ("lathe-refuses" if ref is not None else "no-ref/lathe-refuses") \
                    if kind == "refused" else kind
                if value != "refuses the text" and (ref is not None or kind != "refused"):
                    details.append((name, n + suffix, "mask", value))
            elif value.get("ids") != ids:
                status = "ids-differ"
                details.append((name, n + suffix, "mask", "the text differs (above)"
                                if value.get("text") != text else "ids differ on the same text"))
            elif ref is None:
                status = "no-ref/lathe-masks"
            else:
                status = classify_mask(value["mask"], ref)
                if status in ("under-trains", "over-trains") or status == "header-convention" and not any(
                        d[0] == name and d[2].startswith("mask") and "lathe=" in d[3] for d in details):
                    details.append((name, n + suffix, f"mask ({how} ref)",
                                    mask_diff(fast, ids, value["mask"], ref)))
            row["mask"] = status + (f" ({how})" if how and status != "equal" else "")
            if notes:
                row["note"] = "; ".join(notes)

        # {% generation %} blocks: with the training variant as --chat-template, Lathe's mask is
        # transformers' return_assistant_tokens_mask exactly.
        if training is not None:
            variant = folder / "training.jinja"  # beside tokenizer_config.json: the special tokens
            variant.write_text(training)
            refs = {n: hf_training_mask(fast, CONVERSATIONS[n], kwargs, training) for n in names}
            part = [n for n in names if refs[n][2] is None]
            got = dict(zip(part, run_lines(work / f"{name}-generation{suffix and '-kw'}.jsonl",
                                           [CONVERSATIONS[n] for n in part],
                                           ["--tokenizer", tokenizer_file, "--chat-template", variant, *targs],
                                           "mask", [None] * len(part))))
            for n in part:
                kind, value = got[n]
                t_ids, t_mask, _ = refs[n]
                if kind != "ok":
                    status = "lathe-refuses"
                    details.append((name, n + suffix, "generation", value))
                elif value.get("ids") != t_ids:
                    status = "ids-differ"
                elif value["mask"] == t_mask:
                    status = "equal"
                else:
                    status = "differs"
                    details.append((name, n + suffix, "generation",
                                    mask_diff(fast, t_ids, value["mask"], t_mask)))
                rows[n + suffix]["generation"] = status
        table.extend((name, n, r) for n, r in rows.items())


def main():
    if not (CORPUS / "render").is_dir():
        print(f"skipped: no chat template corpus at {CORPUS}")
        sys.exit(77)
    started = time.time()
    corpus = templates()
    only = os.environ.get("LATHE_CHAT_CORPUS_ONLY")  # a regex of template names, for development
    if only:
        corpus = {k: v for k, v in corpus.items() if re.search(only, k)}
    jobs = int(os.environ.get("LATHE_CHAT_CORPUS_JOBS", min(4, os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)

        def one_template(item):
            name, (source, training) = item
            rows, found = [], []
            check_template(name, source, training, work, rows, found)
            return rows, found
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            done = list(pool.map(one_template, corpus.items()))
    table = [r for rows, _ in done for r in rows]
    details = [f for _, found in done for f in found]

    # The table.
    w = max(len("template"), *(len(n) for n, _, _ in table)) + 1
    wc = max(len("conversation"), *(len(c) for _, c, _ in table)) + 1
    print(f"\n{'template':<{w}}{'conversation':<{wc}}{'text':<26}{'+generation prompt':<26}"
          f"{'mask (released)':<34}mask ({{% generation %}})")
    for name, conv, r in table:
        print(f"{name:<{w}}{conv:<{wc}}{r.get('text', '-'):<26}{r.get('gen', '-'):<26}"
              f"{r.get('mask', '-'):<34}{r.get('generation', '-')}"
              + (f"   [{r['note']}]" if r.get("note") else ""))
    print("\nDetails:")
    for name, conv, col, what in details:
        print(f"  {name} / {conv} / {col}: {what}")
    print("\nSummary:")
    for col in ("text", "gen", "mask", "generation"):
        counts = {}
        for _, _, r in table:
            key = r.get(col, "-").split(" (")[0]
            counts[key] = counts.get(key, 0) + 1
        print(f"  {col:<5} " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    print(f"  {len(corpus)} templates, {len(table)} conversation cases, {CALLS[0]} engine runs, "
          f"{time.time() - started:.0f} s\n")

    by_template = {}
    for name, conv, r in table:
        by_template.setdefault(name, []).append((conv, r))
    for name, rows in by_template.items():
        bad = [f"{c} ({col}: {r[col]})" for c, r in rows for col in ("text", "gen")
               if r.get(col) in ("differs", "lathe-refuses", "bad-output")]
        n = sum(1 for _, r in rows for col in ("text", "gen")
                if r.get(col) and not r[col].startswith("hf-refuses"))
        check(not bad, f"{name}: {n - len(bad)} of {n} renders equal apply_chat_template's"
              + ("" if not bad else ": not " + ", ".join(bad[:6]) + (" ..." if len(bad) > 6 else "")))
        refused = [c for c, r in rows for col in ("text", "gen") if r.get(col, "").startswith("hf-refuses")]
        bad = [f"{c} ({col})" for c, r in rows for col in ("text", "gen") if r.get(col) == "hf-refuses/lathe-renders"]
        if refused:
            check(not bad, f"{name}: Lathe refuses the {len(refused)} renders transformers refuses"
                  + ("" if not bad else ": renders " + ", ".join(bad[:6])))
        # Masks derived from the released template (no {% generation %} blocks; transformers
        # gives none): Lathe never trains a token the reference leaves out (the prompt, another
        # turn); where it trains less than the reference (a turn's header, the <think> a
        # generation prompt opens, an end token the template writes only for the last turn) or
        # refuses a line, it is counted in the summary, not failed.
        over = [f"{c} ({r['mask']})" for c, r in rows if r.get("mask", "").startswith("over-trains")]
        derived = [c for c, r in rows if r.get("mask", "").split(" (")[0] in
                   ("equal", "header-convention", "under-trains", "over-trains")]
        if derived:
            check(not over, f"{name}: {len(derived) - len(over)} of {len(derived)} masks derived from "
                            "the released template train nothing the reference leaves out"
                  + ("" if not over else ": not " + ", ".join(over[:6]) + (" ..." if len(over) > 6 else "")))
        gen = [(c, r["generation"]) for c, r in rows if "generation" in r]
        bad = [f"{c} ({g})" for c, g in gen if g != "equal"]
        if gen:
            check(not bad, f"{name}: with the {{% generation %}} training variant, {len(gen) - len(bad)} of "
                           f"{len(gen)} masks equal transformers' return_assistant_tokens_mask"
                  + ("" if not bad else ": not " + ", ".join(bad[:6]) + (" ..." if len(bad) > 6 else "")))

    if REPORT_ONLY:
        print(f"(--report-only: {len(FAILURES)} check(s) failed, exit 0)")
        return
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("all chat corpus checks passed")


if __name__ == "__main__":
    main()
