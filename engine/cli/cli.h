// lathe-engine subcommands. Each returns the process exit code:
//   0 success, 1 runtime failure, 2 bad config or usage, 130 interrupted by a signal.
#pragma once

#include <string>
#include <vector>

namespace lathe::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInterrupted = 130;

using Args = std::vector<std::string>;

int cmd_schema(const Args& args);
int cmd_validate(const Args& args);
int cmd_config(const Args& args);
int cmd_presets(const Args& args);
int cmd_train(const Args& args);
int cmd_bench(const Args& args);
int cmd_inspect(const Args& args);
int cmd_launch(const Args& args);
int cmd_lr_schedule(const Args& args);
int cmd_export(const Args& args);
int cmd_import(const Args& args);
int cmd_generate(const Args& args);
int cmd_tokenizer(const Args& args);
int cmd_prepare_data(const Args& args);
int cmd_chat(const Args& args);
int cmd_dataset(const Args& args);
int cmd_runs(const Args& args);
int cmd_notes(const Args& args);
int cmd_slurm_script(const Args& args);
int cmd_k8s_manifest(const Args& args);
int cmd_control(const Args& args);

}  // namespace lathe::cli

#include "engine/config/config.h"

namespace lathe::cli {
/// Whether the config's parallel layout (config/layout.h) can run on `world` ranks over `nodes`
/// nodes; otherwise prints its problems, naming the fields, to stderr.
bool layout_runs(const config::ExperimentConfig& cfg, int64_t world, int64_t nodes);

/// `train` with launch.nproc > 1: runs the launcher with the same arguments. `run_folder`: the
/// run's folder, whose status.json the launcher completes when rank 0 dies without a word.
int launch_from_train(const config::ExperimentConfig& cfg, const Args& args,
                      const std::string& command = "train", const std::string& run_folder = "");

/// Splits "CONFIG a.b=c --x.y=z --flag value" into the config spec (first non-override argument)
/// and overrides; options listed in `value_options` consume the next argument and are returned in
/// `options`.
struct ParsedArgs {
    std::string spec;
    std::vector<std::string> overrides;
    std::vector<std::pair<std::string, std::string>> options;
    std::vector<std::string> errors;
    std::string option(const std::string& name, const std::string& fallback = "") const;
    bool has(const std::string& name) const;
};
ParsedArgs parse_args(const Args& args, const std::vector<std::string>& value_options,
                      const std::vector<std::string>& flag_options = {});

/// The config `p` names (spec and overrides), resolved and checked; false after printing
/// "lathe-engine CMD: ..." and every issue to stderr.
bool load_config(const ParsedArgs& p, const char* cmd, config::ExperimentConfig& out);

}  // namespace lathe::cli
