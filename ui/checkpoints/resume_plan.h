// ResumePlan: resuming from a checkpoint, checked before anything starts.
//
// "Resume" continues the same run from exactly that checkpoint: `lathe-engine train CONFIG
// --resume-from CKPT --runs-dir ROOT` (the engine sets newer checkpoints aside as abandoned and
// notes the resume in history.jsonl). "Resume as new run" starts a new run folder from the
// checkpoint's weights and trainer state: run_name=NEW, trainer.save_folder="" (so ROOT/NEW),
// trainer.load_path=CKPT, trainer.load_strategy=always, and a parent.json in ROOT/NEW.
//
// The user may edit the config first. Compared with the checkpoint's config.json, changes are
//   Unsafe  (model.*, dataset.sequence_length, train_module.max_sequence_length): refused, as the
//           engine would refuse them, with the same message;
//   Changed (anything else, e.g. the learning rate or the schedule): allowed; they change what the
//           run means and the engine records them in history.jsonl;
//   Ignored (where the run lives and how it is launched: trainer.save_folder, trainer.load_*,
//           trainer.hard_stop, launch.*, run_name).
#pragma once

#include "engine/config/diff.h"
#include "engine/config/io.h"
#include "ui/checkpoints/checkpoint_info.h"
#include "ui/util/engine_launch.h"

#include <QString>
#include <QVector>

#include <optional>
#include <vector>

namespace lathe::ui {

using Json = lathe::config::Json;

class ResumePlan {
public:
    enum class Mode { SameRun, NewRun };

    struct Launch {
        Json config;         ///< what the engine gets (RunController::start() writes it)
        RunOptions options;  ///< ranks, --runs-dir, --resume-from
        QString runDir;      ///< where the resumed run writes
        Mode mode = Mode::SameRun;
    };

    /// Reads the checkpoint (its config.json, else its run's; train/rank0.json for the step;
    /// .metadata.json for the world size). nullopt with `error` when it cannot resume.
    static std::optional<ResumePlan> fromCheckpoint(const QString& checkpointDir,
                                                    QString* error = nullptr);
    /// The same for a checkpoint of a remote folder (s3://), as the engine listed it, of the run
    /// in the local folder `runDir` (whose config.json is the base). Resuming the same run keeps
    /// the remote save folder.
    static std::optional<ResumePlan> fromRemoteCheckpoint(const CheckpointInfo& info,
                                                          const QString& runDir,
                                                          QString* error = nullptr);

    /// "<run>-from-step<N>", with "-2", "-3"... when taken.
    static QString suggestNewRunName(const QString& runsRoot, const QString& runName, qint64 step);

    const Json& baseConfig() const { return base_; }
    QString checkpointDir() const { return checkpointDir_; }
    QString runDir() const { return runDir_; }
    QString runName() const { return runName_; }
    QString runsRoot() const { return runsRoot_; }
    qint64 step() const { return step_; }
    qint64 tokens() const { return tokens_; }
    /// The world size the run last had (its status.json, else the checkpoint's).
    int worldSize() const { return worldSize_; }

    /// Every difference between the checkpoint's config and `edited`, classified.
    std::vector<config::ConfigDifference> changes(const Json& edited) const;
    /// Empty when `edited` may resume from this checkpoint; else why not (the engine's words).
    QString refusal(const Json& edited) const;
    /// What to start. Refused configs, a bad or taken new run name, and a failure to create the
    /// new run's folder or parent.json give nullopt with `error`. NewRun creates ROOT/NEW and
    /// writes parent.json ({"parent_run", "parent_step", "checkpoint", "parent_dir"}).
    std::optional<Launch> prepareLaunch(const Json& edited, Mode mode, const QString& newRunName,
                                        int ranks, QString* error = nullptr) const;

private:
    Json base_;
    QString checkpointDir_, runDir_, runName_, runsRoot_;
    QString remoteFolder_;  ///< the run's remote save folder; empty for a local run
    qint64 step_ = 0;
    qint64 tokens_ = -1;
    int worldSize_ = 1;
};

}  // namespace lathe::ui
