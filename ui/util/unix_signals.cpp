#include "ui/util/unix_signals.h"

#include <QSocketNotifier>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>

namespace lathe::ui {

namespace {

// The write end for the handler; a signal handler can only reach static storage.
int g_fds[2] = {-1, -1};
struct sigaction g_previous[NSIG];

extern "C" void on_unix_signal(int sig) {
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t n = ::write(g_fds[0], &byte, 1);
    errno = saved;
}

}  // namespace

UnixSignalNotifier::UnixSignalNotifier(std::initializer_list<int> which, QObject* parent)
    : QObject(parent), signals_(which) {
    Q_ASSERT(g_fds[0] < 0);
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_fds) != 0) return;
    ::fcntl(g_fds[0], F_SETFL, O_NONBLOCK);  // a flood of signals never blocks the handler
    ::fcntl(g_fds[1], F_SETFL, O_NONBLOCK);
    notifier_ = new QSocketNotifier(g_fds[1], QSocketNotifier::Read, this);
    connect(notifier_, &QSocketNotifier::activated, this, &UnixSignalNotifier::drain);
    for (int sig : signals_) {
        struct sigaction sa = {};
        sa.sa_handler = on_unix_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        ::sigaction(sig, &sa, &g_previous[sig]);
    }
}

UnixSignalNotifier::~UnixSignalNotifier() {
    if (g_fds[0] < 0) return;
    for (int sig : signals_) ::sigaction(sig, &g_previous[sig], nullptr);
    delete notifier_;
    ::close(g_fds[0]);
    ::close(g_fds[1]);
    g_fds[0] = g_fds[1] = -1;
}

void UnixSignalNotifier::drain() {
    unsigned char byte = 0;
    while (::read(g_fds[1], &byte, 1) == 1) Q_EMIT received(static_cast<int>(byte));
}

}  // namespace lathe::ui
