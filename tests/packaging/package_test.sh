#!/usr/bin/env bash
# Builds the packages with CPack and checks each installed copy away from the build tree:
# the relocatable .tar.gz unpacked into a temporary prefix, the .deb unpacked into a throwaway
# root (dpkg-deb -x). In both, with a clean environment (no LD_LIBRARY_PATH, PATH=/usr/bin:/bin):
#   - the layout (bin/, share/lathe/presets, desktop file, icons, metainfo, licence) is there;
#   - lathe and lathe-engine carry only $ORIGIN-relative RPATHs and ldd resolves every library
#     inside the prefix or from the system, never from LibTorch's venv or the build tree;
#   - `lathe-engine train tiny trainer.max_duration=3steps launch.num_threads=1` trains;
#   - `lathe --version` matches `lathe-engine --version`; `QT_QPA_PLATFORM=offscreen lathe
#     --smoke-test` shows the window and starts the lathe-engine beside it;
#   - every library those processes load (LD_DEBUG=files, dlopen included, the engine child too)
#     lies in the prefix or the system folders;
#   - for the .deb: zstd members, and every system library a carried binary needs belongs to a
#     package its Depends names.
#
#   usage: package_test.sh BUILD_DIR CPACK VERSION ARCHIVE_GENERATOR FORBIDDEN_DIR...
# (ARCHIVE_GENERATOR: TGZ or TZST, the relocatable archive's CPack generator)
# (FORBIDDEN_DIR: LibTorch's folder, the build tree, ... that nothing may be loaded from)
# Needs about 10 GB of free space under $LATHE_PACKAGE_TEST_TMP (default: $TMPDIR or /tmp).
set -euo pipefail

BUILD=$1 CPACK=$2 VERSION=$3 ARCHIVE=$4
shift 4
case "$ARCHIVE" in TGZ) EXT=tar.gz;; TZST) EXT=tar.zst;; *) echo "unknown archive generator $ARCHIVE" >&2; exit 2;; esac
FORBIDDEN=()
for d in "$@"; do FORBIDDEN+=("$(realpath -m "$d")"); done
WORK=$(mktemp -d "${LATHE_PACKAGE_TEST_TMP:-${TMPDIR:-/tmp}}/lathe-package-test.XXXXXX")
WORK=$(realpath "$WORK")
trap 'rm -rf "$WORK"' EXIT
SUMMARY=()

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== [$SECONDS s] $*"; }
clean_env() {  # a login-like environment with nothing of the build's
  env -i HOME="$WORK/home" USER="${USER:-root}" LANG=C.UTF-8 PATH=/usr/bin:/bin \
    XDG_RUNTIME_DIR="$WORK/xdg" "$@"
}
mkdir -p "$WORK/home" "$WORK/xdg"
chmod 700 "$WORK/xdg"

# A path is acceptable when it is inside the prefix or in the system's library folders.
check_path() {  # PREFIX PATH WHAT
  local prefix=$1 p what=$3
  p=$(realpath -m "$2")
  for f in "${FORBIDDEN[@]}"; do
    case "$p/" in "$f"/*) fail "$what: $2 comes from $f";; esac
  done
  case "$p" in
    "$prefix"/*|/lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) ;;
    *) fail "$what: $2 is neither in the prefix nor a system library";;
  esac
}

# The package owning a system library (usrmerge: /lib and /usr/lib are the same files).
owner() {
  local p=$1 q
  for q in "$p" "$(realpath "$p")" "${p#/usr}" "/usr${p}" "$(realpath "$p" | sed 's,^/usr,,')"; do
    dpkg -S "$q" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}

check_prefix() {  # KIND PREFIX
  local kind=$1 prefix
  prefix=$(realpath "$2")
  local t0=$SECONDS

  step "$kind: layout in $prefix"
  for f in bin/lathe bin/lathe-engine share/lathe/presets/tiny.json \
           share/applications/io.github.lathe.Lathe.desktop \
           share/metainfo/io.github.lathe.Lathe.metainfo.xml \
           share/icons/hicolor/scalable/apps/io.github.lathe.Lathe.svg \
           share/doc/lathe/LICENSE share/doc/lathe/copyright \
           share/doc/lathe/README.md share/doc/lathe/docs/gui.md share/doc/lathe/docs/ARCHITECTURE.md; do
    [ -e "$prefix/$f" ] || fail "$kind: $f missing"
  done
  for s in 16 22 24 32 48 64 128 256; do
    file "$prefix/share/icons/hicolor/${s}x${s}/apps/io.github.lathe.Lathe.png" | grep -q "$s x $s" \
      || fail "$kind: no ${s}x${s} PNG icon"
  done
  [ -e "$prefix/lib/lathe" ] || fail "$kind: lib/lathe (LibTorch) missing"
  local extra
  extra=$(find "$prefix" \( -name 'libtorch_python.so' -o -name '*.py' -o -name '*.a' \) -print -quit)
  [ -z "$extra" ] || fail "$kind: Python or static files carried: $extra"

  step "$kind: RPATHs and ldd"
  for b in lathe lathe-engine; do
    local rp
    rp=$(objdump -p "$prefix/bin/$b" | awk '$1=="RPATH"||$1=="RUNPATH"{print $2}')
    IFS=: read -ra parts <<<"$rp"
    for e in "${parts[@]}"; do
      case "$e" in '$ORIGIN'*|'') ;; *) fail "$kind: bin/$b has the non-relocatable RPATH entry $e";; esac
    done
    local out
    out=$(clean_env ldd "$prefix/bin/$b")
    if grep -q "not found" <<<"$out"; then fail "$kind: bin/$b: $(grep 'not found' <<<"$out")"; fi
    while read -r lib; do check_path "$prefix" "$lib" "$kind: ldd bin/$b"; done \
      < <(awk '$2=="=>" && $3 ~ /^\// {print $3}' <<<"$out")
  done

  step "$kind: --version"
  local ev gv
  ev=$(clean_env "$prefix/bin/lathe-engine" --version)
  gv=$(clean_env "$prefix/bin/lathe" --version)
  echo "$ev"
  echo "$gv"
  [[ "$ev" =~ ^lathe-engine\ $VERSION\ \(git\ [0-9a-z]+,\ LibTorch\ [0-9.]+,\ CUDA\ (compiled\ in|not\ compiled\ in)\)$ ]] \
    || fail "$kind: unexpected lathe-engine --version: $ev"
  [ "${gv#lathe }" = "${ev#lathe-engine }" ] || fail "$kind: lathe --version ($gv) differs from lathe-engine's ($ev)"

  step "$kind: lathe-engine train tiny (3 steps)"
  local runs=$WORK/runs-$kind ld=$WORK/ld-$kind
  mkdir -p "$runs" "$ld"
  local t1=$SECONDS
  clean_env LATHE_RUNS_DIR="$runs" LD_DEBUG=files LD_DEBUG_OUTPUT="$ld/train" \
    timeout 600 "$prefix/bin/lathe-engine" train tiny trainer.max_duration=3steps launch.num_threads=1 \
    > "$WORK/train-$kind.log" 2>&1 || { cat "$WORK/train-$kind.log"; fail "$kind: training failed"; }
  tail -5 "$WORK/train-$kind.log"
  grep -q "at step 3/3" "$WORK/train-$kind.log" || fail "$kind: training did not reach step 3"
  [ -d "$runs/tiny/step3" ] || fail "$kind: no checkpoint $runs/tiny/step3"
  SUMMARY+=("$kind: train 3 steps $((SECONDS - t1)) s")

  step "$kind: QT_QPA_PLATFORM=offscreen lathe --smoke-test"
  local gout
  gout=$(clean_env QT_QPA_PLATFORM=offscreen LATHE_RUNS_DIR="$runs" LD_DEBUG=files LD_DEBUG_OUTPUT="$ld/gui" \
         timeout 120 "$prefix/bin/lathe" --smoke-test 2>&1) || { echo "$gout"; fail "$kind: lathe --smoke-test failed"; }
  grep "smoke-test" <<<"$gout" || true
  grep -qF "engine $prefix/bin/lathe-engine: lathe-engine $VERSION" <<<"$gout" \
    || fail "$kind: lathe did not start the lathe-engine beside it"

  step "$kind: libraries loaded at run time (LD_DEBUG=files)"
  local n=0
  while read -r lib; do
    check_path "$prefix" "$lib" "$kind: loaded"
    n=$((n + 1))
  done < <(cat "$ld"/* | sed -n 's/.*calling init: //p' | sort -u)
  [ "$n" -gt 10 ] || fail "$kind: LD_DEBUG recorded only $n libraries"
  grep -hq "calling init: .*/platforms/libqoffscreen.so" "$ld"/gui* \
    || fail "$kind: the GUI's offscreen platform plugin was not seen loading"
  grep -hq "calling init: .*/libtorch_cpu.so$" "$ld"/train* \
    || fail "$kind: libtorch_cpu.so was not seen loading"
  echo "$n distinct libraries, all from the prefix or the system"
  SUMMARY+=("$kind: checks $((SECONDS - t0)) s")
}

package() {  # GENERATOR
  local t0=$SECONDS
  step "cpack -G $1"
  "$CPACK" --config "$BUILD/CPackConfig.cmake" -G "$1" -B "$WORK/pkg" > "$WORK/cpack-$1.log" 2>&1 \
    || { tail -40 "$WORK/cpack-$1.log"; fail "cpack -G $1 failed"; }
  rm -rf "$WORK/pkg/_CPack_Packages"
  SUMMARY+=("cpack -G $1: $((SECONDS - t0)) s")
  echo "${SUMMARY[-1]}"
}

# ---- the relocatable tarball ---------------------------------------------------------------------
package "$ARCHIVE"
TGZ=$(ls "$WORK"/pkg/lathe-"$VERSION"-*."$EXT")
SUMMARY+=("$(basename "$TGZ"): $(du -m "$TGZ" | cut -f1) MB")
t=$SECONDS
mkdir -p "$WORK/tgz"
tar -C "$WORK/tgz" -xf "$TGZ"
SUMMARY+=("unpack $EXT: $((SECONDS - t)) s, $(du -sm "$WORK/tgz" | cut -f1) MB installed")
top=$(ls "$WORK/tgz")
[ "$(wc -l <<<"$top")" = 1 ] || fail "the tarball has several top folders: $top"
# Relocatable: move the unpacked tree once more before using it.
mv "$WORK/tgz/$top" "$WORK/tgz/moved-elsewhere"
check_prefix archive "$WORK/tgz/moved-elsewhere"
rm -rf "$WORK/tgz" "$TGZ"

# ---- the .deb ------------------------------------------------------------------------------------
package DEB
DEB=$(ls "$WORK"/pkg/lathe_"$VERSION"_*.deb)
SUMMARY+=("$(basename "$DEB"): $(du -m "$DEB" | cut -f1) MB")
step "deb: control fields"
dpkg-deb -f "$DEB" Package Version Architecture Depends Suggests Installed-Size
ar t "$DEB" | grep -x "data.tar.zst" >/dev/null || fail "the .deb's data member is not zstd: $(ar t "$DEB" | tr '\n' ' ')"
DEPENDS=$(dpkg-deb -f "$DEB" Depends)
t=$SECONDS
mkdir -p "$WORK/root"
dpkg-deb -x "$DEB" "$WORK/root"
SUMMARY+=("dpkg-deb -x: $((SECONDS - t)) s")
[ -z "$(ls "$WORK/root" | grep -vx usr)" ] || fail "the .deb installs outside /usr: $(ls "$WORK/root")"
check_prefix deb "$WORK/root/usr"

step "deb: Depends covers the system libraries the carried binaries need"
prefix=$WORK/root/usr
declare -A need_pkg=()
while read -r elf; do
  out=$(clean_env ldd "$elf" 2>/dev/null) || continue
  for so in $(objdump -p "$elf" | awk '$1=="NEEDED"{print $2}'); do
    # ldd prints "libX.so => /path (addr)", and the loader as "/lib64/ld-linux-x86-64.so.2 (addr)".
    path=$(awk -v so="$so" '$1==so && $2=="=>" {print $3} $1 ~ "/"so"$" {print $1}' <<<"$out" | head -1)
    if [ -z "$path" ] || [ "$path" = "not" ]; then
      case "$so" in libcuda.so.*) continue;; esac  # the NVIDIA driver: Suggests
      fail "deb: ${elf#"$prefix"/} needs $so, which is not found"
    fi
    case "$(realpath "$path")" in "$(realpath "$prefix")"/*) continue;; esac
    pkg=$(owner "$path") || fail "deb: no Debian package owns $path (needed by ${elf#"$prefix"/})"
    need_pkg[$pkg]+=" ${elf##*/}"
  done
done < <(find "$prefix/bin" "$prefix/lib/lathe" -type f \( -perm -u+x -o -name '*.so*' \))
for pkg in "${!need_pkg[@]}"; do
  # libspdlog1.10 is named through its virtual package libspdlog1.10-fmt9.
  re=$(sed 's/[.+]/\\&/g' <<<"$pkg")
  grep -Eq "(^|, )${re}(-fmt[0-9]+)?( |,|$)" <<<"$DEPENDS" \
    || fail "deb: Depends lacks $pkg (needed by${need_pkg[$pkg]})"
done
echo "needed packages: ${!need_pkg[*]}"
if command -v apt-get >/dev/null; then
  apt-get install --simulate --no-install-recommends "$DEB" > "$WORK/apt.log" 2>&1 \
    || { cat "$WORK/apt.log"; fail "apt-get cannot satisfy the .deb's Depends"; }
  echo "apt-get --simulate: Depends satisfiable"
fi
rm -rf "$WORK/root" "$DEB"

echo
echo "== summary"
printf '   %s\n' "${SUMMARY[@]}"
