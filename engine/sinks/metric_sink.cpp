#include "engine/sinks/metric_sink.h"

#include <cstdio>
#include <exception>

namespace lathe::sinks {

namespace {

void print_to_stderr(const std::string& line) {
    // One fputs so lines from several threads do not interleave mid-line.
    std::string text = "lathe: " + line + "\n";
    std::fputs(text.c_str(), stderr);
}

}  // namespace

MetricSink::MetricSink(std::string target) : target_(std::move(target)) {}

void MetricSink::set_error_handler(ErrorHandler handler) {
    on_error_ = std::move(handler);
}

void MetricSink::fail(const char* phase, const std::string& reason) {
    state_ = State::failed;
    error_ = "metrics: cannot " + std::string(phase) + " " + target_ + ": " + reason +
             " (no more metrics go to this file)";
    // Release the file; a second error while doing so is the same failure.
    try {
        do_close();
    } catch (...) {
    }
    try {
        if (on_error_) {
            on_error_(error_);
        } else {
            print_to_stderr(error_);
        }
    } catch (...) {
        // The handler is the last place to report to; nothing may escape into the caller.
    }
}

template <class F>
void MetricSink::guarded(const char* phase, F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        fail(phase, e.what());
    } catch (...) {
        fail(phase, "unknown error");
    }
}

bool MetricSink::ensure_open() {
    if (state_ == State::open) return true;
    if (state_ != State::fresh) return false;
    guarded("open", [&] {
        do_open();
        state_ = State::open;
    });
    return state_ == State::open;
}

bool MetricSink::open() {
    return ensure_open();
}

void MetricSink::write(const MetricRecord& record) {
    if (!ensure_open()) return;
    guarded("write", [&] {
        do_write(record);
        do_flush();
        ++records_written_;
    });
}

void MetricSink::flush() {
    if (state_ != State::open) return;
    guarded("write", [&] { do_flush(); });
}

void MetricSink::close() {
    if (state_ != State::open) {
        if (state_ == State::fresh) state_ = State::closed;
        return;
    }
    guarded("write", [&] {
        do_close();
        state_ = State::closed;
    });
}

}  // namespace lathe::sinks
