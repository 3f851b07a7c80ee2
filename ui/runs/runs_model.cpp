#include "ui/runs/runs_model.h"

#include "ui/runs/run_format.h"
#include "ui/runs/run_info.h"

#include "engine/run_folder/layout.h"

#include <QBrush>
#include <QColor>
#include <QDir>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QRegularExpression>
#include <QTimer>

#include <cmath>

namespace lathe::ui {
namespace {

constexpr int kMaxWatchedRuns = 500;

QColor stateColor(RunState s) {
    switch (s) {
        case RunState::Running:
            return QColor(0x2e, 0x7d, 0x32);
        case RunState::Finished:
            return QColor(0x15, 0x65, 0xc0);
        case RunState::Stopped:
            return QColor(0x6d, 0x4c, 0x41);
        case RunState::Failed:
        case RunState::Interrupted:
            return QColor(0xc6, 0x28, 0x28);
        case RunState::Unknown:
            break;
    }
    return QColor(0x75, 0x75, 0x75);
}

QString ofTotal(qint64 done, qint64 total, bool human) {
    auto f = [&](qint64 v) {
        return human ? formatCount(static_cast<double>(v)) : QString::number(v);
    };
    if (done < 0) return QStringLiteral("–");
    if (total <= 0) return f(done);
    return QStringLiteral("%1 / %2").arg(f(done), f(total));
}

}  // namespace

RunsModel::RunsModel(QObject* parent) : QAbstractTableModel(parent) {
    watcher_ = new QFileSystemWatcher(this);
    timer_ = new QTimer(this);
    timer_->setInterval(kDefaultRefreshMs);
    soon_ = new QTimer(this);
    soon_->setSingleShot(true);
    soon_->setInterval(100);  // a burst of file events -> one refresh
    connect(timer_, &QTimer::timeout, this, &RunsModel::refresh);
    connect(soon_, &QTimer::timeout, this, &RunsModel::refresh);
    connect(watcher_, &QFileSystemWatcher::directoryChanged, this, &RunsModel::scheduleRefresh);
}

void RunsModel::setRoot(const QString& root) {
    const QString abs = QFileInfo(root).absoluteFilePath();
    if (abs == root_ && !runs_.isEmpty()) return;
    beginResetModel();
    root_ = abs;
    runs_.clear();
    stamps_.clear();
    endResetModel();
    if (!watcher_->directories().isEmpty()) watcher_->removePaths(watcher_->directories());
    refresh();
    timer_->start();
}

void RunsModel::setRefreshInterval(int ms) {
    timer_->setInterval(ms);
    if (ms <= 0) timer_->stop();
}

void RunsModel::scheduleRefresh() {
    if (!soon_->isActive()) soon_->start();
}

RunsModel::Stamp RunsModel::stampOf(const QString& dir) {
    Stamp s;
    const QFileInfo status(runFile(dir, run_folder::kStatusFile));
    if (status.exists()) {
        s.statusMtime = status.lastModified().toMSecsSinceEpoch();
        s.statusSize = status.size();
    }
    const QFileInfo parent(runFile(dir, run_folder::kParentFile));
    if (parent.exists()) s.parentMtime = parent.lastModified().toMSecsSinceEpoch();
    const QFileInfo notes(runFile(dir, run_folder::kNotesFile));
    if (notes.exists()) s.notesMtime = notes.lastModified().toMSecsSinceEpoch() ^ notes.size();
    s.hasConfig = QFileInfo::exists(runFile(dir, run_folder::kConfigFile));
    s.hasMetrics = QFileInfo::exists(runFile(dir, run_folder::kMetricsJsonlFile));
    return s;
}

int RunsModel::rowOf(const QString& path) const {
    const QString abs = QFileInfo(path).absoluteFilePath();
    for (int i = 0; i < runs_.size(); ++i)
        if (runs_[i].path == abs) return i;
    return -1;
}

void RunsModel::refresh() {
    if (root_.isEmpty()) return;
    QDir rootDir(root_);
    QStringList present;
    if (rootDir.exists()) {
        for (const QString& name :
             rootDir.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
            const QString dir = rootDir.filePath(name);
            if (isRunFolder(dir)) present << QFileInfo(dir).absoluteFilePath();
        }
    }
    // Gone.
    for (int row = static_cast<int>(runs_.size()) - 1; row >= 0; --row) {
        if (present.contains(runs_[row].path)) continue;
        beginRemoveRows({}, row, row);
        runs_.removeAt(row);
        stamps_.removeAt(row);
        endRemoveRows();
    }
    // Changed, or claiming to run (its process may have died since).
    for (int row = 0; row < runs_.size(); ++row) {
        const Stamp stamp = stampOf(runs_[row].path);
        if (stamp == stamps_[row] && runs_[row].state != RunState::Running) continue;
        stamps_[row] = stamp;
        RunInfo info = readRunInfo(runs_[row].path, options_);
        if (info == runs_[row]) continue;
        runs_[row] = info;
        Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
        Q_EMIT runChanged(info.path);
    }
    // New.
    QVector<RunInfo> added;
    QVector<Stamp> addedStamps;
    for (const QString& dir : present) {
        if (rowOf(dir) >= 0) continue;
        addedStamps.append(stampOf(dir));
        added.append(readRunInfo(dir, options_));
    }
    if (!added.isEmpty()) {
        const int first = static_cast<int>(runs_.size());
        beginInsertRows({}, first, first + static_cast<int>(added.size()) - 1);
        runs_ += added;
        stamps_ += addedStamps;
        endInsertRows();
    }
    updateWatches();
}

void RunsModel::updateWatches() {
    QStringList want;
    if (QFileInfo(root_).isDir()) want << root_;
    for (int i = 0; i < runs_.size() && i < kMaxWatchedRuns; ++i) want << runs_[i].path;
    const QStringList have = watcher_->directories();
    QStringList drop, add;
    for (const QString& p : have)
        if (!want.contains(p)) drop << p;
    for (const QString& p : want)
        if (!have.contains(p)) add << p;
    if (!drop.isEmpty()) watcher_->removePaths(drop);
    if (!add.isEmpty()) watcher_->addPaths(add);
}

int RunsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

int RunsModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= runs_.size() || index.column() >= ColumnCount) return {};
    const RunInfo& r = runs_.at(index.row());
    if (role == PathRole) return r.path;
    if (role == StateRole) return static_cast<int>(r.state);
    if (role == SortRole) {
        switch (index.column()) {
            case NameColumn:
                return r.name;
            case StateColumn:
                return static_cast<int>(r.state);
            case StartedColumn:
                return r.startedAt.isValid() ? r.startedAt.toMSecsSinceEpoch() : qint64(-1);
            case DurationColumn:
                return std::isfinite(r.elapsedS) ? r.elapsedS : -1.0;
            case StepsColumn:
                return r.step;
            case TokensColumn:
                return r.tokens;
            case LossColumn:
                return std::isfinite(r.lastLoss) ? r.lastLoss : std::numeric_limits<double>::max();
            case WorldSizeColumn:
                return r.worldSize;
            case ModelColumn:
                return r.model;
            case TagsColumn:
                return r.tags.join(QStringLiteral(", "));
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
            case NameColumn:
                return r.name;
            case StateColumn:
                return runStateName(r.state);
            case StartedColumn:
                return r.startedAt.isValid()
                           ? r.startedAt.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"))
                           : QStringLiteral("–");
            case DurationColumn:
                return formatSeconds(r.elapsedS);
            case StepsColumn:
                return ofTotal(r.step, r.maxSteps, false);
            case TokensColumn:
                return ofTotal(r.tokens, r.maxTokens, true);
            case LossColumn:
                return std::isfinite(r.lastLoss) ? QString::number(r.lastLoss, 'f', 4)
                                                 : QStringLiteral("–");
            case WorldSizeColumn:
                return r.worldSize > 0 ? QString::number(r.worldSize) : QStringLiteral("–");
            case ModelColumn: {
                // "768d x 12 layers, vocab 50280" as "768d x 12L, vocab 50280": every column fits
                // the Runs tab of a 1366-pixel screen (the whole text is the tooltip).
                static const QRegularExpression layers(QStringLiteral("\\b(\\d+) layers\\b"));
                return QString(r.model).replace(layers, QStringLiteral("\\1L"));
            }
            case TagsColumn:
                return r.tags.join(QStringLiteral(", "));
        }
    }
    if (role == Qt::ToolTipRole) {
        if (index.column() == ModelColumn) return r.model;
        if (index.column() == TagsColumn && !r.notes.isEmpty()) return r.notes;
        if (index.column() == NameColumn) {
            QString tip = r.path;
            if (!r.parentRun.isEmpty())
                tip += tr("\nresumed as a new run from %1 at step %2")
                           .arg(r.parentRun)
                           .arg(r.parentStep);
            if (!r.notes.isEmpty()) tip += QStringLiteral("\n\n") + r.notes;
            return tip;
        }
        if (index.column() == StateColumn && !r.reason.isEmpty())
            return tr("%1: %2").arg(runStateName(r.state), r.reason);
    }
    if (role == Qt::ForegroundRole && index.column() == StateColumn)
        return QBrush(stateColor(r.state));
    if (role == Qt::TextAlignmentRole && index.column() >= DurationColumn &&
        index.column() <= WorldSizeColumn)
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant RunsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal) return {};
    if (role == Qt::ToolTipRole && section == LossColumn)
        return tr("The last training loss the run logged");
    if (role != Qt::DisplayRole) return {};
    switch (section) {
        case NameColumn:
            return tr("Run");
        case StateColumn:
            return tr("State");
        case StartedColumn:
            return tr("Started");
        case DurationColumn:
            return tr("Duration");
        case StepsColumn:
            return tr("Steps");
        case TokensColumn:
            return tr("Tokens");
        case LossColumn:
            return tr("Loss");
        case WorldSizeColumn:
            return tr("Ranks");
        case ModelColumn:
            return tr("Model");
        case TagsColumn:
            return tr("Tags");
    }
    return {};
}

RunsFilterModel::RunsFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
    setSortRole(RunsModel::SortRole);
    setDynamicSortFilter(true);
}

void RunsFilterModel::setTextFilter(const QString& text) {
    text_ = text.trimmed();
    invalidateFilter();
}

void RunsFilterModel::setStateFilter(const QList<RunState>& states) {
    states_.clear();
    for (RunState s : states) states_.insert(static_cast<int>(s));
    invalidateFilter();
}

bool RunsFilterModel::filterAcceptsRow(int row, const QModelIndex& parent) const {
    auto* runs = qobject_cast<RunsModel*>(sourceModel());
    if (!runs || row >= runs->rowCount(parent)) return true;
    const RunInfo& r = runs->run(row);
    if (!states_.isEmpty() && !states_.contains(static_cast<int>(r.state))) return false;
    if (text_.isEmpty()) return true;
    return r.name.contains(text_, Qt::CaseInsensitive) ||
           r.model.contains(text_, Qt::CaseInsensitive) ||
           r.reason.contains(text_, Qt::CaseInsensitive) ||
           r.tags.join(QLatin1Char(' ')).contains(text_, Qt::CaseInsensitive) ||
           r.notes.contains(text_, Qt::CaseInsensitive);
}

bool RunsFilterModel::lessThan(const QModelIndex& left, const QModelIndex& right) const {
    const QVariant a = left.data(RunsModel::SortRole), b = right.data(RunsModel::SortRole);
    const QPartialOrdering c = QVariant::compare(a, b);
    if (c == QPartialOrdering::Less) return true;
    if (c == QPartialOrdering::Greater) return false;
    // Ties (and incomparable values) in name order, so the order is stable.
    return left.siblingAtColumn(RunsModel::NameColumn).data().toString() <
           right.siblingAtColumn(RunsModel::NameColumn).data().toString();
}

}  // namespace lathe::ui
