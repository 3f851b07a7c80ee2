#include "engine/sinks/async_sink_writer.h"

#include <cstdio>
#include <ctime>
#include <exception>
#include <string>

namespace lathe::sinks {

namespace {
double this_thread_cpu_seconds() {
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

AsyncSinkWriter::AsyncSinkWriter(std::vector<std::unique_ptr<MetricSink>> sinks,
                                 std::size_t capacity)
    : sinks_(std::move(sinks)), capacity_(capacity == 0 ? 1 : capacity) {
    thread_ = std::thread([this] { run(); });
}

AsyncSinkWriter::~AsyncSinkWriter() {
    close();
}

void AsyncSinkWriter::set_error_handler(ErrorHandler handler) {
    std::lock_guard lock(mutex_);
    on_error_ = std::move(handler);
}

void AsyncSinkWriter::submit(MetricRecord record) {
    std::unique_lock lock(mutex_);
    if (closing_) {
        ++dropped_;
        return;
    }
    if (queue_.size() >= capacity_) {
        if (blocked_++ == 0) {
            std::string line = "metrics: the metric files are " + std::to_string(queue_.size()) +
                               " records behind training; waiting for the disk";
            ErrorHandler handler = on_error_;
            lock.unlock();
            try {
                if (handler) {
                    handler(line);
                } else {
                    std::fputs(("lathe: " + line + "\n").c_str(), stderr);
                }
            } catch (...) {
            }
            lock.lock();
        }
        has_room_.wait(lock, [&] { return queue_.size() < capacity_ || closing_; });
        if (closing_) {
            ++dropped_;
            return;
        }
    }
    queue_.push_back(std::move(record));
    ++submitted_;
    lock.unlock();
    has_work_.notify_one();
}

void AsyncSinkWriter::flush() {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = submitted_;
    idle_.wait(lock, [&] { return written_ >= target || finished_; });
}

void AsyncSinkWriter::close() {
    std::lock_guard close_lock(close_mutex_);
    if (!thread_.joinable()) return;
    {
        std::lock_guard lock(mutex_);
        closing_ = true;
    }
    has_work_.notify_all();
    has_room_.notify_all();
    thread_.join();
}

void AsyncSinkWriter::run() {
    std::deque<MetricRecord> batch;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            has_work_.wait(lock, [&] { return !queue_.empty() || closing_; });
            if (queue_.empty()) break;  // closing and drained
            batch.swap(queue_);
        }
        has_room_.notify_all();
        try {
            for (const MetricRecord& record : batch) {
                for (auto& sink : sinks_) sink->write(record);
            }
            for (auto& sink : sinks_) sink->flush();
        } catch (...) {
            // Sinks report their own failures and do not throw; this only guards the thread
            // against an allocation failure escaping (which would terminate the process).
        }
        {
            std::lock_guard lock(mutex_);
            written_ += batch.size();
            thread_cpu_s_ = this_thread_cpu_seconds();
        }
        batch.clear();
        idle_.notify_all();
    }
    try {
        for (auto& sink : sinks_) sink->close();
    } catch (...) {
    }
    {
        std::lock_guard lock(mutex_);
        finished_ = true;
        thread_cpu_s_ = this_thread_cpu_seconds();
    }
    idle_.notify_all();
}

std::uint64_t AsyncSinkWriter::submitted() const {
    std::lock_guard lock(mutex_);
    return submitted_;
}

std::uint64_t AsyncSinkWriter::written() const {
    std::lock_guard lock(mutex_);
    return written_;
}

std::uint64_t AsyncSinkWriter::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

std::uint64_t AsyncSinkWriter::blocked_submits() const {
    std::lock_guard lock(mutex_);
    return blocked_;
}

double AsyncSinkWriter::thread_cpu_seconds() const {
    std::lock_guard lock(mutex_);
    return thread_cpu_s_;
}

}  // namespace lathe::sinks
