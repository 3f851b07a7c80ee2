// TransformerTrainModule: forward/backward over micro-batches, gradient clipping, the optimizer and LR
// schedule, data parallelism (DDP or FSDP), after OLMo-core's TransformerTrainModule.
#pragma once

#include "engine/config/config.h"
#include "engine/data/data_loader.h"
#include "engine/distributed/env.h"
#include "engine/model/transformer.h"
#include "engine/stateful/stateful.h"
#include "engine/train/optimizer.h"

#include <c10/core/Event.h>
#include <torch/torch.h>

#include <memory>

namespace lathe::train {

class Trainer;
class DataParallel;
class FullyShardedDataParallel;
class ComputeCopies;
class StepGraphs;

class TransformerTrainModule : public stateful::Stateful {
public:
    TransformerTrainModule(const config::ExperimentConfig& cfg, dist::Environment& env);
    ~TransformerTrainModule() override;

    void attach(Trainer* trainer) { trainer_ = trainer; }
    /// Checks batch divisibility against the data loader (OLMo-core does this in pre_train).
    void pre_train(const data::DataLoader& loader);

    /// Forward and backward of one rank batch, split into micro-batches; records train/CE loss.
    void train_batch(const data::Batch& batch);
    /// Clips gradients, sets the LR, steps the optimizer; records optim/* metrics. With fused
    /// AdamW on CUDA it never waits for the device: a non-finite norm skips the update there, and
    /// the host warns (or stops, non_finite_grads=stop) one step later.
    void optim_step();
    /// After the last step: the checks optim_step left for the next one (may throw, as a stop).
    void finish_steps();
    void zero_grads();
    /// Held-out loss of one batch: (sum of CE over tokens, number of tokens).
    std::pair<double, int64_t> eval_batch(const data::Batch& batch);

    int64_t num_flops_per_token(int64_t seq_len) const {
        return model_->num_flops_per_token(seq_len);
    }
    model::Transformer& model() { return model_; }
    Optimizer& optimizer() { return *optim_; }
    DataParallel& data_parallel() { return *dp_; }
    const config::TrainModuleConfig& config() const { return cfg_; }
    /// What optim_step does when the gradient norm is NaN or infinite (stability_monitor sets it).
    void set_non_finite_action(config::StabilityAction a) { non_finite_action_ = a; }

    /// Full (unsharded) model and optimizer tensors, keyed by OLMo-core-like names:
    /// "model.<param>", "optim.state.<param>.<state>" (Optimizer::state), and the skip-step
    /// history "optim.skip_step.*".
    std::vector<std::pair<std::string, torch::Tensor>> state_tensors() override;
    /// The model's full parameters by name ("blocks.0.attention.w_q.weight"). Under FSDP every
    /// rank must call it (the shards are gathered) and only rank 0 gets them, as host copies;
    /// otherwise they are the live parameters themselves.
    std::map<std::string, torch::Tensor> full_model_parameters();
    /// Loads tensors saved by state_tensors(); throws lathe::Error naming the key on a mismatch.
    void load_state_tensors(const std::map<std::string, torch::Tensor>& tensors,
                            bool load_optim) override;

    /// The parameters the optimizer updates and checkpoints hold, by name, in the model's order:
    /// the model's own, or their fp32 masters when it computes in copies (dp_config.param_dtype
    /// without FSDP). Not used under FSDP, whose shards are the trained tensors.
    std::vector<std::pair<std::string, torch::Tensor>> trained_parameters() const;
    /// The dtype the model's parameters are copied to for compute, if they are (without FSDP).
    std::optional<torch::ScalarType> compute_copy_dtype() const;

private:
    void set_learning_rates();
    /// Rows [start, start + len) of the batch's document masking: doc_ids (on the device), and
    /// on CUDA their spans from the batch's host ids; none without document masking.
    model::Documents documents(const data::Batch& batch, const torch::Tensor& doc_ids,
                               int64_t start, int64_t len) const;
    /// Why a rank batch with no trained label cannot be trained on, naming its instances' files.
    std::string all_masked_message(const data::Batch& batch) const;
    /// The gradients the optimizer steps with (set ones only).
    std::vector<torch::Tensor> step_grads() const;
    /// Their total norm in fp32, over ranks and tensor-parallel slices, on the device.
    torch::Tensor total_grad_norm(const std::vector<torch::Tensor>& grads);
    void sync_free_optim_step();
    /// The device side of sync_free_optim_step: the norm, clipping and the update, reading and
    /// writing only tensors that outlive the step, so that a CUDA graph can replay it. Returns
    /// the norm and whether the update was skipped (1) or made (0).
    std::pair<torch::Tensor, torch::Tensor> sync_free_update();
    void check_previous_norm();
    /// The optimizer's update (skipped on the device where found_inf says so), then the compute
    /// copies from the updated masters.
    void step_optimizer(const torch::Tensor& found_inf = {});

    /// Tensor parallelism: whole tensors from this rank's slices (state_tensors' names), gathered
    /// over the TP group by the ranks that keep them; and the reverse, this rank's slices of whole
    /// tensors.
    std::vector<std::pair<std::string, torch::Tensor>> gather_tp(
        std::vector<std::pair<std::string, torch::Tensor>> local);
    std::map<std::string, torch::Tensor> slice_tp(
        const std::map<std::string, torch::Tensor>& full) const;

    config::TrainModuleConfig cfg_;
    config::ExperimentConfig full_cfg_;
    dist::Environment& env_;
    Trainer* trainer_ = nullptr;
    model::Transformer model_{nullptr};
    std::unique_ptr<Optimizer> optim_;
    std::unique_ptr<DataParallel> dp_;
    FullyShardedDataParallel* fsdp_ = nullptr;  // dp_ when sharded
    std::unique_ptr<ComputeCopies> copies_;     // dp_config.param_dtype without FSDP
    bool sync_free_ = false;                    // optim_step without a host sync
    std::unique_ptr<StepGraphs> graphs_;        // train_module.cuda_graphs
    struct PendingNorm {
        int64_t step = -1;                  ///< the step whose norm waits to be checked, or -1
        torch::Tensor host;                 ///< the norm, copied without waiting
        std::unique_ptr<c10::Event> event;  ///< when the copy is done (none on the CPU)
    };
    PendingNorm pending_norm_;  // the last step's norm, checked at the next
    config::StabilityAction non_finite_action_ = config::StabilityAction::skip;
    int64_t inject_nan_step_ = -1;
    int64_t inject_nan_loss_step_ = -1;  // LATHE_INJECT_NAN_LOSS=STEP
    int64_t inject_fault_step_ =
        -1;  // LATHE_INJECT_FAULT=RANK:STEP  // fault injection for tests: LATHE_INJECT_NAN_STEP
};

}  // namespace lathe::train
