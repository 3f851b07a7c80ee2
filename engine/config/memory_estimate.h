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
    /// The count passed int64: the figures above stop at its maximum (8 EiB), a lower bound.
    bool saturated = false;
    int64_t world_size = 1;
    bool sharded = false;  ///< FSDP, HSDP or tensor parallelism: divided over ranks
    int64_t split = 1;     ///< the ways the state is divided (shard group x tp degree)
    std::string how;       ///< the layout, as ParallelLayout::describe() says it

    /// "2.31 GiB per rank (150.0M parameters x 16 bytes: weights, gradients, AdamW's two moments)".
    std::string describe() const;
};

/// The estimate for `cfg` trained on `world_size` ranks.
MemoryEstimate estimate_training_memory(const ExperimentConfig& cfg, int64_t world_size);

/// "1.20T", "1.23B", "14.29M", "30.7k", "512": counts (parameters, FLOPs, tokens) for people.
std::string human_count(double v);
/// "1.50 GiB", "512.0 MiB", "12.0 KiB".
std::string human_bytes(double bytes);

/// Empty when the estimate fits in `available_bytes` (free memory of the device, shared by
/// `ranks_sharing` ranks on it); otherwise why not, with both figures and the fields to change.
/// `available_bytes` <= 0 means unknown: then only a saturated estimate, which no device holds,
/// is refused (what `validate`, which knows no device, can check).
std::string memory_refusal(const MemoryEstimate& estimate, int64_t available_bytes,
                           const std::string& device, int64_t ranks_sharing);

}  // namespace lathe::config
