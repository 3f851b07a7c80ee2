// manifest.json: what `lathe-engine prepare-data` made, for training (dataset.paths=[DIR]), the
// GUI and people. The token files themselves are OLMo-core's: headerless little-endian
// uint16/uint32 arrays (part-NNNNN.npy), documents separated by the tokenizer's EOS, which
// NumpyFSLDataset memory-maps as they are; chat data and padded or packed instances add label
// masks (label-mask-NNNNN.npy, one byte per token: OLMo-core's label_mask_paths). docs/data.md
// describes every field.
//
// The record is described once, by visit(): prepare-data writes it, the data pipeline and the
// CLI read it, so a field cannot be named one way on one side and another on the other. Torch-free
// and small (lathe_token_files), so the data pipeline reads token folders without linking the
// preparation (chat templates, compression).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::token_files {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kManifestFormat = "lathe-token-files";
inline constexpr int kManifestVersion = 1;

/// One token file and its label mask.
struct Shard {
    std::string file;  ///< relative to the folder
    int64_t tokens = 0;
    int64_t documents = 0;
    std::optional<std::string> label_mask;  ///< its mask file (one byte per token), relative

    template <class V>
    void visit(V& v) {
        v("file", file);
        v("tokens", tokens);
        v("documents", documents);
        v("label_mask", label_mask);
    }
};

/// The tokenizer the folder was made with, and the copy it keeps.
struct TokenizerInfo {
    std::string id;    ///< fnv1a64 of the tokenizer file
    std::string file;  ///< the copy in the folder ("tokenizer.json" or ".model")
    std::string source;
    std::string kind;
    int64_t vocab_size = 0;
    int64_t padded_vocab_size = 0;
    std::optional<int64_t> bos_id, eos_id;

    template <class V>
    void visit(V& v) {
        v("id", id);
        v("file", file);
        v("source", source);
        v("kind", kind);
        v("vocab_size", vocab_size);
        v("padded_vocab_size", padded_vocab_size);
        v("bos_id", bos_id);
        v("eos_id", eos_id);
    }
};

/// An input file.
struct SourceFile {
    std::string path;
    int64_t bytes = 0;
    int64_t documents = 0;

    template <class V>
    void visit(V& v) {
        v("path", path);
        v("bytes", bytes);
        v("documents", documents);
    }
};

/// A place in an input file where invalid UTF-8 was replaced.
struct Utf8Place {
    std::string file;
    int64_t offset = 0;

    template <class V>
    void visit(V& v) {
        v("file", file);
        v("offset", offset);
    }
};

struct InvalidUtf8 {
    int64_t count = 0;
    std::vector<Utf8Place> first;  ///< the first places

    template <class V>
    void visit(V& v) {
        v("count", count);
        v("first", first);
    }
};

/// Chat data: the template it was rendered with and what the loss is taken on.
struct ChatInfo {
    std::string template_origin;  ///< where the template came from
    std::string template_id;
    std::string train_on;  ///< "assistant" or "all"
    /// Its copy in the folder (beside the tokenizer copy, with the special tokens in
    /// tokenizer_config.json); empty in folders prepared before the template travelled.
    std::string file;
    /// The template variables it was rendered with (--template-arg).
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    /// Lines left out because their assistant turns could not be told apart (--unmaskable
    /// skip), and the first few of them ("file:line: why").
    int64_t skipped_lines = 0;
    std::vector<std::string> skipped;

    template <class V>
    void visit(V& v) {
        v("template", template_origin);
        v("template_id", template_id);
        v("train_on", train_on);
        v("file", file);
        v("kwargs", kwargs);
        v("skipped_lines", skipped_lines);
        v("skipped", skipped);
    }
};

struct Manifest {
    std::string format = kManifestFormat;
    int64_t version = kManifestVersion;
    std::string created_by = "lathe-engine prepare-data";
    TokenizerInfo tokenizer;
    std::string dtype;  ///< "uint16" or "uint32"
    int64_t eos_id = 0;
    bool bos_prepended = false;
    int64_t tokens = 0, documents = 0, text_bytes = 0;
    std::vector<Shard> shards;
    std::vector<SourceFile> sources;
    InvalidUtf8 invalid_utf8;
    bool label_masks = false;
    /// What the folder was made with; a rerun with other settings is refused, naming them.
    nlohmann::ordered_json settings = nlohmann::ordered_json::object();
    std::optional<ChatInfo> chat;
    /// Padded or packed instances ({"kind", "sequence_length", ...}); absent: documents back
    /// to back.
    std::optional<nlohmann::ordered_json> instances;
    std::optional<int64_t> trained_tokens;  ///< with label masks: the mask files' ones

    /// Where it was read from (not written).
    std::string folder;

    template <class V>
    void visit(V& v) {
        v("format", format);
        v("version", version);
        v("created_by", created_by);
        v("tokenizer", tokenizer);
        v("dtype", dtype);
        v("eos_id", eos_id);
        v("bos_prepended", bos_prepended);
        v("tokens", tokens);
        v("documents", documents);
        v("text_bytes", text_bytes);
        v("shards", shards);
        v("sources", sources);
        v("invalid_utf8", invalid_utf8);
        v("label_masks", label_masks);
        v("settings", settings);
        v("chat", chat);
        v("instances", instances);
        v("trained_tokens", trained_tokens);
    }

    int element_size() const { return dtype == "uint16" ? 2 : 4; }
    /// Padded or packed instances: their length (dataset.sequence_length must equal it); 0 when
    /// the documents are back to back.
    int64_t instance_length() const;
    std::string shard_path(const Shard& s) const;
    /// The shard's label-mask file; empty when the folder has none.
    std::string mask_path(const Shard& s) const;
};

/// The manifest as prepare-data writes it (every field in order, absent optionals left out).
nlohmann::ordered_json manifest_json(const Manifest& m);

/// Whether `path` is a folder with a manifest.json, or a manifest.json itself.
bool has_manifest(const std::string& path);

/// Reads and checks `path`'s manifest (a folder or the manifest file): the format and version,
/// every field present with its type, shard names inside the folder, and that every shard exists
/// with tokens x element size bytes (and its label mask, when it has one, with one byte per
/// token). Throws lathe::Error "`file`: reason".
Manifest read_manifest(const std::string& path);

}  // namespace lathe::token_files
