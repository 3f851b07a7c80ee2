// `--resume-from`: continuing a run from exactly one of its checkpoints.
#pragma once

#include "engine/config/io.h"

#include <string>

namespace lathe::checkpoint {

/// Prepares run folder `folder`, whose checkpoints are in `checkpoint_folder` (the run folder, or
/// a remote one), to continue from the checkpoint `resume_dir` with the config `config` (rank 0,
/// before loading):
///  - refuses (lathe::Error) a checkpoint that is not complete, and a config whose changes the
///    checkpoint cannot take (config::resume_refusal: the model's shape, the sequence length);
///  - sets the run's newer checkpoints aside as step{N}.abandoned[K];
///  - appends a "resumed" line to history.jsonl (run_folder::ResumeEvent) with the config changes,
///    and logs them.
/// Returns the step of the checkpoint.
int64_t prepare_resume(const std::string& folder, const std::string& checkpoint_folder,
                       const std::string& resume_dir, const config::Json& config);

}  // namespace lathe::checkpoint
