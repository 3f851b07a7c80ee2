#include "engine/model/kernels/qk_norm_rope.h"

#include "engine/model/kernels/common.h"
#include "engine/model/kernels/qk_norm_rope_launch.h"
#include "engine/model/kernels/rope_math.h"
#include "engine/util/error.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <type_traits>

namespace lathe::model::kernels {
namespace {

using qk_norm_rope::Layout;

// The position of norm row `row`'s token.
int64_t position(const Layout& l, int64_t row) {
    const int64_t token = row / l.rows_per_token;
    return l.positions != nullptr ? l.positions[token] : token % l.seq;
}

// The CPU forward, row by row in the reference's arithmetic: the mean of squares (accumulated in
// double, so that its rounding is at most the reference's), rstd = 1 / sqrt(mean + eps) in fp32,
// the normalised row rounded to y's type, then rope_math.h's rotation stored in y's type.
template <class Y, class W>
void forward_cpu(const Y* y, const W* w, Y* out, float* rstd, const Layout& l, float eps) {
    at::parallel_for(0, l.rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const Y* yr = y + row * l.n;
            double sq = 0;
            for (int64_t i = 0; i < l.n; ++i) {
                const float v = static_cast<float>(yr[i]);
                sq += static_cast<double>(v * v);
            }
            const float r =
                1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(l.n)) + eps);
            rstd[row] = r;
            const int64_t t = position(l, row);
            const float* c = l.cos + t * l.table_stride;
            const float* s = l.sin + t * l.table_stride;
            Y* o = out + row * l.n;
            for (int64_t head = 0; head < l.n / (2 * l.half); ++head) {
                for (int64_t i = 0; i < l.half; ++i) {
                    const int64_t e1 = head * 2 * l.half + i, e2 = e1 + l.half;
                    const float n1 = round_through<Y>(static_cast<float>(yr[e1]) * r *
                                                      static_cast<float>(w[e1]));
                    const float n2 = round_through<Y>(static_cast<float>(yr[e2]) * r *
                                                      static_cast<float>(w[e2]));
                    float o1 = 0, o2 = 0;
                    rope::rotate(n1, n2, c[i], s[i], c[i + l.half], s[i + l.half], o1, o2);
                    o[e1] = static_cast<Y>(o1);
                    o[e2] = static_cast<Y>(o2);
                }
            }
        }
    });
}

// The CPU backward: gn = the rotation's transpose of g, rounded to y's type; then the norm's
// dy = rstd (gn w - n mean(gn w n)) per row with n = y rstd, and the weight's gradient, the sum
// over rows of gn n (in double, per column).
template <class Y, class W>
void backward_cpu(const Y* g, const Y* y, const W* w, const float* rstd, Y* dy, double* dw,
                  const Layout& l) {
    std::vector<float> gn(static_cast<std::size_t>(l.n));
    for (int64_t row = 0; row < l.rows; ++row) {
        const Y* gr = g + row * l.n;
        const Y* yr = y + row * l.n;
        const float r = rstd[row];
        const int64_t t = position(l, row);
        const float* c = l.cos + t * l.table_stride;
        const float* s = l.sin + t * l.table_stride;
        for (int64_t head = 0; head < l.n / (2 * l.half); ++head) {
            for (int64_t i = 0; i < l.half; ++i) {
                const int64_t e1 = head * 2 * l.half + i, e2 = e1 + l.half;
                float d1 = 0, d2 = 0;
                rope::rotate_backward(static_cast<float>(gr[e1]), static_cast<float>(gr[e2]), c[i],
                                      s[i], c[i + l.half], s[i + l.half], d1, d2);
                gn[static_cast<std::size_t>(e1)] = round_through<Y>(d1);
                gn[static_cast<std::size_t>(e2)] = round_through<Y>(d2);
            }
        }
        double dot = 0;
        for (int64_t i = 0; i < l.n; ++i) {
            const float n = static_cast<float>(yr[i]) * r;
            const float gi = gn[static_cast<std::size_t>(i)];
            dot += static_cast<double>(gi * static_cast<float>(w[i]) * n);
            dw[i] += static_cast<double>(gi * n);
        }
        const float mean = static_cast<float>(dot / static_cast<double>(l.n));
        Y* out = dy + row * l.n;
        for (int64_t i = 0; i < l.n; ++i) {
            const float n = static_cast<float>(yr[i]) * r;
            out[i] = static_cast<Y>(
                r * (gn[static_cast<std::size_t>(i)] * static_cast<float>(w[i]) - n * mean));
        }
    }
}

// The layout of y's rows, checked: a clear error names what does not fit.
Layout layout(const torch::Tensor& y, const torch::Tensor& w, const torch::Tensor& cos,
              const torch::Tensor& sin, const torch::Tensor& positions, int64_t head_dim) {
    const auto fail = [&](const std::string& why) {
        throw Error("fused_qk_norm_rope: " + why + " (y " + c10::str(y.sizes()) + ", weight " +
                    c10::str(w.sizes()) + ", head_dim " + std::to_string(head_dim) + ")");
    };
    if (y.dim() < 3 || w.dim() != 1 || head_dim <= 0 || head_dim % 2 != 0)
        fail("y must be (B, T, ...) with a 1-D weight and an even head_dim");
    const int64_t n = w.size(0);
    if (n == 0 || n % head_dim != 0 || y.size(-1) != (y.dim() == 3 ? n : head_dim) ||
        (y.dim() == 4 && n != head_dim) || y.dim() > 4)
        fail("the weight must cover whole heads: H * D over (B, T, H * D) or D over (B, T, H, D)");
    for (const auto t : {y.scalar_type(), w.scalar_type()})
        if (t != torch::kFloat32 && t != torch::kBFloat16 && t != torch::kHalf)
            fail("unsupported dtypes " + c10::str(y.scalar_type(), " and ", w.scalar_type()));
    if (w.device() != y.device() || cos.device() != y.device())
        fail("y, the weight and the tables must be on one device");
    const int64_t B = y.size(0), T = y.size(1);
    if (cos.scalar_type() != torch::kFloat32 || cos.dim() != 2 || cos.size(1) != head_dim ||
        cos.stride(1) != 1 || !sin.is_same_size(cos) || sin.strides() != cos.strides() ||
        sin.scalar_type() != torch::kFloat32)
        fail("cos and sin must be fp32 (positions, head_dim) tables with contiguous rows");
    if (positions.numel() > 0) {
        if (positions.scalar_type() != torch::kInt64 || !positions.sizes().equals({B, T}) ||
            positions.device() != y.device())
            fail("positions must be (B, T) int64 on y's device");
    } else if (cos.size(0) < T) {
        fail("the tables have " + std::to_string(cos.size(0)) + " positions, fewer than T");
    }
    Layout l;
    l.n = n;
    l.half = head_dim / 2;
    l.rows = y.numel() / n;
    l.rows_per_token = B * T == 0 ? 1 : l.rows / (B * T);
    l.seq = T;
    l.table_stride = cos.stride(0);
    return l;
}

struct QkNormRopeFunction : torch::autograd::Function<QkNormRopeFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y_in,
                                 const torch::Tensor& w_in, double eps, const torch::Tensor& cos,
                                 const torch::Tensor& sin, const torch::Tensor& positions_in,
                                 int64_t head_dim) {
        const auto y = y_in.contiguous(), w = w_in.contiguous();
        const auto positions = positions_in.contiguous();
        Layout l = layout(y, w, cos, sin, positions, head_dim);
        if (positions.numel() > 0 && !y.is_cuda()) {
            const int64_t top = positions.max().item<int64_t>();
            if (top >= cos.size(0) || positions.min().item<int64_t>() < 0)
                throw Error("fused_qk_norm_rope: a position is outside the tables' " +
                            std::to_string(cos.size(0)) + " rows");
        }
        l.cos = cos.data_ptr<float>();
        l.sin = sin.data_ptr<float>();
        l.positions = positions.numel() > 0 ? positions.data_ptr<int64_t>() : nullptr;
        auto out = torch::empty_like(y);
        auto rstd = torch::empty({l.rows}, y.options().dtype(torch::kFloat32));
        if (y.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
            const char* what = "fused_qk_norm_rope";
            const auto err = qk_norm_rope::launch_forward(
                kernel_element_type(y.scalar_type(), what),
                kernel_element_type(w.scalar_type(), what), y.data_ptr(), w.data_ptr(),
                out.data_ptr(), rstd.data_ptr<float>(), l, static_cast<float>(eps),
                kernel_stream(y.device()));
            if (!err.empty()) throw Error("fused_qk_norm_rope: CUDA kernel failed: " + err);
#else
            throw Error("fused_qk_norm_rope: this build has no CUDA kernels (nvcc was not found)");
#endif
        } else {
            with_float_type(y.scalar_type(), "fused_qk_norm_rope", [&](auto* yt) {
                with_float_type(w.scalar_type(), "fused_qk_norm_rope", [&](auto* wt) {
                    using Y = std::remove_pointer_t<decltype(yt)>;
                    using W = std::remove_pointer_t<decltype(wt)>;
                    forward_cpu<Y, W>(y.data_ptr<Y>(), w.data_ptr<W>(), out.data_ptr<Y>(),
                                      rstd.data_ptr<float>(), l, static_cast<float>(eps));
                });
            });
        }
        ctx->save_for_backward({y, w, rstd, cos, sin, positions});
        ctx->saved_data["head_dim"] = head_dim;
        return out.view({y.size(0), y.size(1), -1, head_dim});
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto &y = saved[0], &w = saved[1], &rstd = saved[2], &cos = saved[3], &sin = saved[4],
                   &positions = saved[5];
        const int64_t head_dim = ctx->saved_data["head_dim"].toInt();
        const auto g = grads[0].to(y.scalar_type()).contiguous();
        Layout l = layout(y, w, cos, sin, positions, head_dim);
        l.cos = cos.data_ptr<float>();
        l.sin = sin.data_ptr<float>();
        l.positions = positions.numel() > 0 ? positions.data_ptr<int64_t>() : nullptr;
        auto dy = torch::empty_like(y);
        torch::Tensor dw;
        if (y.is_cuda()) {
#ifdef LATHE_WITH_CUDA_KERNELS
            auto partial = torch::empty({qk_norm_rope::partial_chunks(l.rows), l.n},
                                        y.options().dtype(torch::kFloat32));
            const char* what = "fused_qk_norm_rope";
            const auto err = qk_norm_rope::launch_backward(
                kernel_element_type(y.scalar_type(), what),
                kernel_element_type(w.scalar_type(), what), g.data_ptr(), y.data_ptr(),
                w.data_ptr(), rstd.data_ptr<float>(), dy.data_ptr(), partial.data_ptr<float>(), l,
                kernel_stream(y.device()));
            if (!err.empty()) throw Error("fused_qk_norm_rope: CUDA kernel failed: " + err);
            dw = partial.sum(0).to(w.scalar_type());
#else
            throw Error("fused_qk_norm_rope: this build has no CUDA kernels (nvcc was not found)");
#endif
        } else {
            std::vector<double> acc(static_cast<std::size_t>(l.n), 0.0);
            with_float_type(y.scalar_type(), "fused_qk_norm_rope", [&](auto* yt) {
                with_float_type(w.scalar_type(), "fused_qk_norm_rope", [&](auto* wt) {
                    using Y = std::remove_pointer_t<decltype(yt)>;
                    using W = std::remove_pointer_t<decltype(wt)>;
                    backward_cpu<Y, W>(g.data_ptr<Y>(), y.data_ptr<Y>(), w.data_ptr<W>(),
                                       rstd.data_ptr<float>(), dy.data_ptr<Y>(), acc.data(), l);
                });
            });
            dw = torch::tensor(acc, torch::kFloat64).to(w.scalar_type());
        }
        return {dy,
                dw,
                torch::Tensor(),
                torch::Tensor(),
                torch::Tensor(),
                torch::Tensor(),
                torch::Tensor()};
    }
};

}  // namespace

torch::Tensor fused_qk_norm_rope(const torch::Tensor& y, const torch::Tensor& weight, double eps,
                                 const torch::Tensor& cos, const torch::Tensor& sin,
                                 const torch::Tensor& positions, int64_t head_dim) {
    // Autograd's custom functions take defined tensors only: no positions is an empty one.
    const auto none = torch::empty({0}, y.options().dtype(torch::kInt64));
    return QkNormRopeFunction::apply(y, weight, eps, cos, sin,
                                     positions.defined() ? positions : none, head_dim);
}

}  // namespace lathe::model::kernels
