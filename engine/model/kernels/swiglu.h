// The fused SwiGLU (model.fused.swiglu): silu(a) * b, the feed-forward's gate, as one kernel
// forward and one backward (fused_swiglu.cu) instead of silu, mul and their two backward ops, and
// keeping only a and b for backward (the reference also keeps silu(a)). On the CPU the same
// arithmetic as a loop (swiglu_math.h), which is the kernel's reference in the tests.
#pragma once

#include <torch/torch.h>

namespace lathe::model::kernels {

/// silu(a) * b for a and b of the same shape and float type (the arithmetic is fp32, rounded to
/// the type where the reference ops store). Differentiable with respect to both.
torch::Tensor fused_swiglu(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace lathe::model::kernels
