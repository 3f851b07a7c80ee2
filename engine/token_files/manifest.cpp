#include "engine/token_files/manifest.h"

#include "engine/util/error.h"
#include "engine/util/record_json.h"

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace lathe::token_files {

int64_t Manifest::instance_length() const {
    if (!instances || !instances->is_object()) return 0;
    const auto it = instances->find("sequence_length");
    return it != instances->end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::string Manifest::shard_path(const Shard& s) const {
    return (fs::path(folder) / s.file).string();
}

std::string Manifest::mask_path(const Shard& s) const {
    return s.label_mask ? (fs::path(folder) / *s.label_mask).string() : std::string();
}

nlohmann::ordered_json manifest_json(const Manifest& m) {
    return record_json::to_message(m);
}

bool has_manifest(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return fs::is_regular_file(fs::path(path) / kManifestFile, ec);
    return fs::path(path).filename() == kManifestFile && fs::is_regular_file(path, ec);
}

namespace {

// The files a shard names must be names inside the folder.
void check_names(const Manifest& m, const std::string& name) {
    for (const auto& s : m.shards) {
        for (const std::string* f : {&s.file, s.label_mask ? &*s.label_mask : nullptr}) {
            if (!f) continue;
            if ((f == &s.file && f->empty()) || fs::path(*f).is_absolute() ||
                f->find("..") != std::string::npos)
                throw Error(name + ": shard file '" + *f + "' must be a name in the folder");
        }
    }
}

// Every shard (and its mask) is there with the bytes its token count says.
void check_files(const Manifest& m, const std::string& name) {
    std::error_code ec;
    for (const auto& s : m.shards) {
        const std::string p = m.shard_path(s);
        const auto size = fs::file_size(p, ec);
        if (ec) throw Error(name + ": shard " + p + " is missing");
        const uint64_t want =
            static_cast<uint64_t>(s.tokens) * static_cast<uint64_t>(m.element_size());
        if (size != want)
            throw Error(p + ": " + std::to_string(size) + " bytes, but " + name + " says " +
                        std::to_string(s.tokens) + " " + m.dtype + " tokens (" +
                        std::to_string(want) + " bytes)");
        if (!s.label_mask) continue;
        const std::string mp = m.mask_path(s);
        const auto mask_size = fs::file_size(mp, ec);
        if (ec) throw Error(name + ": label mask " + mp + " is missing");
        if (mask_size != static_cast<uint64_t>(s.tokens))
            throw Error(mp + ": " + std::to_string(mask_size) + " bytes, but its shard " + s.file +
                        " holds " + std::to_string(s.tokens) +
                        " tokens; a label mask has one byte per token");
    }
}

}  // namespace

Manifest read_manifest(const std::string& path) {
    std::error_code ec;
    const fs::path file =
        fs::is_directory(path, ec) ? fs::path(path) / kManifestFile : fs::path(path);
    const std::string name = file.string();
    std::ifstream in(file);
    if (!in) throw Error(name + ": cannot open");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw Error(name + ": not JSON: " + e.what());
    }
    // What training needs must be there; the rest may be missing from a folder an older
    // prepare-data made (label_masks, chat and trained_tokens came later), but a field that is
    // there must have its type.
    for (const char* key : {"format", "version", "tokenizer", "dtype", "eos_id", "shards"})
        if (!j.is_object() || !j.contains(key))
            throw Error(name + ": no \"" + key + "\" field (not a prepare-data manifest)");
    if (!j["format"].is_string() || j["format"].get<std::string>() != kManifestFormat)
        throw Error(name + ": format is not " + kManifestFormat);
    if (!j["version"].is_number_integer() || j["version"].get<int64_t>() != kManifestVersion)
        throw Error(name + ": version " + j["version"].dump() + "; this Lathe reads " +
                    std::to_string(kManifestVersion));
    for (const char* key : {"id", "file", "vocab_size"})
        if (!j["tokenizer"].is_object() || !j["tokenizer"].contains(key))
            throw Error(name + ": malformed field: tokenizer." + key + " is missing");
    std::vector<std::string> problems;
    Manifest m = record_json::from_json_lenient<Manifest>(j, &problems);
    if (!problems.empty()) throw Error(name + ": malformed field: " + problems.front());
    m.folder = file.parent_path().string();
    if (m.dtype != "uint16" && m.dtype != "uint32")
        throw Error(name + ": dtype '" + m.dtype + "' is neither uint16 nor uint32");
    check_names(m, name);
    if (m.shards.empty()) throw Error(name + ": lists no shards");
    check_files(m, name);
    return m;
}

}  // namespace lathe::token_files
