// speed_monitor: throughput (tokens/s, batches/s), FLOP/s and MFU against the measured peak of the
// device in the dtype the matrix products run in.
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#ifdef LATHE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>

namespace lathe::train {

using config::ReduceType;
using Clock = std::chrono::steady_clock;

torch::ScalarType compute_dtype(const config::ExperimentConfig& cfg) {
    auto scalar = [](config::DType d) {
        return d == config::DType::bfloat16 ? torch::kBFloat16 : torch::kFloat32;
    };
    const auto& tm = cfg.train_module;
    if (tm.autocast_precision) return scalar(*tm.autocast_precision);
    // param_dtype: FSDP's gathered parameters, or on one rank the compute copies.
    if (tm.dp_config.param_dtype &&
        (tm.dp_config.name != config::DataParallelType::ddp || cfg.launch.nproc == 1)) {
        return scalar(*tm.dp_config.param_dtype);
    }
    return scalar(cfg.model.dtype);
}

double measure_peak_flops(const torch::Device& device, torch::ScalarType dtype) {
    torch::NoGradGuard no_grad;
    // Large enough to keep the device busy: 1024 saturates a CPU core's caches, a GPU needs far
    // more work per launch to reach its peak.
    const int64_t n = device.is_cuda() ? 8192 : 1024;
    auto opts = torch::TensorOptions().dtype(dtype).device(device);
    auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
    auto sync = [&] {
        if (device.is_cuda()) torch::cuda::synchronize();
    };
    for (int i = 0; i < 3; ++i) torch::mm(a, b);
    sync();
    int iters = 0;
    auto t0 = Clock::now();
    double elapsed = 0;
    while (elapsed < 0.3) {
        torch::mm(a, b);
        ++iters;
        if (iters % 4 == 0) {
            sync();
            elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        }
    }
    sync();
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    a = torch::Tensor();
    b = torch::Tensor();
#ifdef LATHE_WITH_CUDA
    // Give the matrices' memory back, so they do not count in the gpu_memory/* reserved peak.
    if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
    return 2.0 * static_cast<double>(n * n * n) * iters / elapsed;
}

double measure_mfu_peak(const torch::Device& device, torch::ScalarType dtype) {
    const double peak = measure_peak_flops(device, dtype);
    if (dtype == torch::kFloat32) return peak;
    const double fp32 = measure_peak_flops(device, torch::kFloat32);
    if (!device.is_cuda() && fp32 > 2 * peak) {
        log::warn(
            "bf16 on this CPU: its matrix products run at {:.1f} GFLOP/s against {:.1f} GFLOP/s in "
            "fp32 ({:.0f}x slower); train in fp32 on a CPU (model.dtype=float32, "
            "train_module.autocast_precision=null) and keep bf16 for GPUs",
            peak / 1e9, fp32 / 1e9, fp32 / peak);
    }
    return std::max(peak, fp32);
}

namespace {

class SpeedMonitor : public Callback {
public:
    explicit SpeedMonitor(const config::SpeedMonitorConfig& c) : cfg_(c) {}
    int priority() const override { return -2; }

    void pre_train() override {
        auto& t = trainer();
        seq_len_ = t.data_loader().dataset().sequence_length();
        // Under tensor parallelism a device reads its data-parallel rank's tokens but does
        // 1/degree of each one's work.
        flops_per_token_ = static_cast<double>(t.train_module().num_flops_per_token(seq_len_)) /
                           static_cast<double>(t.env().layout().tp);
        const auto dtype = compute_dtype(t.config());
        peak_ = cfg_.device_peak_flops.value_or(0);
        if (peak_ <= 0) {
            peak_ = measure_mfu_peak(t.env().device(), dtype);
            log::info("measured peak {:.1f} GFLOP/s ({} matrix product) for MFU", peak_ / 1e9,
                      c10::toString(dtype));
        } else if (!t.env().device().is_cuda() && dtype == torch::kBFloat16) {
            measure_mfu_peak(t.env().device(), dtype);  // for its warning only
        }
        chinchilla_params_ =
            static_cast<double>(t.train_module().model()->num_non_embedding_params());
    }
    void pre_load_batch() override { load_start_ = Clock::now(); }
    void pre_step(const data::Batch& batch) override {
        step_start_ = Clock::now();
        data_s_ = std::chrono::duration<double>(step_start_ - load_start_).count();
        device_tokens_ = batch.input_ids.numel();
    }
    void post_step() override {
        auto now = Clock::now();
        auto& t = trainer();
        double step_s = std::chrono::duration<double>(now - load_start_).count();
        t.record_metric("throughput/total tokens",
                        static_cast<double>(t.global_train_tokens_seen()), ReduceType::max);
        t.record_metric("throughput/total petaflops", t.global_train_petaflops(), ReduceType::max);
        t.record_metric(
            "throughput/chinchilla multiple",
            static_cast<double>(t.global_train_tokens_seen()) / (20.0 * chinchilla_params_),
            ReduceType::max);
        t.record_metric("throughput/device/data loading (s)", data_s_, ReduceType::max);
        t.record_metric("throughput/device/data loading (%)", 100.0 * data_s_ / step_s,
                        ReduceType::max);
        if (++steps_seen_ == 1) return;  // the first step warms up and is left out
        double tps = static_cast<double>(device_tokens_) / step_s;
        total_time_ += step_s;
        total_tokens_ += static_cast<double>(device_tokens_);
        double avg_tps = total_tokens_ / total_time_;
        t.record_metric("throughput/device/TPS", tps, ReduceType::mean);
        t.record_metric("throughput/device/TPS (actual avg)", avg_tps, ReduceType::mean);
        t.record_metric("throughput/device/BPS", 1.0 / step_s, ReduceType::mean);
        t.record_metric("throughput/device/BPS (actual avg)", (steps_seen_ - 1) / total_time_,
                        ReduceType::mean);
        t.record_metric("throughput/device/flopsPS", tps * flops_per_token_, ReduceType::mean);
        t.record_metric("throughput/device/flopsPS (actual avg)", avg_tps * flops_per_token_,
                        ReduceType::mean);
        // In percent, as OLMo-core records it. A step faster than the peak means the peak was
        // measured low (a busy machine, or a given device_peak_flops): it is raised, once, so that
        // MFU never reads above 100%.
        const double achieved = std::max(tps, avg_tps) * flops_per_token_;
        if (achieved > peak_) {
            if (!peak_raised_) {
                log::warn(
                    "achieved {:.1f} GFLOP/s, above the peak of {:.1f} GFLOP/s that MFU is "
                    "measured against; using the achieved figure as the peak",
                    achieved / 1e9, peak_ / 1e9);
            }
            peak_raised_ = true;
            peak_ = achieved;
        }
        t.record_metric("throughput/device/MFU", 100 * tps * flops_per_token_ / peak_,
                        ReduceType::mean);
        t.record_metric("throughput/device/MFU (actual avg)",
                        100 * avg_tps * flops_per_token_ / peak_, ReduceType::mean);
    }

private:
    config::SpeedMonitorConfig cfg_;
    int64_t seq_len_ = 0;
    double flops_per_token_ = 0, peak_ = 1, chinchilla_params_ = 1;
    Clock::time_point load_start_ = Clock::now(), step_start_;
    double data_s_ = 0, total_time_ = 0, total_tokens_ = 0;
    int64_t device_tokens_ = 0, steps_seen_ = 0;
    bool peak_raised_ = false;
};

}  // namespace

std::unique_ptr<Callback> make_speed_monitor(const config::SpeedMonitorConfig& c) {
    return std::make_unique<SpeedMonitor>(c);
}

}  // namespace lathe::train
