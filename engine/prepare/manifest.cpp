#include "engine/prepare/manifest.h"
#include "engine/util/error.h"

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace lathe::prepare {

int64_t Manifest::tokens() const {
    int64_t n = 0;
    for (const auto& s : shards) n += s.tokens;
    return n;
}

std::string Manifest::shard_path(const Shard& s) const {
    return (fs::path(folder) / s.file).string();
}

std::string Manifest::mask_path(const Shard& s) const {
    return s.label_mask.empty() ? std::string() : (fs::path(folder) / s.label_mask).string();
}

bool has_manifest(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return fs::is_regular_file(fs::path(path) / kManifestFile, ec);
    return fs::path(path).filename() == kManifestFile && fs::is_regular_file(path, ec);
}

Manifest read_manifest(const std::string& path) {
    std::error_code ec;
    const fs::path file =
        fs::is_directory(path, ec) ? fs::path(path) / kManifestFile : fs::path(path);
    const std::string name = file.string();
    std::ifstream in(file);
    if (!in) throw Error(name + ": cannot open");
    Manifest m;
    m.folder = file.parent_path().string();
    try {
        m.json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw Error(name + ": not JSON: " + e.what());
    }
    const auto& j = m.json;
    auto need = [&](const char* key) -> const nlohmann::json& {
        if (!j.is_object() || !j.contains(key))
            throw Error(name + ": no \"" + key + "\" field (not a prepare-data manifest)");
        return j.at(key);
    };
    try {
        if (need("format").get<std::string>() != kManifestFormat)
            throw Error(name + ": format is not " + kManifestFormat);
        const int version = need("version").get<int>();
        if (version != kManifestVersion)
            throw Error(name + ": version " + std::to_string(version) + "; this Lathe reads " +
                        std::to_string(kManifestVersion));
        m.dtype = need("dtype").get<std::string>();
        if (m.dtype != "uint16" && m.dtype != "uint32")
            throw Error(name + ": dtype '" + m.dtype + "' is neither uint16 nor uint32");
        const auto& tok = need("tokenizer");
        m.tokenizer_id = tok.at("id").get<std::string>();
        m.tokenizer_file = tok.at("file").get<std::string>();
        m.vocab_size = tok.at("vocab_size").get<int64_t>();
        m.eos_id = need("eos_id").get<int64_t>();
        for (const auto& s : need("shards")) {
            Shard sh{s.at("file").get<std::string>(), s.at("tokens").get<int64_t>(),
                     s.at("documents").get<int64_t>(), s.value("label_mask", std::string())};
            for (const std::string* f : {&sh.file, &sh.label_mask}) {
                if ((f == &sh.file && f->empty()) || fs::path(*f).is_absolute() ||
                    f->find("..") != std::string::npos)
                    throw Error(name + ": shard file '" + *f + "' must be a name in the folder");
            }
            m.shards.push_back(std::move(sh));
        }
        if (j.contains("instances") && j["instances"].is_object())
            m.instance_length = j["instances"].value("sequence_length", int64_t(0));
    } catch (const nlohmann::json::exception& e) {
        throw Error(name + ": malformed field: " + e.what());
    }
    if (m.shards.empty()) throw Error(name + ": lists no shards");
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
        if (s.label_mask.empty()) continue;
        const std::string mp = m.mask_path(s);
        const auto mask_size = fs::file_size(mp, ec);
        if (ec) throw Error(name + ": label mask " + mp + " is missing");
        if (mask_size != static_cast<uint64_t>(s.tokens))
            throw Error(mp + ": " + std::to_string(mask_size) + " bytes, but its shard " + s.file +
                        " holds " + std::to_string(s.tokens) +
                        " tokens; a label mask has one byte per token");
    }
    return m;
}

}  // namespace lathe::prepare
