// MetricStore: every metric of a run as series keyed by step (with tokens and wall time alongside),
// their running min/max, TensorBoard's debiased EMA smoothing kept up to date incrementally, and
// CSV export. Not a widget; PlotPanel draws from it.
//
// Resumes: when a run continues from an earlier checkpoint, the points after that checkpoint's
// step belong to a branch of training that was abandoned. abandonAfter(step) moves them out of
// the metric's series into a separate series per abandoned branch (abandonedName()), so the
// run's own series stays strictly increasing in step and holds every step once.
#pragma once

#include "engine/protocol/messages.h"

#include <QHash>
#include <QObject>
#include <QStringList>
#include <QVector>

#include <limits>
#include <memory>

class QIODevice;

namespace lathe::ui {

class MetricStore : public QObject {
    Q_OBJECT

public:
    enum class Axis { Step, Tokens, WallTime };
    Q_ENUM(Axis)

    struct Series {
        QString name;    ///< unique key in the store
        QString metric;  ///< the metric it shows ("train/CE loss"); == name for the run's own line
        int branch = 0;  ///< 0: the run's line; k >= 1: the k-th abandoned branch
        QVector<double> step, tokens, wallTime, value;
        QVector<double> smoothed;  ///< TensorBoard's debiased EMA of `value`
        /// Over the finite values only.
        double min = std::numeric_limits<double>::infinity();
        double max = -std::numeric_limits<double>::infinity();
        double minPositive = std::numeric_limits<double>::infinity();
        bool tokensSorted = true;
        bool wallTimeSorted = true;
        /// Bumped whenever `smoothed` was recomputed as a whole (not just appended to).
        int smoothRevision = 0;

        const QVector<double>& keys(Axis axis) const;
        bool keysSorted(Axis axis) const;
        int size() const { return static_cast<int>(value.size()); }

    private:
        friend class MetricStore;
        double emaLast_ = 0;
        int emaCount_ = 0;
        bool constant_ = true;
    };

    explicit MetricStore(QObject* parent = nullptr);

    /// Adds one step's values; a value whose step is not after the series' last is rejected.
    void append(const lathe::protocol::Metrics& metrics);
    bool append(const QString& name, double step, double tokens, double wallTime, double value);
    void clear();

    /// Moves every point with step > `step` out of the run's series (branch 0) into new series of
    /// abandoned branch abandonedBranches() + 1 (one per metric that had such points). Returns
    /// the number of points moved; emits restructured() when any moved.
    int abandonAfter(double step);
    int abandonedBranches() const { return branches_; }
    /// The name of the series holding `metric`'s points of abandoned branch `branch`.
    static QString abandonedName(const QString& metric, int branch);

    /// Every series name, the run's and the abandoned ones, in creation order.
    QStringList names() const { return names_; }
    /// The run's own series (branch 0) only.
    QStringList metricNames() const;
    const Series* series(const QString& name) const;
    int rejected() const { return rejected_; }

    /// TensorBoard's smoothing weight in [0, 1): 0 is no smoothing.
    double smoothingWeight() const { return weight_; }
    void setSmoothingWeight(double weight);

    /// TensorBoard's debiased exponential moving average (its scalar card's `resmoothDataset`):
    /// last = last*w + (1-w)*x over the finite values, divided by 1 - w^n (n finite values so
    /// far); non-finite values pass through; a constant series is returned unchanged.
    static QVector<double> smooth(const QVector<double>& values, double weight);

    /// Wide CSV: step,tokens,wall_time,<name>... one row per step; empty cells where a series has
    /// no value at that step. `names` empty means every metric's own series (no abandoned branches).
    bool writeCsv(QIODevice* out, const QStringList& names = {}) const;
    QString toCsv(const QStringList& names = {}) const;

Q_SIGNALS:
    void seriesAdded(const QString& name);
    /// New points in one or more series (emitted once per append call).
    void appended();
    void cleared();
    void smoothingChanged();
    /// Series lost points (abandonAfter()): views must re-read them.
    void restructured();

private:
    bool appendPoint(const QString& name, double step, double tokens, double wallTime, double value,
                     bool& added);
    Series& seriesFor(const QString& name, const QString& metric, int branch);
    static void resmooth(Series& s, double weight);
    static void recomputeRanges(Series& s);

    QStringList names_;
    QHash<QString, std::shared_ptr<Series>> series_;
    double weight_ = 0.6;
    int rejected_ = 0;
    int branches_ = 0;
};

}  // namespace lathe::ui
