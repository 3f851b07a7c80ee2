#include "engine/sinks/csv_sink.h"

#include "engine/sinks/number_text.h"

#include <cmath>

namespace lathe::sinks {

namespace {

void append_csv_number(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "nan";
    } else if (std::isinf(v)) {
        out += v > 0 ? "inf" : "-inf";
    } else {
        detail::append_double(out, v);
    }
}

}  // namespace

void CsvSink::append_field(std::string& out, std::string_view field) {
    if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
        out += field;
        return;
    }
    out += '"';
    for (char c : field) {
        if (c == '"') out += '"';
        out += c;
    }
    out += '"';
}

void CsvSink::format_to(const MetricRecord& record, std::string& out) {
    std::string prefix;
    detail::append_int(prefix, record.step);
    prefix += ',';
    detail::append_int(prefix, record.tokens);
    prefix += ',';
    append_csv_number(prefix, record.wall_time);
    prefix += ',';
    for (const auto& [name, value] : record.values) {
        out += prefix;
        append_field(out, name);
        out += ',';
        append_csv_number(out, value);
        out += '\n';
    }
}

std::string CsvSink::format(const MetricRecord& record) {
    std::string s;
    format_to(record, s);
    return s;
}

CsvSink::CsvSink(std::string path, OpenMode mode) : FileSink(std::move(path)), mode_(mode) {}

void CsvSink::do_open() {
    file_.open(target(), mode_ == OpenMode::append);
    if (file_.initial_size() == 0) file_.write(kHeader);  // a row cut short is already cut off
}

void CsvSink::do_write(const MetricRecord& record) {
    rows_.clear();
    format_to(record, rows_);
    file_.write(rows_);
}

}  // namespace lathe::sinks
