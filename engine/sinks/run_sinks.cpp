#include "engine/sinks/run_sinks.h"

#include "engine/sinks/csv_sink.h"
#include "engine/sinks/jsonl_sink.h"
#include "engine/sinks/tensorboard_sink.h"

#include <filesystem>

namespace lathe::sinks {

std::vector<std::unique_ptr<MetricSink>> make_run_sinks(const std::string& run_dir,
                                                        const RunSinkOptions& options,
                                                        const MetricSink::ErrorHandler& on_error) {
    namespace fs = std::filesystem;
    std::vector<std::unique_ptr<MetricSink>> sinks;
    if (options.jsonl) {
        sinks.push_back(std::make_unique<JsonlSink>(
            (fs::path(run_dir) / JsonlSink::kFileName).string(), options.mode));
    }
    if (options.csv) {
        sinks.push_back(std::make_unique<CsvSink>((fs::path(run_dir) / CsvSink::kFileName).string(),
                                                  options.mode));
    }
    if (options.tensorboard) {
        sinks.push_back(std::make_unique<TensorBoardSink>(TensorBoardSink::unique_path_in(run_dir),
                                                          options.first_step));
    }
    if (on_error) {
        for (auto& sink : sinks) sink->set_error_handler(on_error);
    }
    return sinks;
}

}  // namespace lathe::sinks
