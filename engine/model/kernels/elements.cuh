// What Lathe's CUDA kernels share, included by the .cu files only: device-side element access
// (load a float, bf16 or fp16 element as fp32, store fp32 into one rounding to nearest even, round
// an fp32 value through a storage type as storing and reloading it would), a block-wide sum for
// the row reductions, and on the host the dispatch on an element type and the launch's error.
#pragma once

#include "engine/model/kernels/element_types.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

namespace lathe::model::kernels {

__device__ __forceinline__ float load(const float* p) {
    return *p;
}
__device__ __forceinline__ float load(const __nv_bfloat16* p) {
    return __bfloat162float(*p);
}
__device__ __forceinline__ float load(const __half* p) {
    return __half2float(*p);
}
__device__ __forceinline__ void store(float* p, float v) {
    *p = v;
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
    *p = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store(__half* p, float v) {
    *p = __float2half_rn(v);
}

template <class T>
__device__ __forceinline__ float round_to(float v) {
    T t;
    store(&t, v);
    return load(&t);
}

/// The sum of v over the block (blockDim.x a multiple of 32, at most kMaxThreads), returned to
/// every thread: warp shuffles, then the warps' sums in shared memory.
template <int kMaxThreads>
__device__ float block_sum(float v) {
    __shared__ float warp_sums[kMaxThreads / 32];
    __shared__ float total;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        if (lane == 0) total = s;
    }
    __syncthreads();
    const float out = total;
    __syncthreads();  // total and warp_sums are reused by the next call
    return out;
}

/// Calls f with a null pointer of the device type for `type` (float, __nv_bfloat16, __half), for
/// dispatching a launch on it.
template <class F>
void with_type(ElementType type, F&& f) {
    switch (type) {
        case ElementType::float32:
            f(static_cast<float*>(nullptr));
            break;
        case ElementType::bfloat16:
            f(static_cast<__nv_bfloat16*>(nullptr));
            break;
        case ElementType::float16:
            f(static_cast<__half*>(nullptr));
            break;
    }
}

/// The last launch's error as the launchers return it: empty, or CUDA's message.
inline std::string last_error() {
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

}  // namespace lathe::model::kernels
