// lathe-plot-bench: how long a coalesced repaint of a PlotPanel takes with 10k, 100k and 1M points
// in a series (loss + LR). Not a test: it prints timings. Run it under a display or offscreen:
//   QT_QPA_PLATFORM=offscreen build/<preset>/bin/lathe-plot-bench
#include "ui/plots/plot_panel.h"

#include <QApplication>
#include <QElapsedTimer>

#include <cmath>
#include <cstdio>
#include <random>

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    std::printf("%10s %14s %14s %14s %14s\n", "points", "append (ms)", "sync (ms)", "replot (ms)",
                "zoomed (ms)");
    for (int n : {10000, 100000, 1000000}) {
        lathe::ui::MetricStore store;
        lathe::ui::PlotPanel panel(&store);
        panel.resize(1400, 900);
        panel.show();
        std::mt19937 rng(1);
        std::normal_distribution<double> noise(0, 0.05);
        QElapsedTimer t;
        t.start();
        for (int i = 1; i <= n; ++i) {
            lathe::protocol::Metrics m{
                i,
                int64_t(i) * 2048,
                i * 0.05,
                {{"train/CE loss", 2 + 4 / std::sqrt(double(i)) + noise(rng)},
                 {"optim/LR", 1e-3 * std::min(1.0, i / 1000.0)}}};
            store.append(m);
        }
        const double appendMs = t.nsecsElapsed() / 1e6;
        auto* plot = panel.plotFor(QStringLiteral("train/CE loss"));
        t.restart();
        for (auto* p : panel.plots()) p->sync();
        const double syncMs = t.nsecsElapsed() / 1e6;
        // Steady state: one new point, then a full repaint of every panel, as while training.
        const int reps = 10;
        t.restart();
        for (int r = 0; r < reps; ++r) {
            store.append(QStringLiteral("train/CE loss"), n + r + 1, 0, 0, 2.0);
            for (auto* p : panel.plots()) {
                p->sync();
                p->replot(QCustomPlot::rpImmediateRefresh);
            }
        }
        const double replotMs = t.nsecsElapsed() / 1e6 / reps;
        panel.setFollowLatest(false);
        plot->xAxis->setRange(n * 0.4, n * 0.41);
        t.restart();
        for (int r = 0; r < reps; ++r) plot->replot(QCustomPlot::rpImmediateRefresh);
        const double zoomMs = t.nsecsElapsed() / 1e6 / reps;
        std::printf("%10d %14.1f %14.1f %14.2f %14.2f\n", n, appendMs, syncMs, replotMs, zoomMs);
        std::fflush(stdout);
    }
    return 0;
}
