// The engine's end of the control channel: rank 0 connects to the GUI's socket, sends events and
// receives commands.
//
// send() never waits on the GUI: it encodes the event and queues it for a writer thread. When the
// queue is over its byte budget (the GUI stopped reading) further events are dropped and counted;
// when the GUI goes away, sends become no-ops and connected() turns false. A reader thread decodes
// incoming commands; poll_commands() drains them at a step boundary. Malformed command lines are
// counted, and the first of them kept, for the engine to log through InvalidCommandLog, which
// keeps a flood from filling the log. Qt-free: POSIX sockets and std::thread.
#pragma once

#include "engine/protocol/messages.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lathe::protocol {

/// Command lines that could not be decoded: how many, and the reasons of the first of them.
struct InvalidCommands {
    std::size_t count = 0;
    std::vector<std::string> reasons;  ///< at most ControlClient::kMaxInvalidReasons
};

/// The lines the engine logs for invalid commands, so that a flood (a million garbage lines)
/// neither fills the log nor goes silent: in every `window` the first `burst` are logged one by
/// one; the rest are counted, and when the window is over one line says how many there were.
class InvalidCommandLog {
public:
    using Clock = std::chrono::steady_clock;
    explicit InvalidCommandLog(std::size_t burst = 10,
                               std::chrono::seconds window = std::chrono::seconds(10));
    /// The lines to log for `batch`, received at `now` (first the summary of a window that is
    /// over). Call it often, with empty batches too, so a window's summary is not held back.
    std::vector<std::string> feed(const InvalidCommands& batch, Clock::time_point now);
    /// The summary of the current window, if it dropped anything (at the end of the run).
    std::vector<std::string> finish();

private:
    std::size_t burst_;
    std::chrono::seconds window_;
    bool open_ = false;
    Clock::time_point start_{};
    std::size_t logged_ = 0, total_ = 0;
};

class ControlClient {
public:
    /// Bytes of encoded events that may wait for the GUI before new ones are dropped.
    static constexpr std::size_t kDefaultQueueBytes = std::size_t{64} << 20;
    /// Reasons kept per poll_invalid() (the count goes on): garbage must not grow memory.
    static constexpr std::size_t kMaxInvalidReasons = 100;

    explicit ControlClient(std::size_t max_queue_bytes = kDefaultQueueBytes);
    /// Flushes for at most flush_timeout() what is queued, closes, joins the threads.
    ~ControlClient();
    ControlClient(const ControlClient&) = delete;
    ControlClient& operator=(const ControlClient&) = delete;

    /// Connects to an AF_UNIX stream socket and starts the threads. Returns false (and sets
    /// `error`) when the socket cannot be reached; may be called once.
    bool connect(const std::string& path, std::string* error = nullptr);

    /// Queues an event; thread-safe, returns at once. A no-op once disconnected.
    void send(const Event& event);

    /// Commands received since the last call, oldest first.
    std::vector<Command> poll_commands();
    /// Lines from the GUI that could not be decoded since the last call.
    InvalidCommands poll_invalid();

    /// Waits until everything queued is written (true) or `timeout` passes or the GUI is gone.
    bool flush(std::chrono::milliseconds timeout);
    /// Flushes (bounded by `timeout`) and disconnects; later sends are no-ops.
    void close(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

    bool connected() const { return connected_.load(); }
    /// Events dropped because the queue was full or the GUI had gone.
    std::size_t dropped() const { return dropped_.load(); }

private:
    void writer_loop();
    void reader_loop();
    void mark_disconnected();

    const std::size_t max_queue_bytes_;
    int fd_ = -1;
    std::atomic<bool> connected_{false};
    std::atomic<bool> closing_{false};
    std::atomic<std::size_t> dropped_{0};

    std::mutex out_mutex_;
    std::condition_variable out_cv_;  // writer waits for work; flush() waits for an empty queue
    std::deque<std::string> queue_;
    std::size_t queued_bytes_ = 0;
    bool writing_ = false;  // the writer holds a line outside the queue

    std::mutex in_mutex_;
    std::vector<Command> commands_;
    InvalidCommands invalid_;

    std::thread writer_;
    std::thread reader_;
};

}  // namespace lathe::protocol
