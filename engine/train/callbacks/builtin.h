// The built-in callbacks, configured by name under trainer.callbacks (see config.h), with
// OLMo-core's fields and priorities.
#pragma once

#include "engine/config/config.h"
#include "engine/train/callback.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lathe::train {

class Trainer;

/// Adds every enabled built-in callback to the trainer (checkpointer filtered by no_checkpoints,
/// lm_evaluator by no_evals). `validation` may be null.
void add_builtin_callbacks(Trainer& trainer, const std::shared_ptr<data::TokenDataset>& validation);

std::unique_ptr<Callback> make_console_logger(const config::ConsoleLoggerConfig& c,
                                              int64_t metrics_collect_interval);
std::unique_ptr<Callback> make_checkpointer(const config::CheckpointerConfig& c);
std::unique_ptr<Callback> make_speed_monitor(const config::SpeedMonitorConfig& c);
std::unique_ptr<Callback> make_memory_monitor(const config::MemoryMonitorConfig& c);
std::unique_ptr<Callback> make_lm_evaluator(const config::LMEvaluatorConfig& c,
                                            std::shared_ptr<data::TokenDataset> ds);
std::unique_ptr<Callback> make_stability_monitor(const config::StabilityMonitorConfig& c);
std::unique_ptr<Callback> make_profiler(const config::ProfilerConfig& c);
std::unique_ptr<Callback> make_metric_saver(const config::MetricSaverConfig& c);
std::unique_ptr<Callback> make_config_saver(const config::ConfigSaverConfig& c);
std::unique_ptr<Callback> make_sampler(const config::SamplerConfig& c);

/// What the metric files cost: records written, CPU time of the background writer thread and of
/// handing records to it (on the bookkeeping thread). Final once the callback is closed.
struct MetricSaverStats {
    int64_t records = 0;
    double writer_cpu_s = 0;
    double submit_cpu_s = 0;
};
/// The stats of a metric_saver callback; nullopt when `cb` is not one.
std::optional<MetricSaverStats> metric_saver_stats(const Callback* cb);
/// What `lathe-engine bench` measured (bench_timer), filled in while the trainer runs.
struct BenchResults {
    std::chrono::steady_clock::time_point t0, t1;  ///< the end of the warm-up, the last step
    double blocked_s = 0;                          ///< training blocked by the checkpoint saves
    int64_t saves = 0;
    std::vector<std::string> saved;                ///< the checkpoint folders it saved
    std::vector<std::pair<double, double>> peaks;  ///< per rank: peak RSS, peak CUDA bytes
    std::optional<MetricSaverStats> sink_stats;    ///< the metric files' cost, if written
    /// --profile: nanoseconds per OpKind over the timed steps (kernels on a GPU, operators' self
    /// time on the CPU); empty without it.
    std::vector<int64_t> profile_ns;
    bool profile_cuda = false;  ///< the figures are GPU kernel time
};
struct BenchTimerOptions {
    int64_t warmup = 0;            ///< steps before the timed ones
    int64_t checkpoint_every = 0;  ///< > 0: save a checkpoint every N timed steps
    bool async = true;             ///< those saves asynchronous
    bool memory = false;           ///< gather every rank's peak memory
    bool profile = false;          ///< Kineto over the timed steps: time by kind (op_kinds.h)
};
std::unique_ptr<Callback> make_bench_timer(const BenchTimerOptions& o,
                                           std::shared_ptr<BenchResults> results);
/// Rank 0's end of the GUI's control channel at `socket_path`.
std::unique_ptr<Callback> make_control_channel(const std::string& socket_path);
/// Rank 0's reader of the run folder's control drop-box (run_folder/control_requests.h).
std::unique_ptr<Callback> make_control_dropbox(const std::string& run_dir);

/// Peak FLOP/s of one device for `dtype`, measured with a square matrix product (1024 on a CPU,
/// 8192 on a GPU) for about 0.3 s.
double measure_peak_flops(const torch::Device& device, torch::ScalarType dtype);
/// The dtype the model's matrix products run in: autocast's, else dp_config.param_dtype (FSDP's
/// gathered parameters, or one rank's compute copies), else the model's.
torch::ScalarType compute_dtype(const config::ExperimentConfig& cfg);
/// The peak MFU is measured against: that of the fastest dtype the run computes in, the compute
/// dtype or fp32 (which the loss, norms and optimizer always use). A run in bf16 on a CPU, whose
/// bf16 products are far slower than fp32 ones, gets a warning with both figures.
double measure_mfu_peak(const torch::Device& device, torch::ScalarType dtype);

}  // namespace lathe::train
