#!/usr/bin/env python3
"""cmake/tidy.py's baseline (.ci/tidy-baseline): which translation units the CI's tidy test checks.

A throw-away git repository with three sources (a.cpp and b.cpp read a.h, lib/c.cpp reads only
itself) is built by real ninja with gcc's dependency files, so tidy.py reads a real ninja deps log.
clang-tidy is stood in for by a script that logs each file it is asked to check and reports a
finding in any file holding the word FINDING. Each case asserts the exact set of files checked
and tidy.py's exit status:

  no baseline                 every file
  baseline at HEAD, no edits  none; a finding left in an unchanged file is not reported
  edit a.h                    a.cpp and b.cpp (they read it), not c.cpp
  edit c.cpp with a finding   c.cpp only, and the run fails naming it
  a new lib/.clang-tidy       c.cpp, the one source under lib/
  a changed root .clang-tidy  every file
  another clang-tidy version  every file
  baseline not in history     every file
  --record-baseline           writes HEAD and the version; refuses on a dirty work tree

    check_tidy_baseline.py TIDY_PY
"""
import os
import shutil
import subprocess
import sys
import tempfile

TIDY_PY = os.path.abspath(sys.argv[1])
failures = []


def sh(args, cwd, check=True):
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_repo(top):
    repo = os.path.join(top, "repo")
    write(os.path.join(repo, ".clang-tidy"), "Checks: '-*'\n")
    write(os.path.join(repo, "a.h"), "inline int a() { return 1; }\n")
    write(os.path.join(repo, "a.cpp"), '#include "a.h"\nint fa() { return a(); }\n')
    write(os.path.join(repo, "b.cpp"), '#include "a.h"\nint fb() { return a() + 1; }\n')
    write(os.path.join(repo, "lib", "c.cpp"), "int fc() { return 3; }\n")
    write(os.path.join(repo, ".gitignore"), "build/\n")
    build = os.path.join(repo, "build")
    os.makedirs(build)
    rules = ["rule cxx", "  command = g++ -MD -MF $out.d -c $in -o $out", "  depfile = $out.d",
             "  deps = gcc", ""]
    db = []
    for name in ("a", "b", "lib/c"):
        src = os.path.join(repo, name + ".cpp")
        obj = os.path.basename(name) + ".o"
        rules.append(f"build {obj}: cxx {src}")
        db.append({"directory": build, "file": src,
                   "command": f"g++ -MD -MF {obj}.d -c {src} -o {obj}"})
    write(os.path.join(build, "build.ninja"), "\n".join(rules) + "\n")
    import json
    write(os.path.join(build, "compile_commands.json"), json.dumps(db))
    sh(["ninja", "-C", build], repo)
    sh(["git", "init", "-q"], repo)
    sh(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], repo)
    sh(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"], repo)
    return repo, build


def fake_tidy(top, version):
    path = os.path.join(top, f"fake-tidy-{version}")
    log = os.path.join(top, "checked.log")
    write(path, f"""#!/bin/sh
if [ "$1" = --version ]; then echo "Fake LLVM version {version}"; exit 0; fi
for last; do :; done
echo "$(basename "$last")" >> {log}
if grep -q FINDING "$last"; then echo "$last:1:1: warning: a finding [fake-check]"; exit 1; fi
exit 0
""")
    os.chmod(path, 0o755)
    return path, log


def run(repo, build, tidy, log, *extra):
    if os.path.exists(log):
        os.remove(log)
    proc = subprocess.run([sys.executable, TIDY_PY, tidy, build, "--all", "--since-baseline",
                           *extra], cwd=repo, capture_output=True, text=True)
    checked = sorted(open(log).read().split()) if os.path.exists(log) else []
    return proc, checked


def expect(name, proc, checked, files, status):
    if checked != files or proc.returncode != status:
        failures.append(f"{name}: checked {checked} (status {proc.returncode}), expected {files} "
                        f"(status {status})\n{proc.stdout}{proc.stderr}")
    else:
        print(f"ok: {name}: checked {checked or 'nothing'}, status {status}")


def commit_all(repo, message):
    sh(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", message], repo)


def main():
    top = tempfile.mkdtemp(prefix="lathe-tidy-baseline-")
    try:
        repo, build = make_repo(top)
        tidy, log = fake_tidy(top, "1.0")
        other, _ = fake_tidy(top, "2.0")
        baseline = os.path.join(repo, ".ci", "tidy-baseline")
        everything = ["a.cpp", "b.cpp", "c.cpp"]

        proc, checked = run(repo, build, tidy, log)
        expect("no baseline", proc, checked, everything, 0)

        proc = subprocess.run([sys.executable, TIDY_PY, tidy, build, "--record-baseline"],
                              cwd=repo, capture_output=True, text=True)
        text = open(baseline).read() if os.path.isfile(baseline) else ""
        head = sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()
        if proc.returncode != 0 or f"commit {head}" not in text or "Fake LLVM version 1.0" not in text:
            failures.append(f"--record-baseline wrote {text!r}\n{proc.stdout}{proc.stderr}")
        else:
            print("ok: --record-baseline wrote HEAD and the version")
        sh(["git", "add", ".ci/tidy-baseline"], repo)
        sh(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "baseline"], repo)

        proc, checked = run(repo, build, tidy, log)
        expect("baseline at HEAD, no edits", proc, checked, [], 0)

        with open(os.path.join(repo, "a.h"), "a") as f:
            f.write("inline int a2() { return 2; }\n")
        sh(["ninja", "-C", build], repo)
        proc, checked = run(repo, build, tidy, log)
        expect("a.h edited", proc, checked, ["a.cpp", "b.cpp"], 0)
        commit_all(repo, "a.h")

        with open(os.path.join(repo, "lib", "c.cpp"), "a") as f:
            f.write("// FINDING\n")
        proc, checked = run(repo, build, tidy, log)
        expect("c.cpp edited with a finding", proc, checked, ["a.cpp", "b.cpp", "c.cpp"], 1)
        if "c.cpp" not in proc.stdout.split("findings in", 1)[-1]:
            failures.append(f"the failing run does not name c.cpp:\n{proc.stdout}")
        sh(["git", "checkout", "-q", "lib/c.cpp"], repo)

        proc = subprocess.run([sys.executable, TIDY_PY, tidy, build, "--record-baseline"],
                              cwd=repo, capture_output=True, text=True)
        sh(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "baseline 2"],
           repo)
        proc, checked = run(repo, build, tidy, log)
        expect("baseline moved past the a.h edit", proc, checked, [], 0)

        with open(os.path.join(repo, "lib", "c.cpp"), "a") as f:
            f.write("// FINDING\n")
        proc, checked = run(repo, build, tidy, log)
        expect("c.cpp alone edited with a finding", proc, checked, ["c.cpp"], 1)
        sh(["git", "checkout", "-q", "lib/c.cpp"], repo)

        write(os.path.join(repo, "lib", ".clang-tidy"), "Checks: '-*'\n")
        proc, checked = run(repo, build, tidy, log)
        expect("a new lib/.clang-tidy", proc, checked, ["c.cpp"], 0)
        os.remove(os.path.join(repo, "lib", ".clang-tidy"))

        with open(os.path.join(repo, ".clang-tidy"), "a") as f:
            f.write("# changed\n")
        proc, checked = run(repo, build, tidy, log)
        expect("a changed root .clang-tidy", proc, checked, everything, 0)
        sh(["git", "checkout", "-q", ".clang-tidy"], repo)

        proc, checked = run(repo, build, other, log)
        expect("another clang-tidy", proc, checked, everything, 0)

        text = open(baseline).read()
        import re
        write(baseline, re.sub(r"commit [0-9a-f]+", "commit " + "0" * 40, text))
        proc, checked = run(repo, build, tidy, log)
        expect("baseline not in history", proc, checked, everything, 0)
        sh(["git", "checkout", "-q", ".ci/tidy-baseline"], repo)

        with open(os.path.join(repo, "lib", "c.cpp"), "a") as f:
            f.write("// dirty\n")
        proc = subprocess.run([sys.executable, TIDY_PY, tidy, build, "--record-baseline"],
                              cwd=repo, capture_output=True, text=True)
        if proc.returncode == 0 or "uncommitted" not in proc.stdout:
            failures.append(f"--record-baseline on a dirty tree: {proc.returncode}\n{proc.stdout}")
        else:
            print("ok: --record-baseline refuses a dirty work tree")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print(f"{0 if failures else 1} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
