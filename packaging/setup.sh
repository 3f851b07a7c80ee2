#!/usr/bin/env bash
# Lathe's one-step setup for Debian 12, run as root. Idempotent: a second run installs nothing.
#
#   bash packaging/setup.sh          install what is missing and build (build/release)
#   bash packaging/setup.sh run      ... then run the main job: the GUI when a display exists,
#                                    otherwise train the default tiny model headless
#   bash packaging/setup.sh test     ... then build build/ci and run the whole test suite
#   bash packaging/setup.sh package  ... then build build/release and make the packages in
#                                    build/packages: lathe_<version>_amd64.deb and a relocatable
#                                    lathe-<version>-Linux-x86_64.tar.gz (LibTorch inside)
#
# LibTorch: LATHE_LIBTORCH may name a libtorch folder or a Python torch package folder. Otherwise
# the official PyPI torch wheel (pinned below) goes into a virtual environment under
# ~/.cache/lathe (LATHE_CACHE overrides), which also caches ccache's objects.
set -euo pipefail

TORCH_VERSION=2.13.0
MODE=${1:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LATHE_CACHE:-$HOME/.cache/lathe}
VENV=$CACHE/torch-$TORCH_VERSION
JOBS=${LATHE_JOBS:-$(nproc)}

say() { printf '\033[1m[lathe setup]\033[0m %s\n' "$*"; }
die() { printf '[lathe setup] error: %s\n' "$*" >&2; exit 1; }

case "$MODE" in build|run|test|package|deps) ;; *) die "unknown mode '$MODE' (use: build, run, test, package)";; esac

# ---- Debian packages ------------------------------------------------------------------------------
PKGS=(build-essential cmake ninja-build ccache git pkg-config python3 python3-venv
      qt6-base-dev qt6-base-dev-tools qt6-svg-dev libqcustomplot-dev libgl-dev
      libspdlog-dev nlohmann-json3-dev libyaml-cpp-dev libgloo-dev libpcre2-dev
      libsentencepiece-dev libutf8proc-dev zlib1g-dev libzstd-dev zstd libcurl4-openssl-dev
      xvfb xauth xdotool desktop-file-utils appstream dpkg-dev file clang-format clang-tidy)
# The suite's single-machine Slurm (tests/engine/distributed/slurm_cluster.sh starts and stops its
# own daemons in a temporary folder; nothing is configured system-wide).
[ "$MODE" = test ] && PKGS+=(slurmctld slurmd munge slurm-client)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}); run this script as root"
  command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian 12; install ${missing[*]} by hand"
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed: check the network or the apt sources"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
fi

# ---- LibTorch -------------------------------------------------------------------------------------
if [ -n "${LATHE_LIBTORCH:-}" ]; then
  [ -f "$LATHE_LIBTORCH/lib/libtorch_cpu.so" ] || [ -f "$LATHE_LIBTORCH/torch/lib/libtorch_cpu.so" ] \
    || die "LATHE_LIBTORCH=$LATHE_LIBTORCH holds no lib/libtorch_cpu.so: point it at a libtorch folder or a Python torch package"
  say "LibTorch from LATHE_LIBTORCH=$LATHE_LIBTORCH"
else
  if [ ! -f "$VENV/.complete" ]; then
    say "installing PyPI torch==$TORCH_VERSION into $VENV (about 3 GB, once)"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed: install python3-venv"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" \
      || die "pip could not install torch==$TORCH_VERSION: check access to PyPI, or set LATHE_LIBTORCH to a libtorch folder"
    touch "$VENV/.complete"
  fi
fi
# Test-only Python tools, in the same environment as LibTorch's torch (tests labelled peer and
# remote use them): an independent JSON Schema validator, TensorBoard's event reader, numpy, the
# reference trainer OLMo-core (which accepts this torch), Hugging Face transformers, safetensors,
# tokenizers and sentencepiece, moto's S3 server, and the Kubernetes client (its API types check
# the manifests of k8s-manifest). The marker names the list, so a new list installs again.
TEST_TOOLS=(jsonschema tensorboard numpy "ai2-olmo-core==3.0.0" transformers safetensors tokenizers
            sentencepiece "moto[server]" kubernetes)
TEST_TOOLS_MARK="$VENV/.test-tools-$(printf '%s ' "${TEST_TOOLS[@]}" | cksum | cut -d' ' -f1)"
if [ "$MODE" = test ] && [ -x "$VENV/bin/pip" ] && [ ! -f "$TEST_TOOLS_MARK" ]; then
  say "installing test tools (${TEST_TOOLS[*]}) into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${TEST_TOOLS[@]}" "torch==$TORCH_VERSION" \
    || die "pip could not install the test tools (${TEST_TOOLS[*]})"
  touch "$TEST_TOOLS_MARK"
fi
[ "$MODE" = deps ] && exit 0

# ---- Build ----------------------------------------------------------------------------------------
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}  # clones in other folders share the cache
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
export LATHE_CACHE=$CACHE
cd "$ROOT"
PRESET=release
[ "$MODE" = test ] && PRESET=ci
if [ ! -f "build/$PRESET/build.ninja" ]; then
  say "configuring (cmake --preset $PRESET)"
  cmake --preset "$PRESET" >/dev/null || die "cmake configure failed (see the messages above)"
fi
say "building build/$PRESET"
cmake --build --preset "$PRESET" -j "$JOBS" || die "build failed (see the messages above)"

case "$MODE" in
  run)
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "build/$PRESET/bin/lathe" ]; then
      say "starting the Lathe workbench"
      exec "build/$PRESET/bin/lathe"
    fi
    say "no display: training the default tiny model headless"
    exec "build/$PRESET/bin/lathe-engine" train tiny "run_name=tiny-$(date +%Y%m%d-%H%M%S)"
    ;;
  test)
    say "running the test suite"
    cd "build/$PRESET"
    exec ctest --output-on-failure --timeout 900 -j "${LATHE_TEST_JOBS:-1}"
    ;;
  package)
    say "packaging build/$PRESET into build/packages (cpack: .tar.gz and .deb)"
    rm -rf build/packages/_CPack_Packages
    cpack --config "build/$PRESET/CPackConfig.cmake" -B build/packages >/dev/null \
      || die "cpack failed (run: cpack --config build/$PRESET/CPackConfig.cmake -B build/packages --verbose)"
    rm -rf build/packages/_CPack_Packages  # the staging copies: several GB
    say "packages:"
    ls -sh build/packages/lathe[-_]*
    exit 0
    ;;
esac
say "built: build/$PRESET/bin"
