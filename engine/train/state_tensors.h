// Reading a checkpoint's whole tensors back into a train module, plain or FSDP-sharded: one
// definition of the checks and of where an optimizer's state lives ("optim.state.NAME.KEY").
#pragma once

#include "engine/train/optimizer.h"

#include <torch/torch.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace lathe::train {

using StateTensors = std::map<std::string, torch::Tensor>;

/// tensors[key], which must have `shape`; throws lathe::Error naming the key otherwise.
const torch::Tensor& checkpoint_tensor(const StateTensors& tensors, const std::string& key,
                                       c10::IntArrayRef shape);

/// The saved optimizer state of parameter `name`, each element tensor (exp_avg, ...) as
/// `element(key)` makes it from "optim.state.NAME.KEY" (checked, or sliced), plus the step counter
/// where the optimizer has one; nullopt when the checkpoint has none for it (saved at step 0).
std::optional<StateTensors> saved_optimizer_state(
    const Optimizer& optim, const StateTensors& tensors, const std::string& name,
    const std::function<torch::Tensor(const std::string& key)>& element);

}  // namespace lathe::train
