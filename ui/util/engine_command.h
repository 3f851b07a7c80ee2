// EngineCommand: how the workbench runs a one-shot `lathe-engine` subcommand (prepare-data,
// dataset --plan, generate, inspect, export ...): the program ($LATHE_ENGINE or beside the
// workbench), arguments, environment, stdout as lines while it runs, cancel, and at the end the
// exit status turned into one line of error text. What it printed is read with readOutput() into
// the subcommand's message (engine/protocol/cli_output.h), so widgets get typed results and never
// start processes themselves. The training run is the RunController's, not this.
#pragma once

#include "engine/protocol/cli_output.h"

#include <QByteArray>
#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <optional>

namespace lathe::ui {

class EngineCommand : public QObject {
    Q_OBJECT

public:
    explicit EngineCommand(QObject* parent = nullptr);
    /// A command still running is terminated (SIGTERM, then SIGKILL after 5 s).
    ~EngineCommand() override;

    /// The engine executable; by default findEngine().
    void setProgram(const QString& program) { program_ = program; }
    QString program() const { return program_; }
    /// Variables for the child; by default the workbench's own environment as it is at start().
    void setEnvironment(const QProcessEnvironment& environment) { environment_ = environment; }

    /// Starts `lathe-engine ARGUMENTS`; false when one is still running.
    bool start(const QStringList& arguments);
    /// SIGTERM: the engine stops at a safe point (prepare-data keeps its finished shards).
    void terminate();
    /// SIGKILL, for work with nothing to keep (a generation).
    void kill();
    bool isRunning() const;
    QStringList arguments() const { return arguments_; }

    /// All the command printed on stdout so far (all of it once finished() was emitted).
    QByteArray output() const { return output_; }
    /// Why it failed, in one line ("" after success): the engine's last line on stderr, else
    /// "exit N", "stopped by signal" or "cannot start PROGRAM: reason".
    QString error() const { return error_; }
    /// Whether the last run ended by a signal (terminate(), kill(), a crash).
    bool signalled() const { return signalled_; }

Q_SIGNALS:
    /// One stdout line, without its newline, as it arrives.
    void lineRead(const QByteArray& line);
    /// Exit 0 after a normal exit; error() says why not.
    void finished(bool ok);

private:
    void onFinished(int code, QProcess::ExitStatus status);
    void readLines();

    QString program_;
    std::optional<QProcessEnvironment> environment_;
    QStringList arguments_;
    QPointer<QProcess> process_;
    QByteArray output_, pending_, errors_;
    QString error_;
    bool signalled_ = false;
};

/// The message M a subcommand printed as `text` (one JSON line), read strictly: nullopt and
/// `error` naming the missing or mistyped field when it does not fit.
template <class M>
std::optional<M> readOutput(const QByteArray& text, const char* what, QString* error) {
    try {
        return protocol::read_output<M>(text.toStdString(), what);
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return std::nullopt;
    }
}

}  // namespace lathe::ui
