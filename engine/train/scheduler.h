// Learning-rate schedulers (OLMo-core's optim/scheduler.py semantics), evaluated at
// (current, total) where both count steps or tokens as the config says.
#pragma once

#include "engine/config/config.h"

#include <cstdint>

namespace lathe::train {

/// The LR for `initial_lr` at position `current` of `t_max` (both in the scheduler's units).
double scheduler_lr(const config::SchedulerConfig& s, double initial_lr, int64_t current,
                    int64_t t_max);

}  // namespace lathe::train
