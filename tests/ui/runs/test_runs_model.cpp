// RunsModel / RunsFilterModel against run folders written by hand: what each column says, the
// interrupted-run detection (dead process, stale status), sorting and filtering, and refreshes
// (in place, by the timer and by the file-system watcher), all under QAbstractItemModelTester.
#include "tests/ui/runs/run_fixtures.h"
#include "ui/runs/run_info.h"
#include "ui/runs/runs_model.h"
#include "ui/runs/runs_panel.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

using namespace lathe::ui;
using namespace lathe::testing;

namespace {

// Never ask the real process table: pid 4242 is "alive", every other pid is dead.
RunInfoOptions fakeLiveness(int staleAfterS = 3600) {
    RunInfoOptions o;
    o.alive = [](qint64 pid) { return pid == 4242; };
    o.staleAfterS = staleAfterS;
    o.now = QDateTime::fromString(QStringLiteral("2026-01-01T10:05:00Z"), Qt::ISODate);
    return o;
}

QString cell(const QAbstractItemModel& m, int row, int col) {
    return m.index(row, col).data().toString();
}

}  // namespace

class TestRunsModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void readsStatus() {
        QTemporaryDir root;
        writeJson(root.path() + "/a/status.json", status("finished", 30, 30, 2.4956));
        const RunInfo r = readRunInfo(root.path() + "/a", fakeLiveness());
        QCOMPARE(r.name, QStringLiteral("a"));
        QCOMPARE(r.state, RunState::Finished);
        QCOMPARE(r.step, 30);
        QCOMPARE(r.maxTokens, 30 * 2048);
        QCOMPARE(r.worldSize, 1);
        QCOMPARE(r.model, QStringLiteral("64d x 2 layers, vocab 256"));
        QCOMPARE(r.lastLoss, 2.4956);
        QCOMPARE(r.startedAt, QDateTime(QDate(2026, 1, 1), QTime(9, 0), Qt::UTC));
    }

    void interruptedDetection_data() {
        QTest::addColumn<qint64>("pid");
        QTest::addColumn<QString>("updatedAt");
        QTest::addColumn<int>("expected");
        QTest::newRow("alive, fresh")
            << qint64(4242) << "2026-01-01T10:04:00Z" << int(RunState::Running);
        QTest::newRow("process gone")
            << qint64(777) << "2026-01-01T10:04:00Z" << int(RunState::Interrupted);
        QTest::newRow("alive but stale")
            << qint64(4242) << "2026-01-01T08:00:00Z" << int(RunState::Interrupted);
    }
    void interruptedDetection() {
        QFETCH(qint64, pid);
        QFETCH(QString, updatedAt);
        QFETCH(int, expected);
        QTemporaryDir root;
        writeJson(root.path() + "/r/status.json", status("running", 12, 30, 3.0, pid, updatedAt));
        const RunInfo r = readRunInfo(root.path() + "/r", fakeLiveness());
        QCOMPARE(int(r.state), expected);
        if (r.state == RunState::Interrupted) QVERIFY(!r.reason.isEmpty());
    }

    void realDeadProcess() {
        // A process that has exited is not alive; neither is pid 0 or a non-Lathe process.
        QProcess p;
        p.start(QStringLiteral("true"));
        QVERIFY(p.waitForFinished());
        const qint64 pid = p.processId();
        QVERIFY(!processAlive(0));
        QVERIFY(!processAlive(-5));
        QTemporaryDir root;
        writeJson(root.path() + "/r/status.json",
                  status("running", 5, 30, 3.0, pid > 0 ? pid : 999999,
                         QDateTime::currentDateTimeUtc().toString(Qt::ISODate)));
        QCOMPARE(readRunInfo(root.path() + "/r").state, RunState::Interrupted);
        // This test process exists but is no Lathe engine.
        QVERIFY(!processAlive(QCoreApplication::applicationPid()));
    }

    void missingOrBadStatus() {
        QTemporaryDir root;
        writeFile(root.path() + "/nostatus/config.json", "{}");
        writeFile(root.path() + "/bad/status.json", "{not json");
        QCOMPARE(readRunInfo(root.path() + "/nostatus").state, RunState::Unknown);
        const RunInfo bad = readRunInfo(root.path() + "/bad");
        QCOMPARE(bad.state, RunState::Unknown);
        QVERIFY(bad.reason.contains(QStringLiteral("unreadable")));
        QVERIFY(!isRunFolder(root.path() + "/empty"));
    }

    void modelColumnsSortAndFilter() {
        QTemporaryDir root;
        writeJson(root.path() + "/alpha/status.json", status("finished", 30, 30, 2.5));
        writeJson(root.path() + "/beta/status.json", status("failed", 7, 30, 4.0));
        writeJson(root.path() + "/gamma/status.json", status("running", 12, 100, 3.1, 777));
        writeJson(root.path() + "/delta/status.json",
                  status("running", 50, 100, 2.9, 4242, "2026-01-01T10:04:30Z"));
        writeFile(root.path() + "/not-a-run/readme.txt", "x");

        RunsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setInfoOptions(fakeLiveness());
        model.setRefreshInterval(0);
        model.setRoot(root.path());
        QCOMPARE(model.rowCount(), 4);
        const int gamma = model.rowOf(root.path() + "/gamma");
        QVERIFY(gamma >= 0);
        QCOMPARE(cell(model, gamma, RunsModel::StateColumn), QStringLiteral("interrupted"));
        QVERIFY(model.index(gamma, RunsModel::StateColumn)
                    .data(Qt::ToolTipRole)
                    .toString()
                    .contains("777"));
        QCOMPARE(cell(model, gamma, RunsModel::StepsColumn), QStringLiteral("12 / 100"));
        QCOMPARE(cell(model, gamma, RunsModel::TokensColumn), QStringLiteral("24.6k / 204.8k"));
        QCOMPARE(cell(model, gamma, RunsModel::LossColumn), QStringLiteral("3.1000"));
        QCOMPARE(cell(model, gamma, RunsModel::WorldSizeColumn), QStringLiteral("1"));
        QCOMPARE(cell(model, gamma, RunsModel::DurationColumn), QStringLiteral("1h 00m"));
        QCOMPARE(cell(model, model.rowOf(root.path() + "/delta"), RunsModel::StateColumn),
                 QStringLiteral("running"));

        RunsFilterModel proxy;
        QAbstractItemModelTester proxyTester(&proxy,
                                             QAbstractItemModelTester::FailureReportingMode::Fatal);
        proxy.setSourceModel(&model);
        proxy.sort(RunsModel::LossColumn, Qt::AscendingOrder);
        QStringList order;
        for (int r = 0; r < proxy.rowCount(); ++r) order << cell(proxy, r, RunsModel::NameColumn);
        QCOMPARE(order, (QStringList{"alpha", "delta", "gamma", "beta"}));
        proxy.sort(RunsModel::StepsColumn, Qt::DescendingOrder);
        QCOMPARE(cell(proxy, 0, RunsModel::NameColumn), QStringLiteral("delta"));
        QCOMPARE(cell(proxy, 3, RunsModel::NameColumn), QStringLiteral("beta"));

        proxy.setTextFilter(QStringLiteral("AMM"));
        QCOMPARE(proxy.rowCount(), 1);
        QCOMPARE(cell(proxy, 0, RunsModel::NameColumn), QStringLiteral("gamma"));
        proxy.setTextFilter(QStringLiteral("boom"));  // the failure reason
        QCOMPARE(proxy.rowCount(), 1);
        proxy.setTextFilter({});
        proxy.setStateFilter({RunState::Interrupted, RunState::Failed});
        QCOMPARE(proxy.rowCount(), 2);
        proxy.setStateFilter({RunState::Running});
        QCOMPARE(proxy.rowCount(), 1);
        QCOMPARE(cell(proxy, 0, RunsModel::NameColumn), QStringLiteral("delta"));
        proxy.setStateFilter({});
        QCOMPARE(proxy.rowCount(), 4);
    }

    // Tags and notes on runs (issue 34 item 10): a Tags column, the filter finds tags and notes,
    // a change to notes.json refreshes the row, the Notes… dialog writes it (a bad tag is refused
    // in the dialog, which keeps what was typed), and a status.json that says "interrupted"
    // (written by a run whose workbench was killed) reads as such.
    void tagsAndNotes() {
        QTemporaryDir root;
        writeJson(root.path() + "/alpha/status.json", status("finished", 30, 30, 2.5));
        writeJson(root.path() + "/beta/status.json", status("interrupted", 7, 30, 4.0));
        RunsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setInfoOptions(fakeLiveness());
        model.setRefreshInterval(0);
        model.setRoot(root.path());
        const QString alpha = root.path() + "/alpha";
        QCOMPARE(cell(model, model.rowOf(root.path() + "/beta"), RunsModel::StateColumn),
                 QStringLiteral("interrupted"));
        QString error;
        QVERIFY(
            lathe::ui::writeRunNotes(alpha, "baseline, lr sweep,,baseline", "first try", &error));
        model.refresh();
        QCOMPARE(cell(model, model.rowOf(alpha), RunsModel::TagsColumn),
                 QStringLiteral("baseline, lr sweep"));
        QCOMPARE(model.index(model.rowOf(alpha), RunsModel::TagsColumn).data(Qt::ToolTipRole),
                 QVariant(QStringLiteral("first try")));
        QVERIFY(!lathe::ui::writeRunNotes(alpha, QStringLiteral("ok, bad\x01tag"), "", &error));
        QVERIFY2(error.contains("control character"), qPrintable(error));

        lathe::ui::RunsFilterModel proxy;
        proxy.setSourceModel(&model);
        proxy.setTextFilter("sweep");
        QCOMPARE(proxy.rowCount(), 1);
        proxy.setTextFilter("first try");
        QCOMPARE(proxy.rowCount(), 1);
        proxy.setTextFilter("nothing like it");
        QCOMPARE(proxy.rowCount(), 0);

        // The dialog, as a user fills it: a bad tag first (refused, kept), then good ones.
        lathe::ui::RunsPanel panel(&model);
        QTimer::singleShot(100, [&] {
            auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget());
            if (!dialog) return;
            auto* tags = dialog->findChild<QLineEdit*>("runTags");
            auto* save = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Save);
            QCOMPARE(tags->text(), QStringLiteral("baseline, lr sweep"));
            tags->setText(QStringLiteral("x\x02y"));
            save->click();
            QVERIFY(dialog->isVisible());  // refused: the dialog stays
            tags->setText(QStringLiteral("final, best"));
            dialog->findChild<QPlainTextEdit*>("runNotesText")->setPlainText("the one to keep");
            save->click();
        });
        QVERIFY(panel.editNotes(alpha));
        QCOMPARE(cell(model, model.rowOf(alpha), RunsModel::TagsColumn),
                 QStringLiteral("final, best"));
        QCOMPARE(model.run(model.rowOf(alpha)).notes, QStringLiteral("the one to keep"));
    }

    void refreshInPlace() {
        QTemporaryDir root;
        writeJson(root.path() + "/a/status.json",
                  status("running", 10, 30, 3.5, 4242, "2026-01-01T10:04:00Z"));
        RunsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setInfoOptions(fakeLiveness());
        model.setRefreshInterval(0);
        model.setRoot(root.path());
        QCOMPARE(model.rowCount(), 1);
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        QSignalSpy reset(&model, &QAbstractItemModel::modelReset);

        model.refresh();  // nothing changed
        QCOMPARE(changed.count(), 0);
        QTest::qWait(20);  // a different mtime
        writeJson(root.path() + "/a/status.json", status("finished", 30, 30, 2.5, 4242));
        model.refresh();
        QCOMPARE(changed.count(), 1);
        QCOMPARE(cell(model, 0, RunsModel::StateColumn), QStringLiteral("finished"));

        writeJson(root.path() + "/b/status.json", status("finished", 30, 30, 2.6));
        model.refresh();
        QCOMPARE(model.rowCount(), 2);
        QDir(root.path() + "/a").removeRecursively();
        model.refresh();
        QCOMPARE(model.rowCount(), 1);
        QCOMPARE(cell(model, 0, RunsModel::NameColumn), QStringLiteral("b"));
        QCOMPARE(reset.count(), 0);  // rows come and go; views keep their selection
    }

    void watcherAndTimer() {
        QTemporaryDir root;
        RunsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setInfoOptions(fakeLiveness());
        model.setRefreshInterval(0);  // the watcher alone
        model.setRoot(root.path());
        QCOMPARE(model.rowCount(), 0);
        writeJson(root.path() + "/new/status.json", status("finished", 3, 3, 4.0));
        QTRY_COMPARE_WITH_TIMEOUT(model.rowCount(), 1, 5000);
        // A run whose process dies is noticed by the periodic check alone (no file changes).
        RunsModel timed;
        bool alive = true;
        RunInfoOptions o = fakeLiveness();
        o.alive = [&alive](qint64) { return alive; };
        o.now = {};
        writeJson(root.path() + "/live/status.json",
                  status("running", 3, 30, 4.0, 1234,
                         QDateTime::currentDateTimeUtc().toString(Qt::ISODate)));
        timed.setInfoOptions(o);
        timed.setRefreshInterval(50);
        timed.setRoot(root.path());
        const int row = timed.rowOf(root.path() + "/live");
        QCOMPARE(timed.run(row).state, RunState::Running);
        alive = false;
        QTRY_COMPARE_WITH_TIMEOUT(timed.run(timed.rowOf(root.path() + "/live")).state,
                                  RunState::Interrupted, 5000);
    }
};

QTEST_MAIN(TestRunsModel)
#include "test_runs_model.moc"
