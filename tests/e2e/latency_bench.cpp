// lathe-latency-bench: how responsive the workbench stays while a run streams. Not a test: it
// prints figures. It opens the real window, starts a real lathe-engine run of `tiny` with metrics
// every step, and measures the event loop's latency the whole time: a 5 ms precise timer records
// how late each of its ticks is handled (what a click or a key press waiting in the queue would
// wait at most). Optionally an extra series of N points is added to the loss panel first, so
// every repaint also draws a long run's history.
//
//   QT_QPA_PLATFORM=offscreen build/<preset>/bin/lathe-latency-bench [--steps 400] [--threads 1]
//       [--preload 0]
// (under a display, or xvfb-run, without QT_QPA_PLATFORM). The engine is $LATHE_ENGINE or the
// lathe-engine beside this program; its run folder goes to a temporary $LATHE_RUNS_DIR.
#include "ui/config/config_editor.h"
#include "ui/control/run_controller.h"
#include "ui/control/run_toolbar.h"
#include "ui/main_window.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"

#include <QAction>
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QLabel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

using lathe::ui::MainWindow;
using lathe::ui::RunController;

namespace {

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i =
        static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QStandardPaths::setTestModeEnabled(true);  // leave the user's saved layout alone
    QCoreApplication::setOrganizationName(QStringLiteral("LatheBench"));
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Event-loop latency of the workbench while a run streams"));
    parser.addHelpOption();
    QCommandLineOption stepsOpt(QStringLiteral("steps"), QStringLiteral("Steps to train."),
                                QStringLiteral("N"), QStringLiteral("400"));
    QCommandLineOption threadsOpt(QStringLiteral("threads"), QStringLiteral("Engine CPU threads."),
                                  QStringLiteral("N"), QStringLiteral("1"));
    QCommandLineOption preloadOpt(QStringLiteral("preload"),
                                  QStringLiteral("Points of an extra series in the loss panel."),
                                  QStringLiteral("N"), QStringLiteral("0"));
    parser.addOptions({stepsOpt, threadsOpt, preloadOpt});
    parser.process(app);
    const int steps = parser.value(stepsOpt).toInt();
    const int threads = parser.value(threadsOpt).toInt();
    const int preload = parser.value(preloadOpt).toInt();
    if (steps < 1 || threads < 1 || preload < 0) {
        std::fprintf(stderr,
                     "lathe-latency-bench: --steps and --threads must be positive, --preload not "
                     "negative\n");
        return 2;
    }

    QTemporaryDir runs;
    qputenv("LATHE_RUNS_DIR", runs.path().toUtf8());
    MainWindow w;
    w.resize(1500, 950);
    w.show();
    if (!w.editor()->loadPreset(QStringLiteral("tiny"))) return 1;
    w.editor()->editField(QStringLiteral("trainer.max_duration"),
                          lathe::config::Json{{"value", steps}, {"unit", "steps"}});
    w.editor()->editField(QStringLiteral("trainer.metrics_collect_interval"), 1);
    w.editor()->editField(QStringLiteral("launch.num_threads"), threads);
    w.editor()->editField(QStringLiteral("trainer.callbacks.checkpointer.enabled"), false);
    w.editor()->editField(QStringLiteral("run_name"), "latency");
    if (!w.editor()->isValid()) {
        std::fprintf(stderr, "lathe-latency-bench: the config is not valid\n");
        return 1;
    }

    constexpr int kTickMs = 5;
    std::vector<double> late;  // ms each tick was handled after it was due
    int metrics = 0;
    int lines = 0;
    int replotsAtStart = 0;
    bool measuring = false;
    double preloadMs = 0;
    QElapsedTimer clock, since;
    qint64 last = 0;
    QTimer tick;
    tick.setTimerType(Qt::PreciseTimer);
    tick.setInterval(kTickMs);
    QObject::connect(&tick, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        if (measuring && last > 0) late.push_back(std::max(0.0, (now - last) / 1e6 - kTickMs));
        last = now;
    });
    QObject::connect(w.run(), &RunController::metricsReceived, [&] {
        if (measuring) ++metrics;
    });
    QObject::connect(w.run(), &RunController::logLine, [&] {
        if (measuring) ++lines;
    });
    QObject::connect(w.run(), &RunController::stateChanged, [&](RunController::State s) {
        if (s == RunController::State::Running && !measuring) {
            if (preload > 0) {
                QElapsedTimer t;
                t.start();
                for (int i = 1; i <= preload; ++i) {
                    w.plots()->store()->append(QStringLiteral("eval/bench/CE loss"), i,
                                               int64_t(i) * 2048, i * 0.05,
                                               2 + 4 / std::sqrt(double(i)));
                }
                preloadMs = t.nsecsElapsed() / 1e6;
            }
            replotsAtStart = w.plots()->replotCount();
            measuring = true;
            since.start();
            last = 0;
        }
    });
    int exitCode = -1;
    QObject::connect(w.run(), &RunController::finished,
                     [&](int code, const QString&, const QStringList& tail) {
                         measuring = false;
                         exitCode = code;
                         if (code != 0) {
                             for (const auto& l : tail) std::fprintf(stderr, "%s\n", qPrintable(l));
                         }
                         app.quit();
                     });
    clock.start();
    tick.start();
    QTimer::singleShot(0, [&] { w.toolbar()->startAction()->trigger(); });
    app.exec();
    if (exitCode != 0) {
        std::fprintf(stderr, "lathe-latency-bench: the engine exited %d\n", exitCode);
        return 1;
    }
    const double secs = since.nsecsElapsed() / 1e9;
    std::printf(
        "run: %d steps of tiny, %d engine thread(s), %d metric messages (%.0f/s), %d log lines, "
        "%d repaints (%.1f/s) in %.1f s\n",
        steps, threads, metrics, metrics / secs, lines, w.plots()->replotCount() - replotsAtStart,
        (w.plots()->replotCount() - replotsAtStart) / secs, secs);
    if (preload > 0)
        std::printf("extra series in the loss panel: %d points (added in %.0f ms)\n", preload,
                    preloadMs);
    std::printf(
        "event-loop latency over %zu ticks of %d ms (ms late): median %.2f  p95 %.2f  p99 %.2f  "
        "max %.2f\n",
        late.size(), kTickMs, percentile(late, 50), percentile(late, 95), percentile(late, 99),
        late.empty() ? 0.0 : *std::max_element(late.begin(), late.end()));
    return 0;
}
