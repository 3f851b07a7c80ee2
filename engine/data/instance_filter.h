// OLMo-core's repetition filter (InstanceFilterConfig, find_periodic_sequences): an instance in
// which one n-gram of 1 to repetition_max_period tokens repeats repetition_max_count times or more
// in a row is masked, i.e. trains on nothing. The search and its counts follow OLMo-core's
// data/utils.py exactly, including how a run's ends are measured, so that the same instances are
// masked.
#pragma once

#include "engine/config/config.h"

#include <cstdint>
#include <vector>

namespace lathe::data {

/// One run of a repeating unit: tokens [start, end) repeat a unit of `period` tokens `times` times.
/// `start` can be negative at the very start of an instance, as OLMo-core computes it.
struct Repetition {
    int64_t start = 0;
    int64_t end = 0;
    int64_t period = 0;
    int64_t times = 0;
};

/// OLMo-core's find_periodic_sequences(ids, max_period, min_period): for each period from
/// min_period to min(max_period, n / 3), every maximal run of equal consecutive period-aligned
/// rows that repeats more than twice. Token ids are non-negative.
std::vector<Repetition> find_periodic_sequences(const int64_t* ids, int64_t n, int64_t max_period,
                                                int64_t min_period = 1);

/// Whether the instance passes the filter: false when some repetition reaches
/// repetition_max_count (OLMo-core's _validate_instance).
bool passes_instance_filter(const int64_t* ids, int64_t n, const config::InstanceFilterConfig& f);

}  // namespace lathe::data
