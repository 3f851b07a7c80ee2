// manifest.json: what `lathe-engine prepare-data` made, for training (dataset.paths=[DIR]), the GUI
// and people. The token files themselves are OLMo-core's: headerless little-endian uint16/uint32
// arrays (part-NNNNN.npy), documents separated by the tokenizer's EOS, which NumpyFSLDataset
// memory-maps as they are; chat data and padded or packed instances add label masks
// (label-mask-NNNNN.npy, one byte per token: OLMo-core's label_mask_paths). docs/data.md
// describes every field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::prepare {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kManifestFormat = "lathe-token-files";
inline constexpr int kManifestVersion = 1;

struct Shard {
    std::string file;  ///< relative to the folder
    int64_t tokens = 0;
    int64_t documents = 0;
    std::string label_mask;  ///< its label-mask file (one byte per token), relative; or empty
};

struct Manifest {
    std::string folder;          ///< where it was read from
    std::string dtype;           ///< "uint16" or "uint32"
    std::string tokenizer_id;    ///< fnv1a64 of the tokenizer file
    std::string tokenizer_file;  ///< the copy in the folder ("tokenizer.json" or ".model")
    int64_t vocab_size = 0;
    int64_t eos_id = 0;
    std::vector<Shard> shards;
    /// Padded or packed instances: their length (dataset.sequence_length must equal it); 0 when
    /// the documents are back to back.
    int64_t instance_length = 0;
    nlohmann::json json;  ///< everything, as written

    int element_size() const { return dtype == "uint16" ? 2 : 4; }
    int64_t tokens() const;
    std::string shard_path(const Shard& s) const;
    /// The shard's label-mask file; empty when the folder has none.
    std::string mask_path(const Shard& s) const;
};

/// Whether `path` is a folder with a manifest.json, or a manifest.json itself.
bool has_manifest(const std::string& path);

/// Reads and checks `path`'s manifest (a folder or the manifest file): the format and version, the
/// fields, and that every shard exists with tokens x element size bytes (and its label mask, when
/// it has one, with one byte per token). Throws lathe::Error
/// "`file`: reason".
Manifest read_manifest(const std::string& path);

}  // namespace lathe::prepare
