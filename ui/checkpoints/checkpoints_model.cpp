#include "ui/checkpoints/checkpoints_model.h"

#include "ui/runs/run_format.h"
#include "ui/util/engine_command.h"

#include <QBrush>
#include <QDeadlineTimer>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QThread>
#include <QTimer>

namespace lathe::ui {
namespace {

qint64 nowMs() {
    static QElapsedTimer clock;
    if (!clock.isValid()) clock.start();
    return clock.elapsed();
}

// The engine's last error line, for a message.
qint64 mtime(const QString& path) {
    const QFileInfo fi(path);
    return fi.exists() ? fi.lastModified().toMSecsSinceEpoch() : -1;
}

QColor statusColor(CheckpointInfo::Status s) {
    switch (s) {
        case CheckpointInfo::Status::Complete:
            return QColor(0x2e, 0x7d, 0x32);
        case CheckpointInfo::Status::Partial:
            return QColor(0xef, 0x6c, 0x00);
        case CheckpointInfo::Status::Abandoned:
            return QColor(0x75, 0x75, 0x75);
        case CheckpointInfo::Status::Unusable:
            return QColor(0xc6, 0x28, 0x28);
    }
    return {};
}

}  // namespace

CheckpointsModel::CheckpointsModel(QObject* parent)
    : QAbstractTableModel(parent), cancel_(std::make_shared<std::atomic<bool>>(false)) {
    watcher_ = new QFileSystemWatcher(this);
    timer_ = new QTimer(this);
    timer_->setInterval(kDefaultRefreshMs);
    soon_ = new QTimer(this);
    soon_->setSingleShot(true);
    soon_->setInterval(100);
    connect(timer_, &QTimer::timeout, this, [this] {
        // A remote listing is a request to a server: not every few seconds.
        if (!remoteFolder_.isEmpty() && lastListingMs_ >= 0 &&
            nowMs() - lastListingMs_ < kRemoteRefreshMs)
            return;
        refresh();
    });
    connect(soon_, &QTimer::timeout, this, &CheckpointsModel::refresh);
    connect(watcher_, &QFileSystemWatcher::directoryChanged, this, [this] {
        if (!soon_->isActive()) soon_->start();
    });
}

CheckpointsModel::~CheckpointsModel() {
    cancel_->store(true);
    for (EngineCommand* c : std::as_const(remoteVerifying_)) c->disconnect(this);
    if (listing_) listing_->disconnect(this);
    for (QThread* t : std::as_const(running_)) {
        t->disconnect(this);
        t->wait();
        delete t;
    }
}

void CheckpointsModel::setRunDir(const QString& runDir) {
    const QString abs = runDir.isEmpty() ? QString() : QFileInfo(runDir).absoluteFilePath();
    if (abs == runDir_) {
        refresh();
        return;
    }
    beginResetModel();
    runDir_ = abs;
    rows_.clear();
    stamps_.clear();
    remoteFolder_.clear();
    remoteError_.clear();
    lastListingMs_ = -1;
    endResetModel();
    if (!watcher_->directories().isEmpty()) watcher_->removePaths(watcher_->directories());
    if (!runDir_.isEmpty() && QFileInfo(runDir_).isDir()) watcher_->addPath(runDir_);
    refresh();
    if (runDir_.isEmpty()) {
        timer_->stop();
    } else if (timer_->interval() > 0) {
        timer_->start();
    }
}

void CheckpointsModel::setRefreshInterval(int ms) {
    timer_->setInterval(ms);
    if (ms <= 0) timer_->stop();
}

CheckpointsModel::Stamp CheckpointsModel::stampOf(const QString& path) {
    Stamp s;
    s.dir = mtime(path);
    s.meta = mtime(path + QStringLiteral("/.metadata.json"));
    const QFileInfo model(path + QStringLiteral("/model_and_optim/rank0.lathe"));
    if (model.exists()) {
        s.model = model.lastModified().toMSecsSinceEpoch();
        s.modelSize = model.size();
    }
    s.train = mtime(path + QStringLiteral("/train/rank0.json"));
    return s;
}

void CheckpointsModel::refresh() {
    if (runDir_.isEmpty()) return;
    // The run's config.json says where its checkpoints are (it appears when the run starts).
    if (remoteFolder_.isEmpty()) remoteFolder_ = remoteCheckpointFolder(runDir_);
    if (!remoteFolder_.isEmpty()) {
        refreshRemote();
        return;
    }
    QStringList present;
    const QDir d(runDir_);
    for (const QString& name :
         d.entryList({QStringLiteral("step*")}, QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (isCheckpointName(name)) present << QFileInfo(d.filePath(name)).absoluteFilePath();
    }
    for (int row = static_cast<int>(rows_.size()) - 1; row >= 0; --row) {
        if (present.contains(rows_[row].path)) continue;
        beginRemoveRows({}, row, row);
        rows_.removeAt(row);
        stamps_.removeAt(row);
        endRemoveRows();
    }
    for (int row = 0; row < rows_.size(); ++row) {
        const Stamp s = stampOf(rows_[row].path);
        if (s == stamps_[row]) continue;
        stamps_[row] = s;
        crcProblems_.remove(rows_[row].path);  // changed files: an old verdict no longer holds
        const CheckpointInfo c = inspectCheckpoint(rows_[row].path);
        if (c == rows_[row]) continue;
        rows_[row] = c;
        Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
    }
    for (const QString& path : present) {
        if (rowOf(path) >= 0) continue;
        const Stamp s = stampOf(path);
        const CheckpointInfo c = inspectCheckpoint(path);
        // Keep the rows ordered by step, then name.
        int at = 0;
        while (at < rows_.size() &&
               (rows_[at].step < c.step || (rows_[at].step == c.step && rows_[at].name < c.name)))
            ++at;
        beginInsertRows({}, at, at);
        rows_.insert(at, c);
        stamps_.insert(at, s);
        endInsertRows();
    }
    if (watcher_->directories().isEmpty() && QFileInfo(runDir_).isDir()) watcher_->addPath(runDir_);
}

void CheckpointsModel::refreshRemote() {
    if (listing_) return;  // one listing at a time; its answer arrives in remoteListed()
    listing_ = new EngineCommand(this);
    const QString folder = remoteFolder_;
    EngineCommand* c = listing_;
    connect(c, &EngineCommand::finished, this, [this, c, folder](bool ok) {
        if (listing_ != c) return;
        listing_ = nullptr;
        c->deleteLater();
        lastListingMs_ = nowMs();
        if (folder != remoteFolder_) return;  // another run was chosen meanwhile
        if (!ok) {
            remoteError_ = tr("cannot list %1: %2").arg(folder, c->error());
        } else {
            QString error;
            const auto rows = checkpointsFromInspect(c->output(), &error);
            remoteError_ =
                error.isEmpty() ? QString() : tr("cannot list %1: %2").arg(folder, error);
            if (error.isEmpty()) applyRemoteRows(rows);
        }
        Q_EMIT remoteListed();
    });
    c->start({QStringLiteral("inspect"), remoteFolder_});
}

void CheckpointsModel::applyRemoteRows(const QVector<CheckpointInfo>& rows) {
    bool samePaths = rows.size() == rows_.size();
    for (int i = 0; samePaths && i < rows.size(); ++i) samePaths = rows[i].path == rows_[i].path;
    if (!samePaths) {
        // Rows come and go rarely (a save, a removal): a reset is simplest and keeps the order.
        beginResetModel();
        rows_ = rows;
        stamps_ = QVector<Stamp>(rows.size());
        endResetModel();
        return;
    }
    for (int row = 0; row < rows.size(); ++row) {
        if (rows[row] == rows_[row]) continue;
        rows_[row] = rows[row];
        Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
    }
}

void CheckpointsModel::verifyRemote(const QString& path) {
    auto* c = new EngineCommand(this);
    remoteVerifying_.insert(path, c);
    connect(c, &EngineCommand::finished, this, [this, c, path] {
        if (remoteVerifying_.value(path) != c) return;
        remoteVerifying_.remove(path);
        c->deleteLater();
        // --verify exits 1 when something did not verify, and still says what.
        QString error;
        const auto out =
            readOutput<protocol::CheckpointInspection>(c->output(), "inspect --verify", &error);
        QString problem;
        if (!out) {
            problem = tr("not verified: %1").arg(c->error().isEmpty() ? error : c->error());
        } else if (!out->verified) {
            QStringList problems;
            for (const auto& p : out->problems.value_or(std::vector<std::string>{}))
                problems << QString::fromStdString(p);
            problem =
                problems.isEmpty() ? tr("did not verify") : problems.join(QStringLiteral("; "));
        }
        crcProblems_.insert(path, problem);
        const int row = rowOf(path);
        if (row >= 0) Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
        Q_EMIT verified(path, problem);
    });
    c->start({QStringLiteral("inspect"), QStringLiteral("--verify"), path});
    const int row = rowOf(path);
    if (row >= 0) Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

CheckpointInfo CheckpointsModel::checkpoint(int row) const {
    CheckpointInfo c = rows_.at(row);
    const QString problem = crcProblems_.value(c.path);
    if (!problem.isEmpty()) {
        c.status = CheckpointInfo::Status::Unusable;
        c.reason = problem;
    }
    return c;
}

int CheckpointsModel::rowOf(const QString& pathOrName) const {
    for (int i = 0; i < rows_.size(); ++i)
        if (rows_[i].path == pathOrName || rows_[i].name == pathOrName) return i;
    if (isRemotePath(pathOrName)) return -1;
    const QString abs = QFileInfo(pathOrName).absoluteFilePath();
    for (int i = 0; i < rows_.size(); ++i)
        if (rows_[i].path == abs) return i;
    return -1;
}

bool CheckpointsModel::remove(int row, QString* error) {
    if (row < 0 || row >= rows_.size()) {
        if (error) *error = tr("no such checkpoint");
        return false;
    }
    if (rows_[row].remote) {
        if (error)
            *error = tr("%1 is in a remote folder: the run's retention (max_checkpoints) or the "
                        "bucket's own tools remove it")
                         .arg(rows_[row].path);
        return false;
    }
    const bool ok = removeCheckpoint(rows_[row].path, error);
    refresh();
    return ok;
}

void CheckpointsModel::verify(int row) {
    if (row < 0 || row >= rows_.size()) return;
    const QString path = rows_[row].path;
    if (isVerifying(path)) return;
    if (rows_[row].remote) {
        verifyRemote(path);
        return;
    }
    auto cancel = cancel_;
    QThread* t = QThread::create([this, path, cancel] {
        const QString problem =
            verifyTensorData(path + QStringLiteral("/model_and_optim/rank0.lathe"), cancel.get());
        if (cancel->load()) return;
        QMetaObject::invokeMethod(
            this, [this, path, problem] { onVerified(path, problem); }, Qt::QueuedConnection);
    });
    running_.insert(path, t);
    t->start();
}

void CheckpointsModel::onVerified(const QString& path, const QString& problem) {
    if (QThread* t = running_.take(path)) {
        t->wait();
        delete t;
    }
    crcProblems_.insert(
        path, problem.isEmpty() ? QString() : tr("model_and_optim/rank0.lathe: %1").arg(problem));
    const int row = rowOf(path);
    if (row >= 0) Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
    Q_EMIT verified(path, problem);
}

int CheckpointsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CheckpointsModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CheckpointsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rows_.size() || index.column() >= ColumnCount) return {};
    const CheckpointInfo c = checkpoint(index.row());
    switch (role) {
        case PathRole:
            return c.path;
        case StatusRole:
            return static_cast<int>(c.status);
        case CanResumeRole:
            return c.canResume();
        case CanResumeAsNewRole:
            return c.canResumeAsNewRun();
        case Qt::DisplayRole:
            switch (index.column()) {
                case StepColumn:
                    return checkpointLabel(c);
                case TokensColumn:
                    return formatCount(static_cast<double>(c.tokens));
                case TimeColumn:
                    return c.time.isValid() ? c.time.toLocalTime().toString(
                                                  QStringLiteral("yyyy-MM-dd HH:mm:ss"))
                                            : QStringLiteral("–");
                case SizeColumn:
                    return formatBytes(c.sizeBytes);
                case KindColumn:
                    if (c.status == CheckpointInfo::Status::Partial) return QStringLiteral("–");
                    return c.ephemeral ? tr("ephemeral") : tr("permanent");
                case StatusColumn:
                    return checkpointStatusName(c.status);
                case NoteColumn: {
                    if (isVerifying(c.path)) return tr("verifying…");
                    if (!c.reason.isEmpty()) return c.reason;
                    auto it = crcProblems_.constFind(c.path);
                    if (it != crcProblems_.constEnd() && it->isEmpty()) return tr("verified");
                    return c.name;
                }
            }
            break;
        case Qt::ToolTipRole:
            return c.reason.isEmpty() ? c.path : QStringLiteral("%1\n%2").arg(c.path, c.reason);
        case Qt::ForegroundRole:
            if (index.column() == StatusColumn) return QBrush(statusColor(c.status));
            break;
        case Qt::TextAlignmentRole:
            if (index.column() <= SizeColumn && index.column() != TimeColumn)
                return QVariant(Qt::AlignRight | Qt::AlignVCenter);
            break;
    }
    return {};
}

QVariant CheckpointsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case StepColumn:
            return tr("Step");
        case TokensColumn:
            return tr("Tokens");
        case TimeColumn:
            return tr("Saved");
        case SizeColumn:
            return tr("Size");
        case KindColumn:
            return tr("Kind");
        case StatusColumn:
            return tr("Status");
        case NoteColumn:
            return tr("Note");
    }
    return {};
}

}  // namespace lathe::ui
