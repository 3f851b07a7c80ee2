#!/usr/bin/env python3
"""Check that a C++ data-order permutation equals numpy's bit for bit.

Usage:
    python3 check_numpy_order.py EXE [--seeds S ...] [--sizes N ...]

Interface of EXE: `EXE SEED N` must print the permutation of arange(N, dtype=uint32) produced by
    rng = numpy.random.Generator(numpy.random.PCG64(SEED)); rng.shuffle(arr)
as N whitespace-separated decimal integers on stdout and exit 0 (SEED: 0 <= SEED < 2**64).
This is the order OLMo-core's NumpyFSLDataLoader._build_global_indices uses
(get_rng(seed + epoch), then rng.shuffle(indices)); the C++ side is engine/data/numpy_rng.h.

Optionally, if `EXE --raw SEED COUNT` exits 0, its COUNT printed integers are also compared with
numpy.random.PCG64(SEED).random_raw(COUNT).

Exits 0 when everything matches, 1 on the first mismatch (naming seed, n and first differing
index), 2 on usage / execution errors. Requires numpy.
"""

import argparse
import subprocess
import sys

import numpy as np

DEFAULT_SEEDS = [0, 1, 2, 42, 12345, 2**32 - 1, 2**32 + 7, 2**63 + 5]
DEFAULT_SIZES = [0, 1, 2, 3, 5, 10, 100, 1000, 65537, 1000003]
RAW_COUNT = 10


def numpy_order(seed, n):
    arr = np.arange(n, dtype=np.uint32)
    np.random.Generator(np.random.PCG64(seed)).shuffle(arr)
    return arr


def run_exe(exe, args):
    proc = subprocess.run([exe] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    return proc.returncode, proc.stdout, proc.stderr.decode(errors="replace")


def fail(msg):
    print("MISMATCH: " + msg)
    sys.exit(1)


def check_order(exe, seed, n):
    rc, out, err = run_exe(exe, [seed, n])
    if rc != 0:
        print(f"ERROR: `{exe} {seed} {n}` exited {rc}: {err.strip()}")
        sys.exit(2)
    got = np.array(out.split(), dtype=np.uint64)
    want = numpy_order(seed, n).astype(np.uint64)
    if got.shape != want.shape:
        fail(f"seed={seed} n={n}: got {got.size} values, expected {want.size}")
    diff = np.flatnonzero(got != want)
    if diff.size:
        i = int(diff[0])
        fail(f"seed={seed} n={n}: first differing index {i}: got {int(got[i])}, "
             f"numpy has {int(want[i])} ({diff.size} positions differ)")


def check_raw(exe, seed):
    rc, out, _ = run_exe(exe, ["--raw", seed, RAW_COUNT])
    if rc != 0:
        return False  # --raw is optional
    got = [int(t) for t in out.split()]
    want = [int(x) for x in np.random.PCG64(seed).random_raw(RAW_COUNT)]
    if got != want:
        i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                 min(len(got), len(want)))
        fail(f"raw next_uint64 stream, seed={seed}: first differing index {i}: "
             f"got {got[i] if i < len(got) else 'nothing'}, "
             f"numpy has {want[i] if i < len(want) else 'nothing'}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe", help="C++ executable: `EXE SEED N` prints the permutation")
    ap.add_argument("--seeds", type=int, nargs="+", default=DEFAULT_SEEDS)
    ap.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    args = ap.parse_args()

    raw_checked = 0
    for seed in args.seeds:
        if check_raw(args.exe, seed):
            raw_checked += 1
        for n in args.sizes:
            check_order(args.exe, seed, n)
    print(f"OK: {len(args.seeds)} seeds x {len(args.sizes)} sizes match numpy "
          f"{np.__version__} (raw PCG64 streams checked for {raw_checked} seeds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
