// The fused QK-norm + rotary embedding (model.fused.qk_norm_rope): q (or k) normalised by its
// RMSNorm and rotated by RoPE as one kernel forward (one read of the projection, one write of the
// rotated heads, instead of the norm's write and the rotation's read) and one backward (the
// rotation's transpose, the norm's gradient and the weight's partial sums), on CUDA
// (fused_qk_norm_rope.cu). On the CPU the same arithmetic row by row, which is the kernel's
// reference in the tests. Where it runs: fused_kernels_available (fused_kernels.h).
#pragma once

#include <torch/torch.h>

namespace lathe::model::kernels {

/// RMSNorm of y with `weight` over rows of weight.size(0) features, then RoPE of every head of
/// `head_dim` features, as the reference ops (RMSNorm, then RotaryEmbedding::apply) compute it:
/// the norm in fp32 rounded to y's dtype, the rotation in fp32 rounded again. y is (B, T, H * D)
/// with a weight of H * D (OLMo2's and OLMo3's norm over all heads) or (B, T, H, D) with a weight
/// of D (Qwen3's per head). cos and sin are the fp32 (>= positions, D) tables; `positions`, when
/// defined, is (B, T) int64 (document masking's positions), else each row counts 0..T-1.
/// Returns (B, T, H, D) in y's dtype; differentiable with respect to y and weight.
torch::Tensor fused_qk_norm_rope(const torch::Tensor& y, const torch::Tensor& weight, double eps,
                                 const torch::Tensor& cos, const torch::Tensor& sin,
                                 const torch::Tensor& positions, int64_t head_dim);

}  // namespace lathe::model::kernels
