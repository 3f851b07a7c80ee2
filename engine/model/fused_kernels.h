// Where Lathe's own fused kernels run (fused_rope, fused_swiglu, fused_residual_norm): the CPU
// always (their reference loops), CUDA when the kernels are compiled in (nvcc found at build
// time, LATHE_WITH_CUDA_KERNELS); and the kernels' element type of a tensor's dtype.
#pragma once

#include "engine/model/kernel_types.h"

#include <torch/torch.h>

namespace lathe::model {

/// Whether the fused kernels run on `device`.
bool fused_kernels_available(const torch::Device& device);

/// The kernels' element type for fp32, bf16 or fp16; throws lathe::Error naming `what` otherwise.
kernels::ElementType kernel_element_type(torch::ScalarType type, const char* what);

/// The current CUDA stream of `device` as a cudaStream_t (null without CUDA kernels).
void* kernel_stream(const torch::Device& device);

}  // namespace lathe::model
