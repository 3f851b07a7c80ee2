// Learning-rate schedulers: OLMo-core's optim/scheduler.py, every scheduler it registers, with its
// arithmetic in its order (a peer test compares them at many points). Evaluated at (current, t_max),
// both counting steps or tokens as the config says. Torch-free.
#pragma once

#include "engine/config/config.h"

#include <cstdint>

namespace lathe::train {

/// The LR for a group whose peak is `initial_lr`, at position `current` of `t_max` (both in the
/// scheduler's units). The config must have passed config::check_consistency.
double scheduler_lr(const config::SchedulerConfig& s, double initial_lr, int64_t current,
                    int64_t t_max);

}  // namespace lathe::train
