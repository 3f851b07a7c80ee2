// The CUDA side of the fused SwiGLU, in plain types so that fused_swiglu.cu needs no LibTorch
// header (nvcc compiles it alone). Built only when CUDA kernels are compiled in
// (LATHE_WITH_CUDA_KERNELS).
#pragma once

#include "engine/model/kernels/element_types.h"

#include <cstdint>
#include <string>

namespace lathe::model::kernels::swiglu {

using kernels::ElementType;

/// out = silu(a) * b over n contiguous elements of `type`, on `stream` (a cudaStream_t). Returns
/// an empty string, or the CUDA error.
std::string launch_forward(ElementType type, const void* a, const void* b, void* out, int64_t n,
                           void* stream);
/// da and db from the output's gradient g (all contiguous, n elements of `type`).
std::string launch_backward(ElementType type, const void* g, const void* a, const void* b, void* da,
                            void* db, int64_t n, void* stream);

}  // namespace lathe::model::kernels::swiglu
