// bench_timer: what `lathe-engine bench` measures of a run (docs/performance.md): the wall time of
// the steps after the warm-up, checkpoints saved every N steps and how long each blocked
// training, every rank's peak memory, and the metric files' CPU cost. Last of all callbacks, so
// that metric_saver's close() has finalised its stats; its results outlive the trainer.
#include "engine/checkpoint/checkpointer.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"

#include "engine/train/op_kinds.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <sys/resource.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <limits>
#include <set>

namespace lathe::train {

namespace {

/// The process's peak resident set (getrusage's ru_maxrss), in bytes.
uint64_t peak_rss_bytes() {
    struct rusage u {};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

/// The CUDA caching allocator's peak of allocated bytes on `device`.
uint64_t cuda_peak_bytes(int device) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    return static_cast<uint64_t>(
        stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
            .peak);
}

class BenchTimer : public Callback {
public:
    BenchTimer(const BenchTimerOptions& o, std::shared_ptr<BenchResults> results)
        : o_(o), r_(std::move(results)) {}
    int priority() const override { return std::numeric_limits<int>::min(); }

    void post_train_batch() override {
        if (o_.checkpoint_every <= 0 || step() <= o_.warmup ||
            (step() - o_.warmup) % o_.checkpoint_every != 0)
            return;
        const auto a = std::chrono::steady_clock::now();
        r_->saved.push_back(trainer().save_checkpoint(false, o_.async));
        r_->blocked_s +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
        ++r_->saves;
    }
    void post_step() override {
        if (step() == o_.warmup) {
            if (o_.profile) start_profile();
            r_->t0 = std::chrono::steady_clock::now();
        }
        r_->t1 = std::chrono::steady_clock::now();
    }
    void post_train() override {
        finish_profile();
        trainer().checkpointer().wait();
        if (!o_.memory) return;
        // Every rank's peak, gathered to all (rank 0 reports them): RSS on the host, and the
        // caching allocator's peak on a GPU.
        auto& group = trainer().env().cpu_group();
        const bool cuda = trainer().env().device().is_cuda();
        auto mine = torch::tensor(
            {static_cast<double>(peak_rss_bytes()),
             cuda ? static_cast<double>(cuda_peak_bytes(trainer().env().device().index())) : 0.0},
            torch::kFloat64);
        std::vector<torch::Tensor> all(static_cast<std::size_t>(group.size()));
        for (auto& t : all) t = torch::zeros_like(mine);
        group.all_gather(all, mine);
        for (const auto& t : all) r_->peaks.emplace_back(t[0].item<double>(), t[1].item<double>());
    }
    void close() override {
        if (auto* saver = trainer().callback("metric_saver"))
            r_->sink_stats = metric_saver_stats(saver);
    }

private:
    void start_profile() {
        namespace impl = torch::profiler::impl;
        std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
        profile_cuda_ = trainer().env().device().is_cuda();
        if (profile_cuda_) activities.insert(impl::ActivityType::CUDA);
        const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
        torch::autograd::profiler::prepareProfiler(config, activities);
        torch::autograd::profiler::enableProfiler(config, activities);
        profiling_ = true;
    }
    // Kernel time by kind on a GPU (every CUDA event: kernels, copies, memsets); on the CPU the
    // self time of every operator.
    void finish_profile() {
        if (!profiling_) return;
        profiling_ = false;
        if (profile_cuda_) torch::cuda::synchronize();
        const auto result = torch::autograd::profiler::disableProfiler();
        std::vector<TimedOp> ops;
        for (const auto& e : result->events()) {
            const bool on_gpu = e.deviceType() == c10::DeviceType::CUDA;
            if (on_gpu != profile_cuda_) continue;
            const auto start = static_cast<int64_t>(e.startNs());
            ops.push_back(
                {e.name(), e.startThreadId(), start, start + static_cast<int64_t>(e.durationNs())});
        }
        r_->profile_ns = time_by_kind(std::move(ops), /*nested=*/!profile_cuda_);
        r_->profile_cuda = profile_cuda_;
    }

    bool profiling_ = false, profile_cuda_ = false;
    BenchTimerOptions o_;
    std::shared_ptr<BenchResults> r_;
};

}  // namespace

std::unique_ptr<Callback> make_bench_timer(const BenchTimerOptions& o,
                                           std::shared_ptr<BenchResults> results) {
    return std::make_unique<BenchTimer>(o, std::move(results));
}

}  // namespace lathe::train
