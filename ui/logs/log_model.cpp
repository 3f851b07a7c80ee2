#include "ui/logs/log_model.h"

#include <QBrush>
#include <QColor>
#include <QTimer>

namespace lathe::ui {

LogModel::LogModel(QObject* parent) : QAbstractTableModel(parent) {
    flushTimer_ = new QTimer(this);
    flushTimer_->setSingleShot(true);
    flushTimer_->setInterval(0);
    connect(flushTimer_, &QTimer::timeout, this, &LogModel::flush);
}

LogModel::Level LogModel::levelFromString(const QString& level) {
    const QString l = level.toLower();
    if (l == QLatin1String("debug") || l == QLatin1String("trace")) return Level::Debug;
    if (l.startsWith(QLatin1String("warn"))) return Level::Warning;
    if (l == QLatin1String("error") || l == QLatin1String("critical")) return Level::Error;
    return Level::Info;
}

QString LogModel::levelName(Level level) {
    switch (level) {
        case Level::Debug:
            return QStringLiteral("debug");
        case Level::Info:
            return QStringLiteral("info");
        case Level::Warning:
            return QStringLiteral("warning");
        case Level::Error:
            return QStringLiteral("error");
    }
    return {};
}

QString LogModel::sourceName(int rank) {
    if (rank == kGuiRank) return tr("lathe");
    if (rank == kConsoleRank) return tr("console");
    return tr("rank %1").arg(rank);
}

void LogModel::append(int rank, const QString& level, const QString& message) {
    pending_.append({QDateTime::currentDateTime(), rank, levelFromString(level), message});
    if (!ranks_.contains(rank)) {
        ranks_.append(rank);
        Q_EMIT rankSeen(rank);
    }
    if (!flushTimer_->isActive()) flushTimer_->start();
}

void LogModel::flush() {
    if (pending_.isEmpty()) return;
    if (pending_.size() > maxRows_) pending_.remove(0, pending_.size() - maxRows_);
    const int overflow = rows_.size() + pending_.size() - maxRows_;
    if (overflow > 0) {
        beginRemoveRows({}, 0, overflow - 1);
        rows_.remove(0, overflow);
        endRemoveRows();
    }
    beginInsertRows({}, rows_.size(), rows_.size() + pending_.size() - 1);
    rows_ += pending_;
    endInsertRows();
    pending_.clear();
}

void LogModel::clear() {
    beginResetModel();
    rows_.clear();
    pending_.clear();
    endResetModel();
}

int LogModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int LogModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant LogModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rows_.size()) return {};
    const Entry& e = rows_.at(index.row());
    if (role == RankRole) return e.rank;
    if (role == LevelRole) return static_cast<int>(e.level);
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        switch (index.column()) {
            case TimeColumn:
                return e.time.toString(QStringLiteral("HH:mm:ss.zzz"));
            case SourceColumn:
                return sourceName(e.rank);
            case LevelColumn:
                return levelName(e.level);
            case MessageColumn:
                return e.message;
        }
    }
    if (role == Qt::ForegroundRole && index.column() != TimeColumn) {
        if (e.level == Level::Error) return QBrush(QColor(0xd3, 0x2f, 0x2f));
        if (e.level == Level::Warning) return QBrush(QColor(0xe0, 0x8a, 0x00));
    }
    return {};
}

QVariant LogModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case TimeColumn:
            return tr("Time");
        case SourceColumn:
            return tr("Source");
        case LevelColumn:
            return tr("Level");
        case MessageColumn:
            return tr("Message");
    }
    return {};
}

LogFilterModel::LogFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {}

void LogFilterModel::setMinimumLevel(LogModel::Level level) {
    minLevel_ = level;
    invalidateFilter();
}

void LogFilterModel::setRank(int rank) {
    rank_ = rank;
    invalidateFilter();
}

void LogFilterModel::setSearchText(const QString& text) {
    search_ = text;
    invalidateFilter();
}

bool LogFilterModel::filterAcceptsRow(int row, const QModelIndex& parent) const {
    const QModelIndex idx = sourceModel()->index(row, LogModel::MessageColumn, parent);
    if (sourceModel()->data(idx, LogModel::LevelRole).toInt() < static_cast<int>(minLevel_))
        return false;
    if (rank_ != kAllRanks && sourceModel()->data(idx, LogModel::RankRole).toInt() != rank_)
        return false;
    if (!search_.isEmpty() && !sourceModel()
                                   ->data(idx, Qt::DisplayRole)
                                   .toString()
                                   .contains(search_, Qt::CaseInsensitive))
        return false;
    return true;
}

}  // namespace lathe::ui
