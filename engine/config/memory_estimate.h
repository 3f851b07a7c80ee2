// What a config needs in memory before its first step, from the config alone (torch-free): the
// parameters, their gradients and AdamW's two moments, per rank (sharded under FSDP). A lower
// bound: activations and the allocator's slack come on top. `validate` prints it; `train` checks
// it against the device's free memory before allocating anything.
#pragma once

#include "engine/config/config.h"

#include <cstdint>
#include <string>

namespace lathe::config {

struct MemoryEstimate {
    int64_t parameters = 0;      ///< exactly what the model will have (unless saturated)
    int64_t bytes_per_rank = 0;  ///< parameters + gradients + AdamW state on one rank
    /// What a training step adds on one rank at its peak (the end of the forward pass), for a
    /// micro-batch of `microbatch_tokens` with activation checkpointing `ac_mode`:
    int64_t activation_bytes = 0;  ///< what autograd keeps of the blocks for the backward pass
    int64_t logits_bytes = 0;      ///< the logits and the loss (fp32), the bf16 logits beside
    /// What activation checkpointing recomputes in backward (one block or module at a time). The
    /// logits are freed by then, so the peak counts the larger of this and logits_bytes.
    int64_t backward_bytes = 0;
    int64_t weight_copy_bytes = 0;  ///< bf16 weight copies: autocast's, or dp_config.param_dtype's
    int64_t peak_bytes = 0;         ///< the expected peak per rank
    int64_t microbatch_tokens = 0;
    std::string ac_mode;
    /// The count passed int64: the figures above stop at its maximum (8 EiB), a lower bound.
    bool saturated = false;
    int64_t world_size = 1;
    bool sharded = false;  ///< FSDP, HSDP or tensor parallelism: divided over ranks
    int64_t split = 1;     ///< the ways the state is divided (shard group x tp degree)
    std::string how;       ///< the layout, as ParallelLayout::describe() says it

    /// "at least 2.31 GiB per rank for 150.0M parameters x 16 bytes (...); expected peak 3.1 GiB
    /// per rank: ... activations (2,048-token micro-batch, AC none) ...".
    std::string describe() const;
    /// The expected peak and its parts, one line: "expected peak 70.1 GiB per rank: 17.9 GiB
    /// weights, gradients and AdamW state + ...".
    std::string describe_peak() const;
};

/// The estimate for `cfg` trained on `world_size` ranks. The activations follow
/// engine/model/transformer.cpp (what each block keeps for backward, by autocast, tensor
/// parallelism and activation checkpointing); test_memory_estimate compares them with what
/// `bench --memory` measures.
MemoryEstimate estimate_training_memory(const ExperimentConfig& cfg, int64_t world_size);

/// What activation checkpointing does to block `layer` (OLMo-core's modes): the whole block, its
/// attention, its feed-forward. One definition for the model (which checkpoints them) and the
/// memory estimate (which counts what they keep).
struct CheckpointedParts {
    bool whole = false, attention = false, feed_forward = false;
};
CheckpointedParts checkpointed_parts(const ActivationCheckpointingConfig& ac, int64_t layer);

/// This machine's free memory for a CPU run, in bytes: MemAvailable, or what the cgroup still
/// allows when that is less; 0 when unknown. (The engine asks CUDA for a GPU's.)
int64_t host_available_memory();

/// "1.20T", "1.23B", "14.29M", "30.7k", "512": counts (parameters, FLOPs, tokens) for people.
std::string human_count(double v);
/// "1.50 GiB", "512.0 MiB", "12.0 KiB".
std::string human_bytes(double bytes);

/// Empty when the estimate's peak fits in `available_bytes` (free memory of the device, shared by
/// `ranks_sharing` ranks on it); otherwise why not, with both figures and the remedies in order,
/// each with the peak it would give: activation checkpointing, a smaller micro-batch, sharding
/// (FSDP), then a smaller model. Give the config for the remedies' figures (null: none).
/// `available_bytes` <= 0 means unknown: then only a saturated estimate, which no device holds,
/// is refused (what `validate`, which knows no device, can check).
std::string memory_refusal(const MemoryEstimate& estimate, int64_t available_bytes,
                           const std::string& device, int64_t ranks_sharing,
                           const ExperimentConfig* cfg = nullptr);

}  // namespace lathe::config
