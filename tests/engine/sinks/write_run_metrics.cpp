// Test helper (not a test): writes a known run's metrics into a folder with the standard sinks
// through AsyncSinkWriter, for check_tensorboard.py to read back with TensorBoard, json and csv.
// Usage: lathe_sinks_write_run <dir>. The values are defined in check_tensorboard.py too.
#include "engine/sinks/async_sink_writer.h"
#include "engine/sinks/run_sinks.h"

#include <cmath>
#include <cstdio>
#include <limits>

using namespace lathe::sinks;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    int errors = 0;
    AsyncSinkWriter writer(make_run_sinks(argv[1], {}, [&](const std::string& line) {
        std::fprintf(stderr, "%s\n", line.c_str());
        ++errors;
    }));
    for (int step = 1; step <= 50; ++step) {
        MetricRecord r;
        r.step = step;
        r.tokens = step * 4096LL;
        r.wall_time = 1700000000.0 + step * 0.5;
        r.add("train/CE loss",
              step == 7 ? std::numeric_limits<double>::quiet_NaN() : 10.0 / (step + 1));
        r.add("optim/LR", 1e-3 * step / 50);
        r.add("eval/acc, \"top-1\" (%)", step * 0.01);
        r.add("throughput/device/TPS", 1000.0 + step);
        writer.submit(std::move(r));
    }
    writer.close();
    return errors == 0 ? 0 : 1;
}
