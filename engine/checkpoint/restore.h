// Restoring a run when it starts (OLMo-core's Trainer.fit load logic, with Lathe's protections):
// where to look and in what order (the run's own checkpoint folder, then trainer.load_path), what
// a checkpoint that does not load leads to (set aside and the next older one tried, a fallback,
// or a stop), the ranks' agreement on it, and the refusal to start over a run that has trained
// before. The run supplies only how to load what was chosen (RestoreTarget); the Trainer stays a
// composition root.
#pragma once

#include "engine/checkpoint/checkpointer.h"
#include "engine/config/config.h"
#include "engine/distributed/env.h"

#include <optional>
#include <string>
#include <vector>

namespace lathe::checkpoint {

/// What the restorer asks of the run it restores (the Trainer).
class RestoreTarget {
public:
    virtual ~RestoreTarget() = default;
    /// Loads Lathe checkpoint `dir` on this rank: throws UnusableCheckpointError when it is
    /// damaged, another exception when it does not fit the run.
    virtual void load_checkpoint(const std::string& dir, bool trainer_state, bool optim_state) = 0;
    /// Loads the weights of Hugging Face model folder `dir`; trainer and optimizer start fresh.
    virtual void load_hf_model(const std::string& dir) = 0;
    /// What `dir` held is loaded on every rank, `seconds` after the load began.
    virtual void restored(const std::string& dir, double seconds) = 0;
};

/// Where a run's checkpoints are and how its config says to restore.
struct RestoreSettings {
    std::string save_folder;        ///< the run folder (local)
    std::string checkpoint_folder;  ///< its checkpoints: the run folder, or a remote folder
    config::LoadStrategy strategy = config::LoadStrategy::if_available;
    std::optional<std::string> load_path;
    std::optional<bool> load_trainer_state, load_optim_state;
    bool no_checkpoints = false;

    static RestoreSettings of(const config::TrainerConfig& t, std::string save_folder,
                              std::string checkpoint_folder);
};

/// What to do after a checkpoint failed to load, as every rank agreed.
enum class LoadFailure { damaged, does_not_fit };
enum class AfterFailure { set_aside_and_fall_back, fall_back, stop };

/// The rule: a checkpoint that does not fit the run stops it; a damaged one of the run's own
/// folder is set aside (the next older one is tried, and without one the run starts as if it had
/// none); elsewhere (load_path) nothing is moved, and only if_available falls back to an older
/// one.
AfterFailure after_failed_load(LoadFailure failure, bool own_folder, config::LoadStrategy strategy,
                               bool has_next);

/// The checkpoints to try for `dir`, in order: `dir` itself when it is a checkpoint, else the
/// complete checkpoints in it, newest first. Throws lathe::Error for a folder that holds a model
/// but no .metadata.json (an incomplete checkpoint given by hand).
std::vector<std::string> restore_candidates(const std::string& dir);

/// Whether folder `dir` is the run's own checkpoint folder (local or remote).
bool is_own_checkpoint_folder(const std::string& dir, const std::string& checkpoint_folder);

/// Why run folder `folder`, with no checkpoint to load, has trained before: the step its
/// status.json reached, or a checkpoint its history.jsonl names. Empty for a new run.
std::string earlier_progress(const std::string& folder);

/// Sets the damaged checkpoint `dir` of run folder `folder` aside as step{N}.unusable[K], with the
/// reason inside it and in history.jsonl (rank 0). Returns its new name.
std::string set_aside_unusable(Checkpointer& checkpointer, const std::string& folder,
                               const std::string& dir, const std::string& reason);

class Restorer {
public:
    Restorer(Checkpointer& checkpointer, const dist::Environment& env, RestoreSettings settings);

    /// The whole policy at a run's start, unless `already_loaded` (--resume-from did): the run's
    /// own folder tidied (partial saves removed, incomplete ones set aside) and its newest loadable
    /// checkpoint loaded, else load_path; a stop where nothing loads but the run trained before,
    /// or load_strategy is always. Returns whether a checkpoint or model was loaded.
    bool restore(RestoreTarget& target, bool already_loaded);

    /// Loads from `dir`: a Hugging Face model folder, a checkpoint, or a folder of them (newest
    /// loadable first). Returns false when there was none to load.
    bool load_from(RestoreTarget& target, const std::string& dir, std::optional<bool> trainer_state,
                   std::optional<bool> optim_state);

private:
    void tidy_own_folder();
    Checkpointer& checkpointer_;
    const dist::Environment& env_;
    RestoreSettings settings_;
};

}  // namespace lathe::checkpoint
