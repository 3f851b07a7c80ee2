// The assembled window against the fake engine: Start, live metrics into the plots, Checkpoint,
// Stop, state label and progress, and a screenshot (to $LATHE_SCREENSHOT when set).
#include "ui/main_window.h"

#include "ui/config/config_editor.h"
#include "ui/logs/log_model.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"

#include <QAction>
#include <QLabel>
#include <QProgressBar>
#include <QSpinBox>
#include <QtTest>

using lathe::ui::MainWindow;
using State = lathe::ui::RunController::State;

class TestMainWindow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // QSettings away from the user's
        QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
        QCoreApplication::setApplicationName(QStringLiteral("lathe-test"));
    }

    void formatting() {
        QCOMPARE(MainWindow::formatDuration(5), QStringLiteral("5s"));
        QCOMPARE(MainWindow::formatDuration(245), QStringLiteral("4m 05s"));
        QCOMPARE(MainWindow::formatDuration(3720), QStringLiteral("1h 02m"));
        QCOMPARE(MainWindow::formatDuration(-1), QStringLiteral("–"));
    }

    void runFromTheWindow() {
        qputenv("LATHE_FAKE_MODE", "normal");
        qputenv("LATHE_FAKE_STEPS", "60");
        qputenv("LATHE_FAKE_STEP_MS", "25");
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QCOMPARE(w.stateLabel()->text(), QStringLiteral("idle"));
        QVERIFY(w.startAction()->isEnabled());
        QVERIFY(!w.stopAction()->isEnabled());
        QVERIFY(!w.checkpointAction()->isEnabled());

        // An invalid config cannot be started.
        w.editor()->editField(QStringLiteral("model.d_model"), 0);
        QVERIFY(!w.startAction()->isEnabled());
        w.editor()->undoStack()->undo();
        QVERIFY(w.startAction()->isEnabled());

        w.startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.stateLabel()->text(), QStringLiteral("running"), 20000);
        QVERIFY(!w.editor()->isEnabled());  // no edits under a running engine
        QVERIFY(!w.ranksBox()->isEnabled());
        QVERIFY(w.checkpointAction()->isEnabled());
        w.checkpointAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(w.progressBar()->value() >= 30, 20000);
        QVERIFY2(w.progressText().contains(QStringLiteral("/ 60")), qPrintable(w.progressText()));
        QVERIFY(!w.progressBar()->isTextVisible());
        QVERIFY(w.speedLabel()->text().contains(QStringLiteral("tokens/s")));
        QVERIFY(w.store()->series(QStringLiteral("train/CE loss")));
        QTRY_VERIFY(w.plots()->plotFor(QStringLiteral("train/CE loss"))->graph(0)->dataCount() >
                    20);
        if (qEnvironmentVariableIsSet("LATHE_SCREENSHOT")) {
            QTest::qWait(200);
            QVERIFY(w.grab().save(qEnvironmentVariable("LATHE_SCREENSHOT")));
        }
        w.stopAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.stateLabel()->text(), QStringLiteral("finished"), 20000);
        QVERIFY(w.startAction()->isEnabled());
        QVERIFY(w.editor()->isEnabled());
        bool sawCheckpoint = false;
        w.logModel()->flush();
        for (int i = 0; i < w.logModel()->rowCount(); ++i)
            sawCheckpoint |=
                w.logModel()->entry(i).message.contains(QStringLiteral("checkpoint of step"));
        QVERIFY(sawCheckpoint);
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
