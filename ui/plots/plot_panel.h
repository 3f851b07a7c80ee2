// PlotPanel: the live plots of a run, one MetricPlot per metric group, with shared controls
// (smoothing, log y, x axis, follow latest, reset, PNG/SVG/CSV export). Repaints are coalesced: new
// data only starts a single-shot timer (kReplotIntervalMs) when none is pending, so the plots
// repaint at most ~20 times a second however fast metrics arrive.
//
// The panels are not fixed: "Add plot" offers every logged metric that no panel draws (and each
// of their folders as one panel, "data/source/*"), a plot's context menu removes it, and
// groups()/setGroups() let the window keep the set between sessions. Metrics of a suggested group
// (the mixture's data/source/* tokens) get their panel when they first arrive. When a drag or
// the wheel stops following new points, a bar says so and offers "Follow latest".
#pragma once

#include "ui/plots/metric_plot.h"
#include "ui/plots/metric_store.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QMenu;
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
    /// Groups that appear by themselves when their metrics first arrive (data/source/*).
    static QVector<MetricGroup> suggestedGroups();

    /// The panels, in order.
    QVector<MetricGroup> groups() const;
    /// Replaces every panel (an empty list: the default groups).
    void setGroups(const QVector<MetricGroup>& groups);
    /// Adds a panel at the end; returns it.
    MetricPlot* addPanel(const MetricGroup& group);
    void removePanel(MetricPlot* plot);
    /// Back to defaultGroups().
    void resetPanels();
    /// What "Add plot" offers: one panel per folder holding two or more metrics no panel draws
    /// ("data/source/*"), then one per such metric.
    QVector<MetricGroup> pickerChoices() const;
    /// Whether the "not following" bar is shown.
    bool followBannerVisible() const;

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
    /// Every panel into one picture, PNG or SVG by the file's suffix, at a fixed size that does
    /// not depend on the window: kExportColumns panels of kExportPanelSize per row (a small window
    /// once exported its cramped plots as they were). False with `error` set when it fails.
    bool exportImage(const QString& path, QString* error = nullptr);
    bool exportCsv(const QString& path);
    static constexpr int kExportColumns = 2;
    static constexpr QSize kExportPanelSize{640, 400};
    /// The size of exportImage's picture for `panels` panels.
    static QSize exportSize(int panels);
    /// Panels per row: as many of MetricPlot's minimum width as the width holds, 1 to 3.
    static int columnsFor(int width);
    int columns() const { return columns_; }

public Q_SLOTS:
    void exportImageInteractive();
    void exportCsvInteractive();

Q_SIGNALS:
    /// A panel was added or removed (the window saves the set).
    void panelsChanged();

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void scheduleReplot();
    void replotNow();
    void relayout();
    void fillAddMenu();
    void showPlotMenu(MetricPlot* plot, const QPoint& pos);
    void onSeriesAdded(const QString& name);

    MetricStore* store_;
    QVector<MetricPlot*> plots_;
    QWidget* grid_ = nullptr;
    QTimer* replotTimer_ = nullptr;
    QSlider* smoothing_ = nullptr;
    QLabel* smoothingValue_ = nullptr;
    QCheckBox* logY_ = nullptr;
    QComboBox* xAxis_ = nullptr;
    QCheckBox* follow_ = nullptr;
    QWidget* followBanner_ = nullptr;
    QMenu* addMenu_ = nullptr;
    QStringList dismissed_;  ///< suggested groups the user removed: not added again
    int replots_ = 0;
    int columns_ = 2;
    bool rebuildPending_ = false;
};

}  // namespace lathe::ui
