#!/usr/bin/env bash
# format.sh CLANG_FORMAT check|fix: clang-format over the tracked C++ sources (or, outside a git
# checkout such as an unpacked source archive, every .h/.cpp under app, engine, ui, tests).
set -euo pipefail
CF=$1 MODE=$2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h')
else
  mapfile -t files < <(find app engine ui tests -name '*.cpp' -o -name '*.h')
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
files=("${existing[@]}")
if [ "$MODE" = fix ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf 'not formatted (.clang-format): %s\n' "${bad[@]}" >&2
  echo "fix with: cmake --build --preset dev --target format   (or clang-format -i FILE)" >&2
  exit 1
fi
echo "all ${#files[@]} C++ files formatted"
