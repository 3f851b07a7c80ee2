#include "engine/util/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace lathe::log {

void setup(int rank, bool verbose_rank, const std::string& file) {
    std::vector<spdlog::sink_ptr> sinks;
    auto console = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    console->set_level(verbose_rank ? spdlog::level::info : spdlog::level::warn);
    sinks.push_back(console);
    if (!file.empty()) {
        try {
            auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
            // The file also keeps debug lines (a LibTorch error's backtrace): never the console.
            f->set_level(spdlog::level::debug);
            sinks.push_back(f);
        } catch (const spdlog::spdlog_ex& e) {
            std::fprintf(stderr, "warning: cannot write log file %s: %s\n", file.c_str(), e.what());
        }
    }
    auto logger = std::make_shared<spdlog::logger>("lathe", sinks.begin(), sinks.end());
    // Under the launcher every line is already prefixed with the rank.
    const char* launched = std::getenv("LATHE_LAUNCHED");
    std::string rank_part = (launched && *launched) ? "" : "[rank " + std::to_string(rank) + "] ";
    logger->set_pattern("%H:%M:%S %^%-5l%$ " + rank_part + "%v");
    logger->set_level(file.empty() ? spdlog::level::info : spdlog::level::debug);
    logger->flush_on(spdlog::level::info);
    // A log file that cannot be written (disk full) is said once, not once per line; the console
    // keeps every line. (spdlog's default prints every failure.)
    logger->set_error_handler([file](const std::string& msg) {
        static std::atomic<bool> said{false};
        if (said.exchange(true)) return;
        std::fprintf(stderr,
                     "lathe: cannot write the log file %s: %s (further log-file errors are "
                     "not shown)\n",
                     file.c_str(), msg.c_str());
    });
    spdlog::set_default_logger(logger);
}

void write(Level level, const std::string& message) {
    switch (level) {
        case Level::debug:
            spdlog::debug("{}", message);
            break;
        case Level::info:
            spdlog::info("{}", message);
            break;
        case Level::warn:
            spdlog::warn("{}", message);
            break;
        case Level::error:
            spdlog::error("{}", message);
            break;
    }
}

}  // namespace lathe::log
