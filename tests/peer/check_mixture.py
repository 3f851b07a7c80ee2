#!/usr/bin/env python3
"""Source mixtures (label peer): Lathe's dataset.mixture against OLMo-core 3.0.0's own
SourceMixtureDatasetConfig and NumpyFSLDatasetMixture.

Run with the test environment's Python; argument: lathe-engine.

OLMo-core's mixture draws nothing at random: each source's share (target_ratio x requested_tokens)
is a prefix of each of its files, the files again for every repeat, rounded to whole instances so
that the mixture fills whole global batches (source_mixture.py). Its `seed` reaches only index
files that nothing reads. So the check is exact: for every case, Lathe's instances (`lathe-engine
dataset --instances`) equal OLMo-core's dataset[i]["input_ids"], index by index, and the per-source
counts equal the outcome's; an empty file in a source is skipped by both (Lathe warns, naming it).
Bad mixtures are refused with the source named: ratios that do not sum
to 1, a source that would need more repetition than max_repetition_ratio allows (OLMo-core
refuses the same mixture), a missing file. A short run trains on a mixture and logs
`data/source/<name> tokens` every step, summing to the step's tokens.

The repetition filter (instance_filter_config) masks the same instances as OLMo-core's
NumpyFSLDataset and NumpyFSLDatasetMixture, instance by instance, under four settings, on tokens
with repeated units planted at the start, the end and the middle of instances.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from check_tokenizers import FAILURES, check as log_check  # noqa: E402

ENGINE = sys.argv[1]
SEQ = 32
VOCAB = 1000


def check(ok, what, detail=""):
    log_check(ok, what if ok or not detail else f"{what}\n     {detail}")
    return ok


def engine(*args, runs=None):
    env = dict(os.environ, **({"LATHE_RUNS_DIR": str(runs)} if runs else {}))
    return subprocess.run([ENGINE, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env)


def write_tokens(path, n, seed):
    rng = np.random.default_rng(seed)
    rng.integers(2, VOCAB, size=n, dtype=np.uint16).tofile(path)
    return path


def lathe_overrides(sources, requested, gbs, extra=()):
    return ["dataset.source=numpy", "dataset.token_dtype=uint16", f"model.vocab_size={VOCAB}",
            f"dataset.sequence_length={SEQ}", f"train_module.max_sequence_length={SEQ}",
            f"data_loader.global_batch_size={gbs}", f"train_module.rank_microbatch_size={SEQ}",
            "dataset.mixture.sources=" + json.dumps(sources),
            f"dataset.mixture.requested_tokens={requested}", *extra]


def olmo_core_mixture(sources, requested, gbs):
    from olmo_core.data.numpy_dataset import NumpyFSLDatasetMixture
    from olmo_core.data.source_mixture import (SourceMixtureConfig, SourceMixtureDatasetConfig,
                                               SourceMixtureList)
    cfg = SourceMixtureDatasetConfig(
        # A folder is a sorted glob for OLMo-core (Lathe lists a folder's files sorted).
        source_list=SourceMixtureList(sources=[
            SourceMixtureConfig(**{**s, "paths": [f"{p}/*.npy" if Path(p).is_dir() else p
                                                  for p in s["paths"]]}) for s in sources]),
        requested_tokens=requested, global_batch_size=gbs, seed=7, render_tables=False,
        quiet=True)
    mixture = cfg.build(npdtype=np.uint16, sequence_length=SEQ)
    mixture.filter_zero_token_paths = True  # as NumpyFSLDatasetConfig.build sets it
    ds = NumpyFSLDatasetMixture(*mixture.to_paths(), path_offset_index=mixture.to_index(), seed=7,
                                sequence_length=SEQ, pad_token_id=0, eos_token_id=1,
                                vocab_size=VOCAB, dtype=np.uint16)
    per_source = {o.name: sum(p.tokens for p in o.path_tokens) for o in mixture.sources}
    return ds, per_source


def same_instances(work, name, sources, requested, gbs):
    ds, per_source = olmo_core_mixture(sources, requested, gbs)
    n = len(ds)
    r = engine("dataset", "tiny", *lathe_overrides(sources, requested, gbs),
               "--instances", f"0:{n}")
    if not check(r.returncode == 0, f"{name}: lathe-engine dataset runs", r.stderr[-2000:]):
        return
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    summary, rows = lines[0], lines[1:]
    check(summary["instances"] == n, f"{name}: {n} instances in both",
          f"Lathe {summary['instances']}, OLMo-core {n}")
    mismatched = [i for i, row in enumerate(rows)
                  if row["ids"] != ds[i]["input_ids"].tolist()]
    check(len(rows) == n and not mismatched,
          f"{name}: every instance equals OLMo-core's, index by index",
          f"first differing index {mismatched[:1]}")
    theirs = {k: v for k, v in per_source.items()}
    ours = {s["name"]: s["tokens"] for s in summary.get("sources", [])}
    check(ours == theirs, f"{name}: tokens per source equal OLMo-core's outcome {theirs}",
          f"Lathe {ours}")
    return r


def refused(name, sources, requested, gbs, must_name, olmo_core_refuses=None):
    r = engine("dataset", "tiny", *lathe_overrides(sources, requested, gbs))
    check(r.returncode != 0 and must_name in r.stderr, f"{name}: refused, naming {must_name}",
          (r.stdout + r.stderr)[-1500:])
    if olmo_core_refuses is not None:
        try:
            olmo_core_mixture(sources, requested, gbs)
            refused_too = False
        except Exception as e:  # noqa: BLE001: OLMo-core's OLMoConfigurationError
            refused_too = olmo_core_refuses in str(e)
        check(refused_too, f"{name}: OLMo-core refuses it too ({olmo_core_refuses})")


def trains(work, sources, requested, gbs):
    run = engine("train", "tiny", *lathe_overrides(sources, requested, gbs, [
        "launch.num_threads=1", "run_name=mix",
        "trainer.max_duration=3steps", "trainer.metrics_collect_interval=1",
        "trainer.callbacks.checkpointer.enabled=false"]), runs=work / "runs")
    if not check(run.returncode == 0, "a mixture trains", run.stderr[-2000:]):
        return
    steps = [json.loads(x) for x in (work / "runs" / "mix" / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if "data/source/a tokens" in s["values"]]
    ok = len(steps) == 3
    for s in steps:
        m = s["values"]
        ok = ok and sum(m[f"data/source/{k} tokens"] for k in "abc") == gbs
    check(ok, "train logs data/source/<name> tokens each step, summing to the global batch",
          str(steps[:1])[:1500])


def repetitive_tokens(path, n_instances, seq, seed):
    """Uniform tokens in which most instances get 0 to 2 runs of a repeated unit: 1 to 16 tokens
    repeated 2 to 11 times (period 1 up to a whole instance), at the start, the end, or anywhere,
    so that the filter's thresholds and its measure of a run's ends are all exercised."""
    rng = np.random.default_rng(seed)
    t = rng.integers(2, VOCAB, size=n_instances * seq, dtype=np.int64)
    for i in range(n_instances):
        for _ in range(int(rng.integers(0, 3))):
            period = int(rng.integers(1, 17))
            count = int(rng.integers(2, 12)) if period > 1 else int(rng.integers(2, seq + 1))
            span = min(period * count, seq)
            where = int(rng.integers(0, 3))
            at = i * seq + (0 if where == 0 else seq - span if where == 1
                            else int(rng.integers(0, seq - span + 1)))
            t[at:at + span] = np.resize(t[at:at + period].copy(), span)
    t.astype(np.uint16).tofile(path)
    return path


def filtered_like_olmo_core(work):
    """The repetition filter (instance_filter_config) keeps and masks the same instances as
    OLMo-core's, for a plain dataset and a mixture, under several settings."""
    from olmo_core.data import NumpyFSLDataset
    from olmo_core.data.numpy_dataset import InstanceFilterConfig, NumpyFSLDatasetMixture
    from olmo_core.data.source_mixture import (SourceMixtureConfig, SourceMixtureDatasetConfig,
                                               SourceMixtureList)
    seq = 48
    a = repetitive_tokens(work / "rep-a.npy", 900, seq, 21)
    b = repetitive_tokens(work / "rep-b.npy", 400, seq, 22)
    base = ["dataset.source=numpy", "dataset.token_dtype=uint16", f"model.vocab_size={VOCAB}",
            f"dataset.sequence_length={seq}", f"train_module.max_sequence_length={seq}",
            f"data_loader.global_batch_size={seq * 4}", f"train_module.rank_microbatch_size={seq}"]
    for max_period, min_period, max_count in ((13, 1, 32), (13, 1, 4), (16, 3, 5), (2, 2, 3)):
        cfg = InstanceFilterConfig(repetition_max_period=max_period,
                                   repetition_min_period=min_period,
                                   repetition_max_count=max_count)
        ours_cfg = ("dataset.instance_filter_config=" + json.dumps(
            {"repetition_max_period": max_period, "repetition_min_period": min_period,
             "repetition_max_count": max_count}))
        label = f"periods {min_period}-{max_period}, {max_count} repeats"
        plain = NumpyFSLDataset(a, b, sequence_length=seq, pad_token_id=0, eos_token_id=1,
                                vocab_size=VOCAB, dtype=np.uint16, instance_filter_config=cfg)
        plain.work_dir = work / "olmo-work"
        mix_cfg = SourceMixtureDatasetConfig(
            source_list=SourceMixtureList(sources=[
                SourceMixtureConfig(source_name="a", target_ratio=0.6, paths=[str(a)]),
                SourceMixtureConfig(source_name="b", target_ratio=0.4, paths=[str(b)],
                                    max_repetition_ratio=2.0)]),
            requested_tokens=seq * 1000, global_batch_size=seq * 4, render_tables=False,
            quiet=True)
        mixture = mix_cfg.build(npdtype=np.uint16, sequence_length=seq)
        mixture.filter_zero_token_paths = True
        mixed = NumpyFSLDatasetMixture(*mixture.to_paths(), path_offset_index=mixture.to_index(),
                                       seed=7, sequence_length=seq, pad_token_id=0,
                                       eos_token_id=1, vocab_size=VOCAB, dtype=np.uint16,
                                       instance_filter_config=cfg)
        mix_overrides = ["dataset.mixture.sources=" + json.dumps([
            {"source_name": "a", "target_ratio": 0.6, "paths": [str(a)]},
            {"source_name": "b", "target_ratio": 0.4, "paths": [str(b)],
             "max_repetition_ratio": 2.0}]), f"dataset.mixture.requested_tokens={seq * 1000}"]
        for what, ds, extra in (("plain", plain, [f"dataset.paths=[{a},{b}]"]),
                                ("mixture", mixed, mix_overrides)):
            theirs = [bool(ds[i]["instance_mask"]) for i in range(len(ds))]
            r = engine("dataset", "tiny", *base, *extra, ours_cfg, "--instances",
                       f"0:{len(theirs)}")
            if not check(r.returncode == 0, f"filter {label}, {what}: lathe-engine dataset runs",
                         r.stderr[-2000:]):
                continue
            rows = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")][1:]
            ours = [row.get("keep") for row in rows]
            differ = [i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y]
            masked = theirs.count(False)
            check(len(ours) == len(theirs) and not differ and 0 < masked < len(theirs),
                  f"filter {label}, {what}: Lathe masks the same {masked} of {len(theirs)} "
                  "instances as OLMo-core",
                  f"first differing instances {differ[:5]}: Lathe "
                  f"{[ours[i] for i in differ[:5]]}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        f = {k: write_tokens(work / f"{k}.npy", n, i)
             for i, (k, n) in enumerate({"a1": 5000, "a2": 3100, "b1": 1200, "c1": 777,
                                         "c2": 2500}.items())}
        folder = work / "cfolder"
        folder.mkdir()
        write_tokens(folder / "part-0.npy", 900, 11)
        write_tokens(folder / "part-1.npy", 450, 12)

        def src(name, ratio, paths, rep=1.0, frac=1.0):
            return {"source_name": name, "target_ratio": ratio, "paths": [str(p) for p in paths],
                    "max_repetition_ratio": rep, "max_source_fraction": frac}

        # No repetition; the rounding tops up across files.
        same_instances(work, "three sources, no repeats",
                       [src("a", 0.5, [f["a1"], f["a2"]]), src("b", 0.2, [f["b1"]]),
                        src("c", 0.3, [f["c1"], f["c2"]])], 4000, 256)
        # b needs 2.7x its tokens: whole passes, then a partial one.
        same_instances(work, "a source repeated 2.7 times",
                       [src("a", 0.4, [f["a1"]]), src("b", 0.4, [f["b1"]], rep=3.0),
                        src("c", 0.2, [folder], rep=2.0, frac=0.8)], 8000, 512)
        # An empty file in a source holds no tokens: OLMo-core skips it; Lathe too, naming it.
        empty = work / "empty.npy"
        empty.write_bytes(b"")
        r = same_instances(work, "an empty file in a source",
                           [src("a", 0.5, [f["a1"], empty, f["a2"]]), src("b", 0.5, [f["c2"]])],
                           4000, 256)
        log = (r.stdout + r.stderr) if r else ""
        check(f"{empty} is empty; skipped" in log, "an empty file in a source: a warning names it",
              log[-1500:])
        # requested not a multiple of the batch: rounded up to whole batches.
        same_instances(work, "requested tokens rounded to whole batches",
                       [src("a", 0.7, [f["a2"], f["a1"]]), src("b", 0.3, [f["b1"], f["c1"]])],
                       3333, 128)

        refused("ratios summing to 0.9",
                [src("a", 0.5, [f["a1"]]), src("b", 0.4, [f["b1"]])], 2000, 256,
                "dataset.mixture.sources", olmo_core_refuses="must sum to 1.0")
        refused("too little data for the ratio",
                [src("a", 0.5, [f["a1"]]), src("b", 0.5, [f["b1"]], rep=1.5)], 4000, 256,
                "dataset.mixture.sources[1] (b)", olmo_core_refuses="Insufficient tokens")
        refused("a missing file",
                [src("a", 0.5, [f["a1"]]), src("b", 0.5, [work / "nope.npy"])], 2000, 256,
                "dataset.mixture.sources[1].paths[0]")
        filtered_like_olmo_core(work)
        trains(work, [src("a", 0.5, [f["a1"], f["a2"]]), src("b", 0.25, [f["b1"]], rep=2.0),
                      src("c", 0.25, [f["c1"], f["c2"]])], 4096, 256)
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
