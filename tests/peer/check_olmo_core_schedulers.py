#!/usr/bin/env python3
"""Lathe's learning-rate schedules equal OLMo-core's, scheduler by scheduler.

    python check_olmo_core_schedulers.py LATHE_ENGINE [--rtol 1e-9] [--points 50]

For every case below, OLMo-core 3.0.0's own Scheduler object (olmo_core.optim.scheduler) is built
with the case's parameters and evaluated with get_lr(peak, current, t_max) at --points positions
of the run (evenly spread, plus the edges of each phase); `lathe-engine lr-schedule --json --at ...`
evaluates the same config. Every value must agree within --rtol (relative; exact zeros must be
zero). Both sides run every time: no number here comes from either implementation.

Exits 0 when every case agrees, 1 naming the case, position and both values otherwise, 2 when
lathe-engine fails.
"""

import argparse
import json
import math
import subprocess
import sys

from olmo_core.optim import scheduler as S

PEAK = 1e-3
T_MAX = 1000

# (case name, OLMo-core registered name, parameters, t_max). Parameter names are OLMo-core's, and
# Lathe's config uses the same ones.
CASES = [
    ("constant", "constant", {}, T_MAX),
    ("constant_with_warmup", "constant_with_warmup", {"warmup": 100}, T_MAX),
    ("constant_with_warmup, fraction", "constant_with_warmup",
     {"warmup_fraction": 0.05, "warmup_min_lr": 1e-5}, T_MAX),
    ("wsd", "wsd", {"warmup": 50, "decay_fraction": 0.2, "decay_min_lr": 1e-5}, T_MAX),
    ("wsd, decay in steps", "wsd", {"warmup_fraction": 0.1, "decay": 300, "decay_fraction": None},
     T_MAX),
    ("power_lr", "power_lr", {"warmup": 100, "decay_fraction": 0.1, "b": -0.51}, T_MAX),
    ("linear_with_warmup", "linear_with_warmup", {"warmup": 100, "alpha_f": 0.1}, T_MAX),
    ("linear_with_warmup, own t_max", "linear_with_warmup",
     {"warmup_fraction": 0.05, "t_max": 800, "alpha_f": 0.0}, T_MAX),
    ("inv_sqrt_with_warmup", "inv_sqrt_with_warmup", {"warmup": 100, "alpha_f": 0.0}, T_MAX),
    ("cos_with_warmup", "cos_with_warmup", {"warmup": 100, "alpha_f": 0.1}, T_MAX),
    ("cos_with_warmup, fraction and t_max", "cos_with_warmup",
     {"warmup_fraction": 0.1, "alpha_f": 0.0, "t_max": 700, "warmup_min_lr": 1e-4}, T_MAX),
    ("half_cos_with_warmup", "half_cos_with_warmup", {"warmup": 100, "alpha_f": 0.05}, T_MAX),
    ("cos_with_warmup_and_linear_decay", "cos_with_warmup_and_linear_decay",
     {"warmup": 100, "decay_fraction": 0.2}, T_MAX),
    ("cos_with_warmup_and_linear_decay, decay in steps", "cos_with_warmup_and_linear_decay",
     {"warmup_fraction": 0.02, "decay": 150, "decay_fraction": None, "alpha_f": 0.3}, T_MAX),
    ("wsds", "wsds", {"period_lengths": [400, 300, 300], "warmup": 50, "decay_fraction": 0.1,
                      "period_lr_multipliers": [1.0, 0.5, 0.25], "decay_min_lr": 1e-6}, T_MAX),
    ("exponential", "exponential", {"lr_min": 1e-7}, T_MAX),
    ("composable", "composable", {
        "stages": [
            {"duration": 100, "shape": "linear", "start_lr": 0.0, "end_lr_fraction": 1.0},
            {"duration": 500, "shape": "cosine", "end_lr_fraction": 0.1},
            {"duration": 200, "shape": "linear", "end_lr": 1e-5},
        ],
        "override_decay": {"start": 600, "duration": 150, "shape": "linear",
                           "end_lr_fraction": 0.0},
    }, T_MAX),
    ("sequential", "sequential", {
        "schedulers": [("constant_with_warmup", {"warmup": 100}),
                       ("cos_with_warmup", {"warmup": 0, "alpha_f": 0.1})],
        "schedulers_max": [300],
        "override_decay": {"start": 900, "duration": 50, "shape": "cosine", "end_lr": 1e-6},
    }, T_MAX),
    ("cos_with_warmup, tokens", "cos_with_warmup", {"warmup": 50_000, "alpha_f": 0.1},
     1_000_000),
]

# Fields with a Lathe default that OLMo-core does not share: always spelled out for Lathe.
EXPLICIT = {"warmup": None, "warmup_fraction": None, "decay": None, "decay_fraction": None}


def olmo_scheduler(name, params):
    cls = S.Scheduler.get_registered_class(name)
    kwargs = dict(params)
    if name == "sequential":
        kwargs["schedulers"] = [olmo_scheduler(n, p) for n, p in params["schedulers"]]
        kwargs["schedulers_max"] = list(params["schedulers_max"])
    if name == "composable":
        kwargs["stages"] = [S.ComposableSchedulerStage(**st) for st in params["stages"]]
    if "override_decay" in params:
        kwargs["override_decay"] = S.OverrideDecay(**params["override_decay"])
    return cls(**kwargs)


def lathe_params(name, params):
    """The same schedule as Lathe config JSON (ScheduleParams)."""
    out = {"name": name}
    if name not in ("constant", "exponential", "composable", "sequential"):
        out.update(EXPLICIT)
    if name in ("wsd", "power_lr", "cos_with_warmup_and_linear_decay"):
        out["decay_fraction"] = 0.1  # OLMo-core's default for these
    for k, v in params.items():
        if k == "schedulers":
            out[k] = [lathe_params(n, p) for n, p in v]
        elif k == "override_decay":
            out[k] = dict({"end_lr": None, "end_lr_fraction": None}, **v)
        else:
            out[k] = v
    return out


def positions(name, params, t_max, count):
    pts = {round(t_max * i / (count - 1)) for i in range(count)}
    # The edges of each phase, and one either side.
    edges = []
    for k in ("warmup", "decay", "t_max"):
        if isinstance(params.get(k), int):
            edges += [params[k], t_max - params[k]]
    for k in ("warmup_fraction", "decay_fraction"):
        if isinstance(params.get(k), float):
            edges += [round(t_max * params[k]), t_max - round(t_max * params[k])]
    if "stages" in params:
        acc = 0
        for st in params["stages"]:
            acc += st["duration"]
            edges.append(acc)
    if "override_decay" in params:
        od = params["override_decay"]
        edges += [od["start"], od["start"] + od["duration"]]
    if "period_lengths" in params:
        acc = 0
        for length in params["period_lengths"]:
            acc += length
            edges.append(acc)
    if "schedulers_max" in params:
        edges += params["schedulers_max"]
    for e in edges:
        pts.update(x for x in (e - 1, e, e + 1) if 0 <= x <= t_max)
    return sorted(pts)


def lathe_lrs(engine, name, params, t_max, at):
    sched = lathe_params(name, params)
    overrides = [f"train_module.optim.lr={PEAK!r}", "trainer.max_duration=1000steps"]
    for k, v in sched.items():
        overrides.append(f"train_module.scheduler.{k}={json.dumps(v)}")
    if t_max != T_MAX:
        overrides.append("train_module.scheduler.units=tokens")
    cmd = [engine, "lr-schedule", "tiny", *overrides, "--t-max", str(t_max),
           "--at", ",".join(map(str, at)), "--json"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print(f"lathe-engine lr-schedule failed for {name} (exit {r.returncode}):\n{r.stderr}\n"
              f"command: {' '.join(cmd)}", file=sys.stderr)
        sys.exit(2)
    out = json.loads(r.stdout)
    return out["groups"][-1]["lr"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", help="path of lathe-engine")
    ap.add_argument("--rtol", type=float, default=1e-9)
    ap.add_argument("--points", type=int, default=50)
    args = ap.parse_args()
    ok = True
    for case, name, params, t_max in CASES:
        sched = olmo_scheduler(name, {k: v for k, v in params.items()})
        at = positions(name, params, t_max, args.points)
        want = [float(sched.get_lr(PEAK, x, t_max)) for x in at]
        got = lathe_lrs(args.engine, name, params, t_max, at)
        bad = [(x, g, w) for x, g, w in zip(at, got, want)
               if not (abs(g - w) <= args.rtol * abs(w) and math.isfinite(g))]
        if bad:
            x, g, w = bad[0]
            print(f"FAIL {case}: at {x} of {t_max}: Lathe {g!r}, OLMo-core {w!r} "
                  f"({len(bad)} of {len(at)} positions differ)")
            ok = False
        else:
            print(f"ok   {case}: {len(at)} positions agree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
