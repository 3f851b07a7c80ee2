#include "engine/run_folder/layout.h"

#include <cstdlib>
#include <filesystem>

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
    for (const char* f : {kStatusFile, kConfigFile, kMetricsJsonlFile})
        if (std::filesystem::exists(join(dir, f), ec)) return true;
    return false;
}

}  // namespace lathe::run_folder
