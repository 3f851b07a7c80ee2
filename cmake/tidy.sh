#!/usr/bin/env bash
# tidy.sh CLANG_TIDY BUILD_DIR [FILES...]: clang-tidy (.clang-tidy's checks) over FILES, by default
# the C++ sources changed since git HEAD (staged, unstaged and untracked), with the compile
# commands of BUILD_DIR. GCC's precompiled-header flags are dropped for clang.
set -euo pipefail
TIDY=$1 BUILD=$2
shift 2
cd "$(git rev-parse --show-toplevel)"
if (($#)); then
  files=("$@")
else
  mapfile -t files < <({ git diff --name-only HEAD; git ls-files --others --exclude-standard; } |
                       grep -E '\.cpp$' | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
if ((${#files[@]} == 0)); then
  echo "tidy: no changed C++ sources"
  exit 0
fi
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
python3 - "$BUILD/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, re, shlex, sys
out = []
for e in json.load(open(sys.argv[1])):
    args = e.get("arguments") or shlex.split(e["command"])
    clean, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-include",) :
            skip = True  # -include <pch header>
            continue
        if a.startswith("-Winvalid-pch") or "cmake_pch" in a:
            continue
        clean.append(a)
    e.pop("command", None)
    e["arguments"] = clean
    out.append(e)
json.dump(out, open(sys.argv[2], "w"))
PY
status=0
for f in "${files[@]}"; do
  grep -q "\"file\": \"[^\"]*$f\"" "$db/compile_commands.json" || { echo "tidy: $f is not compiled here (skipped)"; continue; }
  echo "tidy: $f"
  "$TIDY" --quiet -p "$db" "$f" 2> >(grep -v "warnings\? generated" >&2) || status=1
done
exit $status
