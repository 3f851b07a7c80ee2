// MetricSink: where metric records go (a file in the run folder). Public non-virtual methods own
// the state machine and the failure policy; subclasses fill in the protected hooks.
#pragma once

#include "engine/sinks/metric_record.h"

#include <cstdint>
#include <functional>
#include <string>

namespace lathe::sinks {

/// A destination for metric records. Losing a metrics file must never stop training, so a sink
/// never throws into its caller: the first failure (open, write, flush or close: disk full,
/// permission, missing folder) is reported as ONE line through the error handler, naming the file
/// and the reason, and from then on every call is a no-op.
///
/// The file is opened by open() or, lazily, by the first write(). After close() writes are
/// ignored. A sink is not thread-safe; AsyncSinkWriter serializes access to its sinks (and then
/// calls the error handler from its background thread).
///
/// Subclasses implement the do_* hooks and report failures by throwing (any std::exception; its
/// what() becomes the reason). A subclass destructor must call close(), because the base
/// destructor cannot reach the hooks (FileSink, the base of the file sinks, does).
class MetricSink {
public:
    using ErrorHandler = std::function<void(const std::string&)>;

    virtual ~MetricSink() = default;
    MetricSink(const MetricSink&) = delete;
    MetricSink& operator=(const MetricSink&) = delete;

    /// Opens the file now (optional: write() opens it too). False if the sink has failed or is
    /// closed, so a caller can check a run folder up front.
    bool open();
    /// Writes one record and flushes it, so a live reader (GUI, TensorBoard) sees it at once.
    void write(const MetricRecord& record);
    void flush();
    /// Flushes and releases the file; idempotent.
    void close();

    /// Receives the one error line. The default prints "lathe: <line>" to stderr. Set it before
    /// the first write; with AsyncSinkWriter it is called from the writer's thread.
    void set_error_handler(ErrorHandler handler);

    /// The file this sink writes (used in the error line).
    const std::string& target() const { return target_; }
    bool failed() const { return state_ == State::failed; }
    bool is_closed() const { return state_ == State::closed; }
    /// The error line that was reported, empty if none.
    const std::string& error() const { return error_; }
    /// Records handed to do_write() without a failure.
    std::uint64_t records_written() const { return records_written_; }

protected:
    explicit MetricSink(std::string target);

    virtual void do_open() = 0;
    virtual void do_write(const MetricRecord& record) = 0;
    virtual void do_flush() = 0;
    virtual void do_close() = 0;

private:
    enum class State { fresh, open, closed, failed };

    bool ensure_open();
    /// Runs f; an exception becomes the sink's one reported failure.
    template <class F>
    void guarded(const char* phase, F&& f);
    void fail(const char* phase, const std::string& reason);

    std::string target_;
    ErrorHandler on_error_;
    State state_ = State::fresh;
    std::string error_;
    std::uint64_t records_written_ = 0;
};

/// How a file sink treats an existing file: start over, or continue it (resuming a run).
enum class OpenMode { truncate, append };

}  // namespace lathe::sinks
