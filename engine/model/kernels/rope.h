// The fused rotary embedding (model.fused.rope): RotaryEmbedding::apply's result, bitwise, without
// its intermediate tensors: one CUDA kernel forward and one backward (fused_rope.cu), and on the
// CPU the same arithmetic as a loop, which is the kernel's reference in the tests. Where it runs:
// fused_kernels_available (fused_kernels.h).
#pragma once

#include <torch/torch.h>

namespace lathe::model::kernels {

/// RoPE on x of shape (B, T, H, D) (any float type; the arithmetic is fp32) with fp32 tables cos
/// and sin of at least T rows of D, positions 0..T-1. Differentiable with respect to x.
torch::Tensor fused_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin);

}  // namespace lathe::model::kernels
