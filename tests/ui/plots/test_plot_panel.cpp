// PlotPanel: metrics land in the right group, repaints are coalesced (a burst of appends is one
// replot), axis modes, log y, follow-latest, hover read-out, PNG and CSV export.
#include "ui/plots/plot_panel.h"

#include <QTemporaryDir>
#include <QtTest>

using lathe::ui::MetricStore;
using lathe::ui::PlotPanel;

class TestPlotPanel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void groupsAndCoalescedReplots() {
        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(1000, 700);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QCOMPARE(panel.plotFor(QStringLiteral("train/CE loss"))->group().title,
                 QStringLiteral("Loss"));
        QCOMPARE(panel.plotFor(QStringLiteral("eval/lm/validation/CE loss")),
                 panel.plotFor(QStringLiteral("train/CE loss")));
        QCOMPARE(panel.plotFor(QStringLiteral("optim/LR group0"))->group().title,
                 QStringLiteral("Learning rate"));
        QCOMPARE(panel.plotFor(QStringLiteral("throughput/device/TPS"))->group().title,
                 QStringLiteral("Throughput (tokens/s)"));
        QVERIFY(!panel.plotFor(QStringLiteral("something/else")));

        const int before = panel.replotCount();
        for (int i = 1; i <= 5000; ++i) {
            lathe::protocol::Metrics m{
                i, i * 1000, i * 0.01, {{"train/CE loss", 10.0 / i}, {"optim/LR", 1e-3 * i}}};
            store.append(m);
        }
        QCOMPARE(panel.replotCount(), before);  // nothing drawn synchronously
        QVERIFY(panel.replotPending());
        QTRY_VERIFY(!panel.replotPending());
        QCOMPARE(panel.replotCount(), before + 1);  // 5000 appends, one repaint

        auto* loss = panel.plotFor(QStringLiteral("train/CE loss"));
        QCOMPARE(loss->seriesNames(), QStringList{QStringLiteral("train/CE loss")});
        QCOMPARE(loss->graphCount(), 2);  // raw + smoothed
        QCOMPARE(loss->graph(0)->dataCount(), 5000);
        // Follow-latest fits the axes from the running min/max.
        QCOMPARE(loss->xAxis->range().lower, 1.0);
        QCOMPARE(loss->xAxis->range().upper, 5000.0);
        QVERIFY(loss->yAxis->range().contains(10.0) && loss->yAxis->range().contains(10.0 / 5000));

        // Incremental: only the new points are added.
        store.append(QStringLiteral("train/CE loss"), 5001, 5001000, 50.01, 0.001);
        QTRY_COMPARE(loss->graph(0)->dataCount(), 5001);

        // x axis by tokens.
        panel.setXAxis(MetricStore::Axis::Tokens);
        QTRY_VERIFY(!panel.replotPending());
        QCOMPARE(loss->xAxis->range().upper, 5001000.0);
        QCOMPARE(loss->xAxis->label(), QStringLiteral("tokens"));

        // Log y uses the smallest positive value.
        panel.setLogY(true);
        QCOMPARE(loss->yAxis->scaleType(), QCPAxis::stLogarithmic);
        QVERIFY(loss->yAxis->range().lower > 0);
        QVERIFY(loss->yAxis->range().lower <= 0.001);

        // Zooming turns follow-latest off; reset turns it back on.
        panel.setFollowLatest(false);
        loss->xAxis->setRange(0, 10);
        store.append(QStringLiteral("train/CE loss"), 5002, 5002000, 50.02, 0.5);
        QTRY_VERIFY(!panel.replotPending());
        QCOMPARE(loss->xAxis->range().upper, 10.0);
        panel.resetView();
        QTRY_VERIFY(!panel.replotPending());
        QCOMPARE(loss->xAxis->range().upper, 5002000.0);

        // Hover read-out: exact values at the nearest point.
        panel.setXAxis(MetricStore::Axis::Step);
        QTRY_VERIFY(!panel.replotPending());
        const QString text = loss->readout(2.2);
        QVERIFY2(text.contains(QStringLiteral("step 2 ")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("<b>train/CE loss</b>: 5 ")), qPrintable(text));
    }

    // A panel's title names what it draws: training perplexity is not under "Evaluation"
    // (issue 34).
    void panelTitlesNameTheirMetrics() {
        bool found = false;
        for (const auto& g : PlotPanel::defaultGroups()) {
            if (!g.patterns.contains(QStringLiteral("train/PPL"))) continue;
            found = true;
            QVERIFY2(!g.title.startsWith(QStringLiteral("Eval")), qPrintable(g.title));
            QVERIFY(g.title.contains(QStringLiteral("Perplexity")));
        }
        QVERIFY(found);
    }

    void valueAxisHasAMinimumSpan() {
        using lathe::ui::MetricPlot;
        // ±0.5% noise around 100 is not stretched over the whole plot: the axis is at least 5 tall.
        const QCPRange noise = MetricPlot::valueRange(99.5, 100.5, false);
        QVERIFY(noise.contains(99.5) && noise.contains(100.5));
        QVERIFY2(noise.size() >= 5.0, qPrintable(QString::number(noise.size())));
        // A real fall keeps its own span (plus 5% padding).
        const QCPRange fall = MetricPlot::valueRange(2.0, 10.0, false);
        QVERIFY(fall.lower < 2.0 && fall.lower > 1.5 && fall.upper > 10.0 && fall.upper < 10.5);
        // Memory starts at 0.
        const QCPRange memory = MetricPlot::valueRange(3.98, 4.02, true);
        QCOMPARE(memory.lower, 0.0);
        QVERIFY(memory.upper >= 4.02 && memory.upper < 4.5);
        // A constant series still gets a visible range.
        const QCPRange flat = MetricPlot::valueRange(0.0, 0.0, false);
        QVERIFY(flat.size() > 0);

        // The Memory plot of the panel shows 0 under ±0.5% of RSS noise.
        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(1000, 700);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        for (int i = 1; i <= 50; ++i)
            store.append(QStringLiteral("system/memory_rss_gib"), i, i * 10, i * 0.1,
                         4.0 + ((i % 2) ? 0.02 : -0.02));
        auto* plot = panel.plotFor(QStringLiteral("system/memory_rss_gib"));
        QVERIFY(plot);
        QTRY_VERIFY(!panel.replotPending());
        QCOMPARE(plot->yAxis->range().lower, 0.0);
    }

    void smoothingSliderResmooths() {
        MetricStore store;
        PlotPanel panel(&store);
        for (int i = 1; i <= 10; ++i) store.append(QStringLiteral("train/CE loss"), i, i, i, i % 2);
        QTRY_VERIFY(!panel.replotPending());
        auto* loss = panel.plotFor(QStringLiteral("train/CE loss"));
        const double before = (loss->graph(1)->data()->constEnd() - 1)->value;
        panel.setSmoothing(0.0);
        QTRY_VERIFY(!panel.replotPending());
        const double after = (loss->graph(1)->data()->constEnd() - 1)->value;
        QCOMPARE(after, 0.0);  // unsmoothed: the raw last value
        QVERIFY(before != after);
    }

    void exports() {
        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(900, 600);
        for (int i = 1; i <= 100; ++i)
            store.append(QStringLiteral("train/CE loss"), i, i, i, 1.0 / i);
        QTemporaryDir dir;
        const QString png = dir.filePath(QStringLiteral("p.png"));
        QVERIFY(panel.exportPng(png));
        QImage image(png);
        QVERIFY(!image.isNull());
        QVERIFY(image.width() > 100);
        const QString csv = dir.filePath(QStringLiteral("m.csv"));
        QVERIFY(panel.exportCsv(csv));
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll().count('\n'), 101);
        QVERIFY(!panel.exportCsv(dir.filePath(QStringLiteral("missing/dir/m.csv"))));
    }
};

QTEST_MAIN(TestPlotPanel)
#include "test_plot_panel.moc"
