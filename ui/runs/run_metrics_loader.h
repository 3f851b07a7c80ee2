// RunMetricsLoader: a run's curves from its files into a MetricStore, once or following a run that
// is still writing (metrics.jsonl read incrementally from the last complete line, on a
// QFileSystemWatcher signal or every followInterval() ms).
//
// Resumes. The engine appends to metrics.jsonl, so after a resume from step S the file's steps go
// back (e.g. 1..20 then 16..30 after resuming from step 15). When a line's step is not after the
// last step shown, the loader takes the cut point from history.jsonl (the first resume not yet
// accounted for whose from_step is below that step and below the last step shown; failing that,
// the line's step - 1) and calls MetricStore::abandonAfter(cut): the points after the cut move to
// an abandoned series and the run's series continues with the new lines, every step once. A line
// with the same step as the last one is a resume only when history.jsonl has a matching entry;
// otherwise it adds that step's other metrics.
//
// "Resume as new run" children (parent.json) first show the parent run's curve up to the step
// they were started from, then their own lines. The wall-time axis counts seconds from the first
// line shown (wallOrigin()).
#pragma once

#include "ui/plots/metric_store.h"

#include <QObject>
#include <QString>
#include <QVector>

#include <cstdint>
#include <limits>
#include <optional>

class QFileSystemWatcher;
class QTimer;

namespace lathe::sinks {
struct MetricRecord;
}

namespace lathe::ui {

class RunMetricsLoader : public QObject {
    Q_OBJECT

public:
    static constexpr int kDefaultFollowMs = 500;
    static constexpr int kMaxParentDepth = 8;

    explicit RunMetricsLoader(MetricStore* store, QObject* parent = nullptr);

    /// Clears the store and shows the run in `runDir`. A run without metrics.jsonl yet is not an
    /// error (its lines appear when following). False, with `error`, when the file exists but
    /// cannot be read.
    bool open(const QString& runDir, QString* error = nullptr);
    /// Stops following and forgets the run (the store keeps its points).
    void close();
    /// Reads the complete lines appended since the last read; returns how many records.
    int poll();

    void setFollowing(bool on);
    bool isFollowing() const { return following_; }
    void setFollowInterval(int ms);

    QString runDir() const { return runDir_; }
    /// The last step of the run's own series so far (-inf before any).
    double lastStep() const { return lastStep_; }
    /// Unix time of the first line shown: wall time 0 on the plots.
    double wallOrigin() const { return wallOrigin_; }
    int badLines() const { return bad_; }
    /// How many resumes from history.jsonl were used to cut abandoned branches.
    int resumesApplied() const { return resumesApplied_; }

Q_SIGNALS:
    /// New records reached the store.
    void updated(int records);

private:
    struct Branching {
        QVector<qint64> resumeSteps;  ///< from_step of each history.jsonl entry, in order
        int used = 0;
    };
    static QVector<qint64> readResumeSteps(const QString& runDir);
    void ingest(const lathe::sinks::MetricRecord& r, Branching& b, double maxStep);
    std::optional<double> cutFor(double step, Branching& b, bool fallback);
    void loadParents(const QString& runDir, int depth);

    MetricStore* store_;
    QString runDir_;
    std::uint64_t offset_ = 0;
    Branching own_;
    qint64 historySize_ = -1;
    double lastStep_ = -std::numeric_limits<double>::infinity();
    double wallOrigin_ = std::numeric_limits<double>::quiet_NaN();
    int bad_ = 0;
    int resumesApplied_ = 0;
    bool following_ = false;
    QTimer* timer_ = nullptr;
    QFileSystemWatcher* watcher_ = nullptr;
};

}  // namespace lathe::ui
