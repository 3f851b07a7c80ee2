// manifest.json: what `lathe-engine prepare-data` made, for training (dataset.paths=[DIR]), the GUI
// and people. The token files themselves are OLMo-core's: headerless little-endian uint16/uint32
// arrays (part-NNNNN.npy), documents separated by the tokenizer's EOS, which NumpyFSLDataset
// memory-maps as they are. docs/data.md describes every field.
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
};

struct Manifest {
    std::string folder;          ///< where it was read from
    std::string dtype;           ///< "uint16" or "uint32"
    std::string tokenizer_id;    ///< fnv1a64 of the tokenizer file
    std::string tokenizer_file;  ///< the copy in the folder ("tokenizer.json" or ".model")
    int64_t vocab_size = 0;
    int64_t eos_id = 0;
    std::vector<Shard> shards;
    nlohmann::json json;  ///< everything, as written

    int element_size() const { return dtype == "uint16" ? 2 : 4; }
    int64_t tokens() const;
    std::string shard_path(const Shard& s) const;
};

/// Whether `path` is a folder with a manifest.json, or a manifest.json itself.
bool has_manifest(const std::string& path);

/// Reads and checks `path`'s manifest (a folder or the manifest file): the format and version, the
/// fields, and that every shard exists with tokens x element size bytes. Throws lathe::Error
/// "`file`: reason".
Manifest read_manifest(const std::string& path);

}  // namespace lathe::prepare
