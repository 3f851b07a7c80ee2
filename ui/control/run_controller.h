// RunController: one training run of `lathe-engine` as a child process, driven over the control
// channel (docs/protocol.md). Not a widget: the main window and the tests drive the same object.
//
// State machine: Idle -> Starting -> Running <-> Checkpointing -> Stopping -> Finished | Failed.
// The final state comes from the process's exit (0, or a requested stop that ended in 0 or 130, is
// Finished; anything else Failed), never from what the engine claims, so a crash cannot leave the
// GUI waiting. The engine runs in its own process group: kill() and the destructor end every rank.
// Malformed, unknown and out-of-order messages are logged (rank kGuiRank) and dropped.
#pragma once

#include "engine/config/io.h"
#include "engine/protocol/line_buffer.h"
#include "engine/protocol/messages.h"
#include "ui/control/protocol_types.h"
#include "ui/logs/log_model.h"
#include "ui/util/engine_launch.h"

#include <QDir>
#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QStringList>

#include <memory>
#include <optional>

class QLocalServer;
class QLocalSocket;
class QTemporaryDir;
class QTimer;

namespace lathe::ui {

class RunController : public QObject {
    Q_OBJECT

public:
    enum class State { Idle, Starting, Running, Checkpointing, Stopping, Finished, Failed };
    Q_ENUM(State)

    explicit RunController(QObject* parent = nullptr);
    ~RunController() override;

    static QString stateName(State state);
    /// Removes the control folders (`lathe-XXXXXX` in `tempDir`, this user's) that a workbench
    /// killed without cleaning up left behind: their owner.pid names a process that is gone, or,
    /// from before owner.pid, nothing listens on their socket. Returns the folders removed. The
    /// window calls it at start.
    static QStringList removeStaleFolders(const QString& tempDir = QDir::tempPath());

    /// Writes `config` to a private folder and starts `lathe-engine train`. False (see
    /// errorString()) when a run is active or the engine cannot be started.
    bool start(const lathe::config::Json& config, const RunOptions& options = {});
    /// Asks for a checkpoint at the next step boundary (Running only).
    bool requestCheckpoint();
    /// Graceful stop (final checkpoint unless `checkpoint` is false). Before the engine has
    /// connected this sends SIGTERM instead. After stopTimeout() stopTimedOut() is emitted.
    bool requestStop(bool checkpoint = true);
    /// SIGKILL to the engine's whole process group.
    void kill();

    State state() const { return state_; }
    bool isActive() const;
    QString errorString() const { return error_; }
    QString enginePath() const { return enginePath_; }
    QStringList arguments() const { return arguments_; }
    QString socketPath() const;
    QString configPath() const;
    qint64 processId() const;
    bool connected() const;
    const std::optional<lathe::protocol::Hello>& hello() const { return hello_; }
    const std::optional<lathe::protocol::Status>& lastStatus() const { return status_; }
    /// The last lines of engine output and log events, for the post-mortem.
    QStringList lastLines() const { return lastLines_; }
    int exitCode() const { return exitCode_; }
    /// Protocol problems seen in this run (each was logged and the line dropped).
    int droppedMessages() const { return dropped_; }

    int stopTimeout() const { return stopTimeoutMs_; }
    void setStopTimeout(int ms) { stopTimeoutMs_ = ms; }

Q_SIGNALS:
    void stateChanged(lathe::ui::RunController::State state);
    void helloReceived(const lathe::protocol::Hello& hello);
    void metricsReceived(const lathe::protocol::Metrics& metrics);
    void statusReceived(const lathe::protocol::Status& status);
    void checkpointSaved(const lathe::protocol::CheckpointSaved& checkpoint);
    /// The sampler callback's text at a step.
    void samplesReceived(const lathe::protocol::Samples& samples);
    /// level: debug, info, warning, error.
    void logLine(int rank, const QString& level, const QString& message);
    void errorReported(const QString& message);
    /// A requested stop did not end the engine within stopTimeout(): offer kill().
    void stopTimedOut();
    /// The engine process is gone. `summary` says how (e.g. "exit code 1", "killed").
    void finished(int exitCode, const QString& summary, const QStringList& lastLines);

private:
    void setState(State s);
    void note(const QString& level, const QString& message);
    void remember(const QString& line);
    void onNewConnection();
    void onSocketReadyRead();
    void onProcessOutput(QProcess::ProcessChannel channel);
    void onProcessFinished(int exitCode, QProcess::ExitStatus status);
    void onProcessError(QProcess::ProcessError error);
    void handleLine(const std::string& line);
    void handleEvent(lathe::protocol::Event event);
    void dropMessage(const QString& why);
    void sendCommand(const lathe::protocol::Command& command);
    void signalGroup(int sig);
    void cleanupRun();

    State state_ = State::Idle;
    QString error_;
    QString enginePath_;
    QStringList arguments_;
    std::unique_ptr<QTemporaryDir> dir_;
    QProcess* process_ = nullptr;
    QLocalServer* server_ = nullptr;
    QPointer<QLocalSocket> socket_;
    QTimer* stopTimer_ = nullptr;
    lathe::protocol::LineBuffer socketLines_;
    lathe::protocol::LineBuffer stdoutLines_;
    lathe::protocol::LineBuffer stderrLines_;
    std::optional<lathe::protocol::Hello> hello_;
    std::optional<lathe::protocol::Status> status_;
    std::optional<lathe::protocol::ExitReason> bye_;
    QStringList lastLines_;
    qint64 pid_ = 0;
    int exitCode_ = 0;
    int dropped_ = 0;
    int stopTimeoutMs_ = 60000;
    bool stopRequested_ = false;
    bool termSent_ = false;
    bool killed_ = false;
};

}  // namespace lathe::ui
