// CompareView: the curves of several runs overlaid (one colour per run, a legend, the same
// smoothing for all) for one metric at a time, and the config differences of two of them.
// Thin: the data is RunComparison's, the differences ConfigDiffModel's.
#pragma once

#include "ui/runs/config_diff.h"
#include "ui/runs/run_comparison.h"

#include <QWidget>

class QComboBox;
class QCustomPlot;
class QLabel;
class QSlider;
class QTableView;

namespace lathe::ui {

class CompareView : public QWidget {
    Q_OBJECT

public:
    explicit CompareView(RunComparison* comparison, QWidget* parent = nullptr);

    RunComparison* comparison() const { return comparison_; }
    QCustomPlot* plot() const { return plot_; }
    QComboBox* metricBox() const { return metric_; }
    ConfigDiffModel* diffModel() const { return diff_; }
    QString metric() const;
    void setMetric(const QString& name);
    /// Shows the config differences of runs `a` and `b` (indexes in the comparison).
    void setDiffRuns(int a, int b);

private:
    void rebuildRuns();
    void redraw();
    void updateDiff();

    RunComparison* comparison_;
    QComboBox* metric_ = nullptr;
    QSlider* smoothing_ = nullptr;
    QLabel* smoothingValue_ = nullptr;
    QCustomPlot* plot_ = nullptr;
    QComboBox* diffA_ = nullptr;
    QComboBox* diffB_ = nullptr;
    QTableView* diffView_ = nullptr;
    ConfigDiffModel* diff_ = nullptr;
    QLabel* diffSummary_ = nullptr;
};

}  // namespace lathe::ui
