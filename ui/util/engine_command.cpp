#include "ui/util/engine_command.h"

#include "ui/util/engine_launch.h"

namespace lathe::ui {

EngineCommand::EngineCommand(QObject* parent) : QObject(parent), program_(findEngine()) {}

EngineCommand::~EngineCommand() {
    if (process_ && process_->state() != QProcess::NotRunning) {
        process_->disconnect(this);
        process_->terminate();
        if (!process_->waitForFinished(5000)) process_->kill();
        process_->waitForFinished(1000);
    }
}

bool EngineCommand::start(const QStringList& arguments) {
    if (isRunning()) return false;
    arguments_ = arguments;
    output_.clear();
    pending_.clear();
    errors_.clear();
    error_.clear();
    signalled_ = false;
    auto* p = new QProcess(this);
    process_ = p;
    if (environment_) p->setProcessEnvironment(*environment_);
    connect(p, &QProcess::readyReadStandardOutput, this, [this, p] {
        if (p != process_) return;
        const QByteArray chunk = p->readAllStandardOutput();
        output_ += chunk;
        pending_ += chunk;
        readLines();
    });
    connect(p, &QProcess::readyReadStandardError, this, [this, p] {
        if (p == process_) errors_ += p->readAllStandardError();
    });
    connect(p, &QProcess::finished, this, &EngineCommand::onFinished);
    connect(p, &QProcess::errorOccurred, this, [this, p](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart || p != process_) return;
        error_ = tr("cannot start %1: %2").arg(program_, p->errorString());
        process_ = nullptr;
        p->deleteLater();
        Q_EMIT finished(false);
    });
    p->start(program_, arguments);
    return true;
}

void EngineCommand::terminate() {
    if (isRunning()) process_->terminate();
}

void EngineCommand::kill() {
    if (isRunning()) process_->kill();  // our own child, by its handle
}

bool EngineCommand::isRunning() const {
    return process_ && process_->state() != QProcess::NotRunning;
}

void EngineCommand::readLines() {
    int nl;
    while ((nl = pending_.indexOf('\n')) >= 0) {
        const QByteArray line = pending_.left(nl);
        pending_.remove(0, nl + 1);
        Q_EMIT lineRead(line);
    }
}

void EngineCommand::onFinished(int code, QProcess::ExitStatus status) {
    QProcess* p = process_;
    if (!p || p != sender()) return;
    const QByteArray rest = p->readAllStandardOutput();
    output_ += rest;
    pending_ += rest;
    errors_ += p->readAllStandardError();
    process_ = nullptr;
    p->deleteLater();
    readLines();
    if (!pending_.isEmpty()) {  // a last line without its newline
        const QByteArray line = pending_;
        pending_.clear();
        Q_EMIT lineRead(line);
    }
    signalled_ = status != QProcess::NormalExit;
    const bool ok = !signalled_ && code == 0;
    if (!ok) {
        const QStringList lines =
            QString::fromUtf8(errors_).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        error_ = !lines.isEmpty() ? lines.last().trimmed()
                 : signalled_     ? tr("stopped by signal")
                                  : tr("exit %1").arg(code);
    }
    Q_EMIT finished(ok);
}

}  // namespace lathe::ui
