#include "engine/model/tensor_parallel.h"

#include <torch/csrc/autograd/custom_function.h>

namespace lathe::model {

namespace {

// Sums `x` over the group into a new tensor; reduced in fp32 whatever x's dtype (Gloo's reduction
// of bf16 would round at every partial sum).
torch::Tensor all_reduce_copy(const torch::Tensor& x, const dist::Group& group) {
    const bool wide = x.scalar_type() != torch::kFloat32 && x.is_floating_point();
    auto t = wide ? x.to(torch::kFloat32).contiguous() : x.contiguous().clone();
    group.all_reduce(t);
    return wide ? t.to(x.scalar_type()) : t;
}

struct CopyToTp : public torch::autograd::Function<CopyToTp> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 const dist::Group* group) {
        ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
        return x;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad) {
        const auto* group = reinterpret_cast<const dist::Group*>(ctx->saved_data["group"].toInt());
        return {all_reduce_copy(grad[0], *group), torch::Tensor()};
    }
};

struct ReduceFromTp : public torch::autograd::Function<ReduceFromTp> {
    static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x,
                                 const dist::Group* group) {
        return all_reduce_copy(x, *group);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                   torch::autograd::variable_list grad) {
        return {grad[0], torch::Tensor()};
    }
};

struct SumOverTp : public torch::autograd::Function<SumOverTp> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 const dist::Group* group) {
        ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
        return all_reduce_copy(x, *group);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad) {
        const auto* group = reinterpret_cast<const dist::Group*>(ctx->saved_data["group"].toInt());
        return {all_reduce_copy(grad[0], *group), torch::Tensor()};
    }
};

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

torch::Tensor copy_to_tp(const torch::Tensor& x, const dist::Group& group) {
    if (!group.distributed()) return x;
    return CopyToTp::apply(x, &group);
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, const dist::Group& group) {
    if (!group.distributed()) return x;
    return ReduceFromTp::apply(x, &group);
}

torch::Tensor sum_over_tp(const torch::Tensor& x, const dist::Group& group) {
    if (!group.distributed()) return x;
    return SumOverTp::apply(x, &group);
}

torch::Tensor max_over_tp(const torch::Tensor& x, const dist::Group& group) {
    auto t = x.detach().contiguous().clone();
    group.all_reduce(t, dist::ReduceOp::max);
    return t;
}

std::optional<int64_t> tp_shard_dim(const std::string& name, bool loss_parallel,
                                    bool head_qk_norm) {
    // Linear weights are (out_features, in_features): column-parallel splits dim 0 (and the
    // biases with it), row-parallel dim 1.
    if (!head_qk_norm && (ends_with(name, ".attention.q_norm.weight") ||
                          ends_with(name, ".attention.k_norm.weight")))
        return 0;
    for (const char* column :
         {".attention.w_q.weight", ".attention.w_k.weight", ".attention.w_v.weight",
          ".attention.w_q.bias", ".attention.w_k.bias", ".attention.w_v.bias",
          ".feed_forward.w1.weight", ".feed_forward.w3.weight"})
        if (ends_with(name, column)) return 0;
    for (const char* row : {".attention.w_out.weight", ".feed_forward.w2.weight"})
        if (ends_with(name, row)) return 1;
    if (name == "embeddings.weight") return 0;
    if (name == "lm_head.weight" && loss_parallel) return 0;
    return std::nullopt;
}

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight,
                                       int64_t vocab_start, const dist::Group& group) {
    const int64_t rows = weight.size(0);
    auto local = ids - vocab_start;
    auto outside = (local < 0).logical_or(local >= rows);
    auto e = torch::embedding(weight, local.masked_fill(outside, 0));
    return reduce_from_tp(e.masked_fill(outside.unsqueeze(-1), 0), group);
}

std::pair<torch::Tensor, torch::Tensor> vocab_parallel_cross_entropy(
    const torch::Tensor& logits, const torch::Tensor& labels, int64_t vocab_start,
    int64_t ignore_index, bool with_z, const dist::Group& group) {
    const int64_t cols = logits.size(1);
    // logsumexp over the whole vocabulary: the maximum (no gradient: the result does not depend
    // on it), then the sum of exponentials, summed over the group.
    auto max = max_over_tp(std::get<0>(logits.detach().max(-1)), group);
    auto sum_exp = reduce_from_tp((logits - max.unsqueeze(-1)).exp().sum(-1), group);
    auto lse = sum_exp.log() + max;
    // The target's logit lives on one rank; the others contribute zero.
    auto local = labels - vocab_start;
    auto outside = (local < 0).logical_or(local >= cols).logical_or(labels == ignore_index);
    auto picked = logits.gather(1, local.masked_fill(outside, 0).unsqueeze(1)).squeeze(1);
    auto target = reduce_from_tp(picked.masked_fill(outside, 0), group);
    auto ignored = labels == ignore_index;
    auto ce = (lse - target).masked_fill(ignored, 0).sum();
    torch::Tensor z;
    if (with_z) z = lse.pow(2).masked_fill(ignored, 0).sum();
    return {ce, z};
}

}  // namespace lathe::model
