// AsyncSinkWriter: moves metric I/O off the training thread.
#pragma once

#include "engine/sinks/metric_sink.h"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace lathe::sinks {

/// Owns a list of sinks and one background thread that writes every submitted record to every
/// sink, in submission order, flushing after each batch it takes from the queue.
///
/// submit() only moves the record into a queue under a short lock: it never waits for I/O.
/// Backpressure policy: if `capacity` records (default 10000) are already waiting, the disk is
/// stalled far behind training; submit() then blocks until there is room rather than drop
/// metrics or grow without bound, and reports one warning line through the error handler the
/// first time that happens (blocked_submits() counts them). Records submitted after close() are
/// dropped and counted (dropped()).
///
/// All methods are thread-safe. close() (also run by the destructor) drains the queue, closes the
/// sinks and joins the thread. Sink failures are handled by the sinks themselves (one line, then
/// no-ops), so one failing file does not stop the others.
class AsyncSinkWriter {
public:
    using ErrorHandler = MetricSink::ErrorHandler;
    static constexpr std::size_t kDefaultCapacity = 10000;

    explicit AsyncSinkWriter(std::vector<std::unique_ptr<MetricSink>> sinks,
                             std::size_t capacity = kDefaultCapacity);
    ~AsyncSinkWriter();
    AsyncSinkWriter(const AsyncSinkWriter&) = delete;
    AsyncSinkWriter& operator=(const AsyncSinkWriter&) = delete;

    void submit(MetricRecord record);
    /// Returns when every record submitted before the call has been written and flushed.
    void flush();
    /// Drains, closes every sink and joins the thread; idempotent.
    void close();

    /// For the writer's own warnings (backpressure); default: "lathe: <line>" on stderr.
    void set_error_handler(ErrorHandler handler);

    std::uint64_t submitted() const;
    std::uint64_t written() const;
    std::uint64_t dropped() const;
    std::uint64_t blocked_submits() const;
    /// CPU time the background thread has used so far (all its writing and flushing), seconds.
    double thread_cpu_seconds() const;
    /// The sinks, e.g. to look at failed(); do not call them while the writer is open.
    const std::vector<std::unique_ptr<MetricSink>>& sinks() const { return sinks_; }

private:
    void run();

    std::vector<std::unique_ptr<MetricSink>> sinks_;
    const std::size_t capacity_;

    mutable std::mutex mutex_;
    std::condition_variable has_work_;
    std::condition_variable has_room_;
    std::condition_variable idle_;
    std::deque<MetricRecord> queue_;
    bool closing_ = false;
    bool finished_ = false;  ///< the thread has drained and closed the sinks
    std::uint64_t submitted_ = 0;
    std::uint64_t written_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t blocked_ = 0;
    double thread_cpu_s_ = 0;
    ErrorHandler on_error_;

    std::mutex close_mutex_;
    std::thread thread_;
};

}  // namespace lathe::sinks
