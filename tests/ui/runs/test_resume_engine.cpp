// Runs and checkpoints against the real lathe-engine, headless, through the GUI's own classes
// (RunController, RunSession, ResumePlan, RunsModel, CheckpointsModel): train tiny for 30 planned
// steps with a checkpoint at 15, hard-stop at 20, resume from step 15 -> the run's series holds
// steps 1..30 once each, the abandoned 16..20 apart, and every loss equals that of an
// uninterrupted 30-step run (bitwise: one thread, metrics every step). Also: resume as a new run,
// the engine's refusal of a model change matching the GUI's, attaching to a run started elsewhere
// and noticing when it dies; the sampler's text reaching the Samples dock live and from disk, and
// Try it generating from a checkpoint with the real engine.
#include "engine/config/io.h"
#include "tests/engine_runner.h"
#include "tests/ui/runs/engine_fixtures.h"
#include "tests/ui/runs/run_fixtures.h"
#include "ui/checkpoints/checkpoints_model.h"
#include "ui/checkpoints/export_dialog.h"
#include "ui/checkpoints/resume_plan.h"
#include "ui/control/run_controller.h"
#include "ui/control/run_session.h"
#include "ui/control/run_toolbar.h"
#include "ui/main_window.h"
#include "ui/plots/metric_store.h"
#include "ui/runs/run_info.h"
#include "ui/runs/run_metrics_loader.h"
#include "ui/runs/runs_model.h"
#include "ui/samples/samples_model.h"
#include "ui/samples/samples_panel.h"

#include <QDir>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>

#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

using namespace lathe::ui;
using lathe::config::Json;
using lathe::testing::kLoss;
using lathe::testing::range;
using lathe::testing::waitDone;

namespace {

std::vector<std::string> common(const QString& name) {
    return {"run_name=" + name.toStdString(), "launch.num_threads=1",
            "trainer.max_duration=30steps", "trainer.callbacks.checkpointer.save_interval=15",
            "trainer.metrics_collect_interval=1"};
}

Json tinyConfig(const QString& name, const std::vector<std::string>& extra = {}) {
    return lathe::testing::tinyConfig(common(name), extra);
}

}  // namespace

class TestResumeEngine : public QObject {
    Q_OBJECT

    QTemporaryDir root_;
    QMap<qint64, double> reference_;  // the uninterrupted run's losses

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(QFileInfo(lathe::testing::engine_path()).isExecutable());
        qputenv("LATHE_ENGINE", lathe::testing::engine_path().toUtf8());
        QStringList args{"train", "tiny"};
        for (const auto& o : common("reference")) args << QString::fromStdString(o);
        args << "--runs-dir" << root_.path();
        const auto r = lathe::testing::run_engine(args, root_.path());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        reference_ = lathe::testing::losses(
            lathe::testing::read_metrics(root_.path() + "/reference/metrics.jsonl"));
        QCOMPARE(reference_.keys().size(), 30);
    }

    void samplesLiveAndTryIt() {
        MetricStore store;
        RunController run;
        RunSession session(&run, &store);
        SamplesModel samples;
        SamplesPanel panel(&samples);
        QObject::connect(
            &run, &RunController::samplesReceived, &samples,
            [&](const lathe::protocol::Samples& s) {
                QVector<SamplesModel::Sample> v;
                for (const auto& x : s.samples)
                    v.push_back({QString::fromStdString(x.prompt), QString::fromStdString(x.text)});
                samples.addStep(s.step, v);
            });
        RunOptions options;
        options.runsDir = root_.path();
        QString error;
        QVERIFY2(session.startNew(tinyConfig("S", {"trainer.callbacks.sampler.enabled=true",
                                                   "trainer.callbacks.sampler.interval=10",
                                                   "trainer.callbacks.sampler.max_new_tokens=16"}),
                                  options, &error),
                 qPrintable(error));
        // Samples arrive while the run goes on, the newest shown.
        QTRY_VERIFY_WITH_TIMEOUT(samples.steps().size() >= 1, 120000);
        QVERIFY(waitDone(run));
        QCOMPARE(run.state(), RunController::State::Finished);
        QCOMPARE(samples.steps().size(), 3);  // steps 10, 20, 30
        QCOMPARE(samples.steps().back().step, 30);
        QCOMPARE(panel.shownStep(), 30);
        QVERIFY(panel.shownText().startsWith(QStringLiteral("Once upon a time")));
        // The same from disk.
        const QString runDir = root_.path() + "/S";
        SamplesModel fromDisk;
        QCOMPARE(fromDisk.loadRun(runDir), 0);
        QCOMPARE(fromDisk.steps().size(), 3);
        QCOMPARE(fromDisk.steps()[1].samples, samples.steps()[1].samples);
        // Try it on the step-15 checkpoint, with the real engine.
        panel.setEnginePath(lathe::testing::engine_path());
        panel.setModelSource(runDir + "/step15", true);
        panel.promptEdit()->setText(QStringLiteral("The "));
        QSignalSpy done(&panel, &SamplesPanel::generationFinished);
        QVERIFY(panel.generate());
        QVERIFY(done.wait(60000));
        QVERIFY2(done.at(0).at(0).toBool(), qPrintable(panel.tryItOutput()));
        QVERIFY(panel.tryItOutput().startsWith(QStringLiteral("The ")));
        QVERIFY(panel.tryItOutput().size() > 10);
    }

    void resumeSameRun() {
        MetricStore store;
        RunController run;
        RunSession session(&run, &store);
        RunOptions options;
        options.runsDir = root_.path();
        QString error;
        QVERIFY2(session.startNew(tinyConfig("A", {"trainer.hard_stop=20steps"}), options, &error),
                 qPrintable(error));
        QVERIFY(waitDone(run));
        QCOMPARE(run.state(), RunController::State::Finished);
        const QString runDir = QFileInfo(root_.path() + "/A").absoluteFilePath();
        QCOMPARE(session.shownRun(), runDir);
        QCOMPARE(store.series(kLoss)->step, range(1, 20));

        CheckpointsModel checkpoints;
        checkpoints.setRefreshInterval(0);
        checkpoints.setRunDir(runDir);
        const int row15 = checkpoints.rowOf("step15");
        QVERIFY(row15 >= 0);
        QVERIFY(checkpoints.checkpoint(row15).canResume());
        QCOMPARE(checkpoints.checkpoint(row15).tokens, 15 * 2048);
        QVERIFY(checkpoints.rowOf("step20") >= 0);

        // Resume from step 15, with the hard stop lifted (an edit the engine ignores in its diff).
        auto plan = ResumePlan::fromCheckpoint(runDir + "/step15", &error);
        QVERIFY2(plan, qPrintable(error));
        QCOMPARE(plan->worldSize(), 1);
        Json edited = plan->baseConfig();
        edited["trainer"]["hard_stop"] = nullptr;
        QVERIFY(plan->refusal(edited).isEmpty());
        auto launch =
            plan->prepareLaunch(edited, ResumePlan::Mode::SameRun, {}, plan->worldSize(), &error);
        QVERIFY2(launch, qPrintable(error));
        QVERIFY2(session.resume(*plan, *launch, &error), qPrintable(error));
        QVERIFY(run.arguments().contains("--resume-from"));
        QVERIFY(waitDone(run));
        QVERIFY2(run.state() == RunController::State::Finished,
                 qPrintable(run.lastLines().join('\n')));

        // The store: steps 1..30 once each; the abandoned 16..20 apart; the losses of an
        // uninterrupted run, exactly.
        const auto* s = store.series(kLoss);
        QCOMPARE(s->step, range(1, 30));
        for (int i = 0; i < s->size(); ++i)
            QVERIFY2(s->value[i] == reference_.value(qint64(s->step[i])),
                     qPrintable(QStringLiteral("step %1: %2 vs %3")
                                    .arg(s->step[i])
                                    .arg(s->value[i], 0, 'g', 17)
                                    .arg(reference_.value(qint64(s->step[i])), 0, 'g', 17)));
        const auto* gone = store.series(MetricStore::abandonedName(kLoss, 1));
        QVERIFY(gone);
        QCOMPARE(gone->step, range(16, 20));
        QCOMPARE(store.rejected(), 0);

        // On disk: the engine set step20 aside, noted the resume, and reopening shows the same.
        QVERIFY(QFileInfo::exists(runDir + "/step20.abandoned"));
        QVERIFY(QFileInfo::exists(runDir + "/history.jsonl"));
        MetricStore reopened;
        RunMetricsLoader loader(&reopened);
        QVERIFY(loader.open(runDir));
        QCOMPARE(loader.resumesApplied(), 1);
        QCOMPARE(reopened.series(kLoss)->step, s->step);
        QCOMPARE(reopened.series(kLoss)->value, s->value);
        QCOMPARE(reopened.series(MetricStore::abandonedName(kLoss, 1))->step, range(16, 20));
        checkpoints.refresh();
        QCOMPARE(checkpoints.checkpoint(checkpoints.rowOf("step20.abandoned")).status,
                 CheckpointInfo::Status::Abandoned);
        QVERIFY(checkpoints.checkpoint(checkpoints.rowOf("step30")).canResume());
        const RunInfo info = readRunInfo(runDir);
        QCOMPARE(info.state, RunState::Finished);
        QCOMPARE(info.step, 30);
    }

    // "Checkpoint now" is permanent (issue 34): max_checkpoints keeps the newest periodic
    // checkpoints and never removes the one the user asked for, and each removal is logged.
    void checkpointNowSurvivesRetention() {
        MetricStore store;
        RunController run;
        RunSession session(&run, &store);
        RunOptions options;
        options.runsDir = root_.path();
        QString error;
        QVERIFY2(session.startNew(
                     lathe::testing::tinyConfig(
                         {"run_name=keep", "launch.num_threads=1",
                          "trainer.metrics_collect_interval=1", "trainer.max_duration=300steps",
                          "trainer.callbacks.checkpointer.save_interval=50",
                          "trainer.callbacks.checkpointer.max_checkpoints=1"}),
                     options, &error),
                 qPrintable(error));
        QTRY_VERIFY_WITH_TIMEOUT(store.series(kLoss) && store.series(kLoss)->step.size() >= 3,
                                 60000);
        QVERIFY(run.requestCheckpoint());
        QVERIFY(waitDone(run));
        QCOMPARE(run.state(), RunController::State::Finished);
        const QString dir = root_.path() + "/keep";
        const QStringList kept = QDir(dir).entryList({"step*"}, QDir::Dirs, QDir::Name);
        QStringList asked;
        for (const auto& name : kept)
            if (name.mid(4).toLongLong() % 50 != 0) asked << name;
        QVERIFY2(kept.contains("step300"), qPrintable(kept.join(' ')));
        QVERIFY2(asked.size() == 1 && kept.size() == 2, qPrintable(kept.join(' ')));
        const QString log = lathe::testing::read_text(dir + "/logs/rank0.log");
        QVERIFY2(log.contains("removed checkpoint") && log.contains("max_checkpoints=1"),
                 qPrintable(log.right(2000)));
        QVERIFY(log.contains("checkpoint requested at step " + asked.first().mid(4)));
    }

    void resumeAsNewRun() {
        const QString parentDir = QFileInfo(root_.path() + "/A").absoluteFilePath();
        QVERIFY(QFileInfo::exists(parentDir + "/step15/.metadata.json"));
        MetricStore store;
        RunController run;
        RunSession session(&run, &store);
        QString error;
        auto plan = ResumePlan::fromCheckpoint(parentDir + "/step15", &error);
        QVERIFY2(plan, qPrintable(error));
        Json edited = plan->baseConfig();
        edited["trainer"]["hard_stop"] = nullptr;
        auto launch = plan->prepareLaunch(edited, ResumePlan::Mode::NewRun, "A2", 1, &error);
        QVERIFY2(launch, qPrintable(error));
        QVERIFY(QFileInfo::exists(root_.path() + "/A2/parent.json"));
        QVERIFY2(session.resume(*plan, *launch, &error), qPrintable(error));
        QVERIFY(!run.arguments().contains("--resume-from"));
        QVERIFY(waitDone(run));
        QVERIFY2(run.state() == RunController::State::Finished,
                 qPrintable(run.lastLines().join('\n')));
        // Its own file holds 16..30; the plot shows the parent's 1..15 before them.
        const auto own = lathe::testing::losses(
            lathe::testing::read_metrics(root_.path() + "/A2/metrics.jsonl"));
        QCOMPARE(own.firstKey(), 16);
        QCOMPARE(own.lastKey(), 30);
        for (auto it = own.begin(); it != own.end(); ++it)
            QCOMPARE(it.value(), reference_.value(it.key()));
        QCOMPARE(store.series(kLoss)->step, range(1, 30));
        MetricStore reopened;
        RunMetricsLoader loader(&reopened);
        QVERIFY(loader.open(root_.path() + "/A2"));
        QCOMPARE(reopened.series(kLoss)->step, range(1, 30));
        QCOMPARE(reopened.series(kLoss)->value, store.series(kLoss)->value);
        const RunInfo info = readRunInfo(root_.path() + "/A2");
        QCOMPARE(info.parentRun, QStringLiteral("A"));
        QCOMPARE(info.parentStep, 15);
    }

    void engineRefusesWhatTheGuiRefuses() {
        const QString runDir = QFileInfo(root_.path() + "/A").absoluteFilePath();
        auto plan = ResumePlan::fromCheckpoint(runDir + "/step15");
        QVERIFY(plan);
        Json edited = plan->baseConfig();
        edited["model"]["d_model"] = 128;
        const QString gui = plan->refusal(edited);
        QVERIFY(gui.contains("model.d_model: 64 -> 128"));
        const auto r = lathe::testing::run_engine(
            {"train", runDir + "/config.json", "model.d_model=128", "model.n_heads=4",
             "--resume-from", runDir + "/step15", "--runs-dir", root_.path()},
            root_.path());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(
            r.output.contains("cannot resume") && r.output.contains("model.d_model: 64 -> 128"),
            qPrintable(r.output));
    }

    // A workbench killed with SIGKILL (issue 34 item 7): its engine notices (the control
    // connection closes, and the parent-death SIGTERM arrives; a closed stdout no longer kills it
    // with SIGPIPE), saves a final checkpoint, writes "interrupted" and exits. The control folder
    // the workbench left in the temp folder goes at the next start.
    void killedWorkbenchLeavesACheckpoint() {
        const QString victimProgram = qEnvironmentVariable("LATHE_GUI_VICTIM");
        QVERIFY2(QFileInfo(victimProgram).isExecutable(), "LATHE_GUI_VICTIM");
        QTemporaryDir tmp;  // the workbench's TMPDIR: its control folder goes there
        const QString configFile = root_.path() + "/victim.json";
        {
            QFile f(configFile);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray::fromStdString(
                lathe::testing::tinyConfig({"run_name=victim", "launch.num_threads=1",
                                            "trainer.max_duration=100000steps",
                                            "trainer.metrics_collect_interval=1"})
                    .dump()));
        }
        QProcess victim;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("TMPDIR", tmp.path());
        victim.setProcessEnvironment(env);
        victim.start(victimProgram, {configFile, root_.path()});
        QVERIFY(victim.waitForStarted());
        QString out;
        QTRY_VERIFY_WITH_TIMEOUT(
            (out += QString::fromUtf8(victim.readAllStandardOutput()), out.contains("running ")),
            90000);
        const QString control = out.section("control ", 1).section('\n', 0, 0);
        QVERIFY2(QFileInfo(control).isDir() && control.startsWith(tmp.path()), qPrintable(out));

        ::kill(static_cast<pid_t>(victim.processId()), SIGKILL);  // our own child
        QVERIFY(victim.waitForFinished());
        const QString runDir = QFileInfo(root_.path() + "/victim").absoluteFilePath();
        auto status = [&] {
            QFile f(runDir + "/status.json");
            f.open(QIODevice::ReadOnly);
            return lathe::config::Json::parse(f.readAll().toStdString(), nullptr, false);
        };
        QTRY_VERIFY_WITH_TIMEOUT(status().value("state", std::string()) == "interrupted", 60000);
        const auto s = status();
        QVERIFY2(s.value("reason", std::string()).find("went away") != std::string::npos,
                 s.dump().c_str());
        const qint64 step = s.value("step", qint64(-1));
        QVERIFY(step >= 3);
        QVERIFY2(QFileInfo(runDir + QStringLiteral("/step%1").arg(step)).isDir(), s.dump().c_str());
        const auto pid = static_cast<pid_t>(s.value("pid", qint64(0)));
        QTRY_VERIFY_WITH_TIMEOUT(::kill(pid, 0) != 0, 30000);  // the engine exited
        QCOMPARE(readRunInfo(runDir).state, RunState::Interrupted);
        const auto verify = lathe::testing::run_engine(
            {"inspect", "--verify", runDir + QStringLiteral("/step%1").arg(step)}, root_.path());
        QVERIFY2(verify.exit_code == 0, qPrintable(verify.output));

        // The control folder outlived its workbench; the next start removes it, and only it.
        QVERIFY(QFileInfo(control).isDir());
        QVERIFY(QDir(tmp.path()).mkdir("lathe-keepme"));  // not ours: left alone
        QCOMPARE(RunController::removeStaleFolders(tmp.path()), QStringList{control});
        QVERIFY(!QFileInfo::exists(control));
        QVERIFY(QFileInfo(tmp.path() + "/lathe-keepme").isDir());
    }

    // File > Export to Hugging Face… (issue 34 item 10): the reference run's step-15 checkpoint
    // to a Hugging Face folder through the real engine; a bad checkpoint shows the engine's error.
    void exportDialogWritesAHuggingFaceFolder() {
        lathe::ui::ExportDialog dialog;
        QSignalSpy finished(&dialog, &lathe::ui::ExportDialog::finished);
        const QString checkpoint = root_.path() + "/reference/step15";
        dialog.setCheckpoint(checkpoint);
        // Suggested outside the runs folder (issue 45 item 6), where no run list looks.
        QCOMPARE(dialog.arguments().at(2), QDir::homePath() + "/lathe-exports/reference-step15-hf");
        const QString out = root_.path() + "/reference-step15-hf";  // a user's choice: inside it
        dialog.setOutputFolder(out);
        dialog.setDType("bfloat16");
        QVERIFY(dialog.arguments().contains("bfloat16"));
        dialog.findChild<QPushButton*>("exportButton")->click();
        QVERIFY(dialog.isRunning());
        QVERIFY(finished.wait(120000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(dialog.statusText()));
        QVERIFY(QFileInfo(out + "/config.json").isFile());
        QVERIFY(QFileInfo(out + "/model.safetensors").isFile());
        {
            // Even there, the runs list shows runs only: the model folder is no "unknown" run.
            RunsModel runs;
            runs.setRoot(root_.path());
            QVERIFY(runs.rowOf(QFileInfo(root_.path() + "/reference").absoluteFilePath()) >= 0);
            QCOMPARE(runs.rowOf(QFileInfo(out).absoluteFilePath()), -1);
        }
        QVERIFY2(
            dialog.statusText().contains("Exported to") && dialog.statusText().contains("bfloat16"),
            qPrintable(dialog.statusText()));
        dialog.setCheckpoint(root_.path() + "/no-such-run/step15");
        dialog.setOutputFolder(root_.path() + "/nothing-hf");
        QVERIFY(dialog.startExport());
        QVERIFY(finished.wait(60000));
        QVERIFY(!finished.last().at(0).toBool());
        QVERIFY2(dialog.statusText().startsWith("Export failed:") &&
                     dialog.statusText().contains("no-such-run"),
                 qPrintable(dialog.statusText()));
    }

    // A run started elsewhere (headless: a cluster job, a shell) that the window opens and
    // follows: its toolbar's Checkpoint now and Stop reach it through the run folder's control
    // drop-box (issue 46 item 4), and it stops with a final checkpoint.
    void windowControlsAFollowedRun() {
        QStandardPaths::setTestModeEnabled(true);  // the window's QSettings away from the user's
        QProcess engine;
        engine.setProcessChannelMode(QProcess::MergedChannels);
        engine.start(
            lathe::testing::engine_path(),
            {"train", "tiny", "run_name=followed", "launch.num_threads=1",
             "trainer.max_duration=100000steps", "trainer.metrics_collect_interval=1",
             "trainer.callbacks.checkpointer.save_interval=100000", "--runs-dir", root_.path()});
        QVERIFY(engine.waitForStarted());
        const QString runDir = QFileInfo(root_.path() + "/followed").absoluteFilePath();
        QTRY_VERIFY_WITH_TIMEOUT(
            readRunInfo(runDir).state == RunState::Running && readRunInfo(runDir).step >= 5, 60000);
        qputenv("LATHE_RUNS_DIR", root_.path().toUtf8());
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(!w.toolbar()->checkpointAction()->isEnabled());  // nothing shown yet
        QVERIFY(w.openRun(runDir));
        QTRY_COMPARE(w.toolbar()->followedRun(), runDir);
        QVERIFY(w.toolbar()->checkpointAction()->isEnabled());
        QVERIFY(w.toolbar()->stopAction()->isEnabled());
        QVERIFY(w.toolbar()->checkpointAction()->toolTip().contains("drop-box"));
        w.toolbar()->checkpointAction()->trigger();
        auto saved = [&] {
            return QDir(runDir)
                .entryList({"step*"}, QDir::Dirs)
                .filter(QRegularExpression("^step[1-9]\\d*$"));
        };
        QTRY_VERIFY_WITH_TIMEOUT(!saved().isEmpty(), 60000);
        QVERIFY(engine.state() == QProcess::Running);
        w.toolbar()->stopAction()->trigger();
        QVERIFY(engine.waitForFinished(120000));
        const RunInfo info = readRunInfo(runDir);
        QCOMPARE(info.state, RunState::Stopped);
        QVERIFY2(info.reason.contains("control drop-box"), qPrintable(info.reason));
        QVERIFY(QFile::exists(runDir + QString("/step%1/.metadata.json").arg(info.step)));
        // Once it has stopped the buttons are the window's own again (nothing to control).
        QTRY_VERIFY_WITH_TIMEOUT(w.toolbar()->followedRun().isEmpty(), 10000);
        QVERIFY(!w.toolbar()->stopAction()->isEnabled());
        qunsetenv("LATHE_RUNS_DIR");
    }

    void attachAndNoticeDeath() {
        // A run started elsewhere (headless, no control channel), long enough to watch.
        QProcess engine;
        QStringList args{"train",
                         "tiny",
                         "run_name=headless",
                         "launch.num_threads=1",
                         "trainer.max_duration=100000steps",
                         "trainer.metrics_collect_interval=1",
                         "--runs-dir",
                         root_.path()};
        engine.setProcessChannelMode(QProcess::MergedChannels);
        engine.start(lathe::testing::engine_path(), args);
        QVERIFY(engine.waitForStarted());
        const QString runDir = QFileInfo(root_.path() + "/headless").absoluteFilePath();
        QTRY_VERIFY_WITH_TIMEOUT(
            readRunInfo(runDir).state == RunState::Running && readRunInfo(runDir).step >= 10,
            60000);

        RunsModel runs;
        runs.setRefreshInterval(100);
        runs.setRoot(root_.path());
        const int row = runs.rowOf(runDir);
        QVERIFY(row >= 0);
        QCOMPARE(runs.run(row).state, RunState::Running);

        MetricStore store;
        RunController run;
        RunSession session(&run, &store);
        QVERIFY(session.openRun(runDir, true));
        QVERIFY(session.isFollowing());
        const int first = store.series(kLoss)->size();
        QTRY_VERIFY_WITH_TIMEOUT(store.series(kLoss)->size() >= first + 10, 30000);
        const auto* s = store.series(kLoss);
        QCOMPARE(s->step, range(1, s->size()));  // in order, none missing, none twice

        ::kill(static_cast<pid_t>(engine.processId()), SIGKILL);
        QVERIFY(engine.waitForFinished());
        QTRY_COMPARE_WITH_TIMEOUT(runs.run(runs.rowOf(runDir)).state, RunState::Interrupted, 10000);
        QVERIFY(runs.run(runs.rowOf(runDir)).reason.contains("gone"));
    }
};

QTEST_MAIN(TestResumeEngine)
#include "test_resume_engine.moc"
