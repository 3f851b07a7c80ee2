// MetricStore: every metric of a run as series keyed by step (with tokens and wall time alongside),
// their running min/max, TensorBoard's debiased EMA smoothing kept up to date incrementally, and
// CSV export. Not a widget; PlotPanel draws from it.
#pragma once

#include "protocol/messages.h"

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
        QString name;
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

    QStringList names() const { return names_; }
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
    /// no value at that step. `names` empty means every series.
    bool writeCsv(QIODevice* out, const QStringList& names = {}) const;
    QString toCsv(const QStringList& names = {}) const;

Q_SIGNALS:
    void seriesAdded(const QString& name);
    /// New points in one or more series (emitted once per append call).
    void appended();
    void cleared();
    void smoothingChanged();

private:
    bool appendPoint(const QString& name, double step, double tokens, double wallTime, double value,
                     bool& added);
    static void resmooth(Series& s, double weight);

    QStringList names_;
    QHash<QString, std::shared_ptr<Series>> series_;
    double weight_ = 0.6;
    int rejected_ = 0;
};

}  // namespace lathe::ui
