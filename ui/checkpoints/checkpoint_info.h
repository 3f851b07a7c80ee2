// CheckpointInfo: one checkpoint folder of a run, as the GUI judges it without loading tensors.
//
//   step{N}/ with .metadata.json     complete (usable unless a check below fails)
//   step{N}/ without .metadata.json  partial (a save that was interrupted)
//   step{N}-tmp/                     partial (a save in progress or interrupted)
//   step{N}.abandoned[K]/            abandoned (set aside by a resume from an earlier step)
//   step{N}.unusable[K]/             unusable (set aside by the engine when it could not load it;
//                                    the reason is its unusable.json)
//
// A complete or abandoned checkpoint is unusable when its .metadata.json or a train/rank{K}.json
// cannot be read, or its model_and_optim/rank0.lathe is not a whole Lathe tensor file ("LATHETS1",
// uint64 LE header length H, H bytes of JSON header, then the data from 16 + H: the file must
// cover every tensor's offset + nbytes). verifyTensorData() additionally checks every tensor's
// CRC-32C; it reads the whole file, so the GUI runs it in a background thread.
#pragma once

#include <QDateTime>
#include <QString>
#include <QVector>

#include <atomic>

namespace lathe::ui {

struct CheckpointInfo {
    enum class Status { Complete, Partial, Abandoned, Unusable };

    QString name;  ///< folder name: step15, step20-tmp, step20.abandoned
    QString path;  ///< absolute path
    qint64 step = -1;
    Status status = Status::Partial;
    QString reason;  ///< why partial, abandoned or unusable; empty for a complete one
    bool ephemeral = false;
    qint64 tokens = -1;  ///< global_train_tokens_seen of train/rank0.json
    int worldSize = 0;   ///< from .metadata.json
    QDateTime time;      ///< when it was completed (.metadata.json), else the folder's mtime
    qint64 sizeBytes = 0;
    bool abandoned = false;  ///< an abandoned one, usable or not
    bool remote = false;     ///< in a remote folder (s3://, http(s)://): listed by the engine

    /// Complete and every check passed: "Resume" continues the run from it.
    bool canResume() const { return status == Status::Complete; }
    /// Whole and readable (complete, or abandoned but intact): "Resume as new run" may start
    /// from it.
    bool canResumeAsNewRun() const {
        return status == Status::Complete || status == Status::Abandoned;
    }
    bool operator==(const CheckpointInfo& o) const;
    bool operator!=(const CheckpointInfo& o) const { return !(*this == o); }
};

QString checkpointStatusName(CheckpointInfo::Status status);
/// The Step column's text: the step, and what sets the folder apart from a checkpoint of the same
/// step ("200", "200 · abandoned", "200 · abandoned1", "200 · unusable", "200 · saving"), so that
/// two rows of one step can be told apart without reading Status.
QString checkpointLabel(const CheckpointInfo& c);
/// step{N}, step{N}-tmp, step{N}.abandoned[K] or step{N}.unusable[K].
bool isCheckpointName(const QString& folderName);

/// Describes the checkpoint folder `dir`; step -1 when its name is not a checkpoint's.
CheckpointInfo inspectCheckpoint(const QString& dir);
/// Every checkpoint folder of a run, by step (then name).
QVector<CheckpointInfo> scanCheckpoints(const QString& runDir);

/// Whether `path` names a remote checkpoint folder (s3://, http://, https://).
bool isRemotePath(const QString& path);
/// The remote folder a run keeps its checkpoints in: trainer.save_folder of its config.json when
/// that is remote; empty for a run whose checkpoints are in its own folder.
QString remoteCheckpointFolder(const QString& runDir);
/// The checkpoints of `lathe-engine inspect REMOTE_FOLDER`'s output (JSON); empty with `error`
/// when it is not that.
QVector<CheckpointInfo> checkpointsFromInspect(const QByteArray& json, QString* error = nullptr);

/// Structural checks of a Lathe tensor file; empty when whole, otherwise the reason.
QString checkTensorFile(const QString& path);
/// Reads every tensor and compares its CRC-32C with the header's; empty when all match.
/// `cancel` (optional) stops early with "cancelled".
QString verifyTensorData(const QString& path, const std::atomic<bool>* cancel = nullptr);

/// Deletes a checkpoint the way the engine does: .metadata.json first, so it stops counting as
/// complete before its files go, then the folder. False with `error` on failure.
bool removeCheckpoint(const QString& dir, QString* error = nullptr);

}  // namespace lathe::ui
