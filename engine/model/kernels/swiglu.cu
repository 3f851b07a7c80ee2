// The fused SwiGLU's CUDA kernels: one thread per element, loading a and b (and g) in their own
// type, doing swiglu_math.h's fp32 arithmetic, storing in that type. Forward replaces silu and
// mul (two reads and a write of a hidden-size tensor each); backward replaces mul's two products
// and silu_backward, reading g, a and b once and writing da and db.
#include "engine/model/kernels/swiglu_launch.h"
#include "engine/model/kernels/elements.cuh"
#include "engine/model/kernels/swiglu_math.h"

#include <cuda_runtime.h>

namespace lathe::model::kernels::swiglu {
namespace {

using kernels::last_error;
using kernels::load;
using kernels::store;

template <class T>
struct RoundTo {
    __device__ __forceinline__ float operator()(float v) const { return kernels::round_to<T>(v); }
};

template <class T>
__global__ void forward_kernel(const T* __restrict__ a, const T* __restrict__ b,
                               T* __restrict__ out, int64_t n) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
        store(out + i, forward(load(a + i), load(b + i), RoundTo<T>{}));
}

template <class T>
__global__ void backward_kernel(const T* __restrict__ g, const T* __restrict__ a,
                                const T* __restrict__ b, T* __restrict__ da, T* __restrict__ db,
                                int64_t n) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += step) {
        float x, y;
        backward(load(g + i), load(a + i), load(b + i), RoundTo<T>{}, x, y);
        store(da + i, x);
        store(db + i, y);
    }
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
    const int64_t want = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
}

template <class T>
void forward_typed(const void* a, const void* b, void* out, int64_t n, cudaStream_t s) {
    forward_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n);
}

template <class T>
void backward_typed(const void* g, const void* a, const void* b, void* da, void* db, int64_t n,
                    cudaStream_t s) {
    backward_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
        static_cast<const T*>(g), static_cast<const T*>(a), static_cast<const T*>(b),
        static_cast<T*>(da), static_cast<T*>(db), n);
}

}  // namespace

std::string launch_forward(ElementType type, const void* a, const void* b, void* out, int64_t n,
                           void* stream) {
    if (n == 0) return {};
    auto s = static_cast<cudaStream_t>(stream);
    switch (type) {
        case ElementType::float32:
            forward_typed<float>(a, b, out, n, s);
            break;
        case ElementType::bfloat16:
            forward_typed<__nv_bfloat16>(a, b, out, n, s);
            break;
        case ElementType::float16:
            forward_typed<__half>(a, b, out, n, s);
            break;
    }
    return last_error();
}

std::string launch_backward(ElementType type, const void* g, const void* a, const void* b, void* da,
                            void* db, int64_t n, void* stream) {
    if (n == 0) return {};
    auto s = static_cast<cudaStream_t>(stream);
    switch (type) {
        case ElementType::float32:
            backward_typed<float>(g, a, b, da, db, n, s);
            break;
        case ElementType::bfloat16:
            backward_typed<__nv_bfloat16>(g, a, b, da, db, n, s);
            break;
        case ElementType::float16:
            backward_typed<__half>(g, a, b, da, db, n, s);
            break;
    }
    return last_error();
}

}  // namespace lathe::model::kernels::swiglu
