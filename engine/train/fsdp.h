// FSDP (ZeRO-3): parameters, gradients and optimizer state sharded across the data-parallel ranks.
// HSDP: the same within each replica's group of ranks, with the reduced gradient shards then
// averaged over the replicas (the ranks holding the same shard).
//
// The model runs as units (embeddings, each block, the LM head). Each unit's parameters live as
// one flat fp32 vector per optimizer group, padded to a multiple of the world size; a rank holds
// and optimises only its 1/W slice. A unit's forward all-gathers its parameters (cast to
// param_dtype), runs, and frees them; its backward gathers them again, recomputes the unit's
// forward (activation checkpointing, so no gathered parameter outlives its unit), back-propagates,
// and reduce-scatters the gradients (in reduce_dtype) to the shards. Collectives are issued in
// unit order forward and reverse order backward, the same on every rank.
#pragma once

#include "engine/config/config.h"
#include "engine/distributed/env.h"
#include "engine/model/transformer.h"
#include "engine/train/data_parallel.h"
#include "engine/train/optimizer.h"

#include <map>

namespace lathe::train {

class FullyShardedDataParallel : public DataParallel {
public:
    /// `group_of(name)` is the optimizer group (0 .. num_groups-1) of each parameter. The model's
    /// parameters are read where they are (the host, ideally) and only the shards are kept, on
    /// `device`.
    FullyShardedDataParallel(model::Transformer& model, const dist::Group& group,
                             const config::DataParallelConfig& cfg,
                             const std::function<int(const std::string&)>& group_of, int num_groups,
                             const torch::Device& device, const dist::Group* replicate = nullptr);
    void before_backward(bool) override {}
    void finish_backward() override {}
    std::string describe() const override;
    std::vector<torch::Tensor> grad_params() const override;
    void reduce_grad_norm_sq(torch::Tensor& local) const override { group_.all_reduce(local); }

    /// This rank's sum of squared gradients with each parameter's elements weighted by
    /// `weight(name)` (tensor parallelism counts a replicated parameter 1/degree on each rank).
    torch::Tensor weighted_grad_norm_sq(
        const std::function<double(const std::string&)>& weight) const;
    /// The shards of each optimizer group (a unit without parameters of a group has no shard).
    std::vector<std::vector<torch::Tensor>> optimizer_groups() const;
    /// Full tensors by parameter name, gathered from the shards (model and optimizer state) in the
    /// names TransformerTrainModule::state_tensors() uses. Every rank takes part; only rank 0 gets
    /// them, in host memory, one unit at a time (a device never holds the whole model); the other
    /// ranks get an empty list.
    /// With `with_optimizer` false, the model's parameters only.
    std::vector<std::pair<std::string, torch::Tensor>> full_state(Optimizer& optim,
                                                                  bool with_optimizer = true);
    void load_full_state(const std::map<std::string, torch::Tensor>& tensors, Optimizer* optim);

    /// Runs one unit with gathered parameters (used by the model's unit_runner).
    torch::Tensor run(int64_t unit, const torch::Tensor& x);

    struct FlatGroup {
        std::vector<std::string> names;
        std::vector<torch::Tensor*> members;
        std::vector<std::vector<int64_t>> shapes;
        std::vector<int64_t> offsets, numels;
        int64_t total = 0, padded = 0;
        torch::Tensor shard;  ///< this rank's slice: a leaf the optimizer updates
    };
    struct Unit {
        int64_t index = 0;
        std::vector<FlatGroup> groups;  ///< one per optimizer group
    };

    // Used by the autograd function.
    torch::Tensor gather(const FlatGroup& g) const;
    torch::Tensor scatter_grad(const torch::Tensor& full_grad, const FlatGroup& g) const;
    void bind(Unit& u, const std::vector<torch::Tensor>& fulls);
    void unbind(Unit& u);
    std::vector<Unit>& units() { return units_; }
    model::Transformer& model() { return model_; }
    std::optional<torch::ScalarType> param_dtype() const { return param_dtype_; }

private:
    model::Transformer& model_;
    const dist::Group& group_;
    const dist::Group* replicate_ = nullptr;  ///< HSDP: the other replicas of this shard
    std::vector<Unit> units_;
    std::optional<torch::ScalarType> param_dtype_;
    torch::ScalarType reduce_dtype_;
    torch::Device device_{torch::kCPU};
    torch::Tensor empty_;
};

}  // namespace lathe::train
