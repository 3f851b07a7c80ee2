// FileWriter: a thin stdio wrapper for the file sinks that throws with errno's reason, so the
// MetricSink base can report "No space left on device" rather than a bare failure. FileSink: the
// MetricSink of one file, whose subclasses only say how to open it and write a record.
#pragma once

#include "engine/sinks/metric_sink.h"

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace lathe::sinks {

class FileWriter {
public:
    FileWriter() = default;
    ~FileWriter();
    FileWriter(const FileWriter&) = delete;
    FileWriter& operator=(const FileWriter&) = delete;

    /// Opens for writing (truncating) or appending (a partial last line is cut off first). Every
    /// method throws std::runtime_error with
    /// errno's text ("No space left on device") on failure.
    void open(const std::string& path, bool append);
    bool is_open() const { return file_ != nullptr; }
    /// Bytes in the file when it was opened (0 when truncated).
    long initial_size() const { return initial_size_; }
    /// The file's last byte when it was opened in append mode ('\n' if empty or truncated).
    char initial_last_byte() const { return initial_last_byte_; }
    /// Bytes of a partial last line (a crash or a full disk mid-record) cut off by open() in
    /// append mode, so the file holds whole records only and the next one starts a line.
    long trimmed_bytes() const { return trimmed_bytes_; }

    void write(std::string_view bytes);
    void flush();
    /// Always releases the handle; throws if the final flush or close failed.
    void close();

private:
    void trim_partial_line();

    std::FILE* file_ = nullptr;
    long initial_size_ = 0;
    long trimmed_bytes_ = 0;
    char initial_last_byte_ = '\n';
};

/// Throws std::runtime_error(strerror(err)), thread-safely.
[[noreturn]] void throw_errno(int err);

/// A sink writing one file through a FileWriter: flush and close are the file's; subclasses
/// implement do_open() (open `file_`, write any header) and do_write().
class FileSink : public MetricSink {
public:
    ~FileSink() override { close(); }

protected:
    explicit FileSink(std::string path) : MetricSink(std::move(path)) {}
    void do_flush() final { file_.flush(); }
    void do_close() final { file_.close(); }

    FileWriter file_;
};

}  // namespace lathe::sinks
