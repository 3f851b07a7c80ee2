#!/usr/bin/env python3
"""clang-tidy (.clang-tidy's checks) over the project's C++ sources, with a result cache.

    tidy.py CLANG_TIDY BUILD_DIR [--all] [--since-baseline] [--record-baseline] [--cache DIR]
            [-j N] [FILES...]

Which files: FILES, else every project source in BUILD_DIR's compile_commands.json with --all,
else the sources changed since git HEAD (staged, unstaged and untracked). Generated sources (moc,
precompiled-header stubs) are not ours and are skipped.

The baseline (.ci/tidy-baseline, in the repository): a commit whose every source passed a full
check, and the clang-tidy that checked it. With --all --since-baseline (the CI test) a translation
unit is checked only when its source or a project header it reads (ninja's dependency log) differs
from that commit, so a cold machine checks what changed since the last full pass, not all of it.
Everything is checked when the baseline cannot be used: its commit is not in this clone's history,
another clang-tidy runs, or the root .clang-tidy or the compiler settings changed since; a
.clang-tidy of a subfolder that changed re-checks the sources under that folder.
--record-baseline runs the full check (cache-assisted) and, when it is clean on a clean work tree,
writes HEAD into .ci/tidy-baseline for the next commit to carry.

The cache (--cache DIR, or --cache auto: $LATHE_CACHE/tidy, default ~/.cache/lathe/tidy, as the
CI test uses it) holds one entry per translation unit,
keyed by a hash of: clang-tidy's version, .clang-tidy, the compile command (with the source and
build folders replaced by placeholders, so clones in other folders share it), the source and every
project header the compiler read for it (ninja's dependency log of the last build). A header edit
therefore re-checks exactly the files that include it. Third-party headers are keyed by their
include paths, which carry the library's version (torch-2.13.0/...). Findings are cached too, so a
rerun reprints them without re-running clang-tidy.

GCC's precompiled-header flags are dropped for clang. Exit status 1 when any file has a finding.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys

SCHEMA = "1"  # bump when the key or the entry format changes
BASELINE = os.path.join(".ci", "tidy-baseline")
# A change to one of these since the baseline re-checks everything: the compiler settings every
# compile command carries, and the root .clang-tidy (a subfolder's re-checks that folder).
GLOBAL_INPUTS = ("cmake/LatheCompiler.cmake", "CMakePresets.json", ".clang-tidy")


def repo_root():
    return subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()


def changed_sources(root):
    out = subprocess.check_output(["git", "diff", "--name-only", "HEAD"], cwd=root, text=True)
    out += subprocess.check_output(["git", "ls-files", "--others", "--exclude-standard"], cwd=root,
                                   text=True)
    names = {n for n in out.split() if n.endswith(".cpp")}
    return sorted(os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n)))


def tidy_version(tidy):
    out = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout
    return next((l.strip() for l in out.splitlines() if "version" in l), out.strip())


def read_baseline(root):
    """{'commit': sha, 'clang-tidy': version line} from .ci/tidy-baseline, or None."""
    path = os.path.join(root, BASELINE)
    if not os.path.isfile(path):
        return None
    fields = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#") and " " in line:
            k, v = line.split(" ", 1)
            fields[k] = v.strip()
    return fields if "commit" in fields and "clang-tidy" in fields else None


def changed_since(root, commit):
    """Repository-relative paths that differ from COMMIT (committed, staged, unstaged, untracked),
    or None when COMMIT is not in this clone's history."""
    ok = subprocess.run(["git", "cat-file", "-e", commit + "^{commit}"], cwd=root,
                        capture_output=True).returncode == 0
    if not ok:
        return None
    out = subprocess.check_output(["git", "diff", "--name-only", commit], cwd=root, text=True)
    out += subprocess.check_output(["git", "ls-files", "--others", "--exclude-standard"], cwd=root,
                                   text=True)
    return set(out.split())


def baseline_scope(root, tidy):
    """(changed paths, why) for --since-baseline: None for the paths means check everything."""
    base = read_baseline(root)
    if base is None:
        return None, f"no {BASELINE}: every file is checked"
    if base["clang-tidy"] != tidy_version(tidy):
        return None, (f"{BASELINE} was checked by {base['clang-tidy']}, this is "
                      f"{tidy_version(tidy)}: every file is checked")
    changed = changed_since(root, base["commit"])
    if changed is None:
        return None, (f"the baseline commit {base['commit'][:12]} is not in this clone's history: "
                      "every file is checked")
    touched = sorted(p for p in changed if p in GLOBAL_INPUTS)
    if touched:
        return None, f"{', '.join(touched)} changed since the baseline: every file is checked"
    return changed, f"baseline {base['commit'][:12]}: {len(changed)} paths changed since"


def record_baseline(root, tidy):
    status = subprocess.check_output(["git", "status", "--porcelain", "--untracked-files=no"],
                                     cwd=root, text=True)
    if status.strip():
        print("tidy: the work tree has uncommitted changes: commit them, then record the baseline")
        return 1
    head = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=root, text=True).strip()
    os.makedirs(os.path.join(root, os.path.dirname(BASELINE)), exist_ok=True)
    with open(os.path.join(root, BASELINE), "w") as f:
        f.write("# Written by `cmake/tidy.py ... --record-baseline` after a full clang-tidy pass "
                "over every source\n# of this commit was clean; the CI's tidy test checks only "
                "what changed since it.\n")
        f.write(f"commit {head}\nclang-tidy {tidy_version(tidy)}\n")
    print(f"tidy: baseline recorded: {head[:12]} ({BASELINE}); commit it")
    return 0


def clang_arguments(entry):
    """The entry's compiler arguments without GCC's precompiled-header flags."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    clean, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-include":
            skip = True  # -include <pch header>
            continue
        if a.startswith("-Winvalid-pch") or "cmake_pch" in a:
            continue
        clean.append(a)
    return clean


def ninja_deps(build):
    """object path (relative to BUILD) -> the absolute paths of the files the compiler read."""
    try:
        text = subprocess.check_output(["ninja", "-C", build, "-t", "deps"], text=True,
                                       stderr=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError):
        return {}
    deps, current = {}, None
    for line in text.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            current = line.split(":", 1)[0]
            deps[current] = []
        elif current is not None:
            deps[current].append(os.path.normpath(os.path.join(build, line.strip())))
    return deps


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Keyer:
    def __init__(self, root, build, tidy):
        self.root, self.build = root, build
        version = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout
        config = open(os.path.join(root, ".clang-tidy"), "rb").read()
        self.base = hashlib.sha256((SCHEMA + version).encode() + config).hexdigest()
        self.deps = ninja_deps(build)
        self.digests = {}

    def _digest(self, path):
        if path not in self.digests:
            self.digests[path] = file_digest(path) if os.path.isfile(path) else "missing"
        return self.digests[path]

    def _ours(self, path):
        # Project files: sources and generated headers. Precompiled headers are binary and
        # rebuilt on every change; what they hold is keyed by the include paths.
        inside = path.startswith(self.root + os.sep)
        return inside and not path.endswith((".gch", ".pch"))

    def _configs(self, source):
        # .clang-tidy files between the repository root and the source (the root's is in base).
        out = []
        d = os.path.dirname(source)
        while d.startswith(self.root + os.sep):
            path = os.path.join(d, ".clang-tidy")
            if os.path.isfile(path):
                out.append(os.path.relpath(path, self.root) + ":" + self._digest(path))
            d = os.path.dirname(d)
        return "\0".join(out)

    def key(self, source, args, output):
        h = hashlib.sha256(self.base.encode())
        norm = []
        skip = False
        for a in args:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            norm.append(a.replace(self.build, "<build>").replace(self.root, "<src>"))
        h.update("\0".join(norm).encode())
        h.update(self._configs(source).encode())
        files = {source}
        deps = self.deps.get(output)
        if deps is None:
            return None  # not built yet: no dependency list, so no reliable key
        files.update(p for p in deps if self._ours(p))
        for p in sorted(files):
            h.update(os.path.relpath(p, self.root).encode() + b"\0" + self._digest(p).encode())
        return h.hexdigest()


def touched_since_baseline(keyer, root, source, entry, changed):
    """Whether SOURCE or a project file its compilation read differs from the baseline. A unit
    with no dependency list (not built) counts as touched."""
    rel = os.path.relpath(source, root)
    if rel in changed:
        return True
    # A subfolder's .clang-tidy that changed: the sources under it.
    for p in changed:
        if os.path.basename(p) == ".clang-tidy" and rel.startswith(os.path.dirname(p) + "/"):
            return True
    args = clang_arguments(entry)
    out = args[args.index("-o") + 1] if "-o" in args else None
    deps = keyer.deps.get(out)
    if deps is None:
        return True
    return any(os.path.relpath(p, root) in changed for p in deps if keyer._ours(p))


def run_one(tidy, db, source):
    proc = subprocess.run([tidy, "--quiet", "-p", db, source], capture_output=True, text=True)
    noise = ("warnings generated", "warning generated", "Suppressed ", "Use -header-filter",
             "Use -system-headers")
    err = "\n".join(l for l in proc.stderr.splitlines() if not any(n in l for n in noise))
    out = (proc.stdout + ("\n" + err if err.strip() else "")).strip()
    return proc.returncode, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tidy")
    ap.add_argument("build")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--since-baseline", action="store_true")
    ap.add_argument("--record-baseline", action="store_true")
    ap.add_argument("--cache")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("files", nargs="*")
    opt = ap.parse_intermixed_args()

    root = repo_root()
    build = os.path.realpath(opt.build)
    db_path = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db_path):
        sys.exit(f"tidy: {db_path} not found: configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON")
    entries = {}
    for e in json.load(open(db_path)):
        src = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if src.startswith(build + os.sep) or not src.startswith(root + os.sep):
            continue  # generated: moc output, precompiled-header stubs
        entries[src] = e

    if opt.files:
        sources = [os.path.realpath(f) for f in opt.files]
    elif opt.all or opt.record_baseline:
        sources = sorted(entries)
    else:
        sources = changed_sources(root)
    if not sources:
        print("tidy: no changed C++ sources")
        return 0
    scope = None
    if opt.since_baseline and not opt.record_baseline:
        scope, why = baseline_scope(root, opt.tidy)
        print(f"tidy: {why}", flush=True)

    # clang's compilation database: GCC's precompiled-header flags out.
    import tempfile
    tmp = tempfile.mkdtemp(prefix="lathe-tidy-")
    clean = []
    for src, e in entries.items():
        clean.append({"directory": e["directory"], "file": src, "arguments": clang_arguments(e)})
    with open(os.path.join(tmp, "compile_commands.json"), "w") as f:
        json.dump(clean, f)

    if opt.cache == "auto":
        cache_root = os.environ.get("LATHE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                    "lathe")
        opt.cache = os.path.join(cache_root, "tidy")
    keyer = Keyer(root, build, opt.tidy) if (opt.cache or scope is not None) else None
    if opt.cache:
        os.makedirs(opt.cache, exist_ok=True)

    jobs, cached, unchanged, failed = [], 0, 0, []
    results = {}
    for src in sources:
        rel = os.path.relpath(src, root)
        e = entries.get(src)
        if e is None:
            print(f"tidy: {rel} is not compiled here (skipped)")
            continue
        if src.endswith(".cu"):
            # Debian 12's clang 14 parses CUDA up to 11.5; the CUDA 12/13 headers nvcc builds
            # against do not parse. The kernels' host side (.cpp) is checked; the kernels have
            # numerics tests against CPU references.
            print(f"tidy: {rel} is CUDA (skipped: clang 14 cannot parse CUDA 12+ headers)")
            continue
        if scope is not None and not touched_since_baseline(keyer, root, src, e, scope):
            unchanged += 1
            continue
        key = None
        if keyer and opt.cache:
            args = clang_arguments(e)
            out = None
            if "-o" in args:
                out = args[args.index("-o") + 1]
            key = keyer.key(src, args, out)
            path = key and os.path.join(opt.cache, key[:2], key)
            if path and os.path.isfile(path):
                entry = json.load(open(path))
                results[rel] = (entry["status"], entry["output"])
                cached += 1
                continue
        jobs.append((rel, src, key))

    def work(job):
        rel, src, key = job
        status, out = run_one(opt.tidy, tmp, src)
        if key:
            d = os.path.join(opt.cache, key[:2])
            os.makedirs(d, exist_ok=True)
            part = os.path.join(d, key + f".{os.getpid()}.part")
            with open(part, "w") as f:
                json.dump({"file": rel, "status": status, "output": out}, f)
            os.replace(part, os.path.join(d, key))
        return rel, status, out

    print(f"tidy: {len(sources)} files, {unchanged} unchanged since the baseline, {cached} from "
          f"the cache, {len(jobs)} to check ({opt.j} at a time)", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opt.j)) as pool:
        for rel, status, out in pool.map(work, jobs):
            print(f"tidy: {rel}{'' if status == 0 else ': findings'}", flush=True)
            results[rel] = (status, out)
    for rel in sorted(results):
        status, out = results[rel]
        if status != 0:
            failed.append(rel)
            print(f"\n==== {rel}\n{out}")
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print(f"\ntidy: findings in {len(failed)} of {len(results)} files: {' '.join(failed)}")
        return 1
    print(f"tidy: clean ({len(results)} files checked or cached, {unchanged} unchanged since "
          "the baseline)")
    if opt.record_baseline:
        return record_baseline(root, opt.tidy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
