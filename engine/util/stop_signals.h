// StopSignalHandler: while it lives, SIGINT and SIGTERM go to `handler`; the previous handlers
// come back when it goes. The trainer (a graceful stop) and the launcher (forwarding to its
// ranks) both install theirs this way.
#pragma once

#include <signal.h>

namespace lathe {

class StopSignalHandler {
public:
    explicit StopSignalHandler(void (*handler)(int)) {
        struct sigaction sa {};
        sa.sa_handler = handler;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int_);
        sigaction(SIGTERM, &sa, &old_term_);
    }
    ~StopSignalHandler() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
    }
    StopSignalHandler(const StopSignalHandler&) = delete;
    StopSignalHandler& operator=(const StopSignalHandler&) = delete;

private:
    struct sigaction old_int_ {};
    struct sigaction old_term_ {};
};

}  // namespace lathe
