#!/usr/bin/env python3
"""Hugging Face parity for every model family Lathe reads besides Olmo2 (check_hf_olmo2.py).

Run with the test environment's Python (transformers, safetensors, torch); argument: lathe-engine.

For LlamaForCausalLM (GQA, head_dim given, Llama 3 "llama3" RoPE scaling, tied embeddings),
Qwen2ForCausalLM (q/k/v biases, "linear" RoPE scaling), Qwen3ForCausalLM (QK-norm per head, head_dim
past hidden/heads, YaRN, tied embeddings) and Olmo3ForCausalLM (sliding windows of 4 tokens on three
layers of four; also with RoPE per layer type as transformers 5 writes it: other thetas on the
windowed layers, and YaRN on the full-attention layers only), each a tiny random model transformers itself builds (random norms and biases, so
that none is the identity), saved by transformers:

  import     `lathe-engine import` reads the folder; Lathe's logits equal transformers' within
             1e-5 relative on prompts past the window and past the scaled context; greedy
             generation (KV cache, left-padded batch) gives transformers' ids and log-probs;
             `generate` on the folder itself (no KV cache) does too.
  export     exporting the import writes the same family: transformers loads it, every tensor
             equals the one transformers saved bit for bit, and the logits are equal.
  load_path  `lathe-engine train HF_DIR` (trainer.load_path=HF_DIR, the folder's model) trains from
             its weights: step 1's CE loss equals transformers' loss on the same batch within
             1e-5; `config HF_DIR` shows that fine-tuning config.
  refusals   an Olmo3 with attention biases, a Llama with mlp_bias, and a RoPE field or layer
             type Lathe does not know end with an error naming the field.
  model_type a config.json without `architectures` loads by its model_type, as transformers'
             Auto classes do; an unknown model_type is refused naming it.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_parity import (check, compare_generation, compare_logits, engine, finish,  # noqa: E402
                       first_loss, tensors_of)


COMMON = dict(vocab_size=300, hidden_size=96, intermediate_size=200, num_hidden_layers=4,
              num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256,
              rms_norm_eps=1e-5, pad_token_id=None, bos_token_id=None, eos_token_id=None)

FAMILIES = {
    "LlamaForCausalLM": (transformers.LlamaConfig, dict(
        head_dim=16, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 16})),
    "Qwen2ForCausalLM": (transformers.Qwen2Config, dict(
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "linear", "rope_theta": 1000000.0, "factor": 2.0})),
    "Qwen3ForCausalLM": (transformers.Qwen3Config, dict(
        head_dim=32, tie_word_embeddings=True,
        rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                         "original_max_position_embeddings": 16})),
    "Olmo3ForCausalLM": (transformers.Olmo3Config, dict(
        sliding_window=4, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0})),
    # transformers 5 writes Olmo3's RoPE per layer type; the windowed layers may differ.
    "Olmo3ForCausalLM-rope-per-layer-type": (transformers.Olmo3Config, dict(
        sliding_window=4, tie_word_embeddings=False,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    # As OLMo 3's long-context checkpoints: YaRN on the full-attention layers only.
    "Olmo3ForCausalLM-yarn-on-full-layers": (transformers.Olmo3Config, dict(
        sliding_window=4, tie_word_embeddings=False,
        rope_parameters={"full_attention": {"rope_type": "yarn", "rope_theta": 500000.0,
                                            "factor": 4.0, "original_max_position_embeddings": 16},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}})),
}


def architecture(label):
    return label.split("-")[0]


def build(name, work):
    cls_cfg, extra = FAMILIES[name]
    cfg = cls_cfg(**COMMON, **extra)
    torch.manual_seed(0)
    model = getattr(transformers, architecture(name))(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" in n:
                p.mul_(1 + 0.3 * torch.randn_like(p))
            elif n.endswith(".bias"):
                p.normal_(0, 0.3)
    folder = work / name
    # Sharded for one family: the index path is the same for all.
    model.save_pretrained(folder, **({"max_shard_size": "200KB"} if name == "Qwen2ForCausalLM" else {}))
    return model, folder





def run_family(name, work):
    ref, folder = build(name, work)
    saved = tensors_of(folder)
    imp = work / f"{name}-imported" / "step0"
    engine("import", folder, imp)
    # Past the window (4) and past the context the scaling starts from (16).
    prompts = [[5, 17, 299, 42], list(range(1, 30)), [250]]
    compare_logits(f"{name} import", imp, ref, prompts)
    compare_generation(f"{name} import, KV cache", imp, ref, prompts, 16)
    compare_generation(f"{name} folder itself, no KV cache", folder, ref, prompts, 16, "--no-kv-cache")

    out = work / f"{name}-export"
    engine("export", imp, out)
    back = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    check(type(back).__name__ == architecture(name),
          f"{name} export: transformers loads it as {type(back).__name__}")
    again = tensors_of(out)
    check(saved.keys() == again.keys() and all(torch.equal(saved[k], again[k]) for k in saved),
          f"{name} export: every tensor equals the one transformers saved, bit for bit "
          f"({len(again)} tensors)")
    with torch.no_grad():
        x = torch.tensor([list(range(1, 40))])
        diff = (back(x).logits - ref(x).logits).abs().max().item()
    check(diff == 0.0, f"{name} export: transformers' logits of the export equal the original's ({diff})")

    # The fine-tuning recipe: `train HF_DIR` takes the folder's model and weights
    # (trainer.load_path=HF_DIR); `config HF_DIR` shows that config.
    seq, batch = 32, 4
    tokens = np.random.default_rng(0).integers(0, 300, size=seq * batch * 8, dtype=np.uint16)
    tokens.tofile(work / "tokens.u16")
    shown = json.loads(engine("config", folder, f"dataset.paths=[{work / 'tokens.u16'}]").stdout)
    check(Path(shown["trainer"]["load_path"]).resolve() == folder.resolve()
          and shown["model"]["n_kv_heads"] == 2 and shown["train_module"]["optim"]["lr"] == 2e-5
          # The warmup is a share of the run: a few-step epoch does not end inside it.
          and shown["train_module"]["scheduler"]["warmup"] is None
          and shown["train_module"]["scheduler"]["warmup_fraction"] == 0.03,
          f"{name}: `config HF_DIR` is a fine-tuning config of the folder's model and weights")
    run = work / f"{name}-run"
    engine("train", folder, f"run_name={name}-lp", f"trainer.save_folder={run}",
           f"dataset.paths=[{work / 'tokens.u16'}]",
           f"dataset.sequence_length={seq}", "dataset.validation_fraction=0",
           f"data_loader.global_batch_size={seq * batch}", "data_loader.shuffle=false",
           f"train_module.rank_microbatch_size={seq * batch}",
           f"train_module.max_sequence_length={seq}", "trainer.max_duration={value: 1, unit: steps}",
           "launch.num_threads=1", "trainer.metrics_collect_interval=1",
           "trainer.callbacks.sampler.enabled=false")
    loss = first_loss(run / "metrics.jsonl")
    ids = torch.from_numpy(tokens[:seq * batch].astype(np.int64)).view(batch, seq)
    with torch.no_grad():
        hf_loss = ref(ids, labels=ids).loss.item()
    check(loss is not None and abs(loss - hf_loss) <= 1e-5 * abs(hf_loss),
          f"{name} load_path=HF_DIR: step 1 CE loss {loss} vs transformers {hf_loss:.7f} (1e-5)")


def refusals(work):
    for index, (name, field, value, expect) in enumerate([
        ("Olmo3ForCausalLM", "attention_bias", True, "attention_bias"),
        ("LlamaForCausalLM", "mlp_bias", True, "mlp_bias"),
        ("Qwen3ForCausalLM", "rope_parameters", {"rope_type": "longrope", "rope_theta": 1e6},
         "rope_type"),
        # A RoPE field or layer type Lathe does not know is refused, never ignored.
        ("Qwen3ForCausalLM", "rope_parameters", {"rope_type": "default", "rope_theta": 1e6,
                                                 "short_factor": [1.0]}, "short_factor"),
        ("Olmo3ForCausalLM", "rope_parameters",
         {"full_attention": {"rope_type": "default", "rope_theta": 5e5},
          "chunked_attention": {"rope_type": "default", "rope_theta": 1e4}}, "chunked_attention"),
        ("Olmo3ForCausalLM", "rope_parameters",
         {"full_attention": {"rope_type": "default", "rope_theta": 5e5},
          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4, "scale": 2}},
         "sliding_attention.scale"),
        ("LlamaForCausalLM", "rope_parameters",
         {"full_attention": {"rope_type": "default", "rope_theta": 5e5},
          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}, "Olmo3 only"),
    ]):
        src = work / f"bad-{index}-{name}-{field}"
        shutil.copytree(work / name, src)
        cfg = json.loads((src / "config.json").read_text())
        cfg[field] = value
        (src / "config.json").write_text(json.dumps(cfg))
        r = engine("import", src, work / f"bad-{index}-out", ok=False)
        check(r.returncode != 0 and f"config.json: {field}" in r.stderr and expect in r.stderr
              and not (work / f"bad-{index}-out").exists(),
              f"{name} with {field}={json.dumps(value)}: refused, naming the field "
              f"({r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'no message'})")


def model_type_only(work):
    """A config.json without `architectures` loads by its model_type, as transformers does."""
    src = work / "LlamaForCausalLM-no-architectures"
    shutil.copytree(work / "LlamaForCausalLM", src)
    cfg = json.loads((src / "config.json").read_text())
    del cfg["architectures"]
    (src / "config.json").write_text(json.dumps(cfg))
    ref = transformers.AutoModelForCausalLM.from_pretrained(src).eval()
    imp = work / "no-architectures-imported" / "step0"
    engine("import", src, imp)
    compare_logits("LlamaForCausalLM without architectures (model_type llama)", imp, ref,
                   [[5, 17, 299, 42], list(range(1, 30))])
    cfg["model_type"] = "mistral"
    (src / "config.json").write_text(json.dumps(cfg))
    r = engine("import", src, work / "no-architectures-mistral", ok=False)
    check(r.returncode != 0 and "config.json: model_type" in r.stderr and "mistral" in r.stderr,
          f"model_type mistral without architectures: refused, naming model_type "
          f"({r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'no message'})")


def main():
    work = Path(tempfile.mkdtemp(prefix="lathe-hf-families-"))
    try:
        for name in FAMILIES:
            run_family(name, work)
        refusals(work)
        model_type_only(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
