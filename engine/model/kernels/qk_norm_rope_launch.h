// The CUDA side of the fused QK-norm + RoPE, in plain types so that fused_qk_norm_rope.cu needs no
// LibTorch header (nvcc compiles it alone). The launchers are built only when CUDA kernels are
// compiled in (LATHE_WITH_CUDA_KERNELS); Layout serves the CPU reference too.
#pragma once

#include "engine/model/kernels/element_types.h"

#include <cstdint>
#include <string>

namespace lathe::model::kernels::qk_norm_rope {

using kernels::ElementType;

/// The widest norm row (n) the kernels take: 256 threads of 16 rotation pairs each.
inline constexpr int64_t kMaxRow = 8192;

/// Where a row's heads sit: `rows` norm rows of n = heads * 2 * half features, `rows_per_token`
/// of them per token, tokens in (B, seq) order; a token's position is positions[token] (int64)
/// when given, else token % seq; cos and sin are fp32 tables with rows table_stride apart.
struct Layout {
    int64_t rows = 0, n = 0, half = 0, rows_per_token = 1, seq = 1, table_stride = 0;
    const float* cos = nullptr;
    const float* sin = nullptr;
    const int64_t* positions = nullptr;
};

/// Forward: out (y's type, same layout as y) = rope(round(y * rstd * w)); rstd (fp32, rows) is
/// saved for backward. Returns an empty string or the CUDA error; `stream` is a cudaStream_t.
std::string launch_forward(ElementType y_type, ElementType w_type, const void* y, const void* w,
                           void* out, float* rstd, const Layout& layout, float eps, void* stream);

/// Backward from g (y's type): dy (y's type) and the weight's partial sums, fp32 (chunks, n) with
/// chunks = partial_chunks(rows), which the caller sums over the chunks.
std::string launch_backward(ElementType y_type, ElementType w_type, const void* g, const void* y,
                            const void* w, const float* rstd, void* dy, float* dw_partial,
                            const Layout& layout, void* stream);

/// The number of row chunks launch_backward writes weight partial sums for.
int64_t partial_chunks(int64_t rows);

}  // namespace lathe::model::kernels::qk_norm_rope
