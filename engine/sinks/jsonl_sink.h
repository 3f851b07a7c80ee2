// JsonlSink: metrics.jsonl, one JSON object per step; the GUI reads it back (jsonl_reader.h).
#pragma once

#include "engine/sinks/file_writer.h"

#include <string>

namespace lathe::sinks {

/// Writes one line per record:
///   {"step":N,"tokens":T,"wall_time":W,"values":{"name":value,...}}
/// Values keep the record's order; numbers are the shortest text that reads back to the same
/// double; NaN and infinities are written as null (JSON has no NaN). In append mode a half-written
/// last line (a crash mid-write) is terminated first so it cannot swallow the next record.
class JsonlSink final : public FileSink {
public:
    static constexpr const char* kFileName = "metrics.jsonl";

    explicit JsonlSink(std::string path, OpenMode mode = OpenMode::truncate);

    /// The line for a record, with its '\n'.
    static std::string format(const MetricRecord& record);
    /// Appends the line for a record to `out`.
    static void format_to(const MetricRecord& record, std::string& out);

protected:
    void do_open() override;
    void do_write(const MetricRecord& record) override;

private:
    OpenMode mode_;
    std::string line_;
};

/// Appends `s` as a JSON string literal (quotes, backslashes and control characters escaped).
void append_json_string(std::string& out, std::string_view s);
/// Appends the shortest decimal text that reads back to `v`; "null" for NaN and infinities.
void append_json_number(std::string& out, double v);

}  // namespace lathe::sinks
