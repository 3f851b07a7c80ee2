// Running a training job in this process (a worker rank): shared by `train`, `worker` and `bench`.
#pragma once

#include "engine/config/config.h"

#include <functional>
#include <string>

namespace lathe::train {
class Trainer;
}

namespace lathe::cli {

struct RunOptions {
    std::string control_socket;  ///< GUI control channel; empty without a GUI
    std::string runs_dir;        ///< overrides the default runs folder
    /// Continue from exactly this checkpoint: newer checkpoints of the run are set aside as
    /// abandoned (step{N}.abandoned) and the resume is noted in the run's history.jsonl.
    std::string resume_from;
    bool bench = false;  ///< no files, no callbacks: measure only
    /// Start even when the memory estimate's peak exceeds the device's free memory (--force).
    bool force = false;
    /// Called after the trainer is assembled, before fit() (bench adds its callback here).
    std::function<void(train::Trainer&)> customize;
};

/// trainer.save_folder, or <runs dir>/<run_name> when it is empty (the runs dir: `runs_dir`, else
/// run_folder::default_runs_root()).
std::string resolve_save_folder(const config::ExperimentConfig& cfg, const std::string& runs_dir);

/// Trains in this process as one rank of the job. Returns an exit code (see cli.h).
int run_worker(config::ExperimentConfig cfg, const RunOptions& opts);

}  // namespace lathe::cli
