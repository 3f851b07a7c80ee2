// StopSignalHandler: while it lives, SIGINT and SIGTERM go to `handler`, with who sent them; the
// previous handlers come back when it goes. The trainer (a graceful stop), the launcher
// (forwarding to its ranks) and prepare-data all install theirs this way.
//
// Who sent it matters for "a second signal stops at once": a parent that dies sends its
// PR_SET_PDEATHSIG once per thread (the kernel hands its children from one exiting thread to the
// next, signalling each time), so a workbench killed with SIGKILL delivers several SIGTERMs within
// milliseconds. A parent (the workbench, the launcher, torchrun's agent) forces a stop with
// SIGKILL; only a repeat from someone else (a terminal's Ctrl+C, a user's kill) means "now".
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace lathe {

/// Who sent a stop signal: this process's parent (kill(), or its death signal), or anyone else.
enum class SignalSender { parent, other };

namespace detail {
using StopHandler = void (*)(int sig, SignalSender sender);
inline std::atomic<StopHandler> g_stop_handler{nullptr};
inline std::atomic<pid_t> g_stop_parent{0};
}  // namespace detail

/// The sender of a signal with this siginfo, `parent` the parent process's id.
inline SignalSender signal_sender(const siginfo_t* info, pid_t parent) noexcept {
    return info != nullptr && info->si_code == SI_USER && parent > 1 && info->si_pid == parent
               ? SignalSender::parent
               : SignalSender::other;
}

extern "C" inline void lathe_stop_signal_trampoline(int sig, siginfo_t* info, void*) {
    if (auto handler = detail::g_stop_handler.load())
        handler(sig, signal_sender(info, detail::g_stop_parent.load()));
}

class StopSignalHandler {
public:
    explicit StopSignalHandler(detail::StopHandler handler) {
        previous_handler_ = detail::g_stop_handler.exchange(handler);
        detail::g_stop_parent.store(::getppid());
        struct sigaction sa {};
        sa.sa_sigaction = lathe_stop_signal_trampoline;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int_);
        sigaction(SIGTERM, &sa, &old_term_);
    }
    ~StopSignalHandler() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
        detail::g_stop_handler.store(previous_handler_);
    }
    StopSignalHandler(const StopSignalHandler&) = delete;
    StopSignalHandler& operator=(const StopSignalHandler&) = delete;

private:
    detail::StopHandler previous_handler_ = nullptr;
    struct sigaction old_int_ {};
    struct sigaction old_term_ {};
};

}  // namespace lathe
