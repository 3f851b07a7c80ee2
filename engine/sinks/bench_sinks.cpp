// lathe-sinks-bench: records per second for each metric sink and for AsyncSinkWriter.
// Usage: lathe-sinks-bench [records=100000] [metrics_per_record=16] [dir=$TMPDIR]
#include "engine/sinks/async_sink_writer.h"
#include "engine/sinks/csv_sink.h"
#include "engine/sinks/jsonl_sink.h"
#include "engine/sinks/run_sinks.h"
#include "engine/sinks/tensorboard_sink.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

using namespace lathe::sinks;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<MetricRecord> make_records(int count, int metrics) {
    static const char* kGroups[] = {"train", "optim", "throughput", "eval"};
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(metrics));
    for (int m = 0; m < metrics; ++m) {
        names.push_back(std::string(kGroups[m % 4]) + "/metric " + std::to_string(m) + " (avg)");
    }
    std::vector<MetricRecord> records(count);
    const double t0 = unix_time_now();
    for (int i = 0; i < count; ++i) {
        MetricRecord& r = records[i];
        r.step = i;
        r.tokens = static_cast<std::int64_t>(i) * 524288;
        r.wall_time = t0 + i * 0.137;
        for (int m = 0; m < metrics; ++m) r.add(names[m], std::exp(-i * 1e-4) * (m + 1.2345));
    }
    return records;
}

void report(const char* name, int count, double secs, const std::string& path) {
    std::printf("%-28s %12.0f records/s", name, count / secs);
    if (!path.empty()) {
        std::error_code ec;
        auto bytes = fs::file_size(path, ec);
        std::printf("  %8.1f MB/s", bytes / secs / 1e6);
    }
    std::printf("  (%d records in %.3f s)\n", count, secs);
}

void bench_sink(const char* name, MetricSink& sink, const std::vector<MetricRecord>& records) {
    auto t0 = Clock::now();
    for (const auto& r : records) sink.write(r);
    sink.close();
    double secs = seconds_since(t0);
    if (sink.failed()) std::printf("%s failed: %s\n", name, sink.error().c_str());
    report(name, static_cast<int>(records.size()), secs, sink.target());
}

}  // namespace

int main(int argc, char** argv) {
    const int count = argc > 1 ? std::atoi(argv[1]) : 100000;
    const int metrics = argc > 2 ? std::atoi(argv[2]) : 16;
    fs::path dir = argc > 3 ? fs::path(argv[3]) : fs::temp_directory_path();
    dir /= "lathe-sinks-bench-" + std::to_string(getpid());
    fs::create_directories(dir);

    const auto records = make_records(count, metrics);
    std::printf("%d records x %d metrics, in %s (every record is flushed)\n", count, metrics,
                dir.c_str());

    {
        auto t0 = Clock::now();
        std::string out;
        for (const auto& r : records) {
            out.clear();
            JsonlSink::format_to(r, out);
        }
        report("format jsonl (no I/O)", count, seconds_since(t0), "");
    }
    {
        JsonlSink sink((dir / "metrics.jsonl").string());
        bench_sink("JsonlSink", sink, records);
    }
    {
        CsvSink sink((dir / "metrics.csv").string());
        bench_sink("CsvSink", sink, records);
    }
    {
        TensorBoardSink sink(TensorBoardSink::unique_path_in(dir.string()));
        bench_sink("TensorBoardSink", sink, records);
    }
    {
        fs::path async_dir = dir / "async";
        fs::create_directories(async_dir);
        AsyncSinkWriter writer(make_run_sinks(async_dir.string()));
        auto t0 = Clock::now();
        for (const auto& r : records) writer.submit(r);  // copies, as the trainer's callback would
        double submit_secs = seconds_since(t0);
        writer.close();
        double total_secs = seconds_since(t0);
        std::printf("%-28s %12.0f records/s  (submit: %.2f us per record on the caller thread)\n",
                    "AsyncSinkWriter (all three)", count / total_secs, submit_secs / count * 1e6);
        if (writer.blocked_submits() > 0) {
            std::printf("  submit blocked %llu times (queue full)\n",
                        static_cast<unsigned long long>(writer.blocked_submits()));
        }
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
