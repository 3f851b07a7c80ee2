// The fused residual + RMSNorm's CUDA kernels. Forward: one block per row reduces y's squares
// (warp shuffles, then shared memory), then writes out = x + round(y * rstd * w) in one pass.
// Backward: one block per chunk of rows; for each row it reduces the norm's dot product, writes
// dy, and adds the row's g * n to per-thread column accumulators, which it writes once per chunk
// as the weight's partial sums (summed over the chunks by the caller).
#include "engine/model/kernels/residual_norm_launch.h"
#include "engine/model/kernels/elements.cuh"

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

namespace lathe::model::kernels::residual_norm {
namespace {

using kernels::last_error;
using kernels::load;
using kernels::round_to;
using kernels::store;
using kernels::with_type;

constexpr int kThreads = 256;
constexpr int kMaxColumnsPerThread = 32;
static_assert(int64_t{kThreads} * kMaxColumnsPerThread == kMaxRow, "kMaxRow is the kernels' reach");
constexpr int64_t kRowsPerChunk = 16;

template <class X, class Y, class W, class O>
__global__ void forward_kernel(const X* __restrict__ x, const Y* __restrict__ y,
                               const W* __restrict__ w, O* __restrict__ out,
                               float* __restrict__ rstd, int64_t d, float eps) {
    const int64_t row = blockIdx.x;
    const X* xr = x + row * d;
    const Y* yr = y + row * d;
    O* o = out + row * d;
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = load(yr + i);
        sq += v * v;
    }
    const float r = rsqrtf(kernels::block_sum<kThreads>(sq) / static_cast<float>(d) + eps);
    if (threadIdx.x == 0) rstd[row] = r;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float normed = round_to<Y>(load(yr + i) * r * load(w + i));
        store(o + i, load(xr + i) + normed);
    }
}

template <class G, class Y, class W>
__global__ void backward_kernel(const G* __restrict__ g, const Y* __restrict__ y,
                                const W* __restrict__ w, const float* __restrict__ rstd,
                                Y* __restrict__ dy, float* __restrict__ dw_partial, int64_t rows,
                                int64_t d, bool round_g) {
    float acc[kMaxColumnsPerThread];
    for (int k = 0; k < kMaxColumnsPerThread; ++k) acc[k] = 0.0f;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerChunk;
    const int64_t last = first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
    for (int64_t row = first; row < last; ++row) {
        const G* gr = g + row * d;
        const Y* yr = y + row * d;
        const float r = rstd[row];
        float dot = 0.0f;
        for (int64_t i = threadIdx.x, k = 0; i < d; i += blockDim.x, ++k) {
            float gn = load(gr + i);
            if (round_g) gn = round_to<Y>(gn);
            const float n = load(yr + i) * r;
            dot += gn * load(w + i) * n;
            acc[k] += gn * n;
        }
        const float mean = kernels::block_sum<kThreads>(dot) / static_cast<float>(d);
        Y* out = dy + row * d;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            float gn = load(gr + i);
            if (round_g) gn = round_to<Y>(gn);
            const float n = load(yr + i) * r;
            store(out + i, r * (gn * load(w + i) - n * mean));
        }
    }
    float* part = dw_partial + static_cast<int64_t>(blockIdx.x) * d;
    for (int64_t i = threadIdx.x, k = 0; i < d; i += blockDim.x, ++k) part[i] = acc[k];
}

}  // namespace

int64_t partial_chunks(int64_t rows) {
    return (rows + kRowsPerChunk - 1) / kRowsPerChunk;
}

std::string launch_forward(ElementType x_type, ElementType y_type, ElementType w_type,
                           ElementType out_type, const void* x, const void* y, const void* w,
                           void* out, float* rstd, int64_t rows, int64_t d, float eps,
                           void* stream) {
    if (rows == 0) return {};
    if (d > static_cast<int64_t>(kThreads) * kMaxColumnsPerThread)
        return "feature size " + std::to_string(d) + " is above the kernel's " + std::to_string(kMaxRow);
    auto s = static_cast<cudaStream_t>(stream);
    with_type(x_type, [&](auto* xt) {
        with_type(y_type, [&](auto* yt) {
            with_type(w_type, [&](auto* wt) {
                with_type(out_type, [&](auto* ot) {
                    using X = std::remove_pointer_t<decltype(xt)>;
                    using Y = std::remove_pointer_t<decltype(yt)>;
                    using W = std::remove_pointer_t<decltype(wt)>;
                    using O = std::remove_pointer_t<decltype(ot)>;
                    forward_kernel<X, Y, W, O><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
                        static_cast<const X*>(x), static_cast<const Y*>(y),
                        static_cast<const W*>(w), static_cast<O*>(out), rstd, d, eps);
                });
            });
        });
    });
    return last_error();
}

std::string launch_backward(ElementType g_type, ElementType y_type, ElementType w_type,
                            const void* g, const void* y, const void* w, const float* rstd,
                            void* dy, float* dw_partial, int64_t rows, int64_t d, bool round_g,
                            void* stream) {
    if (rows == 0) return {};
    if (d > static_cast<int64_t>(kThreads) * kMaxColumnsPerThread)
        return "feature size " + std::to_string(d) + " is above the kernel's " + std::to_string(kMaxRow);
    auto s = static_cast<cudaStream_t>(stream);
    const auto chunks = static_cast<unsigned>(partial_chunks(rows));
    with_type(g_type, [&](auto* gt) {
        with_type(y_type, [&](auto* yt) {
            with_type(w_type, [&](auto* wt) {
                using G = std::remove_pointer_t<decltype(gt)>;
                using Y = std::remove_pointer_t<decltype(yt)>;
                using W = std::remove_pointer_t<decltype(wt)>;
                backward_kernel<G, Y, W><<<chunks, kThreads, 0, s>>>(
                    static_cast<const G*>(g), static_cast<const Y*>(y), static_cast<const W*>(w),
                    rstd, static_cast<Y*>(dy), dw_partial, rows, d, round_g);
            });
        });
    });
    return last_error();
}

}  // namespace lathe::model::kernels::residual_norm
