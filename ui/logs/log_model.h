// LogModel: the engine's log lines (by rank and level) as a table model, appended in batches and
// capped in size; LogFilterModel: the level / rank / text filter the log view applies.
#pragma once

#include <QAbstractTableModel>
#include <QDateTime>
#include <QSortFilterProxyModel>
#include <QVector>

class QTimer;

namespace lathe::ui {

/// Log lines that do not come from an engine rank (an engine rank is >= 0).
inline constexpr int kConsoleRank = -1;  ///< the engine process's stdout/stderr
inline constexpr int kGuiRank = -2;      ///< notes of the RunController itself

class LogModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { TimeColumn, SourceColumn, LevelColumn, MessageColumn, ColumnCount };
    enum class Level { Debug, Info, Warning, Error };
    /// Raw values for filtering: the rank (int) and the level (int of Level).
    static constexpr int RankRole = Qt::UserRole + 1;
    static constexpr int LevelRole = Qt::UserRole + 2;
    static constexpr int kDefaultMaxRows = 100000;

    struct Entry {
        QDateTime time;
        int rank = 0;  ///< >= 0 an engine rank; kConsoleRank / kGuiRank otherwise
        Level level = Level::Info;
        QString message;
    };

    explicit LogModel(QObject* parent = nullptr);

    static Level levelFromString(const QString& level);
    static QString levelName(Level level);
    static QString sourceName(int rank);

    /// Queues a line; lines reach the model in one batch per event-loop turn (or flush()).
    void append(int rank, const QString& level, const QString& message);
    void flush();
    void clear();
    void setMaxRows(int n) { maxRows_ = n; }
    /// Ranks seen so far (for the rank filter).
    QVector<int> ranks() const { return ranks_; }
    const Entry& entry(int row) const { return rows_.at(row); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

Q_SIGNALS:
    void rankSeen(int rank);

private:
    QVector<Entry> rows_;
    QVector<Entry> pending_;
    QVector<int> ranks_;
    QTimer* flushTimer_;
    int maxRows_ = kDefaultMaxRows;
};

class LogFilterModel : public QSortFilterProxyModel {
    Q_OBJECT

public:
    static constexpr int kAllRanks = -1000;
    explicit LogFilterModel(QObject* parent = nullptr);
    void setMinimumLevel(LogModel::Level level);
    void setRank(int rank);  ///< kAllRanks for every source
    void setSearchText(const QString& text);

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override;

private:
    LogModel::Level minLevel_ = LogModel::Level::Debug;
    int rank_ = kAllRanks;
    QString search_;
};

}  // namespace lathe::ui
