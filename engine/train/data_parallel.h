// Data parallelism for TransformerTrainModule.
//
// DDP: every rank holds the whole model; gradients are averaged over the data-parallel group in
// buckets of about `bucket_cap_mb`, launched from gradient hooks while the backward pass is still
// running, and only on the last micro-batch of a step (the others accumulate locally, like
// torch's no_sync()). Buckets are launched strictly in order, so every rank issues the same
// collectives in the same order.
#pragma once

#include "engine/config/config.h"
#include "engine/distributed/env.h"

#include <torch/torch.h>

namespace lathe::train {

class DataParallel {
public:
    virtual ~DataParallel() = default;
    /// Called before each micro-batch's backward; `last` is the final one of the step.
    virtual void before_backward(bool last) = 0;
    /// Called after the last micro-batch's backward: waits for the reductions; grads are then the
    /// average over ranks.
    virtual void finish_backward() = 0;
    virtual std::string describe() const = 0;
    /// The tensors whose .grad() the optimizer uses (the model's parameters, or FSDP's shards).
    virtual std::vector<torch::Tensor> grad_params() const { return params_for_grads_; }
    /// Turns a local sum of squared gradients into the global one (identity unless sharded).
    virtual void reduce_grad_norm_sq(torch::Tensor&) const {}
    void set_grad_params(std::vector<torch::Tensor> p) { params_for_grads_ = std::move(p); }

private:
    std::vector<torch::Tensor> params_for_grads_;
};

/// One rank: nothing to do.
class NoDataParallel : public DataParallel {
public:
    void before_backward(bool) override {}
    void finish_backward() override {}
    std::string describe() const override { return "single rank"; }
};

class DistributedDataParallel : public DataParallel {
public:
    DistributedDataParallel(std::vector<torch::Tensor> params, const dist::Group& group,
                            const config::DataParallelConfig& cfg);
    void before_backward(bool last) override;
    void finish_backward() override;
    std::string describe() const override;
    /// Number of buckets (for tests and logs).

private:
    struct Bucket {
        std::vector<std::size_t> params;  // indices into params_
        std::vector<int64_t> offsets;
        torch::Tensor flat;
        std::size_t ready = 0;
        bool launched = false;
        c10::intrusive_ptr<c10d::Work> work;
    };
    void on_grad(std::size_t param, const torch::Tensor& grad);
    void launch_ready_buckets();
    void launch(Bucket& b);

    std::vector<torch::Tensor> params_;
    std::vector<std::size_t> bucket_of_;
    std::vector<bool> got_grad_;
    std::vector<Bucket> buckets_;
    std::size_t next_launch_ = 0;
    const dist::Group& group_;
    torch::ScalarType reduce_dtype_;
    bool sync_ = false;
};

}  // namespace lathe::train
