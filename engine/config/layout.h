// The parallel layout of a run: how `world_size` ranks form a mesh of data parallelism (DDP, FSDP,
// or HSDP's replicas x shards) times tensor parallelism, after OLMo-core's build_world_mesh
// (dimensions [dp_replicate, dp_shard] or [dp], then tp innermost). Torch-free: the engine builds
// its process groups from it, `launch` and the workbench check it before starting, and the
// workbench draws it.
#pragma once

#include "engine/config/config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::config {

struct ParallelLayout {
    int64_t world = 1;     ///< ranks in all
    int64_t tp = 1;        ///< tensor-parallel degree (innermost: consecutive ranks)
    int64_t dp = 1;        ///< data-parallel ranks = world / tp
    int64_t replicas = 1;  ///< HSDP: replica groups (dp = replicas x shard); otherwise 1
    int64_t shard = 1;     ///< ranks the parameters are sharded over (FSDP: dp; HSDP: shard
                           ///< degree; DDP: 1)
    DataParallelType strategy = DataParallelType::ddp;
    /// Why this layout cannot run, each naming the field; empty when it can.
    std::vector<std::string> problems;

    bool ok() const { return problems.empty(); }
    /// Coordinates of a rank: rank = dp_index * tp + tp_index; dp_index = replica * shard +
    /// shard_index.
    int64_t tp_index(int64_t rank) const { return rank % tp; }
    int64_t dp_index(int64_t rank) const { return rank / tp; }
    int64_t replica_index(int64_t rank) const { return dp_index(rank) / shard_group_size(); }
    int64_t shard_index(int64_t rank) const { return dp_index(rank) % shard_group_size(); }
    /// Ranks in one sharding group (HSDP's shard degree, FSDP's dp, DDP's 1 but over dp).
    int64_t shard_group_size() const { return strategy == DataParallelType::hsdp ? shard : dp; }
    /// "fsdp over 2 x tp 2", "hsdp 2 replicas x 2 shards", "tp 2", "single rank".
    std::string describe() const;
};

/// The layout of `cfg` on `world_size` ranks over `num_nodes` nodes (HSDP's default is one replica
/// per node). Problems are reported, not thrown: the caller decides.
ParallelLayout parallel_layout(const ExperimentConfig& cfg, int64_t world_size,
                               int64_t num_nodes = 1);

/// Model problems of tensor parallelism that hold at any world size (the degree must divide the
/// heads, the hidden size and the vocabulary); part of config validation.
std::vector<std::string> tensor_parallel_problems(const ExperimentConfig& cfg);

/// The smallest world size the config's mesh asks for: tp x (HSDP: replicas x shard_degree, where
/// both are given; otherwise tp, or 2 x tp for FSDP/HSDP, which need 2 data-parallel ranks to
/// shard). The workbench proposes it in its Ranks box.
int64_t proposed_world_size(const ExperimentConfig& cfg);

}  // namespace lathe::config
