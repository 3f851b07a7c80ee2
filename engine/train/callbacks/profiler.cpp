// profiler: a trace of a window of steps (LibTorch's legacy profiler), written per rank.
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace lathe::train {

using Clock = std::chrono::steady_clock;

namespace {

class Profiler : public Callback {
public:
    explicit Profiler(const config::ProfilerConfig& c) : cfg_(c) {}
    void pre_load_batch() override {
        const int64_t s = step() + 1;  // the step about to run
        const int64_t begin = cfg_.skip_first + cfg_.wait + cfg_.warmup + 1;
        if (s == begin && !recording_) {
            // Written in the work dir, then copied into the run folder (OLMo-core's profiler does
            // the same through persist_working_file).
            std::filesystem::create_directories(trainer().work_dir() + "/profiler");
            relative_ = "profiler/rank" + std::to_string(trainer().env().rank()) + "-step" +
                        std::to_string(s) + ".chrome_trace.json";
            recording_ = std::make_unique<torch::autograd::profiler::RecordProfile>(
                trainer().work_dir() + "/" + relative_);
        } else if (recording_ && s == begin + cfg_.active) {
            finish();
        }
    }
    void post_train() override { finish(); }
    void close() override { finish(); }

private:
    void finish() {
        if (!recording_) return;
        recording_.reset();  // writes the trace
        log::info("profiler trace written to {}", trainer().persist_working_file(relative_));
    }
    config::ProfilerConfig cfg_;
    std::unique_ptr<torch::autograd::profiler::RecordProfile> recording_;
    std::string relative_;
};

}  // namespace

std::unique_ptr<Callback> make_profiler(const config::ProfilerConfig& c) {
    return std::make_unique<Profiler>(c);
}

}  // namespace lathe::train
