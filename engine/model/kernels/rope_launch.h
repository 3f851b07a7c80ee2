// The CUDA side of the fused rotary embedding, in plain types so that fused_rope.cu needs no
// LibTorch header (nvcc compiles it alone). Built only when CUDA kernels are compiled in
// (LATHE_WITH_CUDA_KERNELS).
#pragma once

#include "engine/model/kernels/element_types.h"

#include <cstdint>
#include <string>

namespace lathe::model::kernels::rope {

using kernels::ElementType;

/// Rotates (or, with `backward`, takes the gradient through) every head of x, laid out
/// (B, T, heads, 2 * half) contiguously, into out (same layout and type), on `stream` (a
/// cudaStream_t). cos and sin are fp32 (>= T, table_stride) tables. Returns an empty string, or
/// the CUDA error.
std::string launch_rope(ElementType type, bool backward, const void* x, void* out, const float* cos,
                        const float* sin, int64_t rows, int64_t half, int64_t heads, int64_t seq,
                        int64_t table_stride, void* stream);

}  // namespace lathe::model::kernels::rope
