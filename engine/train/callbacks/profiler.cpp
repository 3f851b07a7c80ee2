// profiler: a Chrome/Perfetto trace of a window of steps, written per rank, from LibTorch's Kineto
// profiler (OLMo-core's ProfilerCallback uses the same through torch.profiler): CPU operators,
// and on CUDA the kernels, memory copies and their launches, so that a trace shows where the GPU's
// time goes and not only the host's (issue 30 item 5).
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <set>

namespace lathe::train {

namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

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
            std::set<ActivityType> activities{ActivityType::CPU};
            if (trainer().env().device().is_cuda()) activities.insert(ActivityType::CUDA);
            const ProfilerConfig config(ProfilerState::KINETO);
            prof::prepareProfiler(config, activities);
            prof::enableProfiler(config, activities);
            recording_ = true;
        } else if (recording_ && s == begin + cfg_.active) {
            finish();
        }
    }
    void post_train() override { finish(); }
    void close() override { finish(); }

private:
    void finish() {
        if (!recording_) return;
        recording_ = false;
        // The device's work of the window is in the trace only once it has run.
        if (trainer().env().device().is_cuda()) torch::cuda::synchronize();
        prof::disableProfiler()->save(trainer().work_dir() + "/" + relative_);
        log::info("profiler trace written to {}", trainer().persist_working_file(relative_));
    }
    config::ProfilerConfig cfg_;
    bool recording_ = false;
    std::string relative_;
};

}  // namespace

std::unique_ptr<Callback> make_profiler(const config::ProfilerConfig& c) {
    return std::make_unique<Profiler>(c);
}

}  // namespace lathe::train
