// CheckpointsModel: the checkpoints of one run folder as a table (step, tokens, time, size,
// permanent/ephemeral, complete/partial/abandoned/unusable with the reason), kept current by a
// QFileSystemWatcher on the run folder and a periodic timer. A checkpoint is re-inspected only
// when its files' stat() changed. verify() runs the full CRC-32C check of a checkpoint's tensors
// in a background thread; a mismatch makes it unusable.
//
// A run whose checkpoints are remote (its config.json's trainer.save_folder is s3:// or
// http(s)://) is listed by the engine instead (`lathe-engine inspect FOLDER`, in the background,
// at most every kRemoteRefreshMs from the timer), and verified by it (`inspect --verify`).
#pragma once

#include "ui/checkpoints/checkpoint_info.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QVector>

#include <atomic>
#include <memory>

class QFileSystemWatcher;
class QThread;
class QTimer;

namespace lathe::ui {

class EngineCommand;

class CheckpointsModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column {
        StepColumn,
        TokensColumn,
        TimeColumn,
        SizeColumn,
        KindColumn,
        StatusColumn,
        NoteColumn,
        ColumnCount
    };
    static constexpr int PathRole = Qt::UserRole + 1;            ///< QString
    static constexpr int StatusRole = Qt::UserRole + 2;          ///< int of CheckpointInfo::Status
    static constexpr int CanResumeRole = Qt::UserRole + 3;       ///< bool
    static constexpr int CanResumeAsNewRole = Qt::UserRole + 4;  ///< bool
    static constexpr int kDefaultRefreshMs = 3000;
    static constexpr int kRemoteRefreshMs = 15000;

    explicit CheckpointsModel(QObject* parent = nullptr);
    ~CheckpointsModel() override;

    QString runDir() const { return runDir_; }
    /// Shows the checkpoints of `runDir` (empty: none).
    void setRunDir(const QString& runDir);
    void refresh();
    void setRefreshInterval(int ms);

    /// The checkpoint of a row, with a failed CRC verification applied.
    CheckpointInfo checkpoint(int row) const;
    int rowOf(const QString& pathOrName) const;
    /// The run's remote checkpoint folder (s3://...), empty when its checkpoints are local.
    QString remoteFolder() const { return remoteFolder_; }
    /// Why the latest remote listing failed; empty when it succeeded.
    QString remoteError() const { return remoteError_; }
    bool isListing() const { return listing_ != nullptr; }
    /// Deletes the checkpoint of `row` (.metadata.json first, then the folder). A remote one is
    /// refused: the run's retention or the bucket's own tools remove those.
    bool remove(int row, QString* error = nullptr);
    /// Starts the full CRC-32C verification of `row`'s tensors in the background.
    void verify(int row);
    bool isVerifying(const QString& path) const {
        return running_.contains(path) || remoteVerifying_.contains(path);
    }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

Q_SIGNALS:
    /// A verification finished; `problem` is empty when every tensor matched.
    void verified(const QString& path, const QString& problem);
    /// A remote listing finished: the rows are current, or remoteError() says why not.
    void remoteListed();

private:
    struct Stamp {
        qint64 dir = -1, meta = -1, model = -1, modelSize = -1, train = -1;
        bool operator==(const Stamp& o) const {
            return dir == o.dir && meta == o.meta && model == o.model && modelSize == o.modelSize &&
                   train == o.train;
        }
    };
    static Stamp stampOf(const QString& path);
    void onVerified(const QString& path, const QString& problem);
    void refreshRemote();
    void applyRemoteRows(const QVector<CheckpointInfo>& rows);
    void verifyRemote(const QString& path);

    QString runDir_;
    QVector<CheckpointInfo> rows_;
    QVector<Stamp> stamps_;
    QHash<QString, QString> crcProblems_;  ///< path -> problem ("" when verified fine)
    QHash<QString, QThread*> running_;
    std::shared_ptr<std::atomic<bool>> cancel_;
    QFileSystemWatcher* watcher_ = nullptr;
    QTimer* timer_ = nullptr;
    QTimer* soon_ = nullptr;
    QString remoteFolder_;
    QString remoteError_;
    EngineCommand* listing_ = nullptr;
    qint64 lastListingMs_ = -1;  ///< when the latest remote listing finished (monotonic ms)
    QHash<QString, EngineCommand*> remoteVerifying_;
};

}  // namespace lathe::ui
