"""A real lathe-engine run, interrupted and resumed, read back with TensorBoard's own reader.

Trains `tiny` for 25 steps, resumes the run from its step-20 checkpoint to 30 steps (which trains
steps 21 to 25 again, continues metrics.jsonl and metrics.csv and starts a second events file),
then checks that TensorBoard's EventAccumulator sees every metric of every step (0 to 30) exactly
once, with the values and wall times of the last line of that step in metrics.jsonl (the second
events file starts with a SessionLog START at step 21 that purges the orphaned points), and that
metrics.csv holds the same numbers. metrics.jsonl and metrics.csv keep both branches.

Usage: check_engine_run.py <path to lathe-engine>
"""
import csv
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

failures = []


def check(cond, message):
    if not cond:
        failures.append(message)


def as_float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def same(value, want):
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return math.isnan(value)
    if math.isinf(as_float32(want)):
        return math.isinf(value) and (value > 0) == (want > 0)
    return math.isclose(value, as_float32(want), rel_tol=1e-7, abs_tol=1e-30)


def run(engine, runs, *args):
    env = dict(os.environ, LATHE_RUNS_DIR=runs)
    p = subprocess.run([engine, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(p.stdout[-4000:])
        raise SystemExit(f"lathe-engine {' '.join(args)} exited {p.returncode}")
    return p.stdout


def main():
    engine = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="lathe-tb-run-") as runs:
        common = ["launch.num_threads=1", "trainer.metrics_collect_interval=5",
                  "trainer.callbacks.checkpointer.save_interval=10",
                  "trainer.callbacks.speed_monitor.device_peak_flops=1e11"]
        run(engine, runs, "train", "tiny", "run_name=tb", "trainer.max_duration=25steps", *common)
        folder = os.path.join(runs, "tb")
        out = run(engine, runs, "train", os.path.join(folder, "config.json"), "trainer.max_duration=30steps",
                  "--resume-from", os.path.join(folder, "step20"))
        check("step 20" in out or "step20" in out, "the second run did not say it resumed from step 20")

        with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        steps = [r["step"] for r in rows]
        # Step 0 holds what happened before the first step (the initial checkpoint's duration).
        check(steps == list(range(0, 26)) + list(range(21, 31)), f"metrics.jsonl steps {steps}")
        # What TensorBoard must show: a step that goes back starts the branch the run continued on,
        # and every point at or after it from before is dropped (the SessionLog START purge).
        by_tag = {}
        last_step = -1
        for r in rows:
            if r["step"] <= last_step:
                for per_step in by_tag.values():
                    for s in [s for s in per_step if s >= r["step"]]:
                        del per_step[s]
            last_step = r["step"]
            for tag, v in r["values"].items():
                by_tag.setdefault(tag, {})[r["step"]] = (v, r["wall_time"])
        by_tag = {tag: per_step for tag, per_step in by_tag.items() if per_step}
        check("train/CE loss" in by_tag, f"no train/CE loss in metrics.jsonl: {sorted(by_tag)}")
        check(len(by_tag) >= 5, f"only {len(by_tag)} metric names: {sorted(by_tag)}")

        events = glob.glob(os.path.join(folder, "events.out.tfevents.*"))
        check(len(events) == 2, f"expected an events file per run, found {events}")
        acc = EventAccumulator(folder, size_guidance={"scalars": 0})
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        check(tags == set(by_tag), f"TensorBoard tags differ from metrics.jsonl: only in TensorBoard "
              f"{sorted(tags - set(by_tag))}, only in jsonl {sorted(set(by_tag) - tags)}")
        compared = 0
        for tag in sorted(tags & set(by_tag)):
            got = acc.Scalars(tag)
            want = by_tag[tag]
            check([e.step for e in got] == sorted(want), f"{tag}: TensorBoard steps {[e.step for e in got]}, "
                  f"metrics.jsonl steps {sorted(want)}")
            for e in got:
                if e.step not in want:
                    continue
                v, wall = want[e.step]
                check(same(e.value, v), f"{tag} step {e.step}: TensorBoard {e.value}, metrics.jsonl {v}")
                check(abs(e.wall_time - wall) < 1e-3, f"{tag} step {e.step}: wall time {e.wall_time} vs {wall}")
                compared += 1

        with open(os.path.join(folder, "metrics.csv"), newline="", encoding="utf-8") as f:
            body = list(csv.reader(f))
        check(body[0] == ["step", "tokens", "wall_time", "name", "value"], f"csv header {body[0]}")
        check(sum(1 for r in body if r == body[0]) == 1, "metrics.csv repeats its header after the resume")
        csv_values = {(int(r[0]), r[3]): r[4] for r in body[1:]}  # the branch continued on wins
        n_values = sum(len(r["values"]) for r in rows)
        check(len(body) - 1 == n_values, f"metrics.csv has {len(body) - 1} rows, metrics.jsonl {n_values} values")
        for tag, per_step in by_tag.items():
            for step, (v, _) in per_step.items():
                c = csv_values.get((step, tag))
                check(c is not None, f"metrics.csv lacks {tag} at step {step}")
                if c is not None and v is not None:
                    check(math.isclose(float(c), v, rel_tol=1e-15), f"metrics.csv {tag} step {step}: {c} vs {v}")

    for f in failures[:30]:
        print("FAIL:", f)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print(f"ok: TensorBoard read {compared} scalars over 30 steps and 2 runs, equal to metrics.jsonl and metrics.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
