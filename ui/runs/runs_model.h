// RunsModel: every run folder under a runs root as a table (name, state, start, duration, steps,
// tokens, last loss, world size, model), kept current by a QFileSystemWatcher on the root and the
// run folders plus a periodic timer. A refresh only stat()s each folder's status.json and re-reads
// those that changed, or that claim to be running (to notice a dead process). Rows are updated in
// place (dataChanged / insert / remove), so views keep their selection.
//
// RunsFilterModel sorts by the raw values (SortRole) and filters by text and state.
#pragma once

#include "ui/runs/run_info.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QVector>

class QFileSystemWatcher;
class QTimer;

namespace lathe::ui {

class RunsModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column {
        NameColumn,
        StateColumn,
        StartedColumn,
        DurationColumn,
        StepsColumn,
        TokensColumn,
        LossColumn,
        WorldSizeColumn,
        ModelColumn,
        TagsColumn,
        ColumnCount
    };
    static constexpr int PathRole = Qt::UserRole + 1;   ///< QString: the run folder
    static constexpr int StateRole = Qt::UserRole + 2;  ///< int of RunState
    static constexpr int SortRole = Qt::UserRole + 3;   ///< the raw value of a cell
    static constexpr int kDefaultRefreshMs = 2000;

    explicit RunsModel(QObject* parent = nullptr);

    QString root() const { return root_; }
    /// Lists the runs under `root` (created by the engine when missing; watched once it exists).
    void setRoot(const QString& root);
    /// Re-reads what changed. Called by the watcher and the timer; tests call it directly.
    void refresh();
    void setRefreshInterval(int ms);
    /// Options for the interrupted-run detection (staleness, liveness check).
    void setInfoOptions(const RunInfoOptions& options) { options_ = options; }

    const RunInfo& run(int row) const { return runs_.at(row); }
    int rowOf(const QString& path) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

Q_SIGNALS:
    /// A run's information changed (state, step, ...).
    void runChanged(const QString& path);

private:
    struct Stamp {
        qint64 statusMtime = -1, statusSize = -1, parentMtime = -1, notesMtime = -1;
        bool hasConfig = false, hasMetrics = false;
        bool operator==(const Stamp& o) const {
            return statusMtime == o.statusMtime && statusSize == o.statusSize &&
                   parentMtime == o.parentMtime && notesMtime == o.notesMtime &&
                   hasConfig == o.hasConfig && hasMetrics == o.hasMetrics;
        }
    };
    static Stamp stampOf(const QString& dir);
    void scheduleRefresh();
    void updateWatches();

    QString root_;
    QVector<RunInfo> runs_;
    QVector<Stamp> stamps_;
    RunInfoOptions options_;
    QFileSystemWatcher* watcher_ = nullptr;
    QTimer* timer_ = nullptr;
    QTimer* soon_ = nullptr;
};

class RunsFilterModel : public QSortFilterProxyModel {
    Q_OBJECT

public:
    explicit RunsFilterModel(QObject* parent = nullptr);
    /// Case-insensitive substring of the name, model or reason; empty shows all.
    void setTextFilter(const QString& text);
    /// Only runs in these states; empty shows all.
    void setStateFilter(const QList<RunState>& states);

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override;
    bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

private:
    QString text_;
    QSet<int> states_;
};

}  // namespace lathe::ui
