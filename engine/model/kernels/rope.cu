// The fused rotary embedding's CUDA kernel: one thread per (row, i) pair of features i and
// i + D/2, loading x in its own type, doing rope_math.h's fp32 arithmetic, storing in x's type.
// Replaces the reference's upcast, two chunks, a negation, a concatenation, four products, two
// sums and a downcast (and as many again in backward) with one read and one write of x.
#include "engine/model/kernels/rope_launch.h"
#include "engine/model/kernels/elements.cuh"
#include "engine/model/kernels/rope_math.h"

#include <cuda_runtime.h>

namespace lathe::model::kernels::rope {
namespace {

using kernels::load;
using kernels::store;

template <class T, bool kBackward>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ out,
                            const float* __restrict__ cos, const float* __restrict__ sin,
                            int64_t pairs, int64_t half, int64_t heads, int64_t seq,
                            int64_t table_stride) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < pairs;
         idx += step) {
        const int64_t row = idx / half, i = idx - row * half;
        const int64_t t = (row / heads) % seq;
        const T* xr = x + row * 2 * half;
        T* o = out + row * 2 * half;
        const float* c = cos + t * table_stride;
        const float* s = sin + t * table_stride;
        float o1, o2;
        if (kBackward)
            rotate_backward(load(xr + i), load(xr + i + half), c[i], s[i], c[i + half], s[i + half],
                            o1, o2);
        else
            rotate(load(xr + i), load(xr + i + half), c[i], s[i], c[i + half], s[i + half], o1, o2);
        store(o + i, o1);
        store(o + i + half, o2);
    }
}

template <class T>
void launch_typed(bool backward, const void* x, void* out, const float* cos, const float* sin,
                  int64_t pairs, int64_t half, int64_t heads, int64_t seq, int64_t table_stride,
                  cudaStream_t stream) {
    constexpr int kThreads = 256;
    const int64_t want = (pairs + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
    if (backward)
        rope_kernel<T, true><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                              static_cast<T*>(out), cos, sin, pairs,
                                                              half, heads, seq, table_stride);
    else
        rope_kernel<T, false>
            <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(out), cos,
                                              sin, pairs, half, heads, seq, table_stride);
}

}  // namespace

std::string launch_rope(ElementType type, bool backward, const void* x, void* out, const float* cos,
                        const float* sin, int64_t rows, int64_t half, int64_t heads, int64_t seq,
                        int64_t table_stride, void* stream) {
    const int64_t pairs = rows * half;
    if (pairs == 0) return {};
    auto s = static_cast<cudaStream_t>(stream);
    switch (type) {
        case ElementType::float32:
            launch_typed<float>(backward, x, out, cos, sin, pairs, half, heads, seq, table_stride,
                                s);
            break;
        case ElementType::bfloat16:
            launch_typed<__nv_bfloat16>(backward, x, out, cos, sin, pairs, half, heads, seq,
                                        table_stride, s);
            break;
        case ElementType::float16:
            launch_typed<__half>(backward, x, out, cos, sin, pairs, half, heads, seq, table_stride,
                                 s);
            break;
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

}  // namespace lathe::model::kernels::rope
