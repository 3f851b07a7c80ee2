// prepare-data: text in, OLMo-core token files out. Documents (documents.h) are tokenized on every
// core, in order, each followed by the tokenizer's EOS, and written to shards part-NNNNN.npy of at
// most `shard_bytes` (documents never cross shards), with manifest.json (manifest.h) last.
//
// Interruptible and resumable: a finished shard is renamed into place and recorded in
// .prepare-state.json; after an interrupt the same command keeps those shards, redoes the partial
// one and gives the same files as an uninterrupted run.
#pragma once

#include "engine/prepare/documents.h"

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

struct PrepareOptions {
    std::vector<std::string> paths;
    std::string tokenizer;  ///< a tokenizer file (tokenizer/tokenizer.h)
    std::string out;        ///< the output folder
    std::string field = "text";
    uint64_t shard_bytes = 1000000000ULL;
    std::optional<std::string> dtype;  ///< "uint16"/"uint32"; default: the smallest that fits
    bool add_bos = false;              ///< also put the tokenizer's BOS before each document
    std::optional<int64_t> eos_id;     ///< default: the tokenizer's EOS
    int threads = 0;                   ///< 0: every core
    std::function<void(const Progress&)> on_progress;  ///< about twice a second, and at the end
    std::function<void(const Utf8Problem&)> on_problem;
    const std::atomic<bool>* cancel = nullptr;
};

/// Thrown when `cancel` was set: finished shards are kept for a resume.
struct Cancelled {
    int64_t kept_shards = 0;
};

/// Runs prepare-data and returns the manifest written. Throws lathe::Error for bad input (no
/// input, unreadable files, not a tokenizer, a vocabulary the dtype cannot hold, an output folder
/// that holds something else) and Cancelled when interrupted.
nlohmann::json prepare_data(const PrepareOptions& options);

}  // namespace lathe::prepare
