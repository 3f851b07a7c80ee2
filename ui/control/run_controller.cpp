#include "ui/control/run_controller.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocalServer>
#include <QLocalSocket>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTimer>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lathe::ui {
namespace proto = lathe::protocol;

namespace {

constexpr int kLastLinesKept = 40;
// Dropped messages are logged one by one up to this many, then every kDropLogEvery-th.
constexpr int kDropsLoggedInFull = 50;
constexpr int kDropLogEvery = 1000;

QString fromStd(const std::string& s) {
    return QString::fromStdString(s);
}

// "[rank 3] text", "[rank3] text" or "rank3: text" as written by launchers.
const QRegularExpression& rankPrefix() {
    static const QRegularExpression re(QStringLiteral(R"(^\[?rank\s?(\d+)\]?:?\s?)"));
    return re;
}

// spdlog-style "[warning]"/"[error]"/... anywhere near the start of a console line.
QString levelOf(const QString& line, bool isStderr) {
    static const QRegularExpression re(
        QStringLiteral(R"(\[(trace|debug|info|warn|warning|error|critical)\])"),
        QRegularExpression::CaseInsensitiveOption);
    auto m = re.match(line.left(80));
    if (m.hasMatch()) {
        QString l = m.captured(1).toLower();
        if (l == QLatin1String("trace")) return QStringLiteral("debug");
        if (l == QLatin1String("warn")) return QStringLiteral("warning");
        if (l == QLatin1String("critical")) return QStringLiteral("error");
        return l;
    }
    if (line.startsWith(QLatin1String("error")) || line.contains(QLatin1String(": error:")))
        return QStringLiteral("error");
    Q_UNUSED(isStderr);
    return QStringLiteral("info");
}

}  // namespace

RunController::RunController(QObject* parent) : QObject(parent) {
    qRegisterMetaType<proto::Hello>();
    qRegisterMetaType<proto::Metrics>();
    qRegisterMetaType<proto::Status>();
    qRegisterMetaType<proto::CheckpointSaved>();
    qRegisterMetaType<proto::Samples>();
    stopTimer_ = new QTimer(this);
    stopTimer_->setSingleShot(true);
    connect(stopTimer_, &QTimer::timeout, this, [this] {
        if (!isActive()) return;
        note(QStringLiteral("warning"),
             tr("The engine has not stopped after %1 s; it can be killed.")
                 .arg(stopTimeoutMs_ / 1000.0));
        Q_EMIT stopTimedOut();
    });
}

RunController::~RunController() {
    if (process_) {
        QObject::disconnect(process_, nullptr, this, nullptr);
        if (process_->state() != QProcess::NotRunning) {
            signalGroup(SIGKILL);
            process_->waitForFinished(5000);
        }
        signalGroup(SIGKILL);  // ranks that outlived their launcher
    }
}

QString RunController::stateName(State state) {
    switch (state) {
        case State::Idle:
            return tr("idle");
        case State::Starting:
            return tr("starting");
        case State::Running:
            return tr("running");
        case State::Checkpointing:
            return tr("checkpointing");
        case State::Stopping:
            return tr("stopping");
        case State::Finished:
            return tr("finished");
        case State::Failed:
            return tr("failed");
    }
    return {};
}

QStringList RunController::removeStaleFolders(const QString& tempDir) {
    static const QRegularExpression name(QStringLiteral("^lathe-[A-Za-z0-9]{6}$"));
    QStringList removed;
    const QDir temp(tempDir);
    for (const QFileInfo& fi : temp.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (!name.match(fi.fileName()).hasMatch() || fi.isSymLink() || fi.ownerId() != ::getuid())
            continue;
        const QDir dir(fi.absoluteFilePath());
        bool stale = false;
        QFile owner(dir.filePath(QStringLiteral("owner.pid")));
        if (owner.open(QIODevice::ReadOnly)) {
            bool ok = false;
            const qint64 pid = owner.readAll().trimmed().toLongLong(&ok);
            stale = ok && pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
        } else if (dir.exists(QStringLiteral("control.sock"))) {
            QLocalSocket probe;
            probe.connectToServer(dir.filePath(QStringLiteral("control.sock")));
            stale = !probe.waitForConnected(200) &&
                    probe.error() == QLocalSocket::ConnectionRefusedError;
            probe.abort();
        }
        if (stale && QDir(fi.absoluteFilePath()).removeRecursively())
            removed << fi.absoluteFilePath();
    }
    return removed;
}

bool RunController::isActive() const {
    return state_ == State::Starting || state_ == State::Running ||
           state_ == State::Checkpointing || state_ == State::Stopping;
}

QString RunController::socketPath() const {
    return dir_ ? dir_->filePath(QStringLiteral("control.sock")) : QString();
}

QString RunController::configPath() const {
    return dir_ ? dir_->filePath(QStringLiteral("config.json")) : QString();
}

qint64 RunController::processId() const {
    return pid_;
}

bool RunController::connected() const {
    return socket_ && socket_->state() == QLocalSocket::ConnectedState;
}

void RunController::cleanupRun() {
    if (socket_) {
        socket_->disconnect(this);
        socket_->abort();
        socket_->deleteLater();
    }
    socket_.clear();
    if (server_) {
        server_->close();
        server_->deleteLater();
        server_ = nullptr;
    }
    if (process_) {
        QObject::disconnect(process_, nullptr, this, nullptr);
        process_->deleteLater();
        process_ = nullptr;
    }
    stopTimer_->stop();
}

bool RunController::start(const lathe::config::Json& config, const RunOptions& options) {
    if (isActive()) {
        error_ = tr("a run is already in progress");
        return false;
    }
    cleanupRun();
    error_.clear();
    hello_.reset();
    status_.reset();
    bye_.reset();
    lastLines_.clear();
    socketLines_ = lathe::protocol::LineBuffer();
    stdoutLines_ = lathe::protocol::LineBuffer();
    stderrLines_ = lathe::protocol::LineBuffer();
    exitCode_ = 0;
    dropped_ = 0;
    pid_ = 0;
    stopRequested_ = false;
    termSent_ = false;
    killed_ = false;

    enginePath_ = findEngine();
    const QFileInfo engine(enginePath_);
    if (!engine.isFile() || !engine.isExecutable()) {
        error_ = tr("the engine was not found at %1 (set LATHE_ENGINE)").arg(enginePath_);
        return false;
    }

    // A private folder: only this user may reach the socket or read the config.
    dir_ = std::make_unique<QTemporaryDir>(QDir::temp().filePath(QStringLiteral("lathe-XXXXXX")));
    if (!dir_->isValid()) {
        error_ = tr("cannot create a temporary folder: %1").arg(dir_->errorString());
        return false;
    }
    ::chmod(QFile::encodeName(dir_->path()).constData(), 0700);
    // Whose folder this is: a later start removes it if this process dies without cleaning up.
    QFile owner(dir_->filePath(QStringLiteral("owner.pid")));
    if (owner.open(QIODevice::WriteOnly))
        owner.write(QByteArray::number(QCoreApplication::applicationPid()) + "\n");
    owner.close();
    QFile file(configPath());
    if (!file.open(QIODevice::WriteOnly) ||
        file.write(QByteArray::fromStdString(config.dump(2) + "\n")) < 0) {
        error_ = tr("cannot write %1: %2").arg(configPath(), file.errorString());
        return false;
    }
    file.close();

    server_ = new QLocalServer(this);
    server_->setSocketOptions(QLocalServer::UserAccessOption);
    if (!server_->listen(socketPath())) {
        error_ = tr("cannot listen on %1: %2").arg(socketPath(), server_->errorString());
        return false;
    }
    ::chmod(QFile::encodeName(socketPath()).constData(), 0600);
    connect(server_, &QLocalServer::newConnection, this, &RunController::onNewConnection);

    arguments_ = {QStringLiteral("train"), configPath(),
                  QStringLiteral("launch.nproc=%1").arg(std::max(1, options.ranks))};
    arguments_ += options.overrides;
    if (!options.runsDir.isEmpty()) arguments_ += {QStringLiteral("--runs-dir"), options.runsDir};
    if (!options.resumeFrom.isEmpty())
        arguments_ += {QStringLiteral("--resume-from"), options.resumeFrom};
    arguments_ += {QStringLiteral("--control-socket"), socketPath()};

    process_ = new QProcess(this);
    process_->setProgram(enginePath_);
    process_->setArguments(arguments_);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    if (!options.cudaDevices.isEmpty())
        env.insert(QStringLiteral("CUDA_VISIBLE_DEVICES"), options.cudaDevices);
    // Leave a core to this window, unless the config fixes launch.num_threads: measured on two
    // cores, the engine trains faster on one thread than on two beside the GUI (docs/performance.md).
    if (!env.contains(QStringLiteral("LATHE_RESERVE_CORES")))
        env.insert(QStringLiteral("LATHE_RESERVE_CORES"), QStringLiteral("1"));
    process_->setProcessEnvironment(env);
    // Own process group, so that kill() reaches every rank the launcher spawns; and the engine
    // is told (SIGTERM, a graceful interrupt) if the GUI dies without cleaning up.
    process_->setChildProcessModifier([] {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    });
    connect(process_, &QProcess::readyReadStandardOutput, this,
            [this] { onProcessOutput(QProcess::StandardOutput); });
    connect(process_, &QProcess::readyReadStandardError, this,
            [this] { onProcessOutput(QProcess::StandardError); });
    connect(process_, &QProcess::finished, this, &RunController::onProcessFinished);
    connect(process_, &QProcess::errorOccurred, this, &RunController::onProcessError);

    setState(State::Starting);
    note(QStringLiteral("info"),
         tr("starting %1 %2").arg(enginePath_, arguments_.join(QLatin1Char(' '))));
    process_->start();
    pid_ = process_->processId();
    return true;
}

bool RunController::requestCheckpoint() {
    if (state_ != State::Running || !connected()) return false;
    sendCommand(proto::SaveCheckpoint{});
    note(QStringLiteral("info"), tr("checkpoint requested"));
    setState(State::Checkpointing);
    return true;
}

bool RunController::requestStop(bool checkpoint) {
    if (state_ != State::Starting && state_ != State::Running && state_ != State::Checkpointing)
        return false;
    stopRequested_ = true;
    if (connected()) {
        sendCommand(proto::Stop{checkpoint});
        note(QStringLiteral("info"), checkpoint ? tr("stop requested (with a final checkpoint)")
                                                : tr("stop requested (no final checkpoint)"));
    } else {
        note(QStringLiteral("info"), tr("stop requested before the engine connected: SIGTERM"));
        termSent_ = true;
        signalGroup(SIGTERM);
    }
    setState(State::Stopping);
    stopTimer_->start(stopTimeoutMs_);
    return true;
}

void RunController::kill() {
    if (!process_ || process_->state() == QProcess::NotRunning) return;
    killed_ = true;
    note(QStringLiteral("warning"), tr("killing the engine (process group %1)").arg(pid_));
    signalGroup(SIGKILL);
}

void RunController::signalGroup(int sig) {
    if (pid_ <= 0) return;
    // The group first (every rank), then the leader in case it has not called setpgid yet.
    ::kill(static_cast<pid_t>(-pid_), sig);
    if (process_ && process_->state() != QProcess::NotRunning)
        ::kill(static_cast<pid_t>(pid_), sig);
}

void RunController::setState(State s) {
    if (s == state_) return;
    state_ = s;
    Q_EMIT stateChanged(s);
}

void RunController::remember(const QString& line) {
    lastLines_.append(line);
    while (lastLines_.size() > kLastLinesKept) lastLines_.removeFirst();
}

void RunController::note(const QString& level, const QString& message) {
    Q_EMIT logLine(kGuiRank, level, message);
}

void RunController::dropMessage(const QString& why) {
    ++dropped_;
    if (dropped_ <= kDropsLoggedInFull || dropped_ % kDropLogEvery == 0) {
        note(QStringLiteral("warning"),
             tr("control channel: dropped a message (%1)%2")
                 .arg(why, dropped_ > kDropsLoggedInFull ? tr("; %1 dropped so far").arg(dropped_)
                                                         : QString()));
    }
}

void RunController::sendCommand(const proto::Command& command) {
    if (!connected()) return;
    socket_->write(QByteArray::fromStdString(proto::encode(command)));
    socket_->flush();
}

void RunController::onNewConnection() {
    while (QLocalSocket* s = server_->nextPendingConnection()) {
        if (socket_ || !isActive()) {
            note(QStringLiteral("warning"), tr("control channel: refused a second connection"));
            s->abort();
            s->deleteLater();
            continue;
        }
        socket_ = s;
        s->setParent(this);
        connect(s, &QLocalSocket::readyRead, this, &RunController::onSocketReadyRead);
        connect(s, &QLocalSocket::disconnected, this, [this] {
            onSocketReadyRead();
            if (!bye_ && isActive())
                note(QStringLiteral("warning"), tr("the engine closed the control channel"));
        });
        // No other process may connect now.
        server_->close();
        onSocketReadyRead();
    }
}

void RunController::onSocketReadyRead() {
    if (!socket_) return;
    // Bounded work per call: at most 4 MiB, the rest on the next event-loop turn.
    const QByteArray data = socket_->read(4 << 20);
    if (data.isEmpty()) return;
    for (auto& item : socketLines_.feed(std::string_view(data.constData(), data.size()))) {
        if (auto* err = std::get_if<proto::DecodeError>(&item)) {
            dropMessage(fromStd(err->reason));
        } else {
            handleLine(std::get<std::string>(item));
        }
    }
    if (socket_ && socket_->bytesAvailable() > 0)
        QTimer::singleShot(0, this, &RunController::onSocketReadyRead);
}

void RunController::handleLine(const std::string& line) {
    proto::DecodedEvent decoded = proto::decode_event(line);
    if (auto* err = std::get_if<proto::DecodeError>(&decoded)) {
        dropMessage(fromStd(err->reason));
        return;
    }
    handleEvent(std::move(std::get<proto::Event>(decoded)));
}

void RunController::handleEvent(proto::Event event) {
    const QString type = QString::fromLatin1(proto::type_name(event));
    if (bye_) return dropMessage(tr("%1 after bye").arg(type));
    if (!hello_ && !std::holds_alternative<proto::Hello>(event))
        return dropMessage(tr("%1 before hello").arg(type));

    if (auto* h = std::get_if<proto::Hello>(&event)) {
        if (hello_) return dropMessage(tr("a second hello"));
        hello_ = *h;
        note(QStringLiteral("info"), tr("engine connected: %1 rank(s) on %2, run folder %3")
                                         .arg(h->world_size)
                                         .arg(fromStd(h->device), fromStd(h->run_dir)));
        Q_EMIT helloReceived(*hello_);
    } else if (auto* m = std::get_if<proto::Metrics>(&event)) {
        if (state_ == State::Starting) setState(State::Running);
        Q_EMIT metricsReceived(*m);
    } else if (auto* l = std::get_if<proto::Log>(&event)) {
        const QString msg = fromStd(l->message);
        remember(QStringLiteral("[rank %1] %2").arg(l->rank).arg(msg));
        Q_EMIT logLine(static_cast<int>(l->rank), fromStd(l->level), msg);
    } else if (auto* s = std::get_if<proto::Status>(&event)) {
        status_ = *s;
        switch (s->state) {
            case proto::RunState::starting:
                break;
            case proto::RunState::running:
                // A checkpoint or stop we asked for outranks a "running" sent before it began.
                if (state_ == State::Starting) setState(State::Running);
                break;
            case proto::RunState::checkpointing:
                if (state_ == State::Running || state_ == State::Starting)
                    setState(State::Checkpointing);
                break;
            case proto::RunState::stopping:
                setState(State::Stopping);
                break;
            case proto::RunState::finished:
            case proto::RunState::failed:
                break;  // the process's exit decides
        }
        Q_EMIT statusReceived(*s);
    } else if (auto* c = std::get_if<proto::CheckpointSaved>(&event)) {
        note(QStringLiteral("info"),
             tr("checkpoint of step %1 saved to %2 (written in %3)")
                 .arg(c->step)
                 .arg(fromStd(c->path))
                 .arg(c->duration_s < 1 ? tr("%1 ms").arg(c->duration_s * 1000, 0, 'f', 0)
                                        : tr("%1 s").arg(c->duration_s, 0, 'f', 2)));
        if (state_ == State::Checkpointing) setState(State::Running);
        Q_EMIT checkpointSaved(*c);
    } else if (auto* smp = std::get_if<proto::Samples>(&event)) {
        Q_EMIT samplesReceived(*smp);
    } else if (auto* e = std::get_if<proto::ErrorEvent>(&event)) {
        const QString msg = fromStd(e->message);
        remember(tr("error: %1").arg(msg));
        note(QStringLiteral("error"), msg);
        Q_EMIT errorReported(msg);
    } else if (auto* b = std::get_if<proto::Bye>(&event)) {
        bye_ = b->exit_reason;
        note(QStringLiteral("info"),
             tr("engine said goodbye (%1)").arg(QString::fromLatin1(proto::to_string(*bye_))));
    }
}

void RunController::onProcessOutput(QProcess::ProcessChannel channel) {
    if (!process_) return;
    process_->setReadChannel(channel);
    const QByteArray data = process_->readAll();
    const bool isStderr = channel == QProcess::StandardError;
    auto& lines = isStderr ? stderrLines_ : stdoutLines_;
    for (auto& item : lines.feed(std::string_view(data.constData(), data.size()))) {
        if (auto* err = std::get_if<proto::DecodeError>(&item)) {
            note(QStringLiteral("warning"), tr("engine output: %1").arg(fromStd(err->reason)));
            continue;
        }
        QString line = QString::fromUtf8(std::get<std::string>(item));
        remember(line);
        int rank = kConsoleRank;
        auto m = rankPrefix().match(line);
        if (m.hasMatch()) {
            rank = m.captured(1).toInt();
            line = line.mid(m.capturedLength());
        }
        Q_EMIT logLine(rank, levelOf(line, isStderr), line);
    }
}

void RunController::onProcessError(QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart) return;  // crashes arrive through finished()
    error_ = tr("cannot start %1: %2").arg(enginePath_, process_->errorString());
    note(QStringLiteral("error"), error_);
    remember(error_);
    exitCode_ = -1;
    cleanupRun();
    setState(State::Failed);
    Q_EMIT finished(-1, error_, lastLines_);
}

void RunController::onProcessFinished(int exitCode, QProcess::ExitStatus status) {
    // What the engine wrote just before it exited is still worth reading.
    onProcessOutput(QProcess::StandardOutput);
    onProcessOutput(QProcess::StandardError);
    // The engine is gone, so its end of the channel is closed: read to the end of the stream.
    while (socket_ && (socket_->bytesAvailable() > 0 || socket_->waitForReadyRead(100)))
        onSocketReadyRead();
    signalGroup(SIGKILL);  // ranks that outlived their launcher

    exitCode_ = status == QProcess::NormalExit ? exitCode : -1;
    QString summary;
    bool ok = false;
    if (killed_) {
        summary = tr("killed");
    } else if (status == QProcess::CrashExit && termSent_ && exitCode == SIGTERM) {
        ok = true;  // stopped before the engine could handle the signal
        summary = tr("stopped (terminated)");
    } else if (status == QProcess::CrashExit) {
        // For a crash QProcess reports the signal number as the exit code.
        summary = tr("crashed (signal %1: %2)")
                      .arg(exitCode)
                      .arg(QString::fromLocal8Bit(::strsignal(exitCode)));
    } else if (exitCode == 0) {
        ok = true;
        summary =
            bye_ == proto::ExitReason::stopped || stopRequested_ ? tr("stopped") : tr("finished");
    } else if (stopRequested_ && exitCode == 130) {
        ok = true;
        summary = tr("stopped (interrupted)");
    } else {
        summary = tr("exit code %1").arg(exitCode);
    }
    if (bye_ == proto::ExitReason::failed && ok) {
        ok = false;
        summary = tr("failed (the engine reported a failure)");
    }
    note(ok ? QStringLiteral("info") : QStringLiteral("error"), tr("engine %1").arg(summary));
    const QStringList last = lastLines_;
    cleanupRun();
    setState(ok ? State::Finished : State::Failed);
    Q_EMIT finished(exitCode_, summary, last);
}

}  // namespace lathe::ui
