// RunComparison: several runs side by side. Each run's curves are loaded into its own MetricStore
// (RunMetricsLoader: resumes resolved, abandoned branches kept out of the comparison), all with
// the same smoothing weight; each run has a fixed colour. Not a widget: CompareView draws it.
#pragma once

#include "engine/config/io.h"

#include <QColor>
#include <QObject>
#include <QStringList>
#include <QVector>

namespace lathe::ui {

class MetricStore;

class RunComparison : public QObject {
    Q_OBJECT

public:
    explicit RunComparison(QObject* parent = nullptr);

    /// Loads these run folders (replacing the previous set). Runs whose metrics cannot be read
    /// are kept (empty) and listed in errors().
    void setRuns(const QStringList& runDirs);
    int runCount() const { return static_cast<int>(runs_.size()); }
    QString runName(int i) const { return runs_.at(i).name; }
    QString runDir(int i) const { return runs_.at(i).dir; }
    MetricStore* store(int i) const { return runs_.at(i).store; }
    QColor color(int i) const;
    /// The run's config.json (null when missing or unreadable).
    lathe::config::Json config(int i) const;
    QStringList errors() const { return errors_; }

    /// The metrics any run has (the runs' own series, not abandoned branches), first-seen order.
    QStringList metricNames() const;

    double smoothingWeight() const { return weight_; }
    void setSmoothingWeight(double weight);

Q_SIGNALS:
    void runsChanged();
    void smoothingChanged();

private:
    struct Run {
        QString name, dir;
        MetricStore* store = nullptr;
    };
    QVector<Run> runs_;
    QStringList errors_;
    double weight_ = 0.6;
};

}  // namespace lathe::ui
