#include "engine/run_folder/layout.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace lathe::run_folder {

std::string rank_log_file(int rank) {
    return std::string(kLogsDir) + "/rank" + std::to_string(rank) + ".log";
}

std::string join(const std::string& folder, const std::string& name) {
    if (folder.empty()) return name;
    return folder.back() == '/' ? folder + name : folder + "/" + name;
}

std::string default_runs_root() {
    if (const char* d = std::getenv("LATHE_RUNS_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
        return std::string(x) + "/lathe/runs";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.local/share/lathe/runs";
}

bool is_run_folder(const std::string& dir) {
    std::error_code ec;
    for (const char* f : {kStatusFile, kMetricsJsonlFile})
        if (std::filesystem::exists(join(dir, f), ec)) return true;
    const std::string config = join(dir, kConfigFile);
    if (!std::filesystem::exists(config, ec)) return false;
    // A Hugging Face model folder (an export, an import's source) has a config.json too: its
    // model_type or architectures tell it from a run's config.
    std::ifstream in(config);
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    return !(j.is_object() && (j.contains("model_type") || j.contains("architectures")));
}

}  // namespace lathe::run_folder
