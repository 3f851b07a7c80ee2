// PlotPanel: the live plots of a run, one MetricPlot per metric group, with shared controls
// (smoothing, log y, x axis, follow latest, reset, PNG/CSV export). Repaints are coalesced: new
// data only starts a single-shot timer (kReplotIntervalMs) when none is pending, so the plots
// repaint at most ~20 times a second however fast metrics arrive.
#pragma once

#include "ui/plots/metric_plot.h"
#include "ui/plots/metric_store.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QSlider;
class QTimer;

namespace lathe::ui {

class PlotPanel : public QWidget {
    Q_OBJECT

public:
    static constexpr int kReplotIntervalMs = 50;

    explicit PlotPanel(MetricStore* store, QWidget* parent = nullptr);

    /// The groups shown, in order: loss, LR, grad norm, throughput, eval, memory.
    static QVector<MetricGroup> defaultGroups();

    QVector<MetricPlot*> plots() const { return plots_; }
    MetricPlot* plotFor(const QString& metricName) const;
    MetricStore* store() const { return store_; }

    /// Number of coalesced repaints so far (for tests and the benchmark).
    int replotCount() const { return replots_; }
    bool replotPending() const;

    void setSmoothing(double weight);
    void setLogY(bool on);
    void setXAxis(MetricStore::Axis axis);
    void setFollowLatest(bool on);
    void resetView();
    bool exportPng(const QString& path);
    bool exportCsv(const QString& path);

public Q_SLOTS:
    void exportPngInteractive();
    void exportCsvInteractive();

private:
    void scheduleReplot();
    void replotNow();

    MetricStore* store_;
    QVector<MetricPlot*> plots_;
    QWidget* grid_ = nullptr;
    QTimer* replotTimer_ = nullptr;
    QSlider* smoothing_ = nullptr;
    QLabel* smoothingValue_ = nullptr;
    QCheckBox* logY_ = nullptr;
    QComboBox* xAxis_ = nullptr;
    QCheckBox* follow_ = nullptr;
    int replots_ = 0;
    bool rebuildPending_ = false;
};

}  // namespace lathe::ui
