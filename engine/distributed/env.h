// prepare_training_environment() / teardown_training_environment(), after OLMo-core:
// reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT; Slurm's SLURM_* as a fallback; a one-process world when all are absent), rendezvous
// through c10d's TCPStore, and creates the process groups: Gloo for CPU tensors, a separate Gloo
// group for bookkeeping (metrics, cancel checks, commands) and one for checkpoints, and NCCL for
// CUDA tensors when CUDA is in use.
#pragma once

#include "engine/config/config.h"
#include "engine/config/layout.h"

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace lathe::dist {

struct WorldInfo {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;
    int local_world_size = 1;
    std::string master_addr = "127.0.0.1";
    int master_port = 0;
    std::string source = "single process";  ///< "torchrun variables", "slurm" or "single process"
    /// This rank's place among the ranks that see the same filesystem (OLMo-core's
    /// get_fs_local_rank): FS_LOCAL_RANK when set, else the rank on a shared filesystem and the
    /// local rank on one per node. The filesystem's rank 0 writes the files its ranks share.
    int fs_local_rank = 0;
};

/// Whether the nodes share one filesystem, and what said so (for messages).
struct SharedFilesystem {
    bool shared = true;
    std::string source;  ///< "launch.shared_filesystem=false", "OLMO_SHARED_FS=1" or the default's
};

/// launch.shared_filesystem when set, else OLMO_SHARED_FS (1/true/yes or 0/false/no), else the
/// default: shared when the save folder is local (every rank writes checkpoints into it; the
/// run checks it), not assumed when it is remote. Throws lathe::Error on another OLMO_SHARED_FS.
SharedFilesystem resolve_shared_filesystem(std::optional<bool> configured, bool remote_save_folder);

/// OLMo-core's rule: a local save folder needs a filesystem every rank shares. Empty when
/// `nodes` ranks' machines may use `save_folder`; else the refusal, naming the folder and how to
/// fix it.
std::string local_save_folder_problem(const std::string& save_folder, int64_t nodes,
                                      const SharedFilesystem& fs);

/// Reads the launcher's environment. Throws lathe::Error on inconsistent values.
WorldInfo read_world_info();

enum class ReduceOp { sum, max, min };

/// A process group. Null backends mean a one-process world: every collective is then the identity.
class Group {
public:
    Group() = default;
    Group(c10::intrusive_ptr<c10d::Backend> backend, int rank, int size);
    int rank() const { return rank_; }
    int size() const { return size_; }
    bool distributed() const { return size_ > 1; }

    void all_reduce(torch::Tensor& t, ReduceOp op = ReduceOp::sum) const;
    void broadcast(torch::Tensor& t, int root = 0) const;
    void all_gather(std::vector<torch::Tensor>& out, torch::Tensor& in) const;
    void reduce_scatter(torch::Tensor& out, std::vector<torch::Tensor>& in) const;
    void barrier() const;
    /// Starts an all-reduce and returns without waiting (null when not distributed).
    c10::intrusive_ptr<c10d::Work> all_reduce_async(torch::Tensor& t,
                                                    ReduceOp op = ReduceOp::sum) const;
    /// Broadcasts a string from root (two collectives: length, then bytes).
    std::string broadcast_string(const std::string& s, int root = 0) const;

    /// Shuts the backend down (NCCL: flushes and destroys its communicators; a no-op for Gloo).
    void shutdown() const;

private:
    c10::intrusive_ptr<c10d::Backend> backend_;
    int rank_ = 0;
    int size_ = 1;
};

struct EnvironmentOptions {
    std::optional<int64_t> seed;
    std::string backend = "cpu:gloo,cuda:nccl";
    std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // launch.timeout_minutes
    config::LogFilterType log_filter_type = config::LogFilterType::rank0_only;
    config::DeviceKind device = config::DeviceKind::auto_;
    std::optional<int64_t> num_threads;
    /// Decides fs_local_rank (resolve_shared_filesystem).
    SharedFilesystem shared_filesystem;
    /// The mesh for a world of (ranks, nodes): config::parallel_layout of the run's config. Unset:
    /// plain data parallelism over every rank.
    std::function<config::ParallelLayout(int64_t world, int64_t nodes)> layout;
};

/// Everything a rank knows about the job. Created by prepare_training_environment() and passed
/// by reference; no globals.
class Environment {
public:
    ~Environment();
    const WorldInfo& world() const { return world_; }
    int rank() const { return world_.rank; }
    int world_size() const { return world_.world_size; }
    bool distributed() const { return world_.world_size > 1; }
    int fs_local_rank() const { return world_.fs_local_rank; }
    const SharedFilesystem& shared_filesystem() const { return shared_filesystem_; }
    const torch::Device& device() const { return device_; }
    /// The mesh: data parallelism (DDP, FSDP or HSDP's replicas x shards) times tensor
    /// parallelism, tp innermost (config/layout.h).
    const config::ParallelLayout& layout() const { return layout_; }
    /// This rank's place among the data-parallel ranks (which batches it reads).
    int dp_rank() const { return static_cast<int>(layout_.dp_index(world_.rank)); }
    int dp_size() const { return static_cast<int>(layout_.dp); }
    int tp_rank() const { return static_cast<int>(layout_.tp_index(world_.rank)); }
    /// The data-parallel group for the training device's tensors (Gloo on CPU, NCCL on CUDA): the
    /// ranks holding the same tensor-parallel slice; every rank without tensor parallelism.
    const Group& dp_group() const { return dp_; }
    /// The tensor-parallel group (consecutive ranks); a one-rank group without TP.
    const Group& tp_group() const { return tp_; }
    /// FSDP/HSDP: the ranks parameters are sharded over (HSDP: within a replica; FSDP: dp_group).
    const Group& shard_group() const { return shard_; }
    /// HSDP: the ranks holding the same shard in the other replicas; one rank otherwise.
    const Group& replicate_group() const { return replicate_; }
    /// Gloo group serviced only by the bookkeeping thread.
    const Group& bookkeeping_group() const { return bookkeeping_; }
    /// Gloo group for checkpoint coordination (CPU tensors, any thread but one at a time).
    const Group& checkpoint_group() const { return checkpoint_; }
    /// Gloo group for CPU tensors on the training thread.
    const Group& cpu_group() const { return cpu_; }
    /// Releases the groups. `graceful` (every rank finished in step) first shuts down an NCCL
    /// group cleanly, as destroy_process_group() does; otherwise it is only released.
    void teardown(bool graceful = false);

private:
    friend std::unique_ptr<Environment> prepare_training_environment(const EnvironmentOptions&);
    WorldInfo world_;
    torch::Device device_{torch::kCPU};
    c10::intrusive_ptr<c10d::Store> store_;
    config::ParallelLayout layout_;
    SharedFilesystem shared_filesystem_;
    Group dp_, tp_, shard_, replicate_, cpu_, bookkeeping_, checkpoint_;
    bool torn_down_ = false;
};

std::unique_ptr<Environment> prepare_training_environment(const EnvironmentOptions& opts);
/// Destroys the process groups after a run every rank finished (idempotent). ~Environment only
/// releases them.
void teardown_training_environment(Environment& env);

/// Whether this rank should log below warning level under the filter (LOG_FILTER_TYPE env wins).
bool should_log(const WorldInfo& w, config::LogFilterType filter);

}  // namespace lathe::dist
