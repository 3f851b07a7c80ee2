// Engine logging. Messages are formatted with fmt (the copy LibTorch ships, header-only) and
// written through spdlog, which lives in its own small library (lathe_log) because Debian's spdlog
// is built against a different fmt than LibTorch's headers carry.
#pragma once

#include <fmt/format.h>

#include <string>

namespace lathe::log {

enum class Level { debug, info, warn, error };

/// Sets the pattern ("... [rank N] ...") and console level for this process; optional log file.
/// Ranks filtered out by LOG_FILTER_TYPE only show warnings and errors on the console.
void setup(int rank, bool verbose_rank, const std::string& file = "");
void write(Level level, const std::string& message);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace lathe::log
