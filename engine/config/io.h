// Reading, writing, checking and overriding ExperimentConfig documents (JSON and YAML).
#pragma once

#include "engine/config/config.h"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace lathe::config {

using Json = nlohmann::ordered_json;

/// One problem with a config: where (a JSON path such as "trainer.max_duration.unit", or a file
/// position such as "run.yaml:3:7") and why.
struct Issue {
    std::string path;
    std::string message;
    std::string to_string() const { return path.empty() ? message : path + ": " + message; }
    bool operator==(const Issue& o) const { return path == o.path && message == o.message; }
};

/// Thrown by the convenience loaders when a config has issues; what() lists them one a line.
class ConfigError : public std::runtime_error {
public:
    explicit ConfigError(std::vector<Issue> issues);
    const std::vector<Issue>& issues() const { return issues_; }

private:
    std::vector<Issue> issues_;
};

enum class Format { json, yaml };
Format format_for_path(const std::string& path);

/// Limits on a config document, so that bad input (a file nested 100,000 deep, a YAML alias bomb,
/// a multi-gigabyte file) is refused with an issue instead of exhausting the stack or the memory.
/// A real config is a few kilobytes, about 5 levels deep, with a few hundred values; each value
/// costs about 2 us from text to config, so 100,000 values (an alias bomb's worth) load in 0.2 s.
inline constexpr std::size_t kMaxDocumentBytes = std::size_t{4} << 20;  // 4 MiB
inline constexpr int kMaxDocumentDepth = 256;                           // nested arrays and maps
inline constexpr std::size_t kMaxDocumentValues = 100000;  // YAML, counting each use of an alias

/// Parses JSON or YAML text into a document; a syntax error becomes an issue "origin:line:col:
/// ...", as does a document beyond the limits above or a YAML mapping with a key twice.
Json parse_document(const std::string& text, Format format, const std::string& origin,
                    std::vector<Issue>& issues);
std::string dump_document(const Json& doc, Format format);

/// The canonical document of a config: every field, in declaration order.
Json to_json(const ExperimentConfig& config);

/// Reads a document into a config, collecting every unknown key, wrong type, out-of-range number
/// and bad enum value as an issue. Fields that are absent keep their defaults.
ExperimentConfig from_json(const Json& doc, std::vector<Issue>& issues);

/// Checks between fields (batch divisibility, head sizes, data paths...).
std::vector<Issue> check_consistency(const ExperimentConfig& config);

/// Applies "a.b.c=value" (or "--a.b.c=value", or "--a.b.c" meaning true) to a document. Values are
/// read as YAML scalars or flow collections, so 3, 1e-3, true, null, "{value: 5, unit: steps}"
/// work.
std::vector<Issue> apply_overrides(Json& doc, const std::vector<std::string>& overrides);

/// JSON Schema (draft 2020-12) of ExperimentConfig: type, description, default, bounds and enum
/// values of every field. Extra keys: "x-lathe-format" (path, glob, duration).
Json json_schema();

/// Built-in presets (resources/presets), embedded into the library.
const std::vector<std::string>& preset_names();
std::optional<std::string> preset_text(const std::string& name);
inline constexpr const char* kDefaultPreset = "tiny";

/// A config assembled from a file or a preset name plus overrides, with every issue found.
struct Loaded {
    ExperimentConfig config;
    Json document;  ///< the merged document before defaults were filled in
    std::vector<Issue> issues;
    std::string origin;  ///< the file path, or "preset:<name>"
    bool ok() const { return issues.empty(); }
};

/// `spec` is a JSON/YAML file, or a preset name; empty means kDefaultPreset. Never throws for bad
/// input: problems are in Loaded::issues.
Loaded load(const std::string& spec, const std::vector<std::string>& overrides = {});

/// Like load() but from a document; used by the GUI's editor on every keystroke.
Loaded load_document(const Json& doc, const std::string& origin = "editor");

/// load() that throws ConfigError when there are issues.
ExperimentConfig load_or_throw(const std::string& spec,
                               const std::vector<std::string>& overrides = {});

/// Lathe's version, git revision.
const char* version();
const char* git_revision();

}  // namespace lathe::config
