// speed_monitor, memory_monitor, stability_monitor, lm_evaluator and profiler.
#include "train/callbacks/builtin.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/log.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#ifdef LATHE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace lathe::train {

using config::ReduceType;
using Clock = std::chrono::steady_clock;

torch::ScalarType compute_dtype(const config::ExperimentConfig& cfg) {
    auto scalar = [](config::DType d) { return d == config::DType::bfloat16 ? torch::kBFloat16 : torch::kFloat32; };
    const auto& tm = cfg.train_module;
    if (tm.autocast_precision) return scalar(*tm.autocast_precision);
    if (tm.dp_config.name == config::DataParallelType::fsdp && tm.dp_config.param_dtype && cfg.launch.nproc > 1) {
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

namespace {

// ---- speed_monitor ----------------------------------------------------------------------------

class SpeedMonitor : public Callback {
public:
    explicit SpeedMonitor(const config::SpeedMonitorConfig& c) : cfg_(c) {}
    int priority() const override { return -2; }

    void pre_train() override {
        auto& t = trainer();
        seq_len_ = t.data_loader().dataset().sequence_length();
        flops_per_token_ = static_cast<double>(t.train_module().num_flops_per_token(seq_len_));
        const auto dtype = compute_dtype(t.config());
        peak_ = cfg_.device_peak_flops.value_or(0);
        if (peak_ <= 0) {
            peak_ = measure_peak_flops(t.env().device(), dtype);
            log::info("measured peak {:.1f} GFLOP/s ({} matrix product) for MFU", peak_ / 1e9,
                      c10::toString(dtype));
        }
        chinchilla_params_ = static_cast<double>(t.train_module().model()->num_non_embedding_params());
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
        t.record_metric("throughput/total tokens", static_cast<double>(t.global_train_tokens_seen()), ReduceType::max);
        t.record_metric("throughput/total petaflops", t.global_train_petaflops(), ReduceType::max);
        t.record_metric("throughput/chinchilla multiple",
                        static_cast<double>(t.global_train_tokens_seen()) / (20.0 * chinchilla_params_), ReduceType::max);
        t.record_metric("throughput/device/data loading (s)", data_s_, ReduceType::max);
        t.record_metric("throughput/device/data loading (%)", 100.0 * data_s_ / step_s, ReduceType::max);
        if (++steps_seen_ == 1) return;  // the first step warms up and is left out
        double tps = static_cast<double>(device_tokens_) / step_s;
        total_time_ += step_s;
        total_tokens_ += static_cast<double>(device_tokens_);
        double avg_tps = total_tokens_ / total_time_;
        t.record_metric("throughput/device/TPS", tps, ReduceType::mean);
        t.record_metric("throughput/device/TPS (actual avg)", avg_tps, ReduceType::mean);
        t.record_metric("throughput/device/BPS", 1.0 / step_s, ReduceType::mean);
        t.record_metric("throughput/device/BPS (actual avg)", (steps_seen_ - 1) / total_time_, ReduceType::mean);
        t.record_metric("throughput/device/flopsPS", tps * flops_per_token_, ReduceType::mean);
        t.record_metric("throughput/device/flopsPS (actual avg)", avg_tps * flops_per_token_, ReduceType::mean);
        t.record_metric("throughput/device/MFU", tps * flops_per_token_ / peak_, ReduceType::mean);
        t.record_metric("throughput/device/MFU (actual avg)", avg_tps * flops_per_token_ / peak_, ReduceType::mean);
    }

private:
    config::SpeedMonitorConfig cfg_;
    int64_t seq_len_ = 0;
    double flops_per_token_ = 0, peak_ = 1, chinchilla_params_ = 1;
    Clock::time_point load_start_ = Clock::now(), step_start_;
    double data_s_ = 0, total_time_ = 0, total_tokens_ = 0;
    int64_t device_tokens_ = 0, steps_seen_ = 0;
};

// ---- memory_monitor ---------------------------------------------------------------------------

double rss_gib() {
    std::ifstream f("/proc/self/statm");
    long pages_total = 0, pages_rss = 0;
    f >> pages_total >> pages_rss;
    return static_cast<double>(pages_rss) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024 * 1024);
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

// ---- stability_monitor ------------------------------------------------------------------------

class StabilityMonitor : public Callback {
public:
    explicit StabilityMonitor(const config::StabilityMonitorConfig& c) : cfg_(c) {}
    void post_attach() override { trainer().train_module().set_non_finite_action(cfg_.non_finite_grads); }
    void pre_log_metrics(int64_t, metrics::StepMetrics& m) override {
        int spikes_now = 0;
        for (const char* name : {"train/CE loss", "optim/total grad norm"}) {
            auto it = m.find(name);
            if (it == m.end() || !std::isfinite(it->second)) continue;
            auto& w = windows_[name];
            if (static_cast<int64_t>(w.size()) >= std::min<int64_t>(cfg_.window_size, 16)) {
                double mean = 0, var = 0;
                for (double x : w) mean += x;
                mean /= static_cast<double>(w.size());
                for (double x : w) var += (x - mean) * (x - mean);
                double sd = std::sqrt(var / static_cast<double>(w.size()));
                if (it->second > mean + cfg_.threshold_std * sd) ++spikes_now;
            }
            w.push_back(it->second);
            if (static_cast<int64_t>(w.size()) > cfg_.window_size) w.pop_front();
        }
        ++observed_;
        spikes_ += spikes_now;
        m["spike/SpikeScore"] = static_cast<double>(spikes_now);
        m["spike/SpikeScore (total)"] = observed_ > 0 ? 100.0 * static_cast<double>(spikes_) / static_cast<double>(observed_) : 0.0;
    }
    nlohmann::json state_dict() const override { return {{"spikes", spikes_}, {"observed", observed_}}; }
    void load_state_dict(const nlohmann::json& s) override {
        spikes_ = s.value("spikes", int64_t(0));
        observed_ = s.value("observed", int64_t(0));
    }

private:
    config::StabilityMonitorConfig cfg_;
    std::map<std::string, std::deque<double>> windows_;
    int64_t spikes_ = 0, observed_ = 0;
};

// ---- lm_evaluator -----------------------------------------------------------------------------

class LMEvaluator : public Callback {
public:
    LMEvaluator(const config::LMEvaluatorConfig& c, std::shared_ptr<data::TokenDataset> ds) : cfg_(c), ds_(std::move(ds)) {}
    void pre_train() override {
        if (cfg_.eval_on_startup) evaluate();
    }
    void post_step() override {
        if (step() > 1 && step() % cfg_.eval_interval == 0) evaluate();
    }
    void post_train() override {
        if (cfg_.eval_on_finish && step() != last_eval_) evaluate();
    }

    void evaluate() {
        auto& t = trainer();
        auto t0 = Clock::now();
        const auto& group = t.env().cpu_group();
        // Every rank evaluates its share of the same instances; sums are reduced across ranks.
        const int64_t seq = ds_->sequence_length();
        const int64_t rows = std::max<int64_t>(1, t.config().train_module.rank_microbatch_size / seq);
        const int64_t n = ds_->num_instances();
        const int64_t per_batch = rows * group.size();
        int64_t max_batches = (n + per_batch - 1) / per_batch;
        if (cfg_.eval_batches) max_batches = std::min(max_batches, *cfg_.eval_batches);
        double loss_sum = 0;
        int64_t tokens = 0, batches = 0;
        for (int64_t b = 0; b < max_batches; ++b) {
            data::Batch batch;
            std::vector<int64_t> idx;
            for (int64_t r = 0; r < rows; ++r) {
                int64_t i = b * per_batch + group.rank() + r * group.size();
                if (i < n) idx.push_back(i);
            }
            // A rank whose share of the last batch is empty still runs a forward pass (not
            // counted): under FSDP every forward gathers parameters from every rank.
            const bool filler = idx.empty();
            if (filler) idx.push_back(0);
            batch.input_ids = torch::empty({static_cast<int64_t>(idx.size()), seq}, torch::kInt64);
            for (std::size_t r = 0; r < idx.size(); ++r) ds_->instance(idx[r], batch.input_ids.data_ptr<int64_t>() + static_cast<int64_t>(r) * seq);
            auto [l, k] = t.train_module().eval_batch(batch);
            if (filler) continue;
            loss_sum += l;
            tokens += k;
            ++batches;
        }
        auto sums = torch::tensor({loss_sum, static_cast<double>(tokens), static_cast<double>(batches)}, torch::kFloat64);
        group.all_reduce(sums);
        double ce = sums[0].item<double>() / std::max(1.0, sums[1].item<double>());
        const std::string prefix = "eval/lm/" + cfg_.name + "/";
        t.record_metric(prefix + "CE loss", ce, std::nullopt, config::MetricMergeStrategy::latest);
        t.record_metric(prefix + "PPL", std::exp(ce), std::nullopt, config::MetricMergeStrategy::latest);
        t.record_metric("throughput/in-loop eval time (s)", std::chrono::duration<double>(Clock::now() - t0).count(),
                        ReduceType::max, config::MetricMergeStrategy::sum);
        t.record_metric("throughput/in-loop eval batches", sums[2].item<double>(), std::nullopt,
                        config::MetricMergeStrategy::sum);
        last_eval_ = step();
        log::info("eval at step {}: {} CE loss {:.4f}, PPL {:.3f}", step(), cfg_.name, ce, std::exp(ce));
    }

private:
    config::LMEvaluatorConfig cfg_;
    std::shared_ptr<data::TokenDataset> ds_;
    int64_t last_eval_ = -1;
};

// ---- profiler ---------------------------------------------------------------------------------

class Profiler : public Callback {
public:
    explicit Profiler(const config::ProfilerConfig& c) : cfg_(c) {}
    void pre_load_batch() override {
        const int64_t s = step() + 1;  // the step about to run
        const int64_t begin = cfg_.skip_first + cfg_.wait + cfg_.warmup + 1;
        if (s == begin && !recording_) {
            std::filesystem::create_directories(trainer().save_folder() + "/profiler");
            path_ = trainer().save_folder() + "/profiler/rank" + std::to_string(trainer().env().rank()) + "-step" +
                    std::to_string(s) + ".chrome_trace.json";
            recording_ = std::make_unique<torch::autograd::profiler::RecordProfile>(path_);
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
        log::info("profiler trace written to {}", path_);
    }
    config::ProfilerConfig cfg_;
    std::unique_ptr<torch::autograd::profiler::RecordProfile> recording_;
    std::string path_;
};

}  // namespace

std::unique_ptr<Callback> make_speed_monitor(const config::SpeedMonitorConfig& c) { return std::make_unique<SpeedMonitor>(c); }
std::unique_ptr<Callback> make_memory_monitor(const config::MemoryMonitorConfig&) { return std::make_unique<MemoryMonitor>(); }
std::unique_ptr<Callback> make_stability_monitor(const config::StabilityMonitorConfig& c) {
    return std::make_unique<StabilityMonitor>(c);
}
std::unique_ptr<Callback> make_lm_evaluator(const config::LMEvaluatorConfig& c, std::shared_ptr<data::TokenDataset> ds) {
    return std::make_unique<LMEvaluator>(c, std::move(ds));
}
std::unique_ptr<Callback> make_profiler(const config::ProfilerConfig& c) { return std::make_unique<Profiler>(c); }

void add_builtin_callbacks(Trainer& trainer, std::shared_ptr<data::TokenDataset> validation) {
    const auto& t = trainer.trainer_config();
    const auto& c = t.callbacks;
    if (c.console_logger.enabled) trainer.add_callback("console_logger", make_console_logger(c.console_logger, t.metrics_collect_interval));
    if (c.checkpointer.enabled && !t.no_checkpoints) trainer.add_callback("checkpointer", make_checkpointer(c.checkpointer));
    if (c.speed_monitor.enabled) trainer.add_callback("speed_monitor", make_speed_monitor(c.speed_monitor));
    if (c.memory_monitor.enabled) trainer.add_callback("memory_monitor", make_memory_monitor(c.memory_monitor));
    if (c.stability_monitor.enabled) trainer.add_callback("stability_monitor", make_stability_monitor(c.stability_monitor));
    if (c.lm_evaluator.enabled && !t.no_evals) {
        if (!validation) throw Error("trainer.callbacks.lm_evaluator needs dataset.validation_fraction > 0");
        trainer.add_callback("lm_evaluator", make_lm_evaluator(c.lm_evaluator, validation));
    }
    if (c.profiler.enabled) trainer.add_callback("profiler", make_profiler(c.profiler));
    if (c.metric_saver.enabled) trainer.add_callback("metric_saver", make_metric_saver(c.metric_saver));
}

}  // namespace lathe::train
