#include "engine/sinks/tensorboard_sink.h"

#include "engine/run_folder/crc32c.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace lathe::sinks {

namespace tfevents {

using run_folder::crc32c;
using run_folder::mask_crc;

namespace {

// Protobuf wire types.
constexpr std::uint32_t kVarint = 0;
constexpr std::uint32_t kFixed64 = 1;
constexpr std::uint32_t kLengthDelimited = 2;
constexpr std::uint32_t kFixed32 = 5;

// Event fields.
constexpr std::uint32_t kEventWallTime = 1;     // double
constexpr std::uint32_t kEventStep = 2;         // int64
constexpr std::uint32_t kEventFileVersion = 3;  // string
constexpr std::uint32_t kEventSummary = 5;      // Summary
constexpr std::uint32_t kEventSessionLog = 7;   // SessionLog
// SessionLog fields and values.
constexpr std::uint32_t kSessionLogStatus = 1;  // enum SessionStatus
constexpr std::uint64_t kSessionStart = 1;
// Summary fields.
constexpr std::uint32_t kSummaryValue = 1;  // repeated Summary.Value
// Summary.Value fields.
constexpr std::uint32_t kValueTag = 1;          // string
constexpr std::uint32_t kValueSimpleValue = 2;  // float

void put_varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}

void put_key(std::string& out, std::uint32_t field, std::uint32_t wire_type) {
    put_varint(out, (static_cast<std::uint64_t>(field) << 3) | wire_type);
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

void put_double(std::string& out, std::uint32_t field, double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(out, field, kFixed64);
    put_le(out, bits, 8);
}

void put_float(std::string& out, std::uint32_t field, float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(out, field, kFixed32);
    put_le(out, bits, 4);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
    put_key(out, field, kLengthDelimited);
    put_varint(out, bytes.size());
    out += bytes;
}

std::size_t varint_size(std::uint64_t v) {
    std::size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

}  // namespace

void append_record(std::string& out, std::string_view data) {
    std::string header;
    put_le(header, data.size(), 8);
    out += header;
    put_le(out, mask_crc(crc32c(header)), 4);
    out += data;
    put_le(out, mask_crc(crc32c(data)), 4);
}

std::string encode_file_version_event(double wall_time) {
    std::string event;
    put_double(event, kEventWallTime, wall_time);
    put_bytes(event, kEventFileVersion, "brain.Event:2");
    return event;
}

std::string encode_session_start_event(double wall_time, int64_t step) {
    std::string event;
    put_double(event, kEventWallTime, wall_time);
    put_key(event, kEventStep, kVarint);
    put_varint(event, static_cast<std::uint64_t>(step));
    std::string session_log;
    put_key(session_log, kSessionLogStatus, kVarint);
    put_varint(session_log, kSessionStart);
    put_bytes(event, kEventSessionLog, session_log);
    return event;
}

void encode_scalar_event(const MetricRecord& record, std::string& out) {
    put_double(out, kEventWallTime, record.wall_time);
    put_key(out, kEventStep, kVarint);
    put_varint(out, static_cast<std::uint64_t>(record.step));  // negative: 10-byte two's complement

    // Summary length first, so the values are encoded straight into `out` without temporaries.
    // Value = tag (key, length, bytes) + simple_value (key, 4 bytes).
    auto value_size = [](const std::string& tag) {
        return 1 + varint_size(tag.size()) + tag.size() + 1 + 4;
    };
    std::size_t summary_size = 0;
    for (const auto& [name, v] : record.values) {
        std::size_t n = value_size(name);
        summary_size += 1 + varint_size(n) + n;
    }
    put_key(out, kEventSummary, kLengthDelimited);
    put_varint(out, summary_size);
    for (const auto& [name, v] : record.values) {
        put_key(out, kSummaryValue, kLengthDelimited);
        put_varint(out, value_size(name));
        put_bytes(out, kValueTag, name);
        put_float(out, kValueSimpleValue, static_cast<float>(v));
    }
}

}  // namespace tfevents

std::string TensorBoardSink::default_file_name(double unix_time) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
    return "events.out.tfevents." + std::to_string(static_cast<long long>(std::floor(unix_time))) +
           "." + host + ".lathe";
}

std::string TensorBoardSink::unique_path_in(const std::string& dir) {
    namespace fs = std::filesystem;
    std::string name = default_file_name(unix_time_now());
    fs::path path = fs::path(dir) / name;
    std::error_code ec;
    const std::string stem = name.substr(0, name.size() - std::strlen(".lathe"));
    for (int i = 1; fs::exists(path, ec) && i < 1000; ++i) {
        path = fs::path(dir) / (stem + "." + std::to_string(i) + ".lathe");
    }
    return path.string();
}

TensorBoardSink::TensorBoardSink(std::string path, std::optional<int64_t> purge_step)
    : FileSink(std::move(path)), purge_step_(purge_step) {}

void TensorBoardSink::do_open() {
    file_.open(target(), false);
    frame_.clear();
    const double now = unix_time_now();
    tfevents::append_record(frame_, tfevents::encode_file_version_event(now));
    if (purge_step_)
        tfevents::append_record(frame_, tfevents::encode_session_start_event(now, *purge_step_));
    file_.write(frame_);
}

void TensorBoardSink::do_write(const MetricRecord& record) {
    event_.clear();
    tfevents::encode_scalar_event(record, event_);
    frame_.clear();
    tfevents::append_record(frame_, event_);
    file_.write(frame_);
}

}  // namespace lathe::sinks
