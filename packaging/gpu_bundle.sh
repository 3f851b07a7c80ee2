#!/usr/bin/env bash
# Builds lathe-engine against a given PyPI torch wheel (the device's torch, e.g. 2.11.0 = cu130 on
# the H200) and packs it for a machine that has that torch but none of Lathe's Debian libraries:
#
#   bash packaging/gpu_bundle.sh TORCH_VERSION OUT
#
# OUT receives bin/lathe-engine.real (stripped), lib/ (every library it needs that is neither
# LibTorch's, NVIDIA's, nor glibc/libstdc++/libgcc: curl and its chain, spdlog, fmt, yaml-cpp, pcre2,
# sentencepiece, utf8proc, zlib, zstd), bin/lathe-engine (a wrapper that puts lib/ and the device's own torch
# libraries on LD_LIBRARY_PATH for the engine only) and BUNDLE.txt (what it was built from).
# The wheel, NCCL's headers (torch's pin) and the build folder are cached under
# ~/.cache/lathe/gpu; a second run rebuilds only what changed. The engine only: no GUI, no tests.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bash packaging/gpu_bundle.sh TORCH_VERSION OUT" >&2; exit 2; }
TORCH=$1
OUT=$2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LATHE_CACHE:-$HOME/.cache/lathe}
GPU=$CACHE/gpu
SITE=$GPU/site-$TORCH
BUILD=$GPU/build-$TORCH
PIP=$CACHE/torch-2.13.0/bin/pip  # the setup script's venv: its nvidia/* folders satisfy the linker
JOBS=${LATHE_JOBS:-$(nproc)}
say() { printf '\033[1m[gpu bundle]\033[0m %s\n' "$*"; }
die() { printf '[gpu bundle] error: %s\n' "$*" >&2; exit 1; }
[ -x "$PIP" ] || die "no $PIP: run 'bash packaging/setup.sh' first (it installs torch 2.13.0 there)"
VENV_NV=$(ls -d "$CACHE"/torch-2.13.0/lib/python3*/site-packages/nvidia 2>/dev/null | head -1)
[ -d "$VENV_NV" ] || die "no nvidia/ packages in the setup script's venv ($CACHE/torch-2.13.0)"

# NCCL headers must be the ones torch was built with (ProcessGroupNCCL's layout depends on them).
case "$TORCH" in
  2.11.*) NCCL=2.28.9 ;;
  2.13.*) NCCL=$(ls -d "$VENV_NV"/../nvidia_nccl_cu13-*.dist-info 2>/dev/null | sed 's/.*cu13-\(.*\)\.dist-info/\1/' | head -1) ;;
  *) NCCL=${LATHE_NCCL_VERSION:?"set LATHE_NCCL_VERSION to torch $TORCH's nvidia-nccl-cu13 pin"} ;;
esac

mkdir -p "$GPU/wheels"
if [ ! -f "$SITE/.complete" ]; then
  wheel=$(ls "$GPU"/wheels/torch-"$TORCH"-*manylinux*x86_64.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    say "downloading the torch==$TORCH wheel (once)"
    "$PIP" download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 -d "$GPU/wheels" "torch==$TORCH" || die "pip could not download torch==$TORCH"
    wheel=$(ls "$GPU"/wheels/torch-"$TORCH"-*.whl | head -1)
  fi
  nccl=$(ls "$GPU"/wheels/nvidia_nccl_cu13-"$NCCL"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$nccl" ]; then
    "$PIP" download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$GPU/wheels" \
      "nvidia-nccl-cu13==$NCCL" || die "pip could not download nvidia-nccl-cu13==$NCCL"
    nccl=$(ls "$GPU"/wheels/nvidia_nccl_cu13-"$NCCL"-*.whl | head -1)
  fi
  say "unpacking $(basename "$wheel") and NCCL $NCCL's headers into $SITE"
  rm -rf "$SITE"
  mkdir -p "$SITE/nvidia"
  python3 -m zipfile -e "$wheel" "$SITE/unpacked" >/dev/null
  mv "$SITE/unpacked/torch" "$SITE/torch"
  rm -rf "$SITE/unpacked"
  python3 -m zipfile -e "$nccl" "$SITE/nccl-unpacked" >/dev/null
  mv "$SITE/nccl-unpacked/nvidia/nccl" "$SITE/nvidia/nccl"
  rm -rf "$SITE/nccl-unpacked"
  for d in cu13 cudnn cusparselt nvshmem; do
    [ -d "$VENV_NV/$d" ] && ln -sfn "$VENV_NV/$d" "$SITE/nvidia/$d"
  done
  touch "$SITE/.complete"
fi

export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
if [ ! -f "$BUILD/build.ninja" ]; then
  say "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_BUILD_GUI=OFF \
    -DLATHE_BUILD_TESTS=OFF -DLATHE_TORCH_DIR="$SITE/torch" >"$GPU/configure-$TORCH.log" 2>&1 \
    || { tail -20 "$GPU/configure-$TORCH.log"; die "cmake configure failed"; }
fi
say "building lathe-engine against torch $TORCH ($JOBS jobs)"
cmake --build "$BUILD" --target lathe-engine -j "$JOBS" || die "build failed"

say "packing $OUT"
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
strip -o "$OUT/bin/lathe-engine.real" "$BUILD/bin/lathe-engine"
# Everything ldd resolves that the device does not bring: not LibTorch's or NVIDIA's (the device's
# torch has them), not the C and C++ runtimes (the device's are newer).
LD_LIBRARY_PATH="$SITE/torch/lib" ldd "$BUILD/bin/lathe-engine" | awk '/=> \// {print $1, $3}' |
  while read -r name path; do
    case "$name" in
      libtorch*|libc10*|libcuda*|libcudart*|libcublas*|libcudnn*|libnccl*|libnv*|libcusparse*|libcufft*|libcurand*|libcusolver*|libcupti*|libcufile*|libgomp*|libshm*) continue ;;
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) continue ;;
    esac
    cp -L "$path" "$OUT/lib/$name"
  done
cat >"$OUT/bin/lathe-engine" <<'WRAP'
#!/usr/bin/env bash
# Runs the bundled engine against this machine's torch (LATHE_DEVICE_TORCH_LIB, else python3's).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tlib=${LATHE_DEVICE_TORCH_LIB:-$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)}
[ -d "$tlib" ] || { echo "lathe-engine bundle: no torch found (set LATHE_DEVICE_TORCH_LIB to a torch/lib folder)" >&2; exit 1; }
LD_LIBRARY_PATH="$here/../lib:$tlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/lathe-engine.real" "$@"
WRAP
chmod +x "$OUT/bin/lathe-engine"
{
  echo "lathe $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "torch $TORCH (wheel), NCCL headers $NCCL, built $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$OUT/BUNDLE.txt"
size=$(du -sm "$OUT" | cut -f1)
say "bundle: $OUT (${size} MB)"
[ "$size" -le 40 ] || die "the bundle is ${size} MB, over the 40 MB a device call carries"
