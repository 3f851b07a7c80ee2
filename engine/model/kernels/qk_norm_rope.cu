// The fused QK-norm + RoPE's CUDA kernels. Forward: one block per norm row reduces its squares
// (warp shuffles, then shared memory), then each thread takes pairs of features i and i + D/2 of
// a head: normalised, rounded to the input's type as the norm's output is, rotated by
// rope_math.h's arithmetic and stored. Backward: one block per chunk of rows; for each row it takes
// the rotation's transpose of the gradient (rounded as the rotation's backward hands it on),
// reduces the norm's dot product, writes dy, and adds the row's g * n to per-thread column
// accumulators, which it writes once per chunk as the weight's partial sums.
#include "engine/model/kernels/qk_norm_rope_launch.h"
#include "engine/model/kernels/elements.cuh"
#include "engine/model/kernels/rope_math.h"

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

namespace lathe::model::kernels::qk_norm_rope {
namespace {

using kernels::last_error;
using kernels::load;
using kernels::round_to;
using kernels::store;
using kernels::with_type;

constexpr int kMaxThreads = 256;
constexpr int kMaxPairsPerThread = 16;
static_assert(int64_t{kMaxThreads} * kMaxPairsPerThread * 2 == kMaxRow,
              "kMaxRow is the kernels' reach");
constexpr int64_t kRowsPerChunk = 16;

// The table rows of norm row `row`'s position.
__device__ void tables(const Layout& l, int64_t row, const float*& c, const float*& s) {
    const int64_t token = row / l.rows_per_token;
    const int64_t t = l.positions != nullptr ? l.positions[token] : token % l.seq;
    c = l.cos + t * l.table_stride;
    s = l.sin + t * l.table_stride;
}

template <class Y, class W>
__global__ void forward_kernel(const Y* __restrict__ y, const W* __restrict__ w,
                               Y* __restrict__ out, float* __restrict__ rstd, Layout l, float eps) {
    const int64_t row = blockIdx.x, n = l.n, half = l.half, pairs = n / 2;
    const Y* yr = y + row * n;
    Y* o = out + row * n;
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = load(yr + i);
        sq += v * v;
    }
    const float r = rsqrtf(kernels::block_sum<kMaxThreads>(sq) / static_cast<float>(n) + eps);
    if (threadIdx.x == 0) rstd[row] = r;
    const float *c, *s;
    tables(l, row, c, s);
    for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
        const int64_t head = p / half, i = p - head * half;
        const int64_t e1 = head * 2 * half + i, e2 = e1 + half;
        const float n1 = round_to<Y>(load(yr + e1) * r * load(w + e1));
        const float n2 = round_to<Y>(load(yr + e2) * r * load(w + e2));
        float o1, o2;
        rope::rotate(n1, n2, c[i], s[i], c[i + half], s[i + half], o1, o2);
        store(o + e1, o1);
        store(o + e2, o2);
    }
}

template <class Y, class W>
__global__ void backward_kernel(const Y* __restrict__ g, const Y* __restrict__ y,
                                const W* __restrict__ w, const float* __restrict__ rstd,
                                Y* __restrict__ dy, float* __restrict__ dw_partial, Layout l) {
    const int64_t n = l.n, half = l.half, pairs = n / 2;
    float acc1[kMaxPairsPerThread], acc2[kMaxPairsPerThread];
    for (int k = 0; k < kMaxPairsPerThread; ++k) acc1[k] = acc2[k] = 0.0f;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerChunk;
    const int64_t last = first + kRowsPerChunk < l.rows ? first + kRowsPerChunk : l.rows;
    for (int64_t row = first; row < last; ++row) {
        const Y* gr = g + row * n;
        const Y* yr = y + row * n;
        const float r = rstd[row];
        const float *c, *s;
        tables(l, row, c, s);
        // The gradient reaching the norm's output: the rotation's transpose, in y's type.
        auto unrotated = [&](int64_t e1, int64_t i, float& gn1, float& gn2) {
            rope::rotate_backward(load(gr + e1), load(gr + e1 + half), c[i], s[i], c[i + half],
                                  s[i + half], gn1, gn2);
            gn1 = round_to<Y>(gn1);
            gn2 = round_to<Y>(gn2);
        };
        float dot = 0.0f;
        int k = 0;
        for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x, ++k) {
            const int64_t head = p / half, i = p - head * half;
            const int64_t e1 = head * 2 * half + i, e2 = e1 + half;
            float gn1, gn2;
            unrotated(e1, i, gn1, gn2);
            const float n1 = load(yr + e1) * r, n2 = load(yr + e2) * r;
            dot += gn1 * load(w + e1) * n1;
            dot += gn2 * load(w + e2) * n2;
            acc1[k] += gn1 * n1;
            acc2[k] += gn2 * n2;
        }
        const float mean = kernels::block_sum<kMaxThreads>(dot) / static_cast<float>(n);
        Y* out = dy + row * n;
        for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int64_t head = p / half, i = p - head * half;
            const int64_t e1 = head * 2 * half + i, e2 = e1 + half;
            float gn1, gn2;
            unrotated(e1, i, gn1, gn2);
            store(out + e1, r * (gn1 * load(w + e1) - load(yr + e1) * r * mean));
            store(out + e2, r * (gn2 * load(w + e2) - load(yr + e2) * r * mean));
        }
    }
    float* part = dw_partial + static_cast<int64_t>(blockIdx.x) * n;
    int k = 0;
    for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x, ++k) {
        const int64_t head = p / half, i = p - head * half;
        const int64_t e1 = head * 2 * half + i;
        part[e1] = acc1[k];
        part[e1 + half] = acc2[k];
    }
}

// Threads per block: a warp per 32 pairs of a row, at most kMaxThreads (Qwen3's per-head norm of
// 128 features takes two warps, not eight idle ones).
unsigned threads_for(int64_t pairs) {
    const int64_t warps = (pairs + 31) / 32;
    return static_cast<unsigned>(warps * 32 < kMaxThreads ? warps * 32 : kMaxThreads);
}

std::string check(const Layout& l) {
    if (l.n % (2 * l.half) != 0 || l.half == 0) return "the row is not whole heads";
    if (l.n / 2 > static_cast<int64_t>(kMaxThreads) * kMaxPairsPerThread)
        return "norm size " + std::to_string(l.n) + " is above the kernel's " +
               std::to_string(kMaxRow);
    return {};
}

}  // namespace

int64_t partial_chunks(int64_t rows) {
    return (rows + kRowsPerChunk - 1) / kRowsPerChunk;
}

std::string launch_forward(ElementType y_type, ElementType w_type, const void* y, const void* w,
                           void* out, float* rstd, const Layout& layout, float eps, void* stream) {
    if (layout.rows == 0) return {};
    if (auto bad = check(layout); !bad.empty()) return bad;
    auto s = static_cast<cudaStream_t>(stream);
    const unsigned threads = threads_for(layout.n / 2);
    with_type(y_type, [&](auto* yt) {
        with_type(w_type, [&](auto* wt) {
            using Y = std::remove_pointer_t<decltype(yt)>;
            using W = std::remove_pointer_t<decltype(wt)>;
            forward_kernel<Y, W><<<static_cast<unsigned>(layout.rows), threads, 0, s>>>(
                static_cast<const Y*>(y), static_cast<const W*>(w), static_cast<Y*>(out), rstd,
                layout, eps);
        });
    });
    return last_error();
}

std::string launch_backward(ElementType y_type, ElementType w_type, const void* g, const void* y,
                            const void* w, const float* rstd, void* dy, float* dw_partial,
                            const Layout& layout, void* stream) {
    if (layout.rows == 0) return {};
    if (auto bad = check(layout); !bad.empty()) return bad;
    auto s = static_cast<cudaStream_t>(stream);
    const unsigned threads = threads_for(layout.n / 2);
    const auto chunks = static_cast<unsigned>(partial_chunks(layout.rows));
    with_type(y_type, [&](auto* yt) {
        with_type(w_type, [&](auto* wt) {
            using Y = std::remove_pointer_t<decltype(yt)>;
            using W = std::remove_pointer_t<decltype(wt)>;
            backward_kernel<Y, W><<<chunks, threads, 0, s>>>(
                static_cast<const Y*>(g), static_cast<const Y*>(y), static_cast<const W*>(w), rstd,
                static_cast<Y*>(dy), dw_partial, layout);
        });
    });
    return last_error();
}

}  // namespace lathe::model::kernels::qk_norm_rope
