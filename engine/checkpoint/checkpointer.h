// Checkpointer: OLMo-core's layout and semantics with Lathe's own files.
//
//   save_folder/step{N}/            written as step{N}-tmp/ and renamed when complete
//     train/rank{K}.json            per-rank trainer state (step, tokens, epoch, data loader, RNG, callbacks)
//     model_and_optim/rank0.lathe   model and optimizer tensors (tensor_file.h; rank 0 under DDP)
//     config.json                   the resolved config (config_saver)
//     .metadata.json                written last, before the rename: a checkpoint counts only
//                                   once it exists, and a step{N}/ always has it
//
// Saves can be asynchronous: the state is copied on the training thread, then written by a
// background thread; an error there surfaces at the next check with the file named.
//
// A remote save folder (s3://) has no renames: each rank writes its files into a local staging
// folder, uploads them straight to step{N}/ and removes them; once every rank has succeeded, rank
// 0 uploads .metadata.json. A remote step{N}/ without it is an upload that did not finish. Loads
// download the files a rank needs into the staging folder and read them there.
#pragma once

#include "engine/distributed/env.h"
#include "engine/protocol/cli_output.h"
#include "engine/remote/storage.h"
#include "engine/run_folder/records.h"
#include "engine/stateful/stateful.h"
#include "engine/util/error.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace lathe::checkpoint {

struct CheckpointInfo {
    int64_t step = 0;
    std::string path;
    bool complete = false;
    bool ephemeral = false;
    std::string problem;  ///< why it is not complete ("no .metadata.json", ...); empty if it is
};

/// The checkpoint itself is damaged or contradicts itself (a file missing, truncated, failing its
/// checksum, not parseable, or a train state for another step than its folder's). Unlike a
/// checkpoint that does not fit the config (another model shape), no config change can make it
/// load: the trainer sets it aside as step{N}.unusable[K] and falls back to an older one.
class UnusableCheckpointError : public Error {
public:
    using Error::Error;
};

class Checkpointer {
public:
    /// `storage` replaces LocalStorage for local paths (tests); remote paths use storage_for().
    Checkpointer(dist::Environment& env, bool save_overwrite,
                 std::unique_ptr<remote::Storage> storage = nullptr);
    ~Checkpointer();
    /// A local folder for staging uploads and downloads of remote checkpoints (default: a folder
    /// under the system's temporary folder).
    void set_staging_dir(const std::string& dir) { staging_dir_ = dir; }

    /// Saves `state` (its tensors and its JSON state) to `dir`. With async, returns once the state
    /// is copied; `on_done(seconds)` runs on the background thread after the checkpoint is
    /// complete.
    void save(const std::string& dir, stateful::Stateful& state, bool ephemeral, bool async,
              const std::vector<std::pair<std::string, std::string>>& extra_files = {},
              const std::function<void(double)>& on_done = {});
    /// Waits for an async save; rethrows its error.
    void wait();
    /// Rethrows the error of a finished async save; true when none is pending.
    bool poll();
    bool pending() const { return writer_.joinable(); }

    /// Loads `dir` into `state`: its tensors, and its JSON state when `load_trainer_state`. Reads
    /// every file before changing anything, so a failed read leaves `state` as it was. Throws
    /// UnusableCheckpointError when the checkpoint's files are damaged or contradict each other,
    /// lathe::Error when they are fine but do not fit `state`.
    void load(const std::string& dir, stateful::Stateful& state, bool load_trainer_state,
              bool load_optim_state);

    static bool dir_is_checkpoint(const std::string& dir);
    /// Every step{N} folder of `dir`, complete or not (and step{N}-tmp leftovers), by step.
    static std::vector<CheckpointInfo> find_checkpoints(const std::string& dir);
    /// Complete checkpoints only, newest last.
    static std::vector<CheckpointInfo> complete_checkpoints(const std::string& dir);
    /// Removes step{N}-tmp folders: saves that were interrupted before their rename (rank 0).
    /// Nothing else is ever deleted for being incomplete; see set_aside_unusable().
    std::vector<std::string> clean_partial(const std::string& dir);
    /// Renames the checkpoint `dir` to step{N}.unusable[K] and writes unusable.json into it with
    /// `reason` (rank 0; others return an empty record). Returns what it wrote, for history.jsonl.
    run_folder::UnusableCheckpoint set_aside_unusable(const std::string& dir,
                                                      const std::string& reason);
    /// Deletes a checkpoint: metadata first, so it stops counting before its files go.
    void remove(const std::string& dir);
    /// The storage of `path`: the local one, or that of its remote scheme.
    remote::Storage& storage_of(const std::string& path);

private:
    struct Staged {
        std::vector<std::pair<std::string, torch::Tensor>> tensors;
        std::string trainer_state;
        std::vector<std::pair<std::string, std::string>> extra_files;  // written by rank 0
        std::string dir;
        bool ephemeral = false;
    };
    void write(const Staged& s);
    void write_remote(const Staged& s, remote::Storage& remote);
    std::string staging_dir() const;

    dist::Environment& env_;
    bool save_overwrite_;
    std::unique_ptr<remote::Storage> storage_;
    std::unique_ptr<remote::Storage> remote_;
    std::string remote_scheme_;
    std::string staging_dir_;
    std::thread writer_;
    std::atomic<bool> writer_done_{false};
    std::exception_ptr writer_error_;
};

/// Summary of a checkpoint folder for `lathe-engine inspect`. With `verify`, also reads every file
/// in full: the JSON files parse, each train/rank{K}.json is for the folder's step, and every
/// tensor matches its CRC-32C (verified, or not with `problems` naming file and tensor). Without
/// it, `verified` is false and `verification` says it was not done.
protocol::CheckpointInspection inspect_checkpoint(const std::string& dir, bool verify = false);

}  // namespace lathe::checkpoint
