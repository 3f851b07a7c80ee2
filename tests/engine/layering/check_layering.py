#!/usr/bin/env python3
"""Checks every #include "engine/..." / "ui/..." / "app/..." against the build graph.

MAP is written by CMake (tests/engine/layering/CMakeLists.txt): one line per target,
`target folder: folder folder ...`, the folders of every target it links. A file belongs to the
target whose folder is the longest prefix of its path; it may include headers of its own folder
and of the folders its target links. Exit 1 names each file, line and header that breaks this.

--expect-violation FILE=HEADER checks the tree as if FILE also included HEADER, and passes only if
that include is refused (the check's own test).
"""
import os
import re
import sys

# Inside the one lathe_ui target, folders that must not include one another's headers: a resume
# plan, the checkpoints panel and the data and samples pages know how to launch the engine
# (ui/util/engine_launch.h) but not the run controller or the toolbar that drive it.
UI_FORBIDDEN = {
    "ui/checkpoints": ("ui/control",),
    "ui/data": ("ui/control",),
    "ui/samples": ("ui/control",),
    "ui/util": ("ui/control", "ui/checkpoints"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:engine|ui|app)/[^"]+)"')
SOURCES = (".h", ".hpp", ".cpp", ".cu", ".cuh")


def read_map(path):
    targets = {}  # folder -> (target, allowed folders)
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            head, _, allowed = line.partition(":")
            target, folder = head.split()
            targets[folder] = (target, set(allowed.split()))
    return targets


def owner(path, targets):
    """The folder of the target that a path (file or header) belongs to, or None."""
    best = None
    for folder in targets:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def check_include(rel, lineno, header, targets):
    for folder, banned in UI_FORBIDDEN.items():
        if rel.startswith(folder + "/") and header.startswith(tuple(b + "/" for b in banned)):
            return (f"{rel}:{lineno}: includes {header}, but {folder}/ may not include "
                    f"{', '.join(b + '/' for b in banned)} (tests/engine/layering/check_layering.py)")
    mine = owner(rel, targets)
    theirs = owner(header, targets)
    if theirs is None:
        return f"{rel}:{lineno}: includes {header}, which is in no target's folder"
    if theirs == mine:
        return None
    target, allowed = targets[mine]
    if theirs not in allowed:
        return (f"{rel}:{lineno}: includes {header}, but {target} ({mine}/) does not link "
                f"{targets[theirs][0]} ({theirs}/); link it in {mine}/CMakeLists.txt or move the code")
    return None


def main():
    args = sys.argv[1:]
    inject = None
    if "--expect-violation" in args:
        i = args.index("--expect-violation")
        inject = tuple(args[i + 1].split("=", 1))
        del args[i:i + 2]
    map_path, root = args
    targets = read_map(map_path)
    problems = []
    for top in ("engine", "ui", "app"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if owner(rel, targets) is None:
                    problems.append(f"{rel}: in no target's folder")
                    continue
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            p = check_include(rel, lineno, m.group(1), targets)
                            if p:
                                problems.append(p)
    if inject:
        rel, header = inject
        p = check_include(rel, 0, header, targets)
        if p is None:
            print(f"FAIL: {rel} including {header} was not refused")
            return 1
        print("refused as it should be:", p)
        if problems:
            print("FAIL: the tree itself breaks the layering:\n" + "\n".join(problems))
            return 1
        return 0
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the layering (graph: {map_path})")
        return 1
    print(f"layering holds: {len(targets)} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
