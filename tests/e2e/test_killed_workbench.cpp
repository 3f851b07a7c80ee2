// The workbench killed mid-run never loses the steps since the last checkpoint (issue 45 item 1).
// Under Xvfb at 1366x768: the real `lathe` program opens a config, its own Start is pressed with
// a real key event (xdotool, XTEST: Ctrl+R), and once the engine trains the `lathe` process gets
// SIGKILL. Its engine, on one rank and on two, must save a final checkpoint at the step it reached,
// write "interrupted" to status.json and exit. A workbench dies with all its threads, and the
// kernel sends the engine the parent-death signal once per thread: a repeat from the parent must
// not count as the user's "second signal, stop now".
#include "engine/config/io.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QScopeGuard>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <optional>

#include <sys/types.h>

using lathe::config::Json;

namespace {

Json readJson(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return Json::object();
    Json j = Json::parse(f.readAll().toStdString(), nullptr, false);
    return j.is_object() ? j : Json::object();  // not there yet, or half written
}

// xdotool's output, or nothing when it failed.
std::optional<QString> xdotool(const QStringList& args) {
    QProcess p;
    p.start(QStringLiteral("xdotool"), args);
    if (!p.waitForFinished(20000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return std::nullopt;
    return QString::fromUtf8(p.readAllStandardOutput()).trimmed();
}

// The window of process `pid` once it is on screen, or an empty string.
QString windowOf(const QString& pid) {
    const auto found =
        xdotool({QStringLiteral("search"), QStringLiteral("--onlyvisible"), QStringLiteral("--pid"),
                 pid, QStringLiteral("--name"), QStringLiteral("Lathe")});
    return found ? found->section(QLatin1Char('\n'), 0, 0) : QString();
}

}  // namespace

class TestKilledWorkbench : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        if (QStandardPaths::findExecutable(QStringLiteral("xdotool")).isEmpty())
            QFAIL("xdotool is not installed (packaging/setup.sh installs it)");
        QVERIFY2(qEnvironmentVariableIsSet("DISPLAY"), "needs an X server (run under xvfb-run)");
    }

    void killedWindowLeavesAFinalCheckpoint_data() {
        QTest::addColumn<int>("ranks");
        QTest::newRow("one rank") << 1;
        QTest::newRow("two ranks") << 2;
    }

    void killedWindowLeavesAFinalCheckpoint() {
        QFETCH(int, ranks);
        QTemporaryDir home;
        const QString runs = home.filePath(QStringLiteral("runs"));
        const QString config = home.filePath(QStringLiteral("killed.json"));
        QVERIFY(QDir().mkpath(runs) &&
                QDir().mkpath(home.filePath(QStringLiteral("config/Lathe"))));
        // The window restores the rank count of its last session.
        {
            QFile f(home.filePath(QStringLiteral("config/Lathe/Lathe.conf")));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QStringLiteral("[run]\nranks=%1\n").arg(ranks).toUtf8());
        }
        // The tiny preset, long enough that only the kill ends it, with no periodic checkpoint
        // after step 0: every step it reaches is lost unless the final checkpoint is written.
        Json c = readJson(qEnvironmentVariable("LATHE_SOURCE_DIR") +
                          QStringLiteral("/resources/presets/tiny.json"));
        QVERIFY(c.is_object());
        c["run_name"] = "killed";
        c["trainer"]["max_duration"] = "100000steps";
        c["trainer"]["callbacks"]["checkpointer"]["save_interval"] = 100000;
        c["launch"]["num_threads"] = 1;
        {
            QFile f(config);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray::fromStdString(c.dump(2)));
        }

        QProcess window;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("xcb"));
        env.insert(QStringLiteral("HOME"), home.path());
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), home.filePath(QStringLiteral("data")));
        env.insert(QStringLiteral("TMPDIR"), home.path());
        env.insert(QStringLiteral("LATHE_RUNS_DIR"), runs);
        env.insert(QStringLiteral("LATHE_ENGINE"),
                   qEnvironmentVariable("LATHE_BIN_DIR") + QStringLiteral("/lathe-engine"));
        window.setProcessEnvironment(env);
        window.setProcessChannelMode(QProcess::MergedChannels);
        window.start(qEnvironmentVariable("LATHE_BIN_DIR") + QStringLiteral("/lathe"), {config});
        QVERIFY(window.waitForStarted());
        const QString pid = QString::number(window.processId());
        const QString statusFile = runs + QStringLiteral("/killed/status.json");
        // Whatever happens, nothing of this row outlives it: the window, then its engine.
        auto cleanup = qScopeGuard([&] {
            if (window.state() != QProcess::NotRunning) {
                window.kill();
                window.waitForFinished(10000);
            }
            const auto engine = static_cast<pid_t>(readJson(statusFile).value("pid", int64_t(0)));
            for (int i = 0; engine > 0 && ::kill(engine, 0) == 0 && i < 600; ++i) QTest::qWait(100);
        });

        // The window on screen, focused; then the user's Ctrl+R (the toolbar's Start).
        QString id;
        QByteArray output;
        QTRY_VERIFY2_WITH_TIMEOUT(!(id = windowOf(pid)).isEmpty(),
                                  (output += window.readAll()).constData(), 60000);
        QTest::qWait(1000);  // the first paint and the config loaded
        QVERIFY(xdotool({QStringLiteral("windowfocus"), QStringLiteral("--sync"), id}));
        QVERIFY(xdotool({QStringLiteral("key"), QStringLiteral("ctrl+r")}));

        const QString runDir = runs + QStringLiteral("/killed");
        QTRY_VERIFY2_WITH_TIMEOUT(readJson(statusFile).value("step", int64_t(0)) >= 8,
                                  qPrintable(QString::fromUtf8(window.readAll())), 120000);
        const Json running = readJson(statusFile);
        QCOMPARE(running.value("state", std::string()), std::string("running"));
        QCOMPARE(running.value("world_size", int64_t(0)), int64_t(ranks));

        ::kill(static_cast<pid_t>(window.processId()), SIGKILL);  // our own child
        QVERIFY(window.waitForFinished(10000));
        QTRY_VERIFY_WITH_TIMEOUT(readJson(statusFile).value("state", std::string()) != "running",
                                 60000);
        const Json s = readJson(statusFile);
        QVERIFY2(s.value("state", std::string()) == "interrupted", s.dump().c_str());
        QVERIFY2(s.value("reason", std::string()).find("went away") != std::string::npos,
                 s.dump().c_str());
        const int64_t step = s.value("step", int64_t(-1));
        QVERIFY2(step >= 8, s.dump().c_str());
        const QString checkpoint = runDir + QStringLiteral("/step%1").arg(step);
        QVERIFY2(QFileInfo(checkpoint).isDir(), s.dump().c_str());
        const auto enginePid = static_cast<pid_t>(s.value("pid", int64_t(0)));
        QTRY_VERIFY_WITH_TIMEOUT(::kill(enginePid, 0) != 0, 30000);  // the engine exited

        QProcess verify;
        verify.setProcessChannelMode(QProcess::MergedChannels);
        verify.start(qEnvironmentVariable("LATHE_BIN_DIR") + QStringLiteral("/lathe-engine"),
                     {QStringLiteral("inspect"), QStringLiteral("--verify"), checkpoint});
        QVERIFY(verify.waitForFinished(120000));
        QVERIFY2(verify.exitCode() == 0, verify.readAll().constData());
    }
};

QTEST_GUILESS_MAIN(TestKilledWorkbench)
#include "test_killed_workbench.moc"
