// EngineCommand (ui/util/engine_command.h), the one way the workbench runs a one-shot engine
// subcommand: real child processes (/bin/sh standing in for lathe-engine) for its lines, its
// environment, its exit status as one line of error text, cancel, a program that cannot start,
// and readOutput's typed and strict reading of what the command printed.
#include "engine/protocol/cli_output.h"
#include "ui/util/engine_command.h"

#include <QSignalSpy>
#include <QtTest>

#include <signal.h>

using lathe::ui::EngineCommand;
using lathe::ui::readOutput;
namespace proto = lathe::protocol;

class TestEngineCommand : public QObject {
    Q_OBJECT

    static EngineCommand* shell(QObject* parent) {
        auto* c = new EngineCommand(parent);
        c->setProgram(QStringLiteral("/bin/sh"));
        return c;
    }

private Q_SLOTS:
    void linesAndTheResult() {
        QObject owner;
        auto* c = shell(&owner);
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LATHE_TEST_WORD"), QStringLiteral("fine"));
        c->setEnvironment(env);
        QStringList lines;
        connect(c, &EngineCommand::lineRead, &owner,
                [&lines](const QByteArray& l) { lines << QString::fromUtf8(l); });
        QSignalSpy finished(c, &EngineCommand::finished);
        proto::ExportResult r;
        r.exported = "/out";
        r.from = "/run/step10";
        r.files = {"config.json", "model.safetensors"};
        r.tensors = 12;
        r.weight_bytes = 4096;
        r.dtype = "float32";
        const QString json = QString::fromStdString(proto::write_output(r));
        QVERIFY(
            c->start({QStringLiteral("-c"),
                      QStringLiteral("echo \"$LATHE_TEST_WORD\"; printf '%s' '%1'").arg(json)}));
        QVERIFY(!c->start({QStringLiteral("-c"), QStringLiteral("true")}));  // one at a time
        QVERIFY(finished.wait(10000));
        QCOMPARE(finished.at(0).at(0).toBool(), true);
        QVERIFY(c->error().isEmpty());
        // The last line came without a newline and still arrived.
        QCOMPARE(lines, (QStringList{QStringLiteral("fine"), json}));
        QString error;
        const auto back = readOutput<proto::ExportResult>(lines.last().toUtf8(), "export", &error);
        QVERIFY2(back, qPrintable(error));
        QCOMPARE(back->files.size(), std::size_t{2});
        QCOMPARE(back->weight_bytes, int64_t{4096});
        // A retyped field is refused, by name.
        QVERIFY(!readOutput<proto::ExportResult>(
            lines.last().toUtf8().replace("\"tensors\":12", "\"tensors\":\"12\""), "export",
            &error));
        QVERIFY2(error.contains(QStringLiteral("tensors")), qPrintable(error));
    }

    void failuresSayWhy() {
        QObject owner;
        auto* c = shell(&owner);
        QSignalSpy finished(c, &EngineCommand::finished);
        QVERIFY(c->start({QStringLiteral("-c"),
                          QStringLiteral("echo progress; echo 'warning: x' >&2; "
                                         "echo 'lathe-engine export: no such checkpoint' >&2; "
                                         "exit 2")}));
        QVERIFY(finished.wait(10000));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QCOMPARE(c->error(), QStringLiteral("lathe-engine export: no such checkpoint"));
        QVERIFY(!c->signalled());

        QVERIFY(c->start({QStringLiteral("-c"), QStringLiteral("exit 3")}));
        QVERIFY(finished.wait(10000));
        QCOMPARE(c->error(), QStringLiteral("exit 3"));

        auto* missing = new EngineCommand(&owner);
        missing->setProgram(QStringLiteral("/nonexistent/lathe-engine"));
        QSignalSpy failed(missing, &EngineCommand::finished);
        QVERIFY(missing->start({QStringLiteral("inspect")}));
        QVERIFY(failed.count() == 1 || failed.wait(10000));
        QVERIFY2(
            missing->error().startsWith(QStringLiteral("cannot start /nonexistent/lathe-engine")),
            qPrintable(missing->error()));
        QVERIFY(!missing->isRunning());
    }

    void cancel() {
        QObject owner;
        auto* c = shell(&owner);
        QSignalSpy finished(c, &EngineCommand::finished);
        QVERIFY(c->start({QStringLiteral("-c"), QStringLiteral("exec sleep 30")}));
        QTRY_VERIFY(c->isRunning());
        c->terminate();
        QVERIFY(finished.wait(10000));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QVERIFY(c->signalled());
        QVERIFY(!c->isRunning());
    }

    // A command still running when its owner goes is stopped, not left behind.
    void destroyedWhileRunning() {
        qint64 pid = 0;
        {
            QObject owner;
            auto* c = shell(&owner);
            QVERIFY(c->start({QStringLiteral("-c"), QStringLiteral("exec sleep 30")}));
            QTRY_VERIFY(c->isRunning());
            pid = c->findChild<QProcess*>()->processId();
            QVERIFY(pid > 0);
        }
        QVERIFY(::kill(static_cast<pid_t>(pid), 0) != 0);
    }
};

QTEST_GUILESS_MAIN(TestEngineCommand)
#include "test_engine_command.moc"
