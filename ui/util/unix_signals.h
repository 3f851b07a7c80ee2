// UnixSignalNotifier: SIGINT and SIGTERM as a Qt signal on the event loop, so the workbench can
// quit as its Quit action does (stop or detach its engines, remove its control folder) instead of
// dying where it stands. A signal handler may only write(2): it writes the signal number into a
// socket pair whose other end a QSocketNotifier watches.
#pragma once

#include <QObject>

#include <initializer_list>
#include <vector>

class QSocketNotifier;

namespace lathe::ui {

class UnixSignalNotifier : public QObject {
    Q_OBJECT

public:
    /// Installs handlers for `which` (one notifier per process); the destructor restores the
    /// previous ones.
    explicit UnixSignalNotifier(std::initializer_list<int> which, QObject* parent = nullptr);
    ~UnixSignalNotifier() override;
    UnixSignalNotifier(const UnixSignalNotifier&) = delete;
    UnixSignalNotifier& operator=(const UnixSignalNotifier&) = delete;

Q_SIGNALS:
    void received(int signal);

private:
    void drain();

    QSocketNotifier* notifier_ = nullptr;
    std::vector<int> signals_;
};

}  // namespace lathe::ui
