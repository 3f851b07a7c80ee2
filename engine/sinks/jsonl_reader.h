// Reading metrics.jsonl back (GUI, tests, tools). Torch-free and Qt-free.
#pragma once

#include "engine/sinks/metric_record.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::sinks {

/// One JSONL line as a record; nullopt if it is not a JSON object with an integer "step". Missing
/// "tokens"/"wall_time" read as 0, null values as NaN; values keep the file's order.
std::optional<MetricRecord> parse_jsonl_metric_line(std::string_view line);

/// What read_jsonl_metrics_from() found.
struct JsonlChunk {
    std::vector<MetricRecord> records;
    std::uint64_t next_offset = 0;  ///< byte offset just past the last complete line read
    std::size_t bad_lines = 0;      ///< complete lines that were not records (skipped)
    bool restarted = false;  ///< the file was shorter than offset (rewritten): read from byte 0
};

/// Reads the complete ('\n'-terminated) lines from byte `offset` on, for following a live file:
/// call again with next_offset. A half-written last line is left for the next call. If the file
/// is now shorter than `offset` (a new run truncated it), reading starts over at 0 and
/// `restarted` is set, so a follower can drop what it had. Throws
/// std::runtime_error("cannot read <path>: <reason>") if the file cannot be opened.
JsonlChunk read_jsonl_metrics_from(const std::string& path, std::uint64_t offset = 0);

/// Every record in the file. A last line without '\n' is used if it parses (a complete record)
/// and ignored otherwise (half-written); other bad lines are skipped, counted in `bad_lines` if
/// given. Throws std::runtime_error if the file cannot be opened.
std::vector<MetricRecord> read_jsonl_metrics(const std::string& path,
                                             std::size_t* bad_lines = nullptr);

}  // namespace lathe::sinks
