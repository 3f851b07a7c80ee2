#include "engine/model/varlen_attention.h"

#include "engine/util/error.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

namespace lathe::model {
namespace {

void check(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
           const torch::Tensor& cu_seqlens) {
    if (q.dim() != 3 || k.dim() != 3 || !k.sizes().equals(v.sizes()) || q.size(0) != k.size(0) ||
        q.size(2) != k.size(2) || k.size(1) == 0 || q.size(1) % k.size(1) != 0)
        throw Error(
            "varlen_attention: q must be (total, H, D) and k, v (total, H_kv, D) with H a "
            "multiple of H_kv; not " +
            c10::str(q.sizes(), ", ", k.sizes(), " and ", v.sizes()));
    if (cu_seqlens.scalar_type() != torch::kInt32 || cu_seqlens.dim() != 1 ||
        cu_seqlens.numel() < 2 || cu_seqlens.device() != q.device())
        throw Error("varlen_attention: cu_seqlens must be int32 cumulative lengths on q's device");
}

// The CPU route: SDPA over each document in turn (the reference of the flash route).
torch::Tensor per_document(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& cu_seqlens) {
    const auto cu = cu_seqlens.to(torch::kCPU, torch::kInt64);
    const auto* c = cu.data_ptr<int64_t>();
    if (c[0] != 0 || c[cu.numel() - 1] != q.size(0))
        throw Error("varlen_attention: cu_seqlens must run from 0 to the " +
                    std::to_string(q.size(0)) + " tokens");
    const bool gqa = q.size(1) != k.size(1);
    std::vector<torch::Tensor> parts;
    parts.reserve(static_cast<std::size_t>(cu.numel() - 1));
    for (int64_t d = 0; d + 1 < cu.numel(); ++d) {
        const int64_t s = c[d], n = c[d + 1] - c[d];
        if (n < 0)
            throw Error("varlen_attention: cu_seqlens decreases at document " + std::to_string(d));
        if (n == 0) continue;
        auto part = [&](const torch::Tensor& t) { return t.narrow(0, s, n).transpose(0, 1); };
        parts.push_back(at::scaled_dot_product_attention(part(q), part(k), part(v), {}, 0.0,
                                                         /*is_causal=*/true, std::nullopt, gqa)
                            .transpose(0, 1));
    }
    return torch::cat(parts, 0);
}

struct FlashVarlen : torch::autograd::Function<FlashVarlen> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                 const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& cu_seqlens, int64_t max_len) {
        const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
        auto [out, lse, rng_state, unused, debug] = at::_flash_attention_forward(
            q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, /*dropout_p=*/0.0,
            /*is_causal=*/true, /*return_debug_mask=*/false, scale);
        (void)debug;
        ctx->save_for_backward({q, k, v, out, lse, cu_seqlens, rng_state, unused});
        ctx->saved_data["max_len"] = max_len;
        return out;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const int64_t max_len = ctx->saved_data["max_len"].toInt();
        const double scale = 1.0 / std::sqrt(static_cast<double>(s[0].size(2)));
        auto [dq, dk, dv] = at::_flash_attention_backward(
            grads[0].contiguous(), s[0], s[1], s[2], s[3], s[4], s[5], s[5], max_len, max_len,
            /*dropout_p=*/0.0, /*is_causal=*/true, s[6], s[7], scale);
        return {dq, dk, dv, torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

bool varlen_attention_fits(const torch::Tensor& q) {
    const int64_t d = q.size(-1);
    return q.is_cuda() &&
           (q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kHalf) && d % 8 == 0 &&
           d <= 256;
}

torch::Tensor varlen_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                               int64_t max_len) {
    check(q, k, v, cu_seqlens);
    if (!q.is_cuda()) return per_document(q, k, v, cu_seqlens);
    if (!varlen_attention_fits(q))
        throw Error(
            "varlen_attention: flash attention takes bf16 or fp16 heads of a multiple of "
            "8 up to 256 features on CUDA, not " +
            c10::str(q.scalar_type(), " heads of ", q.size(2)));
    return FlashVarlen::apply(q.contiguous(), k.contiguous(), v.contiguous(), cu_seqlens, max_len);
}

}  // namespace lathe::model
