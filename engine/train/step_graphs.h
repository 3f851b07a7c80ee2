// CUDA graphs of the micro-batch step (train_module.cuda_graphs): a micro-batch's forward, loss,
// backward and gradient accumulation captured once and replayed, so that a small model's step is
// one launch per micro-batch instead of hundreds. Two graphs: the first micro-batch of a step
// (gradients written) and the others (gradients added); each reads static copies of the input
// ids, labels and loss divisor and leaves the losses in static outputs. Shapes must repeat: a
// partial last micro-batch, document masking and evaluation run eagerly. A third graph holds the
// optimizer step (gradient norm, clipping, the fused AdamW update, the compute copies' refresh),
// captured once the micro-batch graphs own the gradients; its learning rates are device tensors
// set before each replay.
//
// Once captured, the gradients live in the graphs' memory and are overwritten by the first
// micro-batch of each step instead of being set to none. Without CUDA (and on the CPU) nothing is
// ever captured and every micro-batch runs eagerly.
#pragma once

#include "engine/model/transformer.h"

#include <torch/torch.h>

#include <functional>
#include <memory>

namespace lathe::train {

class StepGraphs {
public:
    /// What one micro-batch does: the forward, the loss divided by `div` (a one-element device
    /// tensor), its backward and the accumulation of the gradients; returns the losses.
    using Body = std::function<model::LossOutput(
        const torch::Tensor& ids, const torch::Tensor& labels, const torch::Tensor& div)>;

    /// Called when a capture fails, before the micro-batch runs eagerly: the gradients a capture
    /// assigned hold nothing real. `first`: the step's first micro-batch (every gradient must be
    /// dropped); else those added to earlier in the step stay, and only any the capture assigned
    /// afresh (compute copies') must go.
    using OnFailure = std::function<void(bool first)>;

    /// Captures on the step after `warmup` eager steps (lazy initialisation done, allocator warm).
    explicit StepGraphs(OnFailure on_failure, int64_t warmup = 2);
    ~StepGraphs();
    StepGraphs(const StepGraphs&) = delete;
    StepGraphs& operator=(const StepGraphs&) = delete;

    /// Runs micro-batch `index` (0: the step's first) of `rows` x `seq` tokens through its graph,
    /// capturing it first if it is time to; `out` gets the losses (copies, which later replays do
    /// not overwrite). False when it must run eagerly instead (not yet time, a shape the graphs
    /// were not made for, or capture failed, which turns the graphs off with a warning).
    bool run(int64_t step, int64_t index, const torch::Tensor& ids, const torch::Tensor& labels,
             double div, const Body& body, model::LossOutput& out);

    /// What the optimizer step does on the device; returns the tensors the host reads after it.
    using StepBody = std::function<std::vector<torch::Tensor>()>;

    /// Runs the optimizer step of `step` through its graph, capturing it first once the
    /// micro-batch graphs own the gradients; `out` gets copies of what `body` returns. False when
    /// it must run eagerly (not yet time, or capture failed, which leaves it eager for the rest of
    /// the run with a warning). `body` must launch the same work every step, reading only tensors
    /// that outlive it.
    bool run_step(int64_t step, const StepBody& body, std::vector<torch::Tensor>& out);

    /// Whether the gradients belong to the graphs (then they are never set to none).
    bool owns_gradients() const { return owns_gradients_; }
    bool failed() const { return failed_; }

private:
    struct Graph;
    std::unique_ptr<Graph> first_, rest_, optimizer_;
    bool optimizer_failed_ = false;
    OnFailure on_failure_;
    int64_t warmup_;
    int64_t rows_ = 0, seq_ = 0;
    bool owns_gradients_ = false;
    bool failed_ = false;
};

}  // namespace lathe::train
