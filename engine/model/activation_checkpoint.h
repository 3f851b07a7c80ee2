// Activation checkpointing (train_module.ac_config): a block, or one of its residual branches, runs
// without keeping its activations; backward runs it again with gradients on and back-propagates
// through the recomputation (the reentrant form of torch.utils.checkpoint). The recomputation runs
// under the forward's autocast state. OLMo2 has no dropout, so it is exact: losses and gradients
// equal those of the run without checkpointing (tests/engine/model/test_model.cpp,
// tests/engine/train/test_training.cpp).
#pragma once

#include "engine/model/transformer.h"

#include <torch/torch.h>

namespace lathe::model {

/// `block.run_part(part, x)`, checkpointed when gradients are being recorded; a plain call
/// otherwise (evaluation, generation, FSDP's gradient-free forward).
torch::Tensor checkpointed(BlockImpl& block, BlockImpl::Part part, const torch::Tensor& x);

}  // namespace lathe::model
