#include "engine/model/kernels/rope.h"

#include "engine/model/kernels/common.h"
#include "engine/model/kernels/rope_math.h"
#include "engine/util/error.h"

#include <torch/csrc/autograd/custom_function.h>

#ifdef LATHE_WITH_CUDA_KERNELS
#include "engine/model/kernels/rope_launch.h"
#endif

namespace lathe::model::kernels {
namespace {

// The CPU path: rope_math.h element by element (no vectorisation tricks that would reorder it).
template <class T>
void rope_cpu(const T* x, T* out, const float* cos, const float* sin, int64_t rows, int64_t half,
              int64_t heads, int64_t seq, int64_t stride, bool backward) {
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const int64_t t = (row / heads) % seq;
            const T* xr = x + row * 2 * half;
            T* o = out + row * 2 * half;
            const float* c = cos + t * stride;
            const float* s = sin + t * stride;
            for (int64_t i = 0; i < half; ++i) {
                float o1 = 0, o2 = 0;
                const float x1 = static_cast<float>(xr[i]), x2 = static_cast<float>(xr[i + half]);
                if (backward)
                    rope::rotate_backward(x1, x2, c[i], s[i], c[i + half], s[i + half], o1, o2);
                else
                    rope::rotate(x1, x2, c[i], s[i], c[i + half], s[i + half], o1, o2);
                o[i] = static_cast<T>(o1);
                o[i + half] = static_cast<T>(o2);
            }
        }
    });
}

torch::Tensor run(const torch::Tensor& input, const torch::Tensor& cos, const torch::Tensor& sin,
                  bool backward) {
    if (input.dim() != 4 || input.size(3) % 2 != 0)
        throw Error("fused_rope: x must be (B, T, H, D) with D even, not " +
                    c10::str(input.sizes()));
    const int64_t T = input.size(1), H = input.size(2), D = input.size(3);
    if (cos.scalar_type() != torch::kFloat32 || cos.dim() != 2 || cos.size(0) < T ||
        cos.size(1) != D || cos.stride(1) != 1 || !sin.is_same_size(cos) ||
        sin.strides() != cos.strides())
        throw Error("fused_rope: cos and sin must be fp32 (>= T, D) tables with contiguous rows");
    const auto x = input.contiguous();
    auto out = torch::empty_like(x);
    const int64_t rows = x.numel() / D, half = D / 2, stride = cos.stride(0);
    if (x.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
        const std::string err = rope::launch_rope(
            kernel_element_type(x.scalar_type(), "fused_rope"), backward, x.data_ptr(),
            out.data_ptr(), cos.data_ptr<float>(), sin.data_ptr<float>(), rows, half, H, T, stride,
            kernel_stream(x.device()));
        if (!err.empty()) throw Error("fused_rope: CUDA kernel failed: " + err);
        return out;
#else
        throw Error("fused_rope: this build has no CUDA kernels (nvcc was not found)");
#endif
    }
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fused_rope", [&] {
        rope_cpu<scalar_t>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), cos.data_ptr<float>(),
                           sin.data_ptr<float>(), rows, half, H, T, stride, backward);
    });
    return out;
}

struct RopeFunction : torch::autograd::Function<RopeFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 const torch::Tensor& cos, const torch::Tensor& sin) {
        ctx->save_for_backward({cos, sin});
        return run(x, cos, sin, false);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        return {run(grads[0], saved[0], saved[1], true), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor fused_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin) {
    return RopeFunction::apply(x, cos, sin);
}

}  // namespace lathe::model::kernels
