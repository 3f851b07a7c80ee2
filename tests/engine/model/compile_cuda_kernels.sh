#!/usr/bin/env bash
# Compiles every CUDA kernel of the engine (engine/**/*.cu) for sm_90 plus its PTX, as the device
# build does, so that a kernel that no longer compiles is caught on a machine without a GPU or a
# CUDA LibTorch. Their numerics are tested through the CPU references (test_model).
# Usage: compile_cuda_kernels.sh NVCC SOURCE_DIR OUT_DIR. Exits 77 (skipped) without nvcc.
set -euo pipefail
NVCC=${1:-} SRC=$2 OUT=$3
if [ -z "$NVCC" ] || ! command -v "$NVCC" >/dev/null 2>&1; then
  echo "no nvcc: the CUDA kernels are not compiled here (skipped)"
  exit 77
fi
mkdir -p "$OUT"
n=0
while IFS= read -r cu; do
  rel=${cu#"$SRC"/}
  echo "nvcc sm_90: $rel"
  "$NVCC" -std=c++17 -I"$SRC" -gencode arch=compute_90,code=sm_90 \
    -gencode arch=compute_90,code=compute_90 -Werror all-warnings -c "$cu" \
    -o "$OUT/$(echo "$rel" | tr / _).o"
  n=$((n + 1))
done < <(find "$SRC/engine" -name '*.cu' | sort)
[ "$n" -gt 0 ] || { echo "no .cu files found under $SRC/engine"; exit 1; }
echo "all $n CUDA kernel files compiled for sm_90"
