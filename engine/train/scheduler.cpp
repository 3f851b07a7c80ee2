#include "engine/train/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lathe::train {

namespace {

using config::ScheduleParams;
using config::SchedulerName;
using config::ScheduleShape;

// Python's round() of a float: to the nearest integer, ties to even.
int64_t py_round(double x) {
    return static_cast<int64_t>(std::nearbyint(x));
}

double linear_warmup(double lr, int64_t current, int64_t warmup, double warmup_min_lr) {
    if (warmup <= 0) return lr;  // no warmup (OLMo-core divides by zero here)
    return warmup_min_lr + (lr - warmup_min_lr) * static_cast<double>(std::min(current, warmup)) /
                               static_cast<double>(warmup);
}

double linear_decay(double lr, int64_t step_from_end, int64_t decay, double decay_min_lr) {
    if (decay <= 0) return decay_min_lr;  // the end of a zero-length decay
    return decay_min_lr + (lr - decay_min_lr) *
                              static_cast<double>(std::min(step_from_end, decay)) /
                              static_cast<double>(decay);
}

double interpolate(ScheduleShape shape, double start, double end, int64_t current,
                   int64_t duration) {
    const double c = static_cast<double>(current), d = static_cast<double>(duration);
    if (shape == ScheduleShape::linear) return start + (end - start) * c / d;
    return end + (start - end) * (1 + std::cos(M_PI * c / d)) / 2;
}

double fraction_or(const std::optional<double>& value, const std::optional<double>& fraction,
                   double lr) {
    return value ? *value : lr * fraction.value_or(0.0);
}

int64_t warmup_of(const ScheduleParams& p, int64_t t_max) {
    if (p.warmup) return *p.warmup;
    return py_round(static_cast<double>(t_max) * p.warmup_fraction.value_or(0.0));
}

int64_t decay_of(const ScheduleParams& p, int64_t length) {
    if (p.decay) return *p.decay;
    return py_round(static_cast<double>(length) * p.decay_fraction.value_or(0.0));
}

double cos_with_warmup(const ScheduleParams& p, double lr, int64_t current, int64_t t_max) {
    t_max = p.t_max.value_or(t_max);
    const double eta_min = lr * p.alpha_f;
    const int64_t warmup = warmup_of(p, t_max);
    if (current < warmup) return linear_warmup(lr, current, warmup, p.warmup_min_lr);
    if (current >= t_max) return eta_min;
    const double c = static_cast<double>(current - warmup), t = static_cast<double>(t_max - warmup);
    return eta_min + (lr - eta_min) * (1 + std::cos(M_PI * c / t)) / 2;
}

double composable_main(const ScheduleParams& p, double lr, int64_t current) {
    current = std::max<int64_t>(current, 0);
    int64_t stage_start = 0;
    double previous_end = lr;
    for (const auto& st : p.stages) {
        const double start = (!st.start_lr && !st.start_lr_fraction)
                                 ? previous_end
                                 : fraction_or(st.start_lr, st.start_lr_fraction, lr);
        const double end = fraction_or(st.end_lr, st.end_lr_fraction, lr);
        const int64_t stage_end = stage_start + st.duration;
        if (current < stage_end)
            return interpolate(st.shape, start, end, current - stage_start, st.duration);
        previous_end = end;
        stage_start = stage_end;
    }
    return previous_end;
}

template <class Main>
double with_override(const ScheduleParams& p, double lr, int64_t current, Main&& main) {
    if (!p.override_decay || current < p.override_decay->start) return main(current);
    const auto& od = *p.override_decay;
    const double start = main(od.start);
    const double end = fraction_or(od.end_lr, od.end_lr_fraction, lr);
    const int64_t c = current - od.start;
    if (c < od.duration) return interpolate(od.shape, start, end, c, od.duration);
    return end;
}

double wsds(const ScheduleParams& p, double lr, int64_t current) {
    const auto& periods = p.period_lengths;
    const int64_t warmup =
        p.warmup ? *p.warmup
                 : py_round(p.warmup_fraction.value_or(0.0) * static_cast<double>(periods.front()));
    auto peak = [&](std::size_t i) {
        return p.period_lr_multipliers.empty() ? lr : lr * p.period_lr_multipliers[i];
    };
    if (current < warmup) return linear_warmup(peak(0), current, warmup, p.warmup_min_lr);
    std::vector<int64_t> adjusted(periods);
    adjusted[0] -= warmup;
    std::vector<int64_t> ends(adjusted.size());
    std::partial_sum(adjusted.begin(), adjusted.end(), ends.begin());
    const int64_t x = current - warmup;
    if (x >= ends.back()) return p.decay_min_lr;
    std::size_t i = 0;
    while (i + 1 < ends.size() && x > ends[i]) ++i;
    const int64_t start = i == 0 ? 0 : ends[i - 1];
    const int64_t len = adjusted[i];
    const int64_t pos = std::min(std::max<int64_t>(x - start, 0), len);
    const int64_t d = decay_of(p, periods[i]);
    const int64_t stable = len - d;
    if (pos < stable) return peak(i);
    return linear_decay(peak(i), d - (pos - stable), d, p.decay_min_lr);
}

double params_lr(const ScheduleParams& p, double lr, int64_t current, int64_t t_max) {
    switch (p.name) {
        case SchedulerName::constant:
            return lr;
        case SchedulerName::constant_with_warmup: {
            const int64_t warmup = warmup_of(p, t_max);
            if (current <= warmup) return linear_warmup(lr, current, warmup, p.warmup_min_lr);
            return lr;
        }
        case SchedulerName::wsd: {
            const int64_t warmup = warmup_of(p, t_max);
            if (current <= warmup) return linear_warmup(lr, current, warmup, p.warmup_min_lr);
            const int64_t decay = decay_of(p, t_max);
            if (current >= t_max - decay)
                return linear_decay(lr, t_max - current, decay, p.decay_min_lr);
            return lr;
        }
        case SchedulerName::power_lr: {
            const int64_t warmup = warmup_of(p, t_max);
            const int64_t decay = decay_of(p, t_max);
            if (current <= warmup) return linear_warmup(lr, current, warmup, p.warmup_min_lr);
            const double w = static_cast<double>(warmup);
            if (current >= t_max - decay) {
                const double tail = lr * std::pow(static_cast<double>(t_max - decay) / w, p.b);
                return linear_decay(tail, t_max - current, decay, p.decay_min_lr);
            }
            return lr * std::pow(static_cast<double>(current) / w, p.b);
        }
        case SchedulerName::linear_with_warmup: {
            t_max = p.t_max.value_or(t_max);
            const double eta_min = lr * p.alpha_f;
            const int64_t warmup = warmup_of(p, t_max);
            if (current < warmup) return linear_warmup(lr, current, warmup, p.warmup_min_lr);
            if (current >= t_max) return eta_min;
            return lr - (lr - eta_min) * (static_cast<double>(current - warmup) /
                                          static_cast<double>(t_max - warmup));
        }
        case SchedulerName::inv_sqrt_with_warmup: {
            const int64_t warmup = warmup_of(p, t_max);
            if (current < warmup) return linear_warmup(lr, current, warmup, p.warmup_min_lr);
            if (current <= 0) return lr;  // warmup 0 at position 0 (OLMo-core divides by zero)
            const double eta_min = lr * p.alpha_f;
            return eta_min + (lr - eta_min) * std::sqrt(static_cast<double>(warmup) /
                                                        static_cast<double>(current));
        }
        case SchedulerName::cos_with_warmup:
            return cos_with_warmup(p, lr, current, t_max);
        case SchedulerName::half_cos_with_warmup: {
            t_max = p.t_max.value_or(t_max);
            const double eta_min = lr * p.alpha_f;
            const int64_t warmup = warmup_of(p, t_max);
            if (current < warmup) {
                const double max_lr = eta_min + (lr - eta_min) / 2;
                return linear_warmup(max_lr, current, warmup, p.warmup_min_lr);
            }
            if (current >= t_max) return eta_min;
            int64_t c = current - warmup, t = t_max - warmup;
            c += t;
            t *= 2;
            return eta_min +
                   (lr - eta_min) *
                       (1 + std::cos(M_PI * static_cast<double>(c) / static_cast<double>(t))) / 2;
        }
        case SchedulerName::cos_with_warmup_and_linear_decay: {
            const int64_t decay = decay_of(p, t_max);
            if (current >= t_max - decay) {
                const double final_cos = cos_with_warmup(p, lr, t_max - decay, t_max);
                return linear_decay(final_cos, t_max - current, decay, p.decay_min_lr);
            }
            return cos_with_warmup(p, lr, current, t_max);
        }
        case SchedulerName::wsds:
            return wsds(p, lr, current);
        case SchedulerName::exponential: {
            if (current >= t_max) return lr;
            if (current == 0) return p.lr_min;
            const double ratio = static_cast<double>(current) / static_cast<double>(t_max);
            return p.lr_min * std::pow(lr / p.lr_min, ratio);
        }
        case SchedulerName::composable:
            return with_override(p, lr, current,
                                 [&](int64_t c) { return composable_main(p, lr, c); });
        case SchedulerName::sequential:
            break;  // only at the top level: scheduler_lr
    }
    return lr;
}

double sequential(const config::SchedulerConfig& s, double lr, int64_t current, int64_t t_max) {
    for (std::size_t i = 0; i + 1 < s.schedulers.size() && i < s.schedulers_max.size(); ++i) {
        const auto& sub = s.schedulers[i];
        const int64_t m = s.schedulers_max[i];
        if (current <= m) return params_lr(sub, lr, current, std::min(t_max, m));
        // The next schedule starts from the LR this one ends at.
        lr = params_lr(sub, lr, m, m);
        current -= m;
        t_max -= m;
    }
    return params_lr(s.schedulers.back(), lr, current, t_max);
}

}  // namespace

double scheduler_lr(const config::SchedulerConfig& s, double lr, int64_t current, int64_t t_max) {
    if (s.name != SchedulerName::sequential) return params_lr(s, lr, current, t_max);
    if (s.schedulers.empty()) return lr;  // rejected by check_consistency
    return with_override(s, lr, current, [&](int64_t c) { return sequential(s, lr, c, t_max); });
}

}  // namespace lathe::train
