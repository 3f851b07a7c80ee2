#include "engine/protocol/control_client.h"

#include "engine/protocol/line_buffer.h"

#include <cerrno>
#include <cstring>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace lathe::protocol {
namespace {
constexpr std::size_t kMaxBatchBytes = 256 * 1024;
}  // namespace

ControlClient::ControlClient(std::size_t max_queue_bytes) : max_queue_bytes_(max_queue_bytes) {}

ControlClient::~ControlClient() {
    close();
}

bool ControlClient::connect(const std::string& path, std::string* error) {
    auto fail = [&](const std::string& why) {
        if (error) *error = why;
        return false;
    };
    if (fd_ >= 0 || closing_) return fail("already connected");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(addr.sun_path))
        return fail("socket path is empty or longer than " +
                    std::to_string(sizeof(addr.sun_path) - 1) + " bytes: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(std::string("socket: ") + std::strerror(errno));
    int rc;
    do {
        rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int err = errno;
        ::close(fd);
        return fail("cannot connect to " + path + ": " + std::strerror(err));
    }
    fd_ = fd;
    connected_ = true;
    writer_ = std::thread([this] { writer_loop(); });
    reader_ = std::thread([this] { reader_loop(); });
    return true;
}

void ControlClient::send(const Event& event) {
    if (!connected_) {
        ++dropped_;
        return;
    }
    std::string line = encode(event);
    {
        std::lock_guard<std::mutex> lock(out_mutex_);
        if (queued_bytes_ + line.size() > max_queue_bytes_) {
            ++dropped_;
            return;
        }
        queued_bytes_ += line.size();
        queue_.push_back(std::move(line));
    }
    out_cv_.notify_all();
}

std::vector<Command> ControlClient::poll_commands() {
    std::lock_guard<std::mutex> lock(in_mutex_);
    std::vector<Command> out;
    out.swap(commands_);
    return out;
}

InvalidCommands ControlClient::poll_invalid() {
    std::lock_guard<std::mutex> lock(in_mutex_);
    InvalidCommands out;
    std::swap(out, invalid_);
    return out;
}

InvalidCommandLog::InvalidCommandLog(std::size_t burst, std::chrono::seconds window)
    : burst_(burst), window_(window) {}

std::vector<std::string> InvalidCommandLog::feed(const InvalidCommands& batch,
                                                 Clock::time_point now) {
    std::vector<std::string> lines;
    if (open_ && now - start_ >= window_) lines = finish();
    if (batch.count == 0) return lines;
    if (!open_) {
        open_ = true;
        start_ = now;
        logged_ = total_ = 0;
    }
    total_ += batch.count;
    for (const auto& reason : batch.reasons) {
        if (logged_ >= burst_) break;
        lines.push_back("dropped a malformed command: " + reason);
        ++logged_;
    }
    return lines;
}

std::vector<std::string> InvalidCommandLog::finish() {
    std::vector<std::string> lines;
    if (open_ && total_ > logged_) {
        lines.push_back("dropped " + std::to_string(total_) + " invalid messages in the last " +
                        std::to_string(window_.count()) + " s (the first " +
                        std::to_string(logged_) + " are logged above)");
    }
    open_ = false;
    return lines;
}

bool ControlClient::flush(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(out_mutex_);
    return out_cv_.wait_for(lock, timeout,
                            [&] { return (queue_.empty() && !writing_) || !connected_; }) &&
           queue_.empty() && !writing_ && connected_;
}

void ControlClient::close(std::chrono::milliseconds timeout) {
    if (closing_.exchange(true)) return;
    if (fd_ < 0) return;
    flush(timeout);
    connected_ = false;
    // shutdown() wakes a reader blocked in recv() and a writer blocked in send().
    ::shutdown(fd_, SHUT_RDWR);
    out_cv_.notify_all();
    if (writer_.joinable()) writer_.join();
    if (reader_.joinable()) reader_.join();
    ::close(fd_);
    fd_ = -1;
}

void ControlClient::mark_disconnected() {
    {
        std::lock_guard<std::mutex> lock(out_mutex_);
        connected_ = false;
        dropped_ += queue_.size();
        queue_.clear();
        queued_bytes_ = 0;
    }
    out_cv_.notify_all();
}

void ControlClient::writer_loop() {
    for (;;) {
        std::string line;
        {
            std::unique_lock<std::mutex> lock(out_mutex_);
            out_cv_.wait(lock, [&] { return !queue_.empty() || !connected_; });
            if (!connected_) return;
            // Everything queued goes out in one write: fewer syscalls and socket buffers.
            line = std::move(queue_.front());
            queue_.pop_front();
            while (!queue_.empty() && line.size() + queue_.front().size() <= kMaxBatchBytes) {
                line += queue_.front();
                queue_.pop_front();
            }
            queued_bytes_ -= line.size();
            writing_ = true;
        }
        std::size_t off = 0;
        bool failed = false;
        while (off < line.size()) {
            ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                failed = true;
                break;
            }
            off += static_cast<std::size_t>(n);
        }
        {
            std::lock_guard<std::mutex> lock(out_mutex_);
            writing_ = false;
        }
        if (failed) {
            mark_disconnected();
            return;
        }
        out_cv_.notify_all();
    }
}

void ControlClient::reader_loop() {
    LineBuffer lines;
    char buf[64 * 1024];
    for (;;) {
        ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // the GUI closed the channel, or close() shut it down
        for (auto& item : lines.feed(std::string_view(buf, static_cast<std::size_t>(n)))) {
            std::lock_guard<std::mutex> lock(in_mutex_);
            auto note_invalid = [&](const DecodeError& err) {
                ++invalid_.count;
                if (invalid_.reasons.size() < kMaxInvalidReasons)
                    invalid_.reasons.push_back(err.reason);
            };
            if (auto* err = std::get_if<DecodeError>(&item)) {
                note_invalid(*err);
                continue;
            }
            DecodedCommand decoded = decode_command(std::get<std::string>(item));
            if (auto* err = std::get_if<DecodeError>(&decoded)) {
                note_invalid(*err);
            } else {
                commands_.push_back(std::get<Command>(decoded));
            }
        }
    }
    mark_disconnected();
}

}  // namespace lathe::protocol
