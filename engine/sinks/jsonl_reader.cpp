#include "engine/sinks/jsonl_reader.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <system_error>

namespace lathe::sinks {

namespace {

using Json = nlohmann::ordered_json;  // keeps the values in file order

[[noreturn]] void fail_read(const std::string& path, const char* what, int err) {
    throw std::runtime_error("cannot read " + path + ": " + what + ": " +
                             std::error_code(err, std::generic_category()).message());
}

// The file from byte `offset` to its end. If the file is now shorter than `offset` (a new run
// rewrote it), reads from the start and sets *restarted.
std::string read_from(const std::string& path, std::uint64_t& offset, bool* restarted) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) fail_read(path, "open", errno);
    if (offset > 0) {
        if (std::fseek(f.get(), 0, SEEK_END) != 0) fail_read(path, "seek", errno);
        const long size = std::ftell(f.get());
        if (size < 0) fail_read(path, "seek", errno);
        if (offset > static_cast<std::uint64_t>(size)) {
            offset = 0;
            if (restarted) *restarted = true;
        }
        if (std::fseek(f.get(), static_cast<long>(offset), SEEK_SET) != 0) {
            fail_read(path, "seek", errno);
        }
    }
    std::string text;
    char buf[1 << 16];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
    if (std::ferror(f.get())) fail_read(path, "read", errno);
    return text;
}

}  // namespace

std::optional<MetricRecord> parse_jsonl_metric_line(std::string_view line) {
    Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    auto step = j.find("step");
    if (step == j.end() || !step->is_number_integer()) return std::nullopt;
    MetricRecord r;
    r.step = step->get<std::int64_t>();
    if (auto t = j.find("tokens"); t != j.end() && t->is_number())
        r.tokens = t->get<std::int64_t>();
    if (auto w = j.find("wall_time"); w != j.end() && w->is_number()) {
        r.wall_time = w->get<double>();
    }
    if (auto v = j.find("values"); v != j.end()) {
        if (!v->is_object()) return std::nullopt;
        r.values.reserve(v->size());
        for (auto it = v->begin(); it != v->end(); ++it) {
            if (it->is_number()) {
                r.values.emplace_back(it.key(), it->get<double>());
            } else if (it->is_null()) {
                r.values.emplace_back(it.key(), std::numeric_limits<double>::quiet_NaN());
            } else {
                return std::nullopt;
            }
        }
    }
    return r;
}

namespace {

// The complete lines of `text`, which starts at byte `offset` of the file.
JsonlChunk parse_complete_lines(const std::string& text, std::uint64_t offset) {
    JsonlChunk chunk;
    chunk.next_offset = offset;
    std::size_t pos = 0;
    for (;;) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string::npos) break;  // unterminated tail: maybe still being written
        std::string_view line(text.data() + pos, end - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") != std::string_view::npos) {
            if (auto r = parse_jsonl_metric_line(line)) {
                chunk.records.push_back(std::move(*r));
            } else {
                ++chunk.bad_lines;
            }
        }
        pos = end + 1;
    }
    chunk.next_offset = offset + pos;
    return chunk;
}

}  // namespace

JsonlChunk read_jsonl_metrics_from(const std::string& path, std::uint64_t offset) {
    bool restarted = false;
    std::string text = read_from(path, offset, &restarted);
    JsonlChunk chunk = parse_complete_lines(text, offset);
    chunk.restarted = restarted;
    return chunk;
}

std::vector<MetricRecord> read_jsonl_metrics(const std::string& path, std::size_t* bad_lines) {
    std::uint64_t offset = 0;
    const std::string text = read_from(path, offset, nullptr);  // one read: a live writer appends
    JsonlChunk chunk = parse_complete_lines(text, 0);
    // The unterminated tail: a complete record that lacks only its newline, or a half-written one.
    std::string_view tail(text);
    tail.remove_prefix(chunk.next_offset);
    if (tail.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        if (auto r = parse_jsonl_metric_line(tail)) chunk.records.push_back(std::move(*r));
    }
    if (bad_lines) *bad_lines = chunk.bad_lines;
    return std::move(chunk.records);
}

}  // namespace lathe::sinks
