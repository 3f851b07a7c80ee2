// RunController against a real child process: lathe-fake-engine (tests/ui/fake_engine.cpp), which
// speaks the protocol and can be told to crash, send garbage, ignore a stop or fail.
#include "ui/control/run_controller.h"

#include "engine/config/io.h"

#include <QFile>
#include <QFileInfo>
#include <QSignalSpy>
#include <QtTest>

#include <csignal>

using lathe::ui::RunController;
using State = RunController::State;

namespace {

lathe::config::Json tinyConfig() {
    return lathe::config::to_json(lathe::config::load("tiny").config);
}

// Whether a pid is gone (or only a zombie nobody has reaped yet).
bool processGone(qint64 pid) {
    QFile status(QStringLiteral("/proc/%1/status").arg(pid));
    if (!status.open(QIODevice::ReadOnly)) return true;
    return status.readAll().contains("State:\tZ");
}

}  // namespace

class TestRunController : public QObject {
    Q_OBJECT

    QList<State> states_;

    void record(RunController& rc) {
        states_.clear();
        connect(&rc, &RunController::stateChanged, this, [this](State s) { states_ << s; });
    }

private Q_SLOTS:
    void init() {
        qputenv("LATHE_FAKE_MODE", "normal");
        qputenv("LATHE_FAKE_STEPS", "20");
        qputenv("LATHE_FAKE_STEP_MS", "10");
        QVERIFY2(QFileInfo(lathe::ui::findEngine()).isExecutable(),
                 qPrintable(lathe::ui::findEngine()));
    }

    void normalRun() {
        RunController rc;
        record(rc);
        QSignalSpy metrics(&rc, &RunController::metricsReceived);
        QSignalSpy hello(&rc, &RunController::helloReceived);
        QSignalSpy finished(&rc, &RunController::finished);
        QCOMPARE(rc.state(), State::Idle);
        lathe::ui::RunOptions options;
        options.ranks = 2;
        QVERIFY2(rc.start(tinyConfig(), options), qPrintable(rc.errorString()));
        QVERIFY(rc.isActive());
        // The private folder and the socket are the user's alone.
        const QFileInfo dir(QFileInfo(rc.socketPath()).path());
        QCOMPARE(dir.permissions() & (QFile::ReadGroup | QFile::ReadOther | QFile::ExeOther),
                 QFile::Permissions());
        QVERIFY(rc.arguments().contains(QStringLiteral("launch.nproc=2")));
        QVERIFY(rc.arguments().contains(QStringLiteral("--control-socket")));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 30000);
        QCOMPARE(rc.state(), State::Finished);
        QCOMPARE(states_, (QList<State>{State::Starting, State::Running, State::Finished}));
        QCOMPARE(metrics.size(), 20);
        QCOMPARE(hello.size(), 1);
        QCOMPARE(rc.hello()->world_size, int64_t(2));  // the override reached the engine
        QCOMPARE(rc.hello()->config["run_name"].get<std::string>(), std::string("tiny"));
        QCOMPARE(finished.at(0).at(0).toInt(), 0);
        QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("finished"));
        QCOMPARE(rc.lastStatus()->step, int64_t(20));
        QCOMPARE(rc.droppedMessages(), 0);
        // A second run with the same controller.
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 2, 30000);
        QCOMPARE(rc.state(), State::Finished);
    }

    void checkpointThenStop() {
        qputenv("LATHE_FAKE_STEPS", "100000");
        RunController rc;
        record(rc);
        QSignalSpy saved(&rc, &RunController::checkpointSaved);
        QSignalSpy finished(&rc, &RunController::finished);
        QVERIFY(!rc.requestCheckpoint());  // nothing to checkpoint yet
        QVERIFY(rc.start(tinyConfig()));
        QVERIFY(!rc.start(tinyConfig()));  // one run at a time
        QTRY_COMPARE_WITH_TIMEOUT(rc.state(), State::Running, 20000);
        QVERIFY(rc.requestCheckpoint());
        QCOMPARE(rc.state(), State::Checkpointing);
        QTRY_COMPARE_WITH_TIMEOUT(saved.size(), 1, 10000);
        QTRY_COMPARE(rc.state(), State::Running);
        QVERIFY(rc.requestStop(true));
        QCOMPARE(rc.state(), State::Stopping);
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 20000);
        QCOMPARE(rc.state(), State::Finished);
        QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("stopped"));
        QCOMPARE(saved.size(), 2);  // the final checkpoint of the stop
        QVERIFY(states_.contains(State::Checkpointing));
        QCOMPARE(states_.last(), State::Finished);
    }

    void crashShowsExitAndLastLines() {
        qputenv("LATHE_FAKE_MODE", "crash");
        RunController rc;
        QSignalSpy finished(&rc, &RunController::finished);
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 20000);
        QCOMPARE(rc.state(), State::Failed);
        QVERIFY2(finished.at(0).at(1).toString().contains(QStringLiteral("crashed")),
                 qPrintable(finished.at(0).at(1).toString()));
        const QStringList last = finished.at(0).at(2).toStringList();
        QVERIFY(last.join(QLatin1Char('\n')).contains(QStringLiteral("fake engine: mode crash")));
        // The controller is ready for the next run.
        qputenv("LATHE_FAKE_MODE", "normal");
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 2, 20000);
        QCOMPARE(rc.state(), State::Finished);
    }

    void garbageIsDroppedAndTheRunContinues() {
        qputenv("LATHE_FAKE_MODE", "garbage");
        RunController rc;
        QSignalSpy metrics(&rc, &RunController::metricsReceived);
        QSignalSpy finished(&rc, &RunController::finished);
        QSignalSpy logs(&rc, &RunController::logLine);
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 30000);
        QCOMPARE(rc.state(), State::Finished);
        QCOMPARE(metrics.size(), 20);  // every real event got through
        QVERIFY2(rc.droppedMessages() >= 10 * 6, qPrintable(QString::number(rc.droppedMessages())));
        bool sawOversize = false, sawSecondHello = false;
        for (const auto& args : logs) {
            const QString msg = args.at(2).toString();
            sawOversize |= msg.contains(QStringLiteral("dropped a line of"));
            sawSecondHello |= msg.contains(QStringLiteral("a second hello"));
        }
        QVERIFY(sawOversize);
        QVERIFY(sawSecondHello);
    }

    void stopTimeoutThenKillEndsTheProcessGroup() {
        qputenv("LATHE_FAKE_MODE", "ignore-stop");
        const QString pidFile = QDir::temp().filePath(
            QStringLiteral("lathe-fake-%1.pid").arg(QCoreApplication::applicationPid()));
        qputenv("LATHE_FAKE_PIDFILE", pidFile.toLocal8Bit());
        RunController rc;
        rc.setStopTimeout(300);
        QSignalSpy timedOut(&rc, &RunController::stopTimedOut);
        QSignalSpy finished(&rc, &RunController::finished);
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(rc.state(), State::Running, 20000);
        QTRY_VERIFY(QFileInfo(pidFile).size() > 0);
        QFile f(pidFile);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const qint64 child = f.readAll().trimmed().toLongLong();
        QVERIFY(child > 0);
        QVERIFY(!processGone(child));
        QVERIFY(rc.requestStop());
        QTRY_COMPARE_WITH_TIMEOUT(timedOut.size(), 1, 5000);
        QCOMPARE(rc.state(), State::Stopping);
        rc.kill();
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 10000);
        QCOMPARE(rc.state(), State::Failed);
        QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("killed"));
        QTRY_VERIFY_WITH_TIMEOUT(processGone(child), 5000);  // the engine's child too
        QFile::remove(pidFile);
    }

    void destructorLeavesNoProcessBehind() {
        qputenv("LATHE_FAKE_MODE", "ignore-stop");
        qputenv("LATHE_FAKE_PIDFILE", "/dev/null");
        qint64 pid = 0;
        {
            RunController rc;
            QVERIFY(rc.start(tinyConfig()));
            QTRY_COMPARE_WITH_TIMEOUT(rc.state(), State::Running, 20000);
            pid = rc.processId();
            QVERIFY(pid > 0);
        }
        QTRY_VERIFY_WITH_TIMEOUT(processGone(pid), 5000);
    }

    void stopBeforeConnectingInterrupts() {
        qputenv("LATHE_FAKE_STEPS", "100000");
        RunController rc;
        QSignalSpy finished(&rc, &RunController::finished);
        QVERIFY(rc.start(tinyConfig()));
        QCOMPARE(rc.state(), State::Starting);
        QVERIFY(rc.requestStop());  // no channel yet: SIGTERM, the engine exits 130
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 20000);
        QCOMPARE(rc.state(), State::Finished);
        QVERIFY(finished.at(0).at(1).toString().startsWith(QStringLiteral("stopped")));
    }

    void engineExitingEarlyFails() {
        qputenv("LATHE_FAKE_MODE", "exit-early");
        RunController rc;
        QSignalSpy finished(&rc, &RunController::finished);
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 20000);
        QCOMPARE(rc.state(), State::Failed);
        QCOMPARE(finished.at(0).at(0).toInt(), 3);
        QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("exit code 3"));
        QVERIFY(finished.at(0)
                    .at(2)
                    .toStringList()
                    .join(QLatin1Char('\n'))
                    .contains(QStringLiteral("exiting before connecting")));
    }

    void engineErrorIsReported() {
        qputenv("LATHE_FAKE_MODE", "fail");
        RunController rc;
        QSignalSpy errors(&rc, &RunController::errorReported);
        QSignalSpy finished(&rc, &RunController::finished);
        QVERIFY(rc.start(tinyConfig()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 20000);
        QCOMPARE(rc.state(), State::Failed);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors.at(0).at(0).toString(), QStringLiteral("fake failure: the loss is NaN"));
    }

    void missingEngine() {
        const QByteArray saved = qgetenv("LATHE_ENGINE");
        qputenv("LATHE_ENGINE", "/nonexistent/lathe-engine");
        RunController rc;
        QVERIFY(!rc.start(tinyConfig()));
        QVERIFY(rc.errorString().contains(QStringLiteral("/nonexistent/lathe-engine")));
        QCOMPARE(rc.state(), State::Idle);
        qputenv("LATHE_ENGINE", saved);
    }
};

QTEST_GUILESS_MAIN(TestRunController)
#include "test_run_controller.moc"
