#include "engine/sinks/jsonl_sink.h"

#include "engine/sinks/number_text.h"

#include <cmath>

namespace lathe::sinks {

void append_json_string(std::string& out, std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += kHex[c >> 4];
                    out += kHex[c & 0xF];
                } else {
                    out += ch;  // UTF-8 passes through
                }
        }
    }
    out += '"';
}

void append_json_number(std::string& out, double v) {
    if (!std::isfinite(v)) {
        out += "null";
        return;
    }
    detail::append_double(out, v);
}

void JsonlSink::format_to(const MetricRecord& record, std::string& out) {
    out += "{\"step\":";
    detail::append_int(out, record.step);
    out += ",\"tokens\":";
    detail::append_int(out, record.tokens);
    out += ",\"wall_time\":";
    append_json_number(out, record.wall_time);
    out += ",\"values\":{";
    bool first = true;
    for (const auto& [name, value] : record.values) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, name);
        out += ':';
        append_json_number(out, value);
    }
    out += "}}\n";
}

std::string JsonlSink::format(const MetricRecord& record) {
    std::string s;
    format_to(record, s);
    return s;
}

JsonlSink::JsonlSink(std::string path, OpenMode mode) : FileSink(std::move(path)), mode_(mode) {}

void JsonlSink::do_open() {
    // In append mode a fragment left by a crash or a full disk is cut off: whole records only.
    file_.open(target(), mode_ == OpenMode::append);
}

void JsonlSink::do_write(const MetricRecord& record) {
    line_.clear();
    format_to(record, line_);
    file_.write(line_);
}

}  // namespace lathe::sinks
