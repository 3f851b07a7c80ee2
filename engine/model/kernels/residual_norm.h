// The fused residual + RMSNorm of a post-norm block (model.fused.residual_norm; OLMo2's and
// OLMo3's reordered norm): out = x + RMSNorm(y), as one kernel forward (one read of x and y, one
// write of out, instead of the norm's write and the add's read and write) and one backward (the
// norm's gradient and the weight's partial sums), on CUDA (fused_residual_norm.cu). On the CPU
// the same arithmetic row by row, which is the kernel's reference in the tests.
#pragma once

#include <torch/torch.h>

namespace lathe::model::kernels {

/// x + (y * rsqrt(mean(y^2) + eps) * weight) over the last dimension, as the reference ops
/// compute it: the norm in fp32 from y's values and the weight's, rounded to y's dtype, then
/// added to x with type promotion (a bf16 branch onto an fp32 residual stream gives fp32).
/// Differentiable with respect to x, y and weight.
torch::Tensor fused_residual_norm(const torch::Tensor& x, const torch::Tensor& y,
                                  const torch::Tensor& weight, double eps);

}  // namespace lathe::model::kernels
