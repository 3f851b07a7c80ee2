// PlotPanel: metrics land in the right group, repaints are coalesced (a burst of appends is one
// replot), axis modes, log y, follow-latest, hover read-out, readable sizes, PNG/SVG and CSV export.
#include "ui/plots/plot_panel.h"

#include <QPushButton>
#include <QScrollArea>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QToolButton>
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

    // The picture has the same fixed size whatever the window's (issue 45 item 10: a small
    // window exported its cramped plots), as PNG and as SVG.
    void exports() {
        MetricStore store;
        for (int i = 1; i <= 100; ++i)
            store.append(QStringLiteral("train/CE loss"), i, i, i, 1.0 / i);
        QTemporaryDir dir;
        const QSize expected = PlotPanel::exportSize(int(PlotPanel::defaultGroups().size()));
        QCOMPARE(expected, QSize(2 * 640 + 8, 3 * 400 + 2 * 8));
        for (const QSize window : {QSize(420, 300), QSize(1500, 1000)}) {
            PlotPanel panel(&store);
            panel.resize(window);
            panel.show();
            QVERIFY(QTest::qWaitForWindowExposed(&panel));
            const QString png = dir.filePath(QStringLiteral("p%1.png").arg(window.width()));
            QString error;
            QVERIFY2(panel.exportImage(png, &error), qPrintable(error));
            QImage image(png);
            QCOMPARE(image.size(), expected);
            // The loss panel's curve is drawn: pixels of its colour in the first panel's area.
            int coloured = 0;
            for (int y = 0; y < 400; ++y)
                for (int x = 0; x < 640; ++x) {
                    const QColor c = image.pixelColor(x, y);
                    if (c.saturation() > 100) ++coloured;
                }
            QVERIFY2(coloured > 200, qPrintable(QString::number(coloured)));
            // The panels on screen keep their own size.
            QCOMPARE(panel.plots().front()->viewport().size(), panel.plots().front()->size());

            const QString svg = dir.filePath(QStringLiteral("p%1.svg").arg(window.width()));
            QVERIFY2(panel.exportImage(svg, &error), qPrintable(error));
            QFile f(svg);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray text = f.readAll();
            QVERIFY(text.contains("<svg"));
            QVERIFY2(text.contains(QStringLiteral("viewBox=\"0 0 %1 %2\"")
                                       .arg(expected.width())
                                       .arg(expected.height())
                                       .toUtf8()),
                     text.left(600).constData());
            QVERIFY(text.contains("Loss"));
            QVERIFY(!panel.exportImage(dir.filePath(QStringLiteral("p.bmp")), &error));
            QVERIFY2(error.contains(QLatin1String(".png or .svg")), qPrintable(error));
            QVERIFY(!panel.exportImage(dir.filePath(QStringLiteral("missing/dir/p.png")), &error));
            QVERIFY2(error.contains(QLatin1String("missing/dir")), qPrintable(error));
        }
        PlotPanel panel(&store);
        const QString csv = dir.filePath(QStringLiteral("m.csv"));
        QVERIFY(panel.exportCsv(csv));
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll().count('\n'), 101);
        QVERIFY(!panel.exportCsv(dir.filePath(QStringLiteral("missing/dir/m.csv"))));
    }

    // Every panel, empty or not, uses its whole area and never gets smaller than readable: the
    // legend's row once narrowed the plot to its title's width (a tiny box with a clipped "no
    // data yet"), and eight panels at 1600x1000 were 30 px tall (issue 45 item 10). More panels
    // than fit scroll; a narrow area gets one column.
    void panelsStayReadable() {
        using lathe::ui::MetricPlot;
        MetricStore store;
        for (int i = 1; i <= 30; ++i) {
            store.append(QStringLiteral("train/CE loss"), i, i, i, 1.0 / i);
            store.append(QStringLiteral("eval/lm/c4/CE loss"), i, i, i, 2.0 / i);
        }
        PlotPanel panel(&store);
        for (const QString& extra : {QStringLiteral("a/x"), QStringLiteral("b/y")})
            panel.addPanel({extra, {extra}, true});
        for (const QSize window : {QSize(1000, 700), QSize(560, 500)}) {
            panel.resize(window);
            panel.show();
            QVERIFY(QTest::qWaitForWindowExposed(&panel));
            QTRY_COMPARE(panel.columns(), PlotPanel::columnsFor(window.width()));
            QCOMPARE(panel.columns(), window.width() >= 900 ? 2 : 1);
            QTRY_VERIFY(!panel.replotPending());
            for (auto* plot : panel.plots()) {
                plot->replot(QCustomPlot::rpImmediateRefresh);
                const QRect axis = plot->axisRect()->outerRect();
                const QString what = QStringLiteral("%1: plot %2x%3, axis rect %4x%5")
                                         .arg(plot->group().title)
                                         .arg(plot->width())
                                         .arg(plot->height())
                                         .arg(axis.width())
                                         .arg(axis.height());
                QVERIFY2(plot->height() >= MetricPlot::kMinimumHeight, qPrintable(what));
                QVERIFY2(plot->width() >= MetricPlot::kMinimumWidth, qPrintable(what));
                QVERIFY2(axis.width() >= plot->width() * 9 / 10, qPrintable(what));
                QVERIFY2(axis.height() >= plot->height() / 2, qPrintable(what));
            }
            // Eight panels do not fit 700 px at their minimum height: the area scrolls.
            auto* scroll = panel.findChild<QScrollArea*>();
            QVERIFY(scroll->widget()->height() > scroll->viewport()->height());
        }
    }

    // Large values get compact labels with the decimals the tick step needs: a narrow plot once
    // showed a clipped "350" for 35,000 tokens/s (issue 34). The legend sits under the axis rect,
    // never over the curve or the labels.
    void valueLabelsAndLegendStayReadable() {
        using lathe::ui::MetricPlot;
        QCOMPARE(MetricPlot::compactLabels({34900, 34950, 35000}),
                 (QVector<QString>{"34.90k", "34.95k", "35.00k"}));
        QCOMPARE(MetricPlot::compactLabels({0, 1e6, 2e6}), (QVector<QString>{"0", "1M", "2M"}));
        QCOMPARE(MetricPlot::compactLabels({0, 2e9, 4e9}), (QVector<QString>{"0", "2G", "4G"}));
        QVERIFY(MetricPlot::compactLabels({0.5, 1, 1.5}).isEmpty());  // QCustomPlot's own

        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(700, 500);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        for (int i = 1; i <= 50; ++i) {
            store.append(QStringLiteral("throughput/device/TPS"), i, i, i, 35000 + (i % 7) * 20);
            store.append(QStringLiteral("throughput/device/TPS (actual avg)"), i, i, i,
                         34900 + (i % 5) * 30);
        }
        QTRY_VERIFY(!panel.replotPending());
        auto* plot = panel.plotFor(QStringLiteral("throughput/device/TPS"));
        plot->replot(QCustomPlot::rpImmediateRefresh);
        const auto labels = plot->yAxis->tickVectorLabels();
        QVERIFY(!labels.isEmpty());
        for (const QString& l : labels) QVERIFY2(l.endsWith(QLatin1Char('k')), qPrintable(l));
        const QRect axisRect = plot->axisRect()->outerRect();
        QVERIFY(plot->legend->visible());
        QVERIFY2(!plot->legend->outerRect().intersects(axisRect),
                 qPrintable(QStringLiteral("legend %1,%2 %3x%4 over the axis rect")
                                .arg(plot->legend->outerRect().x())
                                .arg(plot->legend->outerRect().y())
                                .arg(plot->legend->outerRect().width())
                                .arg(plot->legend->outerRect().height())));
        QVERIFY(plot->legend->outerRect().top() >= axisRect.bottom());
    }

    // A click keeps following; a drag stops it and a bar says so, with a button that resumes
    // (issue 34: a click stopped following silently).
    void followingStopsVisiblyAndResumes() {
        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(900, 600);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        for (int i = 1; i <= 100; ++i)
            store.append(QStringLiteral("train/CE loss"), i, i, i, 10.0 / i);
        QTRY_VERIFY(!panel.replotPending());
        auto* plot = panel.plotFor(QStringLiteral("train/CE loss"));
        const QPoint centre = plot->axisRect()->rect().center();

        QTest::mouseClick(plot, Qt::LeftButton, {}, centre);
        QVERIFY(plot->followLatest());
        QVERIFY(!panel.followBannerVisible());

        QTest::mousePress(plot, Qt::LeftButton, {}, centre);
        QMouseEvent move(QEvent::MouseMove, QPointF(centre + QPoint(40, 0)),
                         QPointF(plot->mapToGlobal(centre + QPoint(40, 0))), Qt::NoButton,
                         Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(plot, &move);
        QTest::mouseRelease(plot, Qt::LeftButton, {}, centre + QPoint(40, 0));
        QVERIFY(!plot->followLatest());
        QVERIFY(panel.followBannerVisible());
        store.append(QStringLiteral("train/CE loss"), 500, 500, 500, 0.01);
        QTRY_VERIFY(!panel.replotPending());
        QVERIFY(plot->xAxis->range().upper < 500);  // the view stays where the user put it

        auto* resume = panel.findChild<QPushButton*>(QStringLiteral("resumeFollow"));
        QVERIFY(resume && resume->isVisible());
        resume->click();
        QVERIFY(plot->followLatest());
        QVERIFY(!panel.followBannerVisible());
        QTRY_VERIFY(!panel.replotPending());
        QCOMPARE(plot->xAxis->range().upper, 500.0);
    }

    // Panels are not fixed: "Add plot" offers any logged metric no panel draws, a panel can be
    // removed, and a mixture's data/source/* tokens get their own panel when they first arrive.
    void metricPickerAddsAndRemovesPanels() {
        using lathe::ui::MetricGroup;
        MetricStore store;
        PlotPanel panel(&store);
        panel.resize(900, 700);
        panel.show();
        QSignalSpy changed(&panel, &PlotPanel::panelsChanged);
        const int defaults = panel.plots().size();

        store.append(QStringLiteral("data/source/web tokens"), 1, 1, 1, 300);
        auto* sources = panel.plotFor(QStringLiteral("data/source/web tokens"));
        QVERIFY(sources);
        QCOMPARE(sources->group().title, QStringLiteral("Tokens per data source"));
        store.append(QStringLiteral("data/source/code tokens"), 1, 1, 1, 100);
        QCOMPARE(panel.plotFor(QStringLiteral("data/source/code tokens")), sources);
        QCOMPARE(panel.plots().size(), defaults + 1);

        store.append(QStringLiteral("train/masked labels (%)"), 1, 1, 1, 40);
        QVERIFY(!panel.plotFor(QStringLiteral("train/masked labels (%)")));
        // Through the real menu.
        auto* add = panel.findChild<QToolButton*>(QStringLiteral("addPlot"));
        QVERIFY(add && add->menu());
        Q_EMIT add->menu()->aboutToShow();
        QAction* pick = nullptr;
        for (QAction* a : add->menu()->actions())
            if (a->text() == QStringLiteral("train/masked labels (%)")) pick = a;
        QVERIFY(pick);
        pick->trigger();
        auto* masked = panel.plotFor(QStringLiteral("train/masked labels (%)"));
        QVERIFY(masked);
        QVERIFY(changed.count() >= 2);

        // Removed panels stay removed; their metrics go back to the picker, a folder as one.
        panel.removePanel(masked);
        panel.removePanel(sources);
        QVERIFY(!panel.plotFor(QStringLiteral("train/masked labels (%)")));
        store.append(QStringLiteral("data/source/books tokens"), 2, 2, 2, 50);
        QVERIFY(!panel.plotFor(QStringLiteral("data/source/books tokens")));
        const auto choices = panel.pickerChoices();
        QVERIFY(!choices.isEmpty());
        QCOMPARE(choices.front().patterns, QStringList{QStringLiteral("data/source/*")});

        // The set round-trips (the window keeps it in QSettings).
        panel.addPanel(choices.front());
        QVector<MetricGroup> saved;
        for (const auto& g : panel.groups()) saved << MetricGroup::fromVariant(g.toVariant());
        QCOMPARE(saved, panel.groups());
        panel.resetPanels();
        QCOMPARE(panel.groups(), PlotPanel::defaultGroups());
        panel.setGroups(saved);
        QCOMPARE(panel.groups(), saved);
        QVERIFY(panel.plotFor(QStringLiteral("data/source/books tokens")));
    }
};

QTEST_MAIN(TestPlotPanel)
#include "test_plot_panel.moc"
