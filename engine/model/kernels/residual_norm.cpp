#include "engine/model/kernels/residual_norm.h"

#include "engine/model/kernels/common.h"
#include "engine/util/error.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <type_traits>

#ifdef LATHE_WITH_CUDA_KERNELS
#include "engine/model/kernels/residual_norm_launch.h"
#endif

namespace lathe::model::kernels {
namespace {

void check(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& w) {
    if (!x.sizes().equals(y.sizes()) || y.dim() < 1 || w.dim() != 1 || w.size(0) != y.size(-1) ||
        x.device() != y.device() || w.device() != y.device())
        throw Error(
            "fused_residual_norm: x and y must have one shape and the weight its last "
            "dimension, on one device; not " +
            c10::str(x.sizes(), ", ", y.sizes(), " and ", w.sizes()));
}

// The CPU forward, row by row in the reference's arithmetic: the mean of squares (accumulated in
// double, so that its rounding is at most the reference's), rstd = 1 / sqrt(mean + eps) in fp32,
// the normalised row rounded to y's type, added to x in fp32 and stored in out's type.
template <class X, class Y, class W, class O>
void forward_cpu(const X* x, const Y* y, const W* w, O* out, float* rstd, int64_t rows, int64_t d,
                 float eps) {
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const Y* yr = y + row * d;
            double sq = 0;
            for (int64_t i = 0; i < d; ++i) {
                const float v = static_cast<float>(yr[i]);
                sq += static_cast<double>(v * v);
            }
            const float r = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(d)) + eps);
            rstd[row] = r;
            const X* xr = x + row * d;
            O* o = out + row * d;
            for (int64_t i = 0; i < d; ++i) {
                const float normed =
                    round_through<Y>(static_cast<float>(yr[i]) * r * static_cast<float>(w[i]));
                o[i] = static_cast<O>(static_cast<float>(xr[i]) + normed);
            }
        }
    });
}

// The CPU backward: dy = rstd (g w - n mean(g w n)) per row with n = y rstd, and the weight's
// gradient sum over rows of g n (in double, per column).
template <class G, class Y, class W>
void backward_cpu(const G* g, const Y* y, const W* w, const float* rstd, Y* dy, double* dw,
                  int64_t rows, int64_t d, bool round_g) {
    for (int64_t row = 0; row < rows; ++row) {
        const G* gr = g + row * d;
        const Y* yr = y + row * d;
        const float r = rstd[row];
        auto gn = [&](int64_t i) {
            const float v = static_cast<float>(gr[i]);
            return round_g ? round_through<Y>(v) : v;
        };
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) {
            const float n = static_cast<float>(yr[i]) * r;
            dot += static_cast<double>(gn(i) * static_cast<float>(w[i]) * n);
            dw[i] += static_cast<double>(gn(i) * n);
        }
        const float mean = static_cast<float>(dot / static_cast<double>(d));
        Y* out = dy + row * d;
        for (int64_t i = 0; i < d; ++i) {
            const float n = static_cast<float>(yr[i]) * r;
            out[i] = static_cast<Y>(r * (gn(i) * static_cast<float>(w[i]) - n * mean));
        }
    }
}

struct ResidualNormFunction : torch::autograd::Function<ResidualNormFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                                 const torch::Tensor& y_in, const torch::Tensor& w_in, double eps) {
        check(x_in, y_in, w_in);
        const auto x = x_in.contiguous(), y = y_in.contiguous(), w = w_in.contiguous();
        const auto out_type = at::promote_types(x.scalar_type(), y.scalar_type());
        const int64_t d = y.size(-1), rows = y.numel() / std::max<int64_t>(d, 1);
        auto out = torch::empty(x.sizes(), x.options().dtype(out_type));
        auto rstd = torch::empty({rows}, y.options().dtype(torch::kFloat32));
        if (y.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
            const char* what = "fused_residual_norm";
            const auto err = residual_norm::launch_forward(
                kernel_element_type(x.scalar_type(), what),
                kernel_element_type(y.scalar_type(), what),
                kernel_element_type(w.scalar_type(), what), kernel_element_type(out_type, what),
                x.data_ptr(), y.data_ptr(), w.data_ptr(), out.data_ptr(), rstd.data_ptr<float>(),
                rows, d, static_cast<float>(eps), kernel_stream(y.device()));
            if (!err.empty()) throw Error("fused_residual_norm: CUDA kernel failed: " + err);
#else
            throw Error("fused_residual_norm: this build has no CUDA kernels (nvcc was not found)");
#endif
        } else {
            const char* what = "fused_residual_norm";
            with_float_type(x.scalar_type(), what, [&](auto* xt) {
                with_float_type(y.scalar_type(), what, [&](auto* yt) {
                    with_float_type(w.scalar_type(), what, [&](auto* wt) {
                        with_float_type(out_type, what, [&](auto* ot) {
                            using X = std::remove_pointer_t<decltype(xt)>;
                            using Y = std::remove_pointer_t<decltype(yt)>;
                            using W = std::remove_pointer_t<decltype(wt)>;
                            using O = std::remove_pointer_t<decltype(ot)>;
                            forward_cpu<X, Y, W, O>(x.data_ptr<X>(), y.data_ptr<Y>(),
                                                    w.data_ptr<W>(), out.data_ptr<O>(),
                                                    rstd.data_ptr<float>(), rows, d,
                                                    static_cast<float>(eps));
                        });
                    });
                });
            });
        }
        ctx->save_for_backward({y, w, rstd});
        ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
        return out;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto &y = saved[0], &w = saved[1], &rstd = saved[2];
        const auto x_type = static_cast<torch::ScalarType>(ctx->saved_data["x_type"].toInt());
        const auto g = grads[0].contiguous();
        const int64_t d = y.size(-1), rows = y.numel() / std::max<int64_t>(d, 1);
        // The add's backward hands the branch the gradient in its own dtype.
        const bool round_g = g.scalar_type() != y.scalar_type();
        auto dy = torch::empty_like(y);
        torch::Tensor dw;
        if (y.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
            auto partial = torch::empty({residual_norm::partial_chunks(rows), d},
                                        y.options().dtype(torch::kFloat32));
            const char* what = "fused_residual_norm";
            const auto err = residual_norm::launch_backward(
                kernel_element_type(g.scalar_type(), what),
                kernel_element_type(y.scalar_type(), what),
                kernel_element_type(w.scalar_type(), what), g.data_ptr(), y.data_ptr(),
                w.data_ptr(), rstd.data_ptr<float>(), dy.data_ptr(), partial.data_ptr<float>(),
                rows, d, round_g, kernel_stream(y.device()));
            if (!err.empty()) throw Error("fused_residual_norm: CUDA kernel failed: " + err);
            dw = partial.sum(0).to(w.scalar_type());
#else
            throw Error("fused_residual_norm: this build has no CUDA kernels (nvcc was not found)");
#endif
        } else {
            std::vector<double> acc(static_cast<std::size_t>(d), 0.0);
            const char* what = "fused_residual_norm";
            with_float_type(g.scalar_type(), what, [&](auto* gt) {
                with_float_type(y.scalar_type(), what, [&](auto* yt) {
                    with_float_type(w.scalar_type(), what, [&](auto* wt) {
                        using G = std::remove_pointer_t<decltype(gt)>;
                        using Y = std::remove_pointer_t<decltype(yt)>;
                        using W = std::remove_pointer_t<decltype(wt)>;
                        backward_cpu<G, Y, W>(g.data_ptr<G>(), y.data_ptr<Y>(), w.data_ptr<W>(),
                                              rstd.data_ptr<float>(), dy.data_ptr<Y>(), acc.data(),
                                              rows, d, round_g);
                    });
                });
            });
            dw = torch::tensor(acc, torch::kFloat64).to(w.scalar_type());
        }
        return {g.to(x_type), dy, dw, torch::Tensor()};
    }
};

}  // namespace

torch::Tensor fused_residual_norm(const torch::Tensor& x, const torch::Tensor& y,
                                  const torch::Tensor& weight, double eps) {
    return ResidualNormFunction::apply(x, y, weight, eps);
}

}  // namespace lathe::model::kernels
