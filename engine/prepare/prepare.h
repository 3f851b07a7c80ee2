// prepare-data: text in, OLMo-core token files out. Documents (documents.h) are tokenized on every
// core, in order, each followed by the tokenizer's EOS, and written to shards part-NNNNN.npy of at
// most `shard_bytes` (documents never cross shards), with manifest.json (engine/token_files/manifest.h) last.
// Conversations (ChatOptions) are rendered with the chat template first, and written with label
// masks (label-mask-NNNNN.npy, OLMo-core's label_mask_paths format: one byte per token); padded
// or packed instances (Instances) get masks too, which mask out their padding.
//
// Interruptible and resumable: a finished shard is renamed into place and recorded in
// .prepare-state.json; after an interrupt the same command keeps those shards, redoes the partial
// one and gives the same files as an uninterrupted run.
#pragma once

#include "engine/prepare/documents.h"
#include "engine/token_files/manifest.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lathe::prepare {

inline constexpr const char* kStateFile = ".prepare-state.json";

struct Progress {
    uint64_t bytes_done = 0, bytes_total = 0;  ///< of the source files on disk
    uint64_t text_bytes = 0;                   ///< decompressed text read
    int64_t tokens = 0, documents = 0, shards = 0;
    double seconds = 0;
    int64_t resumed_shards = 0;
};

/// How documents become training instances. stream: back to back (NumpyFSLDataset cuts them);
/// padded: each document in instances of its own, cut into sequence_length pieces and padded
/// (NumpyPaddedFSLDataset); packed: whole documents packed best-fit-decreasing into instances
/// (NumpyPackedFSLDataset, long documents truncated), padded. Padding is masked out.
enum class Instances { stream, padded, packed };

/// Chat input: JSONL lines whose `messages` are rendered with the model's chat template.
struct ChatOptions {
    std::string template_path;  ///< empty: the template beside the tokenizer (chat/template.h)
    bool train_on_all = false;  ///< train on every token, not just the assistant's turns
    /// Template variables (`--template-arg NAME=VALUE`, chat::add_template_arg).
    nlohmann::ordered_json template_args = nlohmann::ordered_json::object();
    /// A line whose assistant turns cannot be told apart (chat::Unmaskable): false stops the run
    /// naming it, true leaves it out and counts it (the manifest's chat.skipped_lines).
    bool skip_unmaskable = false;
};

struct PrepareOptions {
    std::vector<std::string> paths;
    std::string tokenizer;  ///< a tokenizer file (tokenizer/tokenizer.h)
    std::string out;        ///< the output folder
    std::string field = "text";
    uint64_t shard_bytes = 1000000000ULL;
    std::optional<std::string> dtype;  ///< "uint16"/"uint32"; default: the smallest that fits
    bool add_bos = false;              ///< also put the tokenizer's BOS before each document
    std::optional<int64_t> eos_id;     ///< default: the tokenizer's EOS
    std::optional<ChatOptions> chat;   ///< conversations in; token files plus label masks out
    Instances instances = Instances::stream;
    int64_t sequence_length = 0;    ///< for padded and packed instances
    std::optional<int64_t> pad_id;  ///< default: the tokenizer's pad token, else its EOS
    int threads = 0;                ///< 0: every core
    std::function<void(const Progress&)> on_progress;  ///< about twice a second, and at the end
    std::function<void(const Utf8Problem&)> on_problem;
    const std::atomic<bool>* cancel = nullptr;
};

/// Thrown when `cancel` was set: finished shards are kept for a resume.
struct Cancelled {
    int64_t kept_shards = 0;
};

/// Runs prepare-data and returns the manifest written (token_files::manifest_json() is its file). Throws lathe::Error for bad input (no
/// input, unreadable files, not a tokenizer, a vocabulary the dtype cannot hold, an output folder
/// that holds something else) and Cancelled when interrupted.
token_files::Manifest prepare_data(const PrepareOptions& options);

}  // namespace lathe::prepare
