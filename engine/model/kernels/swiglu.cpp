#include "engine/model/kernels/swiglu.h"

#include "engine/model/kernels/common.h"
#include "engine/model/kernels/swiglu_math.h"
#include "engine/util/error.h"

#include <torch/csrc/autograd/custom_function.h>

#ifdef LATHE_WITH_CUDA_KERNELS
#include "engine/model/kernels/swiglu_launch.h"
#endif

namespace lathe::model::kernels {
namespace {

// Rounding to the storage type T through float, as storing a T and reading it back does.
template <class T>
struct RoundTo {
    float operator()(float v) const { return static_cast<float>(static_cast<T>(v)); }
};

void check(const torch::Tensor& a, const torch::Tensor& b) {
    if (!a.sizes().equals(b.sizes()) || a.scalar_type() != b.scalar_type() ||
        a.device() != b.device())
        throw Error(
            "fused_swiglu: a and b must have the same shape, dtype and device, not " +
            c10::str(a.sizes(), " ", a.scalar_type(), " and ", b.sizes(), " ", b.scalar_type()));
    if (a.scalar_type() != torch::kFloat32 && a.scalar_type() != torch::kBFloat16 &&
        a.scalar_type() != torch::kHalf)
        throw Error("fused_swiglu: unsupported dtype " +
                    std::string(c10::toString(a.scalar_type())));
}

torch::Tensor forward_impl(const torch::Tensor& a_in, const torch::Tensor& b_in) {
    check(a_in, b_in);
    const auto a = a_in.contiguous(), b = b_in.contiguous();
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    if (a.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
        const std::string err = swiglu::launch_forward(
            kernel_element_type(a.scalar_type(), "fused_swiglu"), a.data_ptr(), b.data_ptr(),
            out.data_ptr(), n, kernel_stream(a.device()));
        if (!err.empty()) throw Error("fused_swiglu: CUDA kernel failed: " + err);
        return out;
#else
        throw Error("fused_swiglu: this build has no CUDA kernels (nvcc was not found)");
#endif
    }
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, a.scalar_type(), "fused_swiglu", [&] {
        const auto* pa = a.data_ptr<scalar_t>();
        const auto* pb = b.data_ptr<scalar_t>();
        auto* po = out.data_ptr<scalar_t>();
        at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
                po[i] = static_cast<scalar_t>(swiglu::forward(
                    static_cast<float>(pa[i]), static_cast<float>(pb[i]), RoundTo<scalar_t>{}));
        });
    });
    return out;
}

std::pair<torch::Tensor, torch::Tensor> backward_impl(const torch::Tensor& g_in,
                                                      const torch::Tensor& a,
                                                      const torch::Tensor& b) {
    const auto g = g_in.to(a.scalar_type()).contiguous();
    auto da = torch::empty_like(a), db = torch::empty_like(b);
    const int64_t n = a.numel();
    if (a.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
        const std::string err = swiglu::launch_backward(
            kernel_element_type(a.scalar_type(), "fused_swiglu"), g.data_ptr(), a.data_ptr(),
            b.data_ptr(), da.data_ptr(), db.data_ptr(), n, kernel_stream(a.device()));
        if (!err.empty()) throw Error("fused_swiglu: CUDA kernel failed: " + err);
        return {da, db};
#else
        throw Error("fused_swiglu: this build has no CUDA kernels (nvcc was not found)");
#endif
    }
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kBFloat16, at::kHalf, a.scalar_type(), "fused_swiglu_backward", [&] {
            const auto* pg = g.data_ptr<scalar_t>();
            const auto* pa = a.data_ptr<scalar_t>();
            const auto* pb = b.data_ptr<scalar_t>();
            auto* pda = da.data_ptr<scalar_t>();
            auto* pdb = db.data_ptr<scalar_t>();
            at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                    float x = 0, y = 0;
                    swiglu::backward(static_cast<float>(pg[i]), static_cast<float>(pa[i]),
                                     static_cast<float>(pb[i]), RoundTo<scalar_t>{}, x, y);
                    pda[i] = static_cast<scalar_t>(x);
                    pdb[i] = static_cast<scalar_t>(y);
                }
            });
        });
    return {da, db};
}

struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                                 const torch::Tensor& b) {
        auto out = forward_impl(a, b);
        ctx->save_for_backward({a.contiguous(), b.contiguous()});
        return out;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        auto [da, db] = backward_impl(grads[0], saved[0], saved[1]);
        return {da, db};
    }
};

}  // namespace

torch::Tensor fused_swiglu(const torch::Tensor& a, const torch::Tensor& b) {
    return SwigluFunction::apply(a, b);
}

}  // namespace lathe::model::kernels
