// The CUDA side of the fused residual + RMSNorm, in plain types so that fused_residual_norm.cu
// needs no LibTorch header (nvcc compiles it alone). Built only when CUDA kernels are compiled in
// (LATHE_WITH_CUDA_KERNELS).
#pragma once

#include "engine/model/kernels/element_types.h"

#include <cstdint>
#include <string>

namespace lathe::model::kernels::residual_norm {

using kernels::ElementType;

/// The widest row (d) the kernels take: 256 threads of 32 columns each.
inline constexpr int64_t kMaxRow = 8192;

/// Row-major (rows, d) tensors. Forward: out (type `out_type`) = x (`x_type`) + norm(y) (`y_type`
/// rounding) with weight w (`w_type`); rstd (fp32, rows) is saved for backward. Returns an empty
/// string or the CUDA error; `stream` is a cudaStream_t.
std::string launch_forward(ElementType x_type, ElementType y_type, ElementType w_type,
                           ElementType out_type, const void* x, const void* y, const void* w,
                           void* out, float* rstd, int64_t rows, int64_t d, float eps,
                           void* stream);

/// Backward from g (`g_type`, rows x d): dy (`y_type`) and the weight's partial sums, fp32
/// (chunks, d) with chunks = partial_chunks(rows), which the caller sums over the chunks.
/// `round_g` rounds g to y's type first, as the add's backward hands the branch its dtype.
std::string launch_backward(ElementType g_type, ElementType y_type, ElementType w_type,
                            const void* g, const void* y, const void* w, const float* rstd,
                            void* dy, float* dw_partial, int64_t rows, int64_t d, bool round_g,
                            void* stream);

/// The number of row chunks launch_backward writes weight partial sums for.
int64_t partial_chunks(int64_t rows);

}  // namespace lathe::model::kernels::residual_norm
