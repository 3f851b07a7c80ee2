// Where Lathe's own fused kernels run (fused_rope, fused_swiglu, fused_residual_norm): the CPU
// always (their reference loops), CUDA when the kernels are compiled in (nvcc found at build
// time, LATHE_WITH_CUDA_KERNELS); and the kernels' element type of a tensor's dtype.
#pragma once

#include "engine/model/kernels/element_types.h"

#include <torch/torch.h>

namespace lathe::model::kernels {

/// Whether the fused kernels run on `device`.
bool fused_kernels_available(const torch::Device& device);

/// The one answer to "take the fused kernel for x?": the kernel is `enabled` (its model.fused
/// flag, and whatever its caller rules out, such as tensor parallelism), x is on CUDA where the
/// kernels are compiled in (the CPU keeps the reference ops, which the CPU references match), and
/// x's rows of `row` features fit the kernel's `max_row` (0: any width).
bool runs_fused(bool enabled, const torch::Tensor& x, int64_t row = 0, int64_t max_row = 0);

/// The kernels' element type for fp32, bf16 or fp16; throws lathe::Error naming `what` otherwise.
kernels::ElementType kernel_element_type(torch::ScalarType type, const char* what);

/// The current CUDA stream of `device` as a cudaStream_t (null without CUDA kernels).
void* kernel_stream(const torch::Device& device);

/// Calls f with a null pointer of the C++ type of `type` (float, c10::BFloat16 or c10::Half), for
/// dispatching the kernels' CPU references on it; throws lathe::Error naming `what` otherwise.
template <class F>
void with_float_type(torch::ScalarType type, const char* what, F&& f) {
    switch (kernel_element_type(type, what)) {
        case kernels::ElementType::float32:
            f(static_cast<float*>(nullptr));
            break;
        case kernels::ElementType::bfloat16:
            f(static_cast<c10::BFloat16*>(nullptr));
            break;
        case kernels::ElementType::float16:
            f(static_cast<c10::Half*>(nullptr));
            break;
    }
}

/// v rounded through the storage type T, as storing a T and reading it back does (the CPU
/// references' counterpart of kernel_elements.cuh's round_to).
template <class T>
float round_through(float v) {
    return static_cast<float>(static_cast<T>(v));
}

}  // namespace lathe::model::kernels
