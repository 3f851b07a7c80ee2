// Compute copies (train_module.dp_config.param_dtype without FSDP): the model's forward and
// backward run on low-precision copies of its parameters, while fp32 master weights, their
// gradients and the optimizer state stay in fp32, as OLMo-core's FSDP MixedPrecisionPolicy
// (param_dtype=bf16, reduce_dtype=fp32) does on one rank. The copies are made once per optimizer
// step instead of autocast's once per matrix product and micro-batch; each micro-batch's gradients
// are added to the masters' in fp32, so accumulation over micro-batches does not round to bf16.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace lathe::train {

class ComputeCopies {
public:
    /// Takes the model's parameters (named, in the model's order): each becomes a `dtype` copy in
    /// place (the module computes with it), and an fp32 clone of it becomes its master.
    ComputeCopies(const std::vector<std::pair<std::string, torch::Tensor>>& params,
                  torch::ScalarType dtype);

    /// The fp32 masters, in the model's order, named as the model's parameters: what the
    /// optimizer updates, clips and checkpoints.
    const std::vector<std::pair<std::string, torch::Tensor>>& masters() const { return masters_; }
    std::vector<torch::Tensor> master_tensors() const;
    torch::ScalarType dtype() const { return dtype_; }

    /// After a micro-batch's backward: adds each copy's gradient to its master's (in fp32) and
    /// drops the copy's, so the next micro-batch starts from none.
    void accumulate_grads();
    /// After the masters change (an optimizer step, a checkpoint load): the copies again.
    void refresh();

private:
    std::vector<std::pair<std::string, torch::Tensor>> masters_;
    std::vector<torch::Tensor> copies_;
    torch::ScalarType dtype_;
};

}  // namespace lathe::train
