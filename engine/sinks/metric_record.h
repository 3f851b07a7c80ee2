// One step's metrics as the trainer hands them to the sinks (engine/sinks is torch-free and
// Qt-free, so the GUI can read what the engine writes with the same types).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lathe::sinks {

/// One step's metrics. `values` keeps the caller's order (insertion order, not sorted) and every
/// sink writes them in that order. Names are flat "group/name" strings ("train/CE loss",
/// "optim/LR") in UTF-8 and should be unique within a record (a JSON reader keeps the last of
/// duplicates). Values may be NaN or infinite; each sink documents how it spells them.
struct MetricRecord {
    std::int64_t step = 0;    ///< optimizer step (TensorBoard's x axis)
    std::int64_t tokens = 0;  ///< tokens trained on so far, all ranks together
    double wall_time = 0.0;   ///< seconds since the Unix epoch
    std::vector<std::pair<std::string, double>> values;

    void add(std::string name, double value) { values.emplace_back(std::move(name), value); }
};

/// Seconds since the Unix epoch, for MetricRecord::wall_time.
inline double unix_time_now() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace lathe::sinks
