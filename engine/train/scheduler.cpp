#include "engine/train/scheduler.h"

#include <algorithm>
#include <cmath>

namespace lathe::train {

double scheduler_lr(const config::SchedulerConfig& s, double lr, int64_t current,
                    int64_t t_max_default) {
    using config::SchedulerName;
    const int64_t warmup = s.warmup;
    const int64_t t_max = s.t_max.value_or(t_max_default);
    const double eta_min = lr * s.alpha_f;
    auto warming = [&] {
        return s.warmup_min_lr +
               (lr - s.warmup_min_lr) * static_cast<double>(current) / static_cast<double>(warmup);
    };
    switch (s.name) {
        case SchedulerName::constant:
            return lr;
        case SchedulerName::constant_with_warmup:
            return current < warmup ? warming() : lr;
        case SchedulerName::linear_with_warmup:
            if (current < warmup) return warming();
            if (current >= t_max) return eta_min;
            return lr - (lr - eta_min) * static_cast<double>(current - warmup) /
                            static_cast<double>(t_max - warmup);
        case SchedulerName::cos_with_warmup:
            if (current < warmup) return warming();
            if (current >= t_max) return eta_min;
            return eta_min + (lr - eta_min) *
                                 (1.0 + std::cos(M_PI * static_cast<double>(current - warmup) /
                                                 static_cast<double>(t_max - warmup))) /
                                 2.0;
    }
    return lr;
}

}  // namespace lathe::train
