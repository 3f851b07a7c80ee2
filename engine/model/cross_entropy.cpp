#include "engine/model/cross_entropy.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace lathe::model {

namespace {

// Rows per block. On a CPU about a megabyte of fp32 logits, so that a block's passes stay in
// cache; on a GPU about 256 MB, so that kernel launches stay few and the temporary bounded.
int64_t block_rows(const torch::Tensor& logits) {
    const int64_t elements = logits.is_cpu() ? (int64_t{1} << 18) : (int64_t{1} << 26);
    return std::max<int64_t>(1, elements / logits.size(1));
}

struct FusedCrossEntropy : public torch::autograd::Function<FusedCrossEntropy> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                  const torch::Tensor& logits,
                                                  const torch::Tensor& labels, int64_t ignore_index,
                                                  bool with_z) {
        const auto type = logits.scalar_type();
        TORCH_CHECK(logits.dim() == 2 && (type == torch::kFloat32 || type == torch::kBFloat16 ||
                                          type == torch::kHalf),
                    "fused_cross_entropy: logits must be [rows, vocab] fp32, bf16 or fp16");
        const int64_t rows = logits.size(0), step = block_rows(logits);
        const auto fp32 = logits.options().dtype(torch::kFloat32);
        auto lse = torch::empty({rows}, fp32);
        for (int64_t r = 0; r < rows; r += step) {
            const int64_t n = std::min(step, rows - r);
            // Low-precision logits are widened a block at a time: the arithmetic is the fp32
            // path's on the same values, and no fp32 copy of the whole logits is ever held.
            auto block = logits.narrow(0, r, n).to(torch::kFloat32);
            auto max = std::get<0>(block.max(1, /*keepdim=*/true));
            auto sum = (block - max).exp_().sum(1);
            lse.narrow(0, r, n).copy_(sum.log_().add_(max.squeeze(1)));
        }
        auto keep = labels != ignore_index;
        auto safe = labels.masked_fill(keep.logical_not(), 0);
        auto target = logits.gather(1, safe.unsqueeze(1)).squeeze(1).to(torch::kFloat32);
        auto mask = keep.to(torch::kFloat32);
        auto ce = ((lse - target) * mask).sum();
        auto z = with_z ? (lse * lse * mask).sum() : torch::zeros({}, fp32);
        ctx->save_for_backward({logits, lse, safe, mask});
        return {ce, z};
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad) {
        auto saved = ctx->get_saved_variables();
        auto logits = saved[0], lse = saved[1], safe = saved[2], mask = saved[3];
        const auto zero = torch::zeros({}, lse.options());
        auto g_ce = grad[0].defined() ? grad[0] : zero;
        auto g_z = grad[1].defined() ? grad[1] : zero;
        // d ce / d logit = softmax - onehot(label); d z / d logit = 2 lse softmax; rows masked.
        auto scale = mask * (g_ce + 2 * g_z * lse);
        const int64_t rows = logits.size(0), step = block_rows(logits);
        const auto label_term = (-(g_ce * mask)).unsqueeze(1);
        if (logits.scalar_type() == torch::kFloat32) {
            for (int64_t r = 0; r < rows; r += step) {
                const int64_t n = std::min(step, rows - r);
                logits.narrow(0, r, n)
                    .sub_(lse.narrow(0, r, n).unsqueeze(1))
                    .exp_()
                    .mul_(scale.narrow(0, r, n).unsqueeze(1));
            }
            logits.scatter_add_(1, safe.unsqueeze(1), label_term);
        } else {
            // The whole gradient of a block in fp32, label term included, then rounded once into
            // the logits' storage: bitwise the fp32 path's gradient cast to the logits' dtype.
            for (int64_t r = 0; r < rows; r += step) {
                const int64_t n = std::min(step, rows - r);
                auto out = logits.narrow(0, r, n);
                auto block = out.to(torch::kFloat32)
                                 .sub_(lse.narrow(0, r, n).unsqueeze(1))
                                 .exp_()
                                 .mul_(scale.narrow(0, r, n).unsqueeze(1));
                block.scatter_add_(1, safe.narrow(0, r, n).unsqueeze(1),
                                   label_term.narrow(0, r, n));
                out.copy_(block);
            }
        }
        return {logits, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

CrossEntropySums fused_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels,
                                     int64_t ignore_index, bool with_z) {
    auto out = FusedCrossEntropy::apply(logits.contiguous(), labels, ignore_index, with_z);
    CrossEntropySums sums;
    sums.ce = out[0];
    if (with_z) sums.z = out[1];
    return sums;
}

}  // namespace lathe::model
