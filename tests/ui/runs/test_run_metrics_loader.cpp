// Curves from a run's files: MetricStore::abandonAfter, RunMetricsLoader on resumed runs (steps
// going back, with and without history.jsonl), following a file that grows, "resume as new run"
// children, how abandoned branches are drawn, and the run comparison view.
#include "tests/ui/runs/run_fixtures.h"
#include "ui/logs/log_model.h"
#include "ui/plots/metric_plot.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"
#include "ui/runs/compare_view.h"
#include "ui/runs/run_comparison.h"
#include "ui/runs/run_logs.h"
#include "ui/runs/run_metrics_loader.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace lathe::ui;
using namespace lathe::testing;

namespace {

// Loss of the first attempt at a step: 10 - step/10; of the second (resumed) attempt: 20 - step/10.
QByteArray lines(int from, int to, double base) {
    QByteArray out;
    for (int s = from; s <= to; ++s) out += metricLine(s, base - s / 10.0);
    return out;
}

QByteArray historyLine(qint64 fromStep) {
    return QJsonDocument(QJsonObject{{"event", "resumed"},
                                     {"time", "2026-01-01T10:00:00Z"},
                                     {"from_step", fromStep},
                                     {"checkpoint", "x"},
                                     {"abandoned", QJsonArray{}},
                                     {"config_changes", QJsonArray{}}})
               .toJson(QJsonDocument::Compact) +
           "\n";
}

}  // namespace

class TestRunMetricsLoader : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void abandonAfter() {
        MetricStore store;
        QSignalSpy restructured(&store, &MetricStore::restructured);
        for (int s = 1; s <= 20; ++s) {
            store.append(kLoss, s, s * 10, s, 30 - s);
            if (s % 5 == 0) store.append(QStringLiteral("eval/x"), s, s * 10, s, s);
        }
        QCOMPARE(store.abandonAfter(20), 0);
        QCOMPARE(restructured.count(), 0);
        QCOMPARE(store.abandonAfter(15), 5 + 1);
        QCOMPARE(restructured.count(), 1);
        QCOMPARE(store.abandonedBranches(), 1);
        const auto* main = store.series(kLoss);
        QCOMPARE(main->step, range(1, 15));
        QCOMPARE(main->min, 15.0);
        QCOMPARE(main->smoothed.size(), 15);
        QCOMPARE(main->smoothed, MetricStore::smooth(main->value, store.smoothingWeight()));
        const auto* gone = store.series(MetricStore::abandonedName(kLoss, 1));
        QVERIFY(gone);
        QCOMPARE(gone->metric, kLoss);
        QCOMPARE(gone->branch, 1);
        QCOMPARE(gone->step, range(16, 20));
        QCOMPARE(store.series(MetricStore::abandonedName(QStringLiteral("eval/x"), 1))->step,
                 QVector<double>{20});
        QCOMPARE(store.metricNames(), (QStringList{kLoss, QStringLiteral("eval/x")}));
        // The run continues from 16; the CSV holds the run's own series only.
        QVERIFY(store.append(kLoss, 16, 160, 16, 1.0));
        QVERIFY(!store.toCsv().contains("abandoned"));
        store.clear();
        QCOMPARE(store.abandonedBranches(), 0);
    }

    void resumedRun_data() {
        QTest::addColumn<bool>("withHistory");
        QTest::newRow("history.jsonl") << true;
        QTest::newRow("no history") << false;
    }
    void resumedRun() {
        QFETCH(bool, withHistory);
        QTemporaryDir run;
        writeFile(run.path() + "/metrics.jsonl", lines(1, 20, 10) + lines(16, 30, 20));
        if (withHistory) writeFile(run.path() + "/history.jsonl", historyLine(15));
        MetricStore store;
        RunMetricsLoader loader(&store);
        QVERIFY(loader.open(run.path()));
        const auto* s = store.series(kLoss);
        QCOMPARE(s->step, range(1, 30));  // every step once
        for (int i = 0; i < 30; ++i) {
            const int step = i + 1;
            QCOMPARE(s->value[i], (step <= 15 ? 10 : 20) - step / 10.0);
        }
        const auto* gone = store.series(MetricStore::abandonedName(kLoss, 1));
        QVERIFY(gone);
        QCOMPARE(gone->step, range(16, 20));
        QCOMPARE(gone->value.front(), 10 - 1.6);
        QCOMPARE(loader.resumesApplied(), withHistory ? 1 : 0);
        QCOMPARE(store.rejected(), 0);
        // Wall time counts from the first line.
        QCOMPARE(s->wallTime.front(), 0.0);
    }

    void sparseLinesUseHistory() {
        // Lines every 10 steps; resumed from 15: the first attempt's 20 is abandoned although the
        // file only goes back to 20.
        QTemporaryDir run;
        writeFile(run.path() + "/metrics.jsonl",
                  metricLine(10, 5) + metricLine(20, 4) + metricLine(20, 3.5) + metricLine(30, 3));
        writeFile(run.path() + "/history.jsonl", historyLine(15));
        MetricStore store;
        RunMetricsLoader loader(&store);
        QVERIFY(loader.open(run.path()));
        QCOMPARE(store.series(kLoss)->step, (QVector<double>{10, 20, 30}));
        QCOMPARE(store.series(kLoss)->value, (QVector<double>{5, 3.5, 3}));
        QCOMPARE(store.series(MetricStore::abandonedName(kLoss, 1))->value, QVector<double>{4});
    }

    void sameStepWithoutResumeMerges() {
        QTemporaryDir run;
        QByteArray second =
            QJsonDocument(QJsonObject{{"step", 2},
                                      {"tokens", 4096},
                                      {"wall_time", 1.7e9 + 2},
                                      {"values", QJsonObject{{"checkpoint/save_duration_s", 0.1}}}})
                .toJson(QJsonDocument::Compact) +
            "\n";
        writeFile(run.path() + "/metrics.jsonl", lines(1, 2, 10) + second + lines(3, 4, 10));
        MetricStore store;
        RunMetricsLoader loader(&store);
        QVERIFY(loader.open(run.path()));
        QCOMPARE(store.series(kLoss)->step, range(1, 4));
        QCOMPARE(store.series(QStringLiteral("checkpoint/save_duration_s"))->step,
                 QVector<double>{2});
        QCOMPARE(store.abandonedBranches(), 0);
    }

    void repeatedResumes() {
        // 1..20, resumed from 15 -> 16..25, resumed from 10 -> 11..30.
        QTemporaryDir run;
        writeFile(run.path() + "/metrics.jsonl",
                  lines(1, 20, 10) + lines(16, 25, 20) + lines(11, 30, 30));
        writeFile(run.path() + "/history.jsonl", historyLine(15) + historyLine(10));
        MetricStore store;
        RunMetricsLoader loader(&store);
        QVERIFY(loader.open(run.path()));
        QCOMPARE(store.series(kLoss)->step, range(1, 30));
        QCOMPARE(store.series(kLoss)->value[10], 30 - 1.1);
        QCOMPARE(store.abandonedBranches(), 2);
        QCOMPARE(store.series(MetricStore::abandonedName(kLoss, 1))->step, range(16, 20));
        QCOMPARE(store.series(MetricStore::abandonedName(kLoss, 2))->step, range(11, 25));
    }

    void follows() {
        QTemporaryDir run;
        const QString path = run.path() + "/metrics.jsonl";
        writeFile(path, lines(1, 5, 10) + QByteArray("{\"step\":6,\"tok"));  // a half-written line
        MetricStore store;
        RunMetricsLoader loader(&store);
        loader.setFollowInterval(30);
        QVERIFY(loader.open(run.path()));
        loader.setFollowing(true);
        QCOMPARE(store.series(kLoss)->size(), 5);
        QVERIFY(appendFile(
            path,
            QByteArray("ens\":12288,\"wall_time\":1.0,\"values\":{\"train/CE loss\":9.4}}\n") +
                lines(7, 20, 10)));
        QTRY_COMPARE_WITH_TIMEOUT(store.series(kLoss)->size(), 20, 5000);
        // The run is resumed from 15 while we watch.
        appendFile(run.path() + "/history.jsonl", historyLine(15));
        appendFile(path, lines(16, 22, 20));
        QTRY_COMPARE_WITH_TIMEOUT(store.series(kLoss)->step.back(), 22.0, 5000);
        QCOMPARE(store.series(kLoss)->step, range(1, 22));
        QCOMPARE(store.series(MetricStore::abandonedName(kLoss, 1))->step, range(16, 20));
        // Rewritten from scratch: start over.
        writeFile(path, lines(1, 3, 10));
        QTRY_COMPARE_WITH_TIMEOUT(store.series(kLoss) ? store.series(kLoss)->size() : -1, 3, 5000);
        QCOMPARE(store.abandonedBranches(), 0);
        loader.setFollowing(false);
    }

    void childRunShowsItsParent() {
        QTemporaryDir root;
        writeFile(root.path() + "/parent/metrics.jsonl", lines(1, 30, 10));
        writeJson(root.path() + "/child/parent.json",
                  QJsonObject{{"parent_run", "parent"},
                              {"parent_step", 15},
                              {"checkpoint", root.path() + "/parent/step15"}});
        writeFile(root.path() + "/child/metrics.jsonl", lines(16, 25, 20));
        MetricStore store;
        RunMetricsLoader loader(&store);
        QVERIFY(loader.open(root.path() + "/child"));
        QCOMPARE(store.series(kLoss)->step, range(1, 25));
        QCOMPARE(store.series(kLoss)->value[14], 10 - 1.5);
        QCOMPARE(store.series(kLoss)->value[15], 20 - 1.6);
        QCOMPARE(store.abandonedBranches(), 0);
    }

    void abandonedBranchIsDrawnApart() {
        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(1000, 700);
        for (int s = 1; s <= 20; ++s) store.append(kLoss, s, s, s, 10 - s / 10.0);
        store.abandonAfter(15);
        for (int s = 16; s <= 30; ++s) store.append(kLoss, s, s, s, 20 - s / 10.0);
        QTRY_VERIFY(!panel.replotPending());
        MetricPlot* plot = panel.plotFor(kLoss);
        QVERIFY(plot);
        QCOMPARE(plot->seriesNames(), (QStringList{kLoss, MetricStore::abandonedName(kLoss, 1)}));
        QCOMPARE(plot->graphCount(), 3);  // raw + smoothed of the run, one abandoned line
        QCOMPARE(plot->graph(0)->dataCount(), 30);
        QCOMPARE(plot->graph(1)->dataCount(), 30);
        QCPGraph* abandoned = plot->graph(2);
        QCOMPARE(abandoned->dataCount(), 5);
        QCOMPARE(abandoned->pen().style(), Qt::DashLine);
        QVERIFY(abandoned->pen().color().alphaF() < 0.5);
        QCOMPARE(abandoned->name(), kLoss + " (abandoned)");
        QCOMPARE(abandoned->data()->at(0)->key, 16.0);
        QCOMPARE(abandoned->data()->at(0)->value, 10 - 1.6);
    }

    void runLogs() {
        QTemporaryDir run;
        writeFile(run.path() + "/logs/rank0.log",
                  "09:59:54 info  [rank 0] run 'A' in /tmp/A\n"
                  "09:59:55 warning [rank 0] config changed on resume: lr\n"
                  "a line without a prefix\n");
        writeFile(run.path() + "/logs/rank1.log", "09:59:54 error [rank 1] boom\n");
        LogModel model;
        QCOMPARE(loadRunLogs(run.path(), &model), 4);
        QCOMPARE(model.rowCount(), 4);
        QCOMPARE(model.entry(0).message, QStringLiteral("run 'A' in /tmp/A"));
        QCOMPARE(model.entry(1).level, LogModel::Level::Warning);
        QCOMPARE(model.entry(2).message, QStringLiteral("a line without a prefix"));
        QCOMPARE(model.entry(3).rank, 1);
        QCOMPARE(model.entry(3).level, LogModel::Level::Error);
    }

    void comparison() {
        QTemporaryDir root;
        writeFile(root.path() + "/a/metrics.jsonl", lines(1, 30, 10));
        writeJson(root.path() + "/a/config.json",
                  QJsonObject{{"run_name", "a"}, {"lr", 1}, {"same", 2}});
        writeFile(root.path() + "/b/metrics.jsonl", lines(1, 20, 12) + lines(11, 25, 14));
        writeJson(root.path() + "/b/config.json",
                  QJsonObject{{"run_name", "b"}, {"lr", 2}, {"same", 2}});
        RunComparison comparison;
        comparison.setRuns({root.path() + "/a", root.path() + "/b"});
        QCOMPARE(comparison.runCount(), 2);
        QVERIFY(comparison.color(0) != comparison.color(1));
        QCOMPARE(comparison.metricNames(),
                 (QStringList{QStringLiteral("optim/LR (group 0)"), kLoss}));
        QCOMPARE(comparison.store(1)->series(kLoss)->step, range(1, 25));

        CompareView view(&comparison);
        view.resize(900, 600);
        QCOMPARE(view.metric(), kLoss);
        QCOMPARE(view.plot()->graphCount(), 4);
        QCOMPARE(view.plot()->graph(1)->name(), QStringLiteral("a"));
        QCOMPARE(view.plot()->graph(3)->name(), QStringLiteral("b"));
        QCOMPARE(view.plot()->graph(3)->dataCount(), 25);
        QCOMPARE(view.plot()->graph(1)->pen().color(), comparison.color(0));
        // The same smoothing for every run.
        comparison.setSmoothingWeight(0.9);
        for (int r = 0; r < 2; ++r) QCOMPARE(comparison.store(r)->smoothingWeight(), 0.9);
        QCOMPARE(view.plot()->graph(3)->data()->at(5)->value,
                 comparison.store(1)->series(kLoss)->smoothed[5]);
        // Only the differing fields.
        QCOMPARE(view.diffModel()->rowCount(), 2);
        QCOMPARE(view.diffModel()->index(0, 0).data().toString(),
                 QStringLiteral("lr"));  // QJsonObject sorts keys
    }
};

QTEST_MAIN(TestRunMetricsLoader)
#include "test_run_metrics_loader.moc"
