#include "engine/model/kernels/common.h"

#include "engine/util/error.h"

#ifdef LATHE_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif

namespace lathe::model::kernels {

bool fused_kernels_available(const torch::Device& device) {
#ifdef LATHE_WITH_CUDA_KERNELS
    return device.is_cpu() || device.is_cuda();
#else
    return device.is_cpu();
#endif
}

bool runs_fused(bool enabled, const torch::Tensor& x, int64_t row, int64_t max_row) {
    return enabled && x.is_cuda() && fused_kernels_available(x.device()) &&
           (max_row == 0 || row <= max_row);
}

kernels::ElementType kernel_element_type(torch::ScalarType type, const char* what) {
    switch (type) {
        case torch::kFloat32:
            return kernels::ElementType::float32;
        case torch::kBFloat16:
            return kernels::ElementType::bfloat16;
        case torch::kHalf:
            return kernels::ElementType::float16;
        default:
            throw Error(std::string(what) + ": unsupported dtype " + c10::toString(type));
    }
}

void* kernel_stream(const torch::Device& device) {
#ifdef LATHE_WITH_CUDA_KERNELS
    return at::cuda::getCurrentCUDAStream(device.index()).stream();
#else
    (void)device;
    return nullptr;
#endif
}

}  // namespace lathe::model::kernels
