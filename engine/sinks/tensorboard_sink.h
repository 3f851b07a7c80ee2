// TensorBoardSink: an events.out.tfevents.* file (TFRecord framing of Event protobufs), written
// by hand so the engine needs neither protobuf nor TensorFlow.
#pragma once

#include "engine/sinks/file_writer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::sinks {

/// Writes an Event {wall_time, file_version = "brain.Event:2"} when the file opens, then one
/// Event {wall_time, step, summary} per record whose Summary holds one Value {tag, simple_value}
/// per metric (float32: TensorBoard's scalar type; NaN stays NaN). `tokens` is not written (it is
/// in metrics.jsonl / metrics.csv). Every record is flushed, and readers stop quietly at a
/// half-written last record, so a live TensorBoard can follow the file. The file is always new
/// (truncated): TensorBoard merges every events file in the folder, so a resumed run simply adds
/// one. With `purge_step`, a SessionLog START event at that step follows the file version, as
/// PyTorch's SummaryWriter(purge_step=N) writes it: TensorBoard then drops the points at or after
/// it from the earlier files, so steps a resume trains again appear once, with their new values.
class TensorBoardSink final : public FileSink {
public:
    explicit TensorBoardSink(std::string path, std::optional<int64_t> purge_step = std::nullopt);

    /// "events.out.tfevents.<unix seconds>.<hostname>.lathe" (TensorBoard picks up any name that
    /// contains "tfevents").
    static std::string default_file_name(double unix_time);
    /// default_file_name(now) in `dir`, with ".1", ".2"... before ".lathe" if that file exists
    /// (two sinks opened within one second).
    static std::string unique_path_in(const std::string& dir);

protected:
    void do_open() override;
    void do_write(const MetricRecord& record) override;

private:
    std::optional<int64_t> purge_step_;
    std::string event_;
    std::string frame_;
};

/// The pieces, for tests and other writers.
namespace tfevents {
/// Appends a TFRecord: uint64 length (LE), masked CRC-32C of those 8 bytes, the data, masked
/// CRC-32C of the data.
void append_record(std::string& out, std::string_view data);
/// Event {wall_time = 1, file_version = 3}.
std::string encode_file_version_event(double wall_time);
/// Event {wall_time = 1, step = 2, session_log = 7 {status = 1: START}}.
std::string encode_session_start_event(double wall_time, int64_t step);
/// Event {wall_time = 1, step = 2, summary = 5 {value = 1 {tag = 1, simple_value = 2}...}}.
void encode_scalar_event(const MetricRecord& record, std::string& out);
}  // namespace tfevents

}  // namespace lathe::sinks
