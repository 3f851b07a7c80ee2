// The arithmetic of the fused rotary embedding, shared by the CUDA kernel (fused_rope.cu) and its
// CPU reference (fused_rope.cpp): each product and sum is one IEEE single-precision operation,
// never contracted into a fused multiply-add, in the order of the reference ops
// (RotaryEmbedding::apply: x * cos + rotate_half(x) * sin in fp32), so all three agree bitwise.
#pragma once

#if defined(__CUDACC__)
#define LATHE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LATHE_HOST_DEVICE inline
#endif

namespace lathe::model::kernels::rope {

LATHE_HOST_DEVICE float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

LATHE_HOST_DEVICE float add(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/// Forward: features i and i + D/2 of one head at one position, with that position's table
/// entries (c1, s1) at i and (c2, s2) at i + D/2 (equal, as the tables repeat their halves).
LATHE_HOST_DEVICE void rotate(float x1, float x2, float c1, float s1, float c2, float s2, float& o1,
                              float& o2) {
    o1 = add(mul(x1, c1), mul(-x2, s1));
    o2 = add(mul(x2, c2), mul(x1, s2));
}

/// Backward: the gradient of rotate() with respect to (x1, x2) from the output's (g1, g2), as
/// autograd forms it from the reference ops (g * cos plus rotate_half's transpose of g * sin).
LATHE_HOST_DEVICE void rotate_backward(float g1, float g2, float c1, float s1, float c2, float s2,
                                       float& d1, float& d2) {
    d1 = add(mul(g1, c1), mul(g2, s2));
    d2 = add(mul(g2, c2), -mul(g1, s1));
}

}  // namespace lathe::model::kernels::rope
