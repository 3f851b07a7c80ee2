// The arithmetic of the fused SwiGLU, shared by the CUDA kernel (fused_swiglu.cu) and its CPU
// reference (fused_swiglu.cpp), in the reference ops' order: silu(a) = a / (1 + exp(-a)) and
// silu'(a) = sigmoid(a) (1 + a (1 - sigmoid(a))), as ATen's silu and silu_backward compute them
// in fp32. `round` stands for the storage type's rounding, applied where the reference ops store
// an intermediate tensor (silu's output, the product's gradient), so that bf16 results round as
// the unfused path's do.
#pragma once

#if defined(__CUDACC__)
#define LATHE_SWIGLU_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LATHE_SWIGLU_HOST_DEVICE inline
#endif

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace lathe::model::kernels::swiglu {

LATHE_SWIGLU_HOST_DEVICE float exp_neg(float a) {
#if defined(__CUDA_ARCH__)
    return expf(-a);
#else
    return std::exp(-a);
#endif
}

LATHE_SWIGLU_HOST_DEVICE float silu(float a) {
    return a / (1.0f + exp_neg(a));
}

/// Forward: out = round(round(silu(a)) * b).
template <class Round>
LATHE_SWIGLU_HOST_DEVICE float forward(float a, float b, Round round) {
    return round(round(silu(a)) * b);
}

/// Backward from the output's gradient g: da = round(round(g * b) * silu'(a)) and
/// db = round(g * round(silu(a))), the gradients autograd forms through mul and silu.
template <class Round>
LATHE_SWIGLU_HOST_DEVICE void backward(float g, float a, float b, Round round, float& da,
                                       float& db) {
    const float sig = 1.0f / (1.0f + exp_neg(a));
    const float gs = round(g * b);
    da = round(gs * sig * (1.0f + a * (1.0f - sig)));
    db = round(g * round(silu(a)));
}

}  // namespace lathe::model::kernels::swiglu
