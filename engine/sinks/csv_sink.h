// CsvSink: metrics.csv in long format, so metrics that appear mid-run need no new columns.
#pragma once

#include "engine/sinks/file_writer.h"

#include <string>
#include <string_view>

namespace lathe::sinks {

/// Writes the header `step,tokens,wall_time,name,value` and then one row per metric per record,
/// in the record's order. Long format because names can appear after the header is written (eval
/// metrics, a new throughput counter): a wide file would need its header rewritten. A wide table
/// is one pivot away (pandas: df.pivot(index="step", columns="name", values="value")).
///
/// Fields follow RFC 4180: a field containing a comma, a double quote, CR or LF is quoted and its
/// quotes doubled. Numbers are the shortest text that reads back to the same double; non-finite
/// values are `nan`, `inf`, `-inf` (pandas and Python's float() read them). A record without
/// values writes no row. In append mode the header is written only if the file is empty.
class CsvSink final : public FileSink {
public:
    static constexpr const char* kFileName = "metrics.csv";
    static constexpr const char* kHeader = "step,tokens,wall_time,name,value\n";

    explicit CsvSink(std::string path, OpenMode mode = OpenMode::truncate);

    /// The rows for a record (no header).
    static std::string format(const MetricRecord& record);
    static void format_to(const MetricRecord& record, std::string& out);
    /// Appends one field, quoted if it needs to be.
    static void append_field(std::string& out, std::string_view field);

protected:
    void do_open() override;
    void do_write(const MetricRecord& record) override;

private:
    OpenMode mode_;
    std::string rows_;
};

}  // namespace lathe::sinks
