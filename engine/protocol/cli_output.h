// What the one-shot `lathe-engine` subcommands print for the workbench (and for scripts), each
// message described once by its visit() field list: engine/cli writes them with
// record_json::to_message() and the GUI reads them with read_output(), which refuses a line that
// lacks a field or has one of another type, naming it. docs/protocol.md lists them.
//
//   prepare-data --progress json   one event a line: PrepareProgress, PrepareInvalidUtf8,
//                                  PrepareInterrupted, PrepareDone ("event" tells which)
//   dataset --plan                 MixturePlan
//   generate --json                Generation, one a line, then GenerationSummaryLine
//   inspect PATH [--verify]        CheckpointInspection (one checkpoint) or CheckpointListing
//                                  (a run folder or a remote checkpoint folder)
//   export                         ExportResult
//   import                         ImportResult
//   runs --json                    RunRow, one a line
//   notes RUN_DIR                  run_folder::RunNotes (the run folder's own record)
#pragma once

#include "engine/util/record_json.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::protocol {

// ---- prepare-data --progress json ----------------------------------------------------------------

/// Where a preparation stands; about once a second.
struct PrepareProgress {
    static constexpr const char* kEvent = "progress";
    std::string event = kEvent;
    int64_t bytes_done = 0, bytes_total = 0, text_bytes = 0;
    int64_t tokens = 0, documents = 0, shards = 0;
    double seconds = 0, mb_per_s = 0;
    double eta_s = -1;  ///< -1: not known yet

    template <class V>
    void visit(V& v) {
        v("event", event);
        v("bytes_done", bytes_done);
        v("bytes_total", bytes_total);
        v("text_bytes", text_bytes);
        v("tokens", tokens);
        v("documents", documents);
        v("shards", shards);
        v("seconds", seconds);
        v("mb_per_s", mb_per_s);
        v("eta_s", eta_s);
    }
};

/// Invalid UTF-8 in one input file (replaced): how many places, and the first.
struct PrepareInvalidUtf8 {
    static constexpr const char* kEvent = "invalid_utf8";
    std::string event = kEvent;
    std::string file;
    int64_t offset = 0, count = 0;

    template <class V>
    void visit(V& v) {
        v("event", event);
        v("file", file);
        v("offset", offset);
        v("count", count);
    }
};

/// Stopped by a signal; the finished shards stay for a resume.
struct PrepareInterrupted {
    static constexpr const char* kEvent = "interrupted";
    std::string event = kEvent;
    int64_t kept_shards = 0;

    template <class V>
    void visit(V& v) {
        v("event", event);
        v("kept_shards", kept_shards);
    }
};

/// Finished: what the config should point at.
struct PrepareDone {
    static constexpr const char* kEvent = "done";
    std::string event = kEvent;
    std::string folder;     ///< absolute
    std::string tokenizer;  ///< the tokenizer's copy in the folder
    std::string dtype;      ///< uint16 or uint32
    int64_t tokens = 0, documents = 0, shards = 0;
    std::optional<int64_t> trained_tokens;  ///< with label masks: the tokens the loss is taken on
    int64_t padded_vocab_size = 0;

    template <class V>
    void visit(V& v) {
        v("event", event);
        v("folder", folder);
        v("tokenizer", tokenizer);
        v("dtype", dtype);
        v("tokens", tokens);
        v("documents", documents);
        v("shards", shards);
        v("trained_tokens", trained_tokens);
        v("padded_vocab_size", padded_vocab_size);
    }
};

// ---- dataset --plan ------------------------------------------------------------------------------

/// One mixture source: what it holds, needs and may give.
struct MixtureSourcePlanOutput {
    std::string name;
    int64_t available_tokens = 0, needed_tokens = 0, allowed_tokens = 0;
    double repetitions = 0;  ///< needed over usable tokens; null (NaN) when it has none
    double max_repetition_ratio = 1;
    bool fits = false;

    template <class V>
    void visit(V& v) {
        v("name", name);
        v("available_tokens", available_tokens);
        v("needed_tokens", needed_tokens);
        v("allowed_tokens", allowed_tokens);
        v("repetitions", repetitions);
        v("max_repetition_ratio", max_repetition_ratio);
        v("fits", fits);
    }
};

/// A mixture's sources before it is built.
struct MixturePlan {
    int64_t requested_tokens = 0;
    double ratio_sum = 0;
    std::vector<MixtureSourcePlanOutput> sources;

    template <class V>
    void visit(V& v) {
        v("requested_tokens", requested_tokens);
        v("ratio_sum", ratio_sum);
        v("sources", sources);
    }
};

// ---- generate --json -----------------------------------------------------------------------------

/// One generation. The text fields are there when the model has a tokenizer.
struct Generation {
    std::vector<int64_t> prompt_ids, ids;
    std::vector<double> logprobs;
    std::string finish_reason;  ///< "length", "stop_id" ...
    std::optional<std::string> prompt, text;
    /// The text without the stop token that ended it (an end-of-turn or EOS): a chat reply.
    std::optional<std::string> reply;
    /// --logits: the training forward's logits at every prompt position, (T, vocab).
    std::optional<std::vector<std::vector<double>>> logits;

    template <class V>
    void visit(V& v) {
        v("prompt_ids", prompt_ids);
        v("ids", ids);
        v("logprobs", logprobs);
        v("finish_reason", finish_reason);
        v("prompt", prompt);
        v("text", text);
        v("reply", reply);
        v("logits", logits);
    }
};

/// The last line of `generate --json`: {"summary": {...}}.
struct GenerationSummary {
    std::string model;
    int64_t prompts = 0, new_tokens = 0;
    double load_seconds = 0, seconds = 0, tokens_per_second = 0;
    bool kv_cache = false;
    std::string device;

    template <class V>
    void visit(V& v) {
        v("model", model);
        v("prompts", prompts);
        v("new_tokens", new_tokens);
        v("load_seconds", load_seconds);
        v("seconds", seconds);
        v("tokens_per_second", tokens_per_second);
        v("kv_cache", kv_cache);
        v("device", device);
    }
};

struct GenerationSummaryLine {
    GenerationSummary summary;

    template <class V>
    void visit(V& v) {
        v("summary", summary);
    }
};

// ---- inspect -------------------------------------------------------------------------------------

/// A file of a checkpoint.
struct CheckpointFile {
    std::string file;  ///< relative to the checkpoint folder
    int64_t bytes = 0;

    template <class V>
    void visit(V& v) {
        v("file", file);
        v("bytes", bytes);
    }
};

/// The run a checkpoint's config.json describes, in a line.
struct CheckpointConfigSummary {
    std::string run_name;
    std::string model;  ///< "64d x 2 layers, vocab 256"
    int64_t sequence_length = 0, global_batch_size = 0;

    template <class V>
    void visit(V& v) {
        v("run_name", run_name);
        v("model", model);
        v("sequence_length", sequence_length);
        v("global_batch_size", global_batch_size);
    }
};

/// One checkpoint, as `inspect` describes it.
struct CheckpointInspection {
    std::string path;
    std::optional<bool> remote;  ///< true for object storage
    bool complete = false;
    std::optional<std::string> problem;  ///< why it is not complete
    bool verified = false;               ///< every tensor's CRC-32C checked (--verify)
    std::optional<std::string> verification;
    std::optional<std::vector<std::string>> problems;  ///< what --verify found
    std::optional<std::string> set_aside_as_unusable;  ///< the reason it was set aside
    std::optional<nlohmann::ordered_json> metadata;    ///< its .metadata.json
    std::optional<std::string> metadata_error;
    std::optional<int64_t> global_step, global_train_tokens_seen, epoch, world_size;
    std::optional<std::string> trainer_state_error;
    std::optional<CheckpointConfigSummary> config;
    std::optional<std::string> config_error;
    /// Left out in a listing of many checkpoints.
    std::optional<std::vector<CheckpointFile>> files;
    int64_t total_bytes = 0;

    template <class V>
    void visit(V& v) {
        v("path", path);
        v("remote", remote);
        v("complete", complete);
        v("problem", problem);
        v("verified", verified);
        v("verification", verification);
        v("problems", problems);
        v("set_aside_as_unusable", set_aside_as_unusable);
        v("metadata", metadata);
        v("metadata_error", metadata_error);
        v("global_step", global_step);
        v("global_train_tokens_seen", global_train_tokens_seen);
        v("epoch", epoch);
        v("world_size", world_size);
        v("trainer_state_error", trainer_state_error);
        v("config", config);
        v("config_error", config_error);
        v("files", files);
        v("total_bytes", total_bytes);
    }
};

/// The checkpoints of a run folder, or of a remote checkpoint folder.
struct CheckpointListing {
    std::optional<std::string> run_folder, checkpoint_folder;
    std::vector<CheckpointInspection> checkpoints;
    std::optional<std::string> problem;  ///< there is none

    template <class V>
    void visit(V& v) {
        v("run_folder", run_folder);
        v("checkpoint_folder", checkpoint_folder);
        v("checkpoints", checkpoints);
        v("problem", problem);
    }
};

// ---- export, import ------------------------------------------------------------------------------

/// A checkpoint written as a Hugging Face model folder.
struct ExportResult {
    std::string exported;  ///< the folder
    std::string from;      ///< the checkpoint
    std::vector<std::string> files;
    int64_t tensors = 0;
    int64_t weight_bytes = 0;
    std::string dtype;
    double seconds = 0;

    template <class V>
    void visit(V& v) {
        v("exported", exported);
        v("from", from);
        v("files", files);
        v("tensors", tensors);
        v("weight_bytes", weight_bytes);
        v("dtype", dtype);
        v("seconds", seconds);
    }
};

/// The shape of an imported model.
struct ImportedModel {
    int64_t d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, hidden_size = 0;

    template <class V>
    void visit(V& v) {
        v("d_model", d_model);
        v("n_layers", n_layers);
        v("n_heads", n_heads);
        v("n_kv_heads", n_kv_heads);
        v("vocab_size", vocab_size);
        v("hidden_size", hidden_size);
    }
};

/// A Hugging Face model folder written as a checkpoint.
struct ImportResult {
    std::string imported;  ///< the checkpoint written
    std::string from;      ///< the Hugging Face folder
    ImportedModel model;

    template <class V>
    void visit(V& v) {
        v("imported", imported);
        v("from", from);
        v("model", model);
    }
};

// ---- runs --json ---------------------------------------------------------------------------------

/// One run folder of a runs root, as `runs --json` lists it.
struct RunRow {
    std::string name, path;
    std::string state;  ///< status.json's state ("interrupted" when its process is gone); "unknown"
    std::string reason;  ///< why it stopped or failed, or why its state is unknown
    std::optional<int64_t> step, max_steps;
    std::optional<std::string> updated_at, model;
    std::optional<double> last_loss;
    std::optional<std::vector<std::string>> tags;  ///< from notes.json
    std::optional<std::string> notes;

    template <class V>
    void visit(V& v) {
        v("name", name);
        v("path", path);
        v("state", state);
        v("reason", reason);
        v("step", step);
        v("max_steps", max_steps);
        v("updated_at", updated_at);
        v("model", model);
        v("last_loss", last_loss);
        v("tags", tags);
        v("notes", notes);
    }
};

/// The "event" of a prepare-data progress line; empty when the line is not a JSON object with one.
std::string output_event(const std::string& line);

/// One message printed by a subcommand, read strictly: throws lathe::Error "`what`: field:
/// reason" when a field is missing or of another type (record_json::from_json_strict).
template <class M>
M read_output(const std::string& text, const std::string& what) {
    return record_json::parse_strict<M>(text, what);
}

/// The message's line as the subcommand prints it (invalid UTF-8 in strings replaced).
template <class M>
std::string write_output(const M& message) {
    return record_json::to_message(message).dump(-1, ' ', false,
                                                 nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace lathe::protocol
