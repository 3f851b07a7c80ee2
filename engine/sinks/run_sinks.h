// The standard metric files of a run folder, for the metric_saver callback (rank 0).
#pragma once

#include "engine/sinks/metric_sink.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lathe::sinks {

/// Which files make_run_sinks() creates.
struct RunSinkOptions {
    bool jsonl = true;                   ///< metrics.jsonl (the GUI reads this one)
    bool csv = true;                     ///< metrics.csv
    bool tensorboard = true;             ///< events.out.tfevents.<time>.<host>.lathe
    OpenMode mode = OpenMode::truncate;  ///< append when resuming (JSONL, CSV)
    /// The first step this run will write: TensorBoard drops the points of earlier event files at
    /// or after it (steps that a resume trains again). JSONL and CSV keep every line.
    std::optional<int64_t> first_step;
};

/// Sinks writing into `run_dir` (which must exist), each with `on_error` if it is set. Nothing
/// is opened yet; call open() on each to check the folder up front.
std::vector<std::unique_ptr<MetricSink>> make_run_sinks(
    const std::string& run_dir, const RunSinkOptions& options = {},
    const MetricSink::ErrorHandler& on_error = {});

}  // namespace lathe::sinks
