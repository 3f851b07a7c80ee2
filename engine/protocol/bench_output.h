// `lathe-engine bench`'s one JSON line (docs/performance.md), described once by visit() as the
// other subcommands' output is (cli_output.h): the CLI writes it with write_output(), scripts and
// the tests read it. A header of its own: only the bench command includes it.
#pragma once

#include "engine/protocol/cli_output.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::protocol {

/// One rank's peak memory, GiB: the process's RSS, and on a GPU the allocator's peak.
struct BenchRankMemory {
    double peak_rss_gib = 0;
    std::optional<double> peak_cuda_gib;

    template <class V>
    void visit(V& v) {
        v("peak_rss_gib", peak_rss_gib);
        v("peak_cuda_gib", peak_cuda_gib);
    }
};

/// --memory: the layout and each rank's peak.
struct BenchMemory {
    std::string ac_mode;  ///< train_module.ac_config.mode
    std::string dp;       ///< the data-parallel kind, or "none"
    int64_t tp = 1;
    std::vector<BenchRankMemory> ranks;

    template <class V>
    void visit(V& v) {
        v("ac_mode", ac_mode);
        v("dp", dp);
        v("tp", tp);
        v("ranks", ranks);
    }
};

/// --profile: where the timed steps' time went (engine/train/op_kinds.h).
struct BenchProfile {
    std::string time;  ///< "GPU kernels" or "CPU operators' self time"
    double ms_per_step = 0;
    /// Each kind's {"share", "ms_per_step"}, by the kind's name.
    nlohmann::ordered_json kinds = nlohmann::ordered_json::object();

    template <class V>
    void visit(V& v) {
        v("time", time);
        v("ms_per_step", ms_per_step);
        v("kinds", kinds);
    }
};

/// What the metric files cost, off the training thread.
struct BenchMetricFiles {
    int64_t records = 0;
    double cpu_ms_per_step = 0;
    double cpu_share = 0;  ///< of the step's CPU budget (step time x threads)

    template <class V>
    void visit(V& v) {
        v("records", records);
        v("cpu_ms_per_step", cpu_ms_per_step);
        v("cpu_share", cpu_share);
    }
};

struct BenchReport {
    std::string config;  ///< the run name
    int64_t steps = 0, world_size = 1;
    double step_time_s = 0, tokens_per_s = 0, flops_per_token = 0;
    double achieved_gflops = 0, peak_gflops = 0;
    double mfu = 0;  ///< a fraction; capped at 1 (above, the peak was measured low)
    int64_t threads = 1;
    std::string dtype;  ///< the compute dtype
    bool callbacks = false;
    std::optional<BenchMemory> memory;
    std::optional<std::string> checkpoint_mode;  ///< --checkpoint-every: "synchronous" ...
    std::optional<int64_t> checkpoints;
    std::optional<double> checkpoint_blocking_s;  ///< per save
    std::optional<BenchProfile> profile;
    std::optional<BenchMetricFiles> metric_files;

    template <class V>
    void visit(V& v) {
        v("config", config);
        v("steps", steps);
        v("world_size", world_size);
        v("step_time_s", step_time_s);
        v("tokens_per_s", tokens_per_s);
        v("flops_per_token", flops_per_token);
        v("achieved_gflops", achieved_gflops);
        v("peak_gflops", peak_gflops);
        v("mfu", mfu);
        v("threads", threads);
        v("dtype", dtype);
        v("callbacks", callbacks);
        v("memory", memory);
        v("checkpoint_mode", checkpoint_mode);
        v("checkpoints", checkpoints);
        v("checkpoint_blocking_s", checkpoint_blocking_s);
        v("profile", profile);
        v("metric_files", metric_files);
    }
};

}  // namespace lathe::protocol
