// Device-side element access shared by Lathe's CUDA kernels: load a float, bf16 or fp16 element
// as fp32, store fp32 into one (rounding to nearest even), and round an fp32 value through a
// storage type as storing and reloading it would. Included by the .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

}  // namespace lathe::model::kernels
