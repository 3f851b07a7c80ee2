#include "engine/config/io.h"
#include "presets_data.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace lathe::config {

const std::vector<std::string>& preset_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto& p : detail::kPresets) n.emplace_back(p.name);
        return n;
    }();
    return names;
}

std::optional<std::string> preset_text(const std::string& name) {
    for (const auto& p : detail::kPresets) {
        if (name == p.name) return std::string(p.text);
    }
    return std::nullopt;
}

Loaded load_document(const Json& doc, const std::string& origin) {
    Loaded r;
    r.origin = origin;
    r.document = doc;
    r.config = from_json(doc, r.issues);
    if (r.issues.empty()) r.issues = check_consistency(r.config);
    return r;
}

namespace {

// Reads at most kMaxDocumentBytes + 1 bytes, so that a huge file (or /dev/zero) is refused
// without being read whole.
bool read_config_file(std::ifstream& f, const std::string& path, std::string& text,
                      std::vector<Issue>& issues) {
    char buf[1 << 16];
    while (text.size() <= kMaxDocumentBytes && (f.read(buf, sizeof buf) || f.gcount() > 0))
        text.append(buf, static_cast<std::size_t>(f.gcount()));
    if (f.bad()) {
        issues.push_back({path, std::string("cannot read: ") + std::strerror(errno)});
        return false;
    }
    if (text.size() > kMaxDocumentBytes) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        issues.push_back(
            {path, "too large (" +
                       (ec ? "over " + std::to_string(kMaxDocumentBytes) : std::to_string(size)) +
                       " bytes): a config is at most " + std::to_string(kMaxDocumentBytes >> 20) +
                       " MiB"});
        return false;
    }
    return true;
}

}  // namespace

Loaded load(const std::string& spec_in, const std::vector<std::string>& overrides) {
    std::string spec = spec_in.empty() ? kDefaultPreset : spec_in;
    Loaded r;
    std::string text;
    Format format = Format::json;
    std::error_code ec;
    // A folder opens as a stream that reads nothing: "unexpected end of input" would say nothing
    // useful. A folder named like a preset (a run folder "tiny") leaves the preset reachable.
    const bool is_folder = std::filesystem::is_directory(spec, ec);
    if (is_folder && !preset_text(spec)) {
        r.issues.push_back({spec, "is a directory, not a config file"});
        return r;
    }
    std::ifstream f;
    if (!is_folder) f.open(spec, std::ios::binary);
    if (f) {
        if (!read_config_file(f, spec, text, r.issues)) return r;
        format = format_for_path(spec);
        r.origin = spec;
    } else if (auto preset = preset_text(spec)) {
        text = *preset;
        r.origin = "preset:" + spec;
    } else {
        int err = errno;
        std::string msg;
        if (spec.find('/') == std::string::npos && spec.find('.') == std::string::npos) {
            std::string known;
            for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
            msg = "no such config file or preset (presets: " + known + ")";
        } else {
            msg = std::string("cannot read: ") + std::strerror(err);
        }
        r.issues.push_back({spec, msg});
        return r;
    }
    Json doc = parse_document(text, format, r.origin, r.issues);
    if (!r.issues.empty()) return r;
    if (!doc.is_object()) {
        r.issues.push_back({r.origin, "the config must be an object at the top level"});
        return r;
    }
    r.issues = apply_overrides(doc, overrides);
    if (!r.issues.empty()) return r;
    Loaded l = load_document(doc, r.origin);
    return l;
}

ExperimentConfig load_or_throw(const std::string& spec, const std::vector<std::string>& overrides) {
    Loaded l = load(spec, overrides);
    if (!l.ok()) throw ConfigError(l.issues);
    return l.config;
}

}  // namespace lathe::config
