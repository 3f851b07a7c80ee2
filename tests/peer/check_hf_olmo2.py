#!/usr/bin/env python3
"""Hugging Face parity for `lathe-engine export`, `import`, `generate` and trainer.load_path=HF_DIR.

Run with the test environment's Python (transformers, safetensors, torch); argument: lathe-engine.

  export    A model trained by Lathe (1 rank, and 2 ranks with FSDP) is exported (fp32 sharded,
            bf16); transformers' own Olmo2ForCausalLM loads it, its logits equal Lathe's forward
            within 1e-5 relative, and its greedy continuations and
            their log-probabilities equal `lathe-engine generate`'s (three prompts of different
            lengths in one left-padded batch, with and without the KV cache). bf16 weights are
            exactly the fp32 ones rounded.
  import    A randomly initialised transformers Olmo2 (grouped-query attention, an intermediate
            size off Lathe's rule, random norms) saved sharded in fp32 and whole in bf16 and fp16 is
            imported; Lathe's logits (1e-5 relative) and generations equal transformers';
            exporting the import gives back every tensor bit for bit, and so does importing an
            export; training continues from the import, from transformers' loss, and it falls.
  load_path trainer.load_path=HF_DIR trains from the folder's weights: step 1's CE loss equals
            transformers' loss on the same batch within 1e-5; with train_module.load_key_mapping
            a folder with a renamed tensor trains the same.
  bad input A truncated shard, a header that lies, an unknown, a missing or a misshapen tensor, an
            unsupported architecture and a load_path whose model differs from the config each end
            with an error naming it, and leave no checkpoint behind.
"""
import copy
import json
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_parity import (check, compare_generation, compare_logits, engine, finish,  # noqa: E402
                       tensors_of)


def main():
    work = Path(tempfile.mkdtemp(prefix="lathe-hf-"))
    try:
        run_tests(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish()


def run_tests(work):
    prompts = [list(b"The "), list(b"Once upon a time, "), [120]]

    # ---- export: a model Lathe trained, 1 rank and 2 ranks with FSDP ----
    common = ["trainer.max_duration={value: 30, unit: steps}", "launch.num_threads=1"]
    engine("train", "tiny", "run_name=one", f"trainer.save_folder={work / 'one'}", *common)
    engine("launch", "--nproc", "2", "tiny", "run_name=fsdp", f"trainer.save_folder={work / 'fsdp'}",
           "train_module.dp_config.name=fsdp", *common)
    for name in ["one", "fsdp"]:
        ckpt = work / name / "step30"
        out = work / f"{name}-hf"
        r = json.loads(engine("export", ckpt, out, "--max-shard-size", "150KB").stdout)
        check((out / "model.safetensors.index.json").exists() and len(r["files"]) > 3,
              f"export {name}: sharded past --max-shard-size ({len(r['files'])} files)")
        model = transformers.AutoModelForCausalLM.from_pretrained(out)
        check(type(model).__name__ == "Olmo2ForCausalLM", f"export {name}: transformers loads it")
        compare_logits(f"export {name}", ckpt, model, prompts)
        compare_generation(f"export {name}, KV cache", ckpt, model, prompts)
        compare_generation(f"export {name}, no KV cache", out, model, prompts, 20, "--no-kv-cache")
    # bf16: exactly the fp32 weights rounded.
    engine("export", work / "one" / "step30", work / "bf16", "--dtype", "bfloat16")
    fp32, bf16 = tensors_of(work / "one-hf"), tensors_of(work / "bf16")
    check(fp32.keys() == bf16.keys() and
          all(bf16[k].dtype == torch.bfloat16 and torch.equal(bf16[k], fp32[k].to(torch.bfloat16))
              for k in fp32),
          "export --dtype bfloat16: every tensor is the fp32 one rounded to bf16")
    check(json.loads((work / "bf16" / "config.json").read_text())["torch_dtype"] == "bfloat16",
          "export --dtype bfloat16: config.json says torch_dtype bfloat16")
    check(engine("export", work / "one" / "step30", work / "bf16", ok=False).returncode != 0,
          "export refuses an existing non-empty folder")
    # Export then import: the imported checkpoint holds the trained weights bit for bit.
    engine("import", work / "one-hf", work / "one-back")
    engine("export", work / "one-back", work / "one-back-hf")
    again = tensors_of(work / "one-back-hf")
    check(fp32.keys() == again.keys() and all(torch.equal(fp32[k], again[k]) for k in fp32),
          "export then import gives back every tensor bit for bit")

    # ---- import: a model transformers made ----
    torch.manual_seed(0)
    cfg = transformers.Olmo2Config(vocab_size=300, hidden_size=96, intermediate_size=200,
                                   num_hidden_layers=2, num_attention_heads=6,
                                   num_key_value_heads=2, max_position_embeddings=128,
                                   rope_theta=10000.0, rms_norm_eps=1e-5, pad_token_id=None,
                                   bos_token_id=None, eos_token_id=None)
    ref = transformers.Olmo2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for n, p in ref.named_parameters():
            if "norm" in n:
                p.mul_(1 + 0.2 * torch.randn_like(p))
    ref.save_pretrained(work / "ref", max_shard_size="100KB")
    check((work / "ref" / "model.safetensors.index.json").exists(), "import: the reference is sharded")
    imp = work / "imported" / "step0"
    engine("import", work / "ref", imp)
    ids_prompts = [[5, 17, 299, 42], [1, 2, 3, 4, 5, 6, 7, 8, 9], [250]]
    compare_logits("import fp32 (sharded)", imp, ref, ids_prompts)
    compare_generation("import fp32 (sharded)", imp, ref, ids_prompts)
    compare_generation("generate from the Hugging Face folder itself", work / "ref", ref, ids_prompts)
    engine("export", imp, work / "reexport")
    orig = {k: v for k, v in ref.state_dict().items()}
    back = tensors_of(work / "reexport")
    check(orig.keys() == back.keys() and all(torch.equal(orig[k], back[k]) for k in orig),
          "import then export gives back every tensor bit for bit")
    for dtype, name in [(torch.bfloat16, "bf16"), (torch.float16, "fp16")]:
        copy.deepcopy(ref).to(dtype).save_pretrained(work / f"ref-{name}")
        engine("import", work / f"ref-{name}", work / f"imp-{name}")
        engine("export", work / f"imp-{name}", work / f"reexp-{name}")
        got = tensors_of(work / f"reexp-{name}")
        check(all(torch.equal(got[k], orig[k].to(dtype).to(torch.float32)) for k in orig),
              f"import {name}: the weights are the {name} values, exactly")
        model = transformers.AutoModelForCausalLM.from_pretrained(work / f"ref-{name}",
                                                                  dtype=torch.float32).eval()
        compare_generation(f"import {name}", work / f"imp-{name}", model, ids_prompts)

    # ---- training continues from an import: on a token file with a pattern, the loss falls ----
    pattern = np.tile(np.arange(0, 60, dtype=np.uint16), 2000)
    pattern.tofile(work / "pattern.u16")
    engine("train", "tiny", "run_name=cont", f"trainer.save_folder={work / 'cont'}",
           f"trainer.load_path={imp}", "model.d_model=96", "model.n_layers=2", "model.n_heads=6",
           "model.n_kv_heads=2", "model.vocab_size=300", "model.rope_theta=10000",
           "model.layer_norm_eps=1e-5", "model.hidden_size_multiple_of=1",
           f"model.hidden_size_multiplier={200.5 / 256}", "dataset.source=numpy",
           f"dataset.paths=[{work / 'pattern.u16'}]", "dataset.sequence_length=32",
           "data_loader.global_batch_size=256", "data_loader.shuffle=false",
           "train_module.rank_microbatch_size=256",
           "train_module.max_sequence_length=32", "trainer.max_duration={value: 30, unit: steps}",
           "train_module.scheduler.name=constant", "launch.num_threads=1",
           "trainer.metrics_collect_interval=1")
    cont = {}
    for line in (work / "cont" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "train/CE loss" in rec["values"]:
            cont[rec["step"]] = rec["values"]["train/CE loss"]
    with torch.no_grad():
        x = torch.from_numpy(pattern[:32 * 8].astype(np.int64)).view(8, 32)
        start = ref(x, labels=x).loss.item()
    check(len(cont) == 30 and abs(cont[1] - start) <= 1e-4 * start and cont[30] < 0.5 * cont[1],
          f"training continues from the import: CE loss {cont.get(1)} (transformers: {start:.5f}) "
          f"-> {cont.get(30)}")

    # ---- trainer.load_path=HF_DIR ----
    cfg_b = transformers.Olmo2Config(**{**cfg.to_dict(), "intermediate_size": 256})
    torch.manual_seed(1)
    ref_b = transformers.Olmo2ForCausalLM(cfg_b).eval()
    ref_b.save_pretrained(work / "ref-b")
    seq, batch = 32, 4
    tokens = np.random.default_rng(0).integers(0, 300, size=seq * batch * 8, dtype=np.uint16)
    tokens.tofile(work / "tokens.u16")
    model_args = ["model.d_model=96", "model.n_layers=2", "model.n_heads=6", "model.n_kv_heads=2",
                  "model.vocab_size=300", "model.rope_theta=10000", "model.layer_norm_eps=1e-5"]
    data_args = ["dataset.source=numpy", f"dataset.paths=[{work / 'tokens.u16'}]",
                 f"dataset.sequence_length={seq}", "dataset.validation_fraction=0",
                 f"data_loader.global_batch_size={seq * batch}", "data_loader.shuffle=false",
                 f"train_module.rank_microbatch_size={seq * batch}",
                 f"train_module.max_sequence_length={seq}",
                 "trainer.max_duration={value: 1, unit: steps}", "launch.num_threads=1",
                 "trainer.metrics_collect_interval=1"]
    engine("train", "tiny", "run_name=lp", f"trainer.save_folder={work / 'lp'}",
           f"trainer.load_path={work / 'ref-b'}", *model_args, *data_args)
    lathe_loss = None
    for line in (work / "lp" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["step"] == 1 and "train/CE loss" in rec["values"]:
            lathe_loss = rec["values"]["train/CE loss"]
    ids = torch.from_numpy(tokens[:seq * batch].astype(np.int64)).view(batch, seq)
    with torch.no_grad():
        hf_loss = ref_b(ids, labels=ids).loss.item()
    check(lathe_loss is not None and abs(lathe_loss - hf_loss) <= 1e-5 * abs(hf_loss),
          f"load_path=HF_DIR: step 1 CE loss {lathe_loss} vs transformers {hf_loss:.7f} (1e-5)")
    # train_module.load_key_mapping: a folder whose tensor has another name loads with a mapping.
    renamed = work / "ref-b-renamed"
    shutil.copytree(work / "ref-b", renamed)
    t = safetensors.torch.load_file(str(renamed / "model.safetensors"))
    t["model.layers.0.mlp.gate.weight"] = t.pop("model.layers.0.mlp.gate_proj.weight")
    safetensors.torch.save_file(t, str(renamed / "model.safetensors"), metadata={"format": "pt"})
    r = engine("train", "tiny", "run_name=km0", f"trainer.save_folder={work / 'km0'}",
               f"trainer.load_path={renamed}", *model_args, *data_args, ok=False)
    check(r.returncode != 0 and "'model.layers.0.mlp.gate.weight' is not a parameter" in r.stderr,
          "a renamed tensor without load_key_mapping is named")
    engine("train", "tiny", "run_name=km", f"trainer.save_folder={work / 'km'}",
           f"trainer.load_path={renamed}", *model_args, *data_args,
           'train_module.load_key_mapping={"blocks.0.feed_forward.w1.weight": '
           '"model.layers.0.mlp.gate.weight"}')
    km_loss = None
    for line in (work / "km" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["step"] == 1:
            km_loss = rec["values"].get("train/CE loss")
    check(km_loss == lathe_loss, f"load_key_mapping: the renamed folder trains as the original ({km_loss})")
    r = engine("train", "tiny", "run_name=lp2", f"trainer.save_folder={work / 'lp2'}",
               f"trainer.load_path={work / 'ref-b'}", *model_args[1:], "model.d_model=192",
               *data_args, ok=False)
    check(r.returncode != 0 and "model.d_model: 96 in the saved model, 192 in the config" in r.stderr,
          "load_path=HF_DIR with another model: the error names model.d_model")

    # ---- bad input ----
    def broken(name, edit, expected):
        src = work / f"bad-{name}"
        shutil.copytree(work / "ref-bf16", src)
        edit(src)
        out = work / f"bad-{name}-ckpt"
        r = engine("import", src, out, ok=False)
        check(r.returncode != 0 and expected in r.stderr and not out.exists() and
              not Path(str(out) + ".partial").exists(),
              f"import refuses {name}: '{expected}' named, no checkpoint left"
              + ("" if expected in r.stderr else f" (got: {r.stderr.strip()[-300:]})"))

    def truncate(d):
        f = d / "model.safetensors"
        f.write_bytes(f.read_bytes()[:-100])

    def lie(d):
        f = d / "model.safetensors"
        data = f.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        name = "model.layers.0.mlp.up_proj.weight"
        begin, end = header[name]["data_offsets"]
        header[name]["data_offsets"] = [begin, end - 2]
        text = json.dumps(header).encode()
        f.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n:])

    def edit_tensors(change):
        def edit(d):
            t = safetensors.torch.load_file(str(d / "model.safetensors"))
            change(t)
            safetensors.torch.save_file(t, str(d / "model.safetensors"), metadata={"format": "pt"})
        return edit

    def edit_config(change):
        def edit(d):
            c = json.loads((d / "config.json").read_text())
            change(c)
            (d / "config.json").write_text(json.dumps(c))
        return edit

    broken("a truncated file", truncate, "truncated")
    broken("a header that lies", lie, "tensor 'model.layers.0.mlp.up_proj.weight': data_offsets")
    broken("an unknown tensor",
           edit_tensors(lambda t: t.update({"model.layers.0.mlp.extra.weight": torch.zeros(2)})),
           "tensor 'model.layers.0.mlp.extra.weight' is not a parameter")
    broken("a missing tensor", edit_tensors(lambda t: t.pop("model.layers.1.self_attn.k_norm.weight")),
           "missing tensors: blocks.1.attention.k_norm.weight")
    broken("a misshapen tensor",
           edit_tensors(lambda t: t.update({"model.norm.weight": torch.ones(95, dtype=torch.bfloat16)})),
           "tensor 'model.norm.weight' has shape [95], the model needs [96]")
    broken("another architecture",
           edit_config(lambda c: c.update({"architectures": ["MistralForCausalLM"], "model_type": "mistral"})),
           "config.json: architectures")


if __name__ == "__main__":
    main()
