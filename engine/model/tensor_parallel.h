// Tensor parallelism (train_module.tp_config), Megatron-style within a node: the attention heads
// and the SwiGLU hidden units are split over the ranks of the TP group (column-parallel w_q, w_k,
// w_v, w1, w3; row-parallel w_out, w2), the embedding table over the vocabulary, and, with
// loss_parallel, the LM head over the vocabulary with a parallel cross-entropy. QK-norm stays a
// norm over all heads, as in OLMo-core: its mean of squares is summed over the group. Everything
// else (the block norms, the final norm) is replicated and receives identical gradients on every
// TP rank. The collectives are autograd functions over dist::Group: Gloo on CPU, NCCL on CUDA.
#pragma once

#include "engine/distributed/env.h"

#include <torch/torch.h>

#include <optional>
#include <string>

namespace lathe::model {

/// Megatron's f: the identity forward; backward sums the gradient over the group (the input fans
/// out to every rank's slice of the next layer).
torch::Tensor copy_to_tp(const torch::Tensor& x, const dist::Group& group);
/// Megatron's g: forward sums the ranks' partial results; backward is the identity.
torch::Tensor reduce_from_tp(const torch::Tensor& x, const dist::Group& group);
/// The sum over the group of a value each rank then uses for its own slice (QK-norm's sum of
/// squares): forward and backward both sum over the group, since every rank's use contributes to
/// every rank's gradient. (reduce_from_tp's identity backward holds only when what follows is
/// the same computation on every rank.)
torch::Tensor sum_over_tp(const torch::Tensor& x, const dist::Group& group);
/// The elementwise maximum over the group, without gradient.
torch::Tensor max_over_tp(const torch::Tensor& x, const dist::Group& group);

/// Where a rank's slice of a split parameter lies.
struct TensorParallelSlice {
    const dist::Group* group = nullptr;
    int64_t degree = 1;
    int64_t rank = 0;
    bool active() const { return group != nullptr && degree > 1; }
};

/// The dimension along which the parameter `name` (e.g. "blocks.0.attention.w_q.weight") is split
/// under tensor parallelism; nullopt for a replicated one. The LM head is split only with
/// loss_parallel; per-head QK-norm weights (head_qk_norm) are replicated.
std::optional<int64_t> tp_shard_dim(const std::string& name, bool loss_parallel,
                                    bool head_qk_norm = false);

/// Embedding lookup in a vocabulary slice starting at `vocab_start`: rows outside it are zero on
/// this rank, and the sum over the group is the whole lookup.
torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight,
                                       int64_t vocab_start, const dist::Group& group);

/// Cross-entropy (and z-loss) summed over the tokens whose label is not `ignore_index`, from logits
/// split over the vocabulary (this rank holds columns [vocab_start, vocab_start + logits.size(1))).
/// Returns {ce_sum, lse_sq_sum} (the latter undefined unless `with_z`), the same on every rank.
std::pair<torch::Tensor, torch::Tensor> vocab_parallel_cross_entropy(
    const torch::Tensor& logits, const torch::Tensor& labels, int64_t vocab_start,
    int64_t ignore_index, bool with_z, const dist::Group& group);

}  // namespace lathe::model
