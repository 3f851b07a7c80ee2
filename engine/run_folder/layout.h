// The run folder: where every file of a run lives, by name. The engine writes these files and the
// GUI reads them; both take the names from here.
//
//   <runs root>/<run_name>/          the run folder (= trainer.save_folder unless it is set)
//     config.json                    the resolved config (the engine writes it at start)
//     status.json                    state, step, loss ... (run_status.h; rank 0 keeps it current)
//     history.jsonl                  one JSON line per event: resumed from a checkpoint, ...
//     parent.json                    "Resume as new run": the run and step this one started from
//     samples.jsonl                  generated text samples, one JSON line per sample
//     metrics.jsonl, metrics.csv     the metrics of every step (lathe_sinks)
//     events.out.tfevents.*          the same for TensorBoard
//     logs/rank{K}.log               each rank's log
//     token_ranges.json              the largest token of each raw token file, by path, size and
//                                    modification time (data/dataset.h checks them once)
//     step{N}/ ...                   checkpoints (checkpoint_names.h, docs/checkpoint-format.md)
#pragma once

#include <string>

namespace lathe::run_folder {

inline constexpr const char* kConfigFile = "config.json";
/// In a checkpoint (and an exported or imported model folder): the run's tokenizer file, by kind:
/// a Hugging Face tokenizer.json, or a SentencePiece model (tokenizer/tokenizer.h chooses).
inline constexpr const char* kTokenizerFile = "tokenizer.json";
inline constexpr const char* kSentencePieceFile = "tokenizer.model";
inline constexpr const char* kStatusFile = "status.json";
inline constexpr const char* kHistoryFile = "history.jsonl";
inline constexpr const char* kParentFile = "parent.json";
/// The user's tags and notes on the run (records.h, RunNotes); the engine never writes it.
inline constexpr const char* kNotesFile = "notes.json";
inline constexpr const char* kSamplesFile = "samples.jsonl";
inline constexpr const char* kMetricsJsonlFile = "metrics.jsonl";
inline constexpr const char* kMetricsCsvFile = "metrics.csv";
inline constexpr const char* kLogsDir = "logs";
inline constexpr const char* kTokenRangesFile = "token_ranges.json";

/// "logs/rank{K}.log", relative to the run folder.
std::string rank_log_file(int rank);

/// `folder` + "/" + `name`.
std::string join(const std::string& folder, const std::string& name);

/// Where runs live when nothing else says: $LATHE_RUNS_DIR, else $XDG_DATA_HOME/lathe/runs, else
/// ~/.local/share/lathe/runs.
std::string default_runs_root();

/// Whether `dir` looks like a run folder: it has a status.json or metrics.jsonl, or a config.json
/// that is not a Hugging Face model's (no model_type or architectures).
bool is_run_folder(const std::string& dir);

}  // namespace lathe::run_folder
