// memory_monitor: the process's resident memory, and on a GPU the CUDA allocator's figures.
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"

#ifdef LATHE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <unistd.h>
#include <chrono>
#include <fstream>

namespace lathe::train {

using config::ReduceType;
using Clock = std::chrono::steady_clock;

namespace {

double rss_gib() {
    std::ifstream f("/proc/self/statm");
    long pages_total = 0, pages_rss = 0;
    f >> pages_total >> pages_rss;
    return static_cast<double>(pages_rss) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
           (1024.0 * 1024 * 1024);
}

class MemoryMonitor : public Callback {
public:
    int priority() const override { return -1; }
    void post_step() override {
        auto& t = trainer();
        if (t.env().device().is_cuda()) {
#ifdef LATHE_WITH_CUDA
            cuda_metrics();
#endif
            return;
        }
        t.record_metric("memory/RSS (GiB)", rss_gib(), ReduceType::max);
    }

private:
#ifdef LATHE_WITH_CUDA
    void cuda_metrics();
#endif
};

#ifdef LATHE_WITH_CUDA
void MemoryMonitor::cuda_metrics() {
    auto& t = trainer();
    auto idx = t.env().device().index();
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    auto props = at::cuda::getDeviceProperties(idx);
    const double gib = 1024.0 * 1024 * 1024, total = static_cast<double>(props->totalGlobalMem);
    const auto agg = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    double active = static_cast<double>(stats.active_bytes[agg].peak);
    double reserved = static_cast<double>(stats.reserved_bytes[agg].peak);
    t.record_metric("gpu_memory/GPU active mem (GiB)", active / gib, ReduceType::max);
    t.record_metric("gpu_memory/GPU active mem (%)", 100.0 * active / total, ReduceType::max);
    t.record_metric("gpu_memory/GPU reserved mem (GiB)", reserved / gib, ReduceType::max);
    t.record_metric("gpu_memory/GPU reserved mem (%)", 100.0 * reserved / total, ReduceType::max);
    c10::cuda::CUDACachingAllocator::resetPeakStats(idx);
}
#endif

}  // namespace

std::unique_ptr<Callback> make_memory_monitor(const config::MemoryMonitorConfig&) {
    return std::make_unique<MemoryMonitor>();
}

}  // namespace lathe::train
