// End to end, under Xvfb: the workbench window with a run made by the real engine. Select the run
// in the Runs dock, open it, select its step15 checkpoint, press Resume: the engine continues the
// run and the curve continues from step 16 (the first attempt's 16..30 drawn apart as abandoned).
// Then compare two runs. Screenshots go to $LATHE_ARTIFACTS.
#include "ui/checkpoints/export_dialog.h"
#include "ui/control/run_toolbar.h"
#include "ui/main_window.h"

#include "tests/engine_runner.h"
#include "tests/ui/runs/run_fixtures.h"
#include "ui/checkpoints/checkpoints_model.h"
#include "ui/checkpoints/checkpoints_panel.h"
#include "ui/config/config_editor.h"
#include "ui/control/run_session.h"
#include "ui/plots/metric_plot.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"
#include "ui/runs/compare_view.h"
#include "ui/runs/runs_model.h"
#include "ui/runs/runs_panel.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QUndoStack>
#include <QtTest>

using namespace lathe::ui;
using lathe::testing::kLoss;
using lathe::testing::range;

namespace {

QString artifacts() {
    QString dir = qEnvironmentVariable("LATHE_ARTIFACTS", QDir::tempPath());
    QDir().mkpath(dir);
    return dir;
}

}  // namespace

class TestRunsE2E : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
        QCoreApplication::setApplicationName(QStringLiteral("lathe-runs-e2e"));
        qputenv("LATHE_ENGINE", lathe::testing::engine_path().toUtf8());
    }

    // Every test starts from the preset and the default panels, not from the last test's form
    // (the window restores both from QSettings).
    void init() {
        QSettings s;
        s.remove(QStringLiteral("editor/session"));
        s.remove(QStringLiteral("plots/panels"));
    }

    void selectCheckpointAndResume() {
        QTemporaryDir root;
        qputenv("LATHE_RUNS_DIR", root.path().toUtf8());
        for (const QString& lr : {QStringLiteral("0.003"), QStringLiteral("0.001")}) {
            const QString name =
                lr == "0.003" ? QStringLiteral("e2e") : QStringLiteral("e2e-low-lr");
            const auto r = lathe::testing::run_engine(
                {"train", "tiny", "run_name=" + name, "launch.num_threads=1",
                 "trainer.max_duration=30steps", "trainer.callbacks.checkpointer.save_interval=15",
                 "trainer.metrics_collect_interval=1", "train_module.optim.lr=" + lr, "--runs-dir",
                 root.path()},
                root.path());
            QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        }
        const QString runDir = QFileInfo(root.path() + "/e2e").absoluteFilePath();

        MainWindow w;
        w.resize(1800, 1100);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QCOMPARE(w.runsRoot(), root.path());
        QTRY_COMPARE(w.runsPanel()->model()->rowCount(), 2);

        // Select the run: its checkpoints appear; Open shows its curve.
        QVERIFY(w.runsPanel()->selectRun(runDir));
        QTRY_COMPARE(w.checkpointsPanel()->model()->runDir(), runDir);
        QTRY_VERIFY(w.checkpointsPanel()->model()->rowOf("step15") >= 0);
        QTest::mouseClick(w.runsPanel()->openButton(), Qt::LeftButton);
        QTRY_COMPARE(w.session()->shownRun(), runDir);
        QCOMPARE(w.plots()->store()->series(kLoss)->step, range(1, 30));

        // Select step15 and press Resume: the window asks first, naming the checkpoint it will
        // set aside; Cancel changes nothing.
        QVERIFY(w.checkpointsPanel()->selectCheckpoint("step15"));
        // (File > Export to Hugging Face… starts from the selected checkpoint.)
        lathe::ui::ExportDialog* exporter = w.showExportDialog();
        QCOMPARE(QFileInfo(exporter->arguments().at(1)).fileName(), QStringLiteral("step15"));
        exporter->close();
        QPushButton* resume = w.checkpointsPanel()->resumeButton();
        QTRY_VERIFY(resume->isEnabled());
        QString asked;
        auto answer = [&](bool confirm, bool dontAsk) {
            QTimer::singleShot(200, [&, confirm, dontAsk] {
                auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
                if (!box) return;
                asked = box->text();
                if (dontAsk) box->checkBox()->setChecked(true);
                for (QAbstractButton* b : box->buttons())
                    if ((box->buttonRole(b) == QMessageBox::AcceptRole) == confirm)
                        QTest::mouseClick(b, Qt::LeftButton);
            });
        };
        answer(false, false);
        QTest::mouseClick(resume, Qt::LeftButton);
        QVERIFY2(asked.contains("step30"), qPrintable(asked));
        QCOMPARE(w.run()->state(), lathe::ui::RunController::State::Idle);
        QVERIFY(QFileInfo::exists(runDir + "/step30"));
        asked.clear();
        answer(true, true);
        QTest::mouseClick(resume, Qt::LeftButton);
        QVERIFY2(asked.contains("step30"), qPrintable(asked));
        auto* ask = w.findChild<QAction*>("askBeforeSettingAside");
        QVERIFY(ask && !ask->isChecked());  // "Don't ask again" is kept, and can be undone there
        // While it runs, Resume is disabled with the reason, whatever is selected.
        QTRY_VERIFY(w.run()->isActive());
        QVERIFY(w.checkpointsPanel()->selectCheckpoint("step15"));
        QVERIFY(!resume->isEnabled());
        QVERIFY(resume->toolTip().contains("in progress"));
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("finished"),
                                  120000);
        ask->setChecked(true);
        QCOMPARE(w.run()->exitCode(), 0);

        // The curve continued from 16: 1..30 once, the first attempt's 16..30 apart.
        const auto* loss = w.plots()->store()->series(kLoss);
        QCOMPARE(loss->step, range(1, 30));
        QCOMPARE(w.plots()->store()->series(MetricStore::abandonedName(kLoss, 1))->step,
                 range(16, 30));
        MetricPlot* plot = w.plots()->plotFor(kLoss);
        QTRY_COMPARE(plot->graph(0)->dataCount(), 30);
        QCOMPARE(plot->seriesNames().size(), 2);
        QVERIFY(QFileInfo::exists(runDir + "/step30.abandoned"));
        QTRY_VERIFY(w.checkpointsPanel()->model()->rowOf("step30.abandoned") >= 0);
        QTest::qWait(300);
        QVERIFY(w.grab().save(artifacts() + "/runs-resume.png"));

        // Edit & resume: the checkpoint's config in the editor; a model change is refused before
        // anything starts, a learning-rate change is noted; then resume as a new run.
        QVERIFY(w.checkpointsPanel()->selectCheckpoint("step15"));
        QTest::mouseClick(w.checkpointsPanel()->editResumeButton(), Qt::LeftButton);
        ResumeBar* bar = w.checkpointsPanel()->resumeBar();
        QTRY_VERIFY(bar->isVisible());
        QVERIFY(bar->resumeButton()->isEnabled());
        QCOMPARE(bar->ranks(), 1);
        w.editor()->editField(QStringLiteral("model.d_model"), 128);
        QVERIFY(!bar->resumeButton()->isEnabled());
        QVERIFY(bar->refusalLabel()->text().contains(QStringLiteral("model.d_model: 64 -> 128")));
        w.editor()->undoStack()->undo();
        QVERIFY(bar->resumeButton()->isEnabled());
        w.editor()->editField(QStringLiteral("train_module.optim.lr"), 0.002);
        QCOMPARE(bar->changesList()->count(), 1);
        QVERIFY(bar->changesList()->item(0)->text().startsWith(
            QStringLiteral("train_module.optim.lr")));
        bar->setMode(ResumePlan::Mode::NewRun);
        QCOMPARE(bar->newRunName(), QStringLiteral("e2e-from-step15"));
        QTest::mouseClick(bar->resumeButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("finished"),
                                  120000);
        QCOMPARE(w.run()->exitCode(), 0);
        QVERIFY(!bar->isVisible());
        const QString child = root.path() + "/e2e-from-step15";
        QTRY_VERIFY(w.runsPanel()->model()->rowOf(child) >= 0);
        // The parent's 1..15, then its own 16..30; nothing abandoned in a new run.
        QCOMPARE(w.plots()->store()->series(kLoss)->step, range(1, 30));
        QCOMPARE(w.plots()->store()->abandonedBranches(), 0);
        QTRY_COMPARE(w.runsPanel()->currentRun(), QFileInfo(child).absoluteFilePath());
        QVERIFY(QFileInfo::exists(child + "/parent.json"));
        lathe::config::Json childConfig;
        QVERIFY(readJsonFile(child + "/config.json", childConfig));
        QCOMPARE(childConfig["train_module"]["optim"]["lr"].get<double>(), 0.002);
        QTest::qWait(300);
        QVERIFY(w.grab().save(artifacts() + "/runs-resume-as-new.png"));

        // Compare the two runs: one curve each, and their config differences.
        CompareView* compare = w.compareRuns({runDir, root.path() + "/e2e-low-lr"});
        QVERIFY(compare);
        QCOMPARE(compare->plot()->graphCount(), 4);
        bool lrDiffers = false;
        for (const auto& d : compare->diffModel()->differences())
            lrDiffers |= d.path == "train_module.optim.lr";
        QVERIFY(lrDiffers);
        QVERIFY(QTest::qWaitForWindowExposed(compare->window()));
        QTest::qWait(300);
        QVERIFY(compare->window()->grab().save(artifacts() + "/runs-compare.png"));
        compare->window()->close();
    }
};

QTEST_MAIN(TestRunsE2E)
#include "test_runs_e2e.moc"
