"""Reads back the metric files written by lathe_sinks_write_run with independent readers:
TensorBoard's EventAccumulator (events file), json (metrics.jsonl) and csv (metrics.csv).

Usage: check_tensorboard.py <path to lathe_sinks_write_run>
"""
import csv
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

STEPS = list(range(1, 51))
TAGS = ["train/CE loss", "optim/LR", 'eval/acc, "top-1" (%)', "throughput/device/TPS"]


def expected(tag, step):
    if tag == "train/CE loss":
        return math.nan if step == 7 else 10.0 / (step + 1)
    if tag == "optim/LR":
        return 1e-3 * step / 50
    if tag == 'eval/acc, "top-1" (%)':
        return step * 0.01
    return 1000.0 + step


failures = []


def check(cond, message):
    if not cond:
        failures.append(message)


def same(value, want, rel):
    if math.isnan(want):
        return value is not None and math.isnan(value)
    return value is not None and math.isclose(value, want, rel_tol=rel, abs_tol=1e-12)


def check_tensorboard(folder):
    files = glob.glob(os.path.join(folder, "*tfevents*"))
    check(len(files) == 1, f"expected one events file, found {files}")
    check(all(os.path.basename(f).startswith("events.out.tfevents.") and f.endswith(".lathe")
              for f in files), f"events file name: {files}")
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    check(tags == sorted(TAGS), f"TensorBoard scalar tags {tags}, want {sorted(TAGS)}")
    for tag in TAGS:
        if tag not in tags:
            continue
        events = acc.Scalars(tag)
        check([e.step for e in events] == STEPS, f"{tag}: steps {[e.step for e in events]}")
        for e in events:
            # simple_value is float32
            check(same(e.value, expected(tag, e.step), 1e-6),
                  f"{tag} step {e.step}: TensorBoard value {e.value}, want {expected(tag, e.step)}")
            check(abs(e.wall_time - (1700000000.0 + e.step * 0.5)) < 1e-6,
                  f"{tag} step {e.step}: wall_time {e.wall_time}")


def check_jsonl(folder):
    with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    check([r["step"] for r in rows] == STEPS, "metrics.jsonl steps")
    for r in rows:
        check(r["tokens"] == r["step"] * 4096, f"metrics.jsonl tokens at step {r['step']}")
        check(list(r["values"].keys()) == TAGS, f"metrics.jsonl names {list(r['values'])}")
        for tag, v in r["values"].items():
            v = math.nan if v is None else v
            check(same(v, expected(tag, r["step"]), 1e-15),
                  f"metrics.jsonl {tag} step {r['step']}: {v}")


def check_csv(folder):
    with open(os.path.join(folder, "metrics.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    check(rows[0] == ["step", "tokens", "wall_time", "name", "value"], f"csv header {rows[0]}")
    body = rows[1:]
    check(len(body) == len(STEPS) * len(TAGS), f"csv has {len(body)} rows")
    for i, row in enumerate(body):
        step, tag = STEPS[i // len(TAGS)], TAGS[i % len(TAGS)]
        check(len(row) == 5, f"csv row {i + 2} has {len(row)} fields: {row}")
        if len(row) != 5:
            continue
        check(int(row[0]) == step and row[3] == tag, f"csv row {i + 2}: {row}")
        check(int(row[1]) == step * 4096, f"csv row {i + 2} tokens: {row}")
        check(float(row[2]) == 1700000000.0 + step * 0.5, f"csv row {i + 2} wall_time: {row}")
        check(same(float(row[4]), expected(tag, step), 1e-15), f"csv row {i + 2} value: {row}")


def main():
    writer = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="lathe-tb-") as folder:
        subprocess.run([writer, folder], check=True)
        check_tensorboard(folder)
        check_jsonl(folder)
        check_csv(folder)
    for f in failures[:30]:
        print("FAIL:", f)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("ok: TensorBoard, json and csv read back every step and value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
