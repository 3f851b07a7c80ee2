// Checkpoint folder names inside a run folder, and the files inside a checkpoint.
//
//   step{N}/                  a checkpoint of step N (complete once its .metadata.json exists)
//   step{N}-tmp/              a save in progress, or one that was interrupted
//   step{N}.abandoned[K]/     set aside by a resume from an earlier step (K = 1, 2 ... when the
//                             name is taken)
//   step{N}.unusable[K]/      set aside because it could not be loaded (a corrupted or
//                             interrupted save); unusable.json inside says why
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::run_folder {

/// Inside a checkpoint folder.
inline constexpr const char* kCheckpointMetadataFile = ".metadata.json";
inline constexpr const char* kModelTensorFile = "model_and_optim/rank0.lathe";
/// Inside a step{N}.unusable[K] folder: why it was set aside (records.h, UnusableCheckpoint).
inline constexpr const char* kUnusableReasonFile = "unusable.json";
/// "train/rank{K}.json": rank K's trainer state.
std::string train_state_file(int rank);

struct CheckpointName {
    enum class Kind { Saved, Temporary, Abandoned, Unusable };
    int64_t step = 0;
    Kind kind = Kind::Saved;
};

/// "step{N}".
std::string checkpoint_folder_name(int64_t step);
/// The folder a save writes before renaming it into place: `checkpoint_dir` + "-tmp".
std::string temporary_folder(const std::string& checkpoint_dir);
/// Parses a folder name (not a path); nullopt when it is not a checkpoint's.
std::optional<CheckpointName> parse_checkpoint_name(std::string_view folder_name);

/// The first free name to set `checkpoint_dir` aside under: `checkpoint_dir` + ".abandoned", then
/// ".abandoned1", ".abandoned2" ... `exists` says whether a path is taken.
std::string abandoned_path(const std::string& checkpoint_dir,
                           const std::function<bool(const std::string&)>& exists);
/// The same for a checkpoint set aside as unusable: ".unusable", ".unusable1" ...
std::string unusable_path(const std::string& checkpoint_dir,
                          const std::function<bool(const std::string&)>& exists);

}  // namespace lathe::run_folder
