// train, bench, inspect.
#include "checkpoint/checkpointer.h"
#include "cli/cli.h"
#include "cli/run.h"
#include "config/io.h"
#include "train/callbacks/builtin.h"
#include "train/trainer.h"
#include "util/error.h"

#include <chrono>
#include <cmath>
#include <iostream>

namespace lathe::cli {

namespace {

bool load_config(const ParsedArgs& p, const char* cmd, config::ExperimentConfig& out) {
    if (!p.errors.empty()) {
        for (const auto& e : p.errors) std::cerr << "lathe-engine " << cmd << ": " << e << "\n";
        return false;
    }
    auto loaded = config::load(p.spec, p.overrides);
    if (!loaded.ok()) {
        std::cerr << "lathe-engine " << cmd << ": invalid config " << loaded.origin << ":\n";
        for (const auto& issue : loaded.issues) std::cerr << "  " << issue.to_string() << "\n";
        return false;
    }
    out = loaded.config;
    return true;
}

}  // namespace

int cmd_train(const Args& args) {
    auto p = parse_args(args, {"--control-socket", "--runs-dir", "--resume-from"});
    config::ExperimentConfig cfg;
    if (!load_config(p, "train", cfg)) return kExitUsage;
    RunOptions opts;
    opts.resume_from = p.option("--resume-from");
    opts.control_socket = p.option("--control-socket");
    opts.runs_dir = p.option("--runs-dir");
    const bool is_worker = std::getenv("RANK") || std::getenv("WORLD_SIZE") || std::getenv("SLURM_PROCID");
    if (cfg.launch.nproc > 1 && !is_worker) return launch_from_train(cfg, args);
    return run_worker(cfg, opts);
}

int cmd_bench(const Args& args) {
    auto p = parse_args(args, {"--steps", "--warmup"});
    config::ExperimentConfig cfg;
    if (!load_config(p, "bench", cfg)) return kExitUsage;
    int64_t steps = std::stoll(p.option("--steps", "20"));
    int64_t warmup = std::stoll(p.option("--warmup", "3"));
    if (steps < 1 || warmup < 1) {
        std::cerr << "lathe-engine bench: --steps and --warmup must be >= 1\n";
        return kExitUsage;
    }
    cfg.trainer.max_duration = config::Duration::steps(warmup + steps);
    cfg.trainer.hard_stop.reset();
    cfg.trainer.no_checkpoints = true;
    cfg.trainer.no_evals = true;
    cfg.trainer.metrics_collect_interval = 1000000;
    cfg.trainer.save_folder = "/nonexistent-bench";

    // The trainer (and so this callback) is gone when run_worker returns: times live out here.
    std::chrono::steady_clock::time_point t0, t1;
    struct BenchTimer : train::Callback {
        int64_t warmup = 0;
        std::chrono::steady_clock::time_point *t0 = nullptr, *t1 = nullptr;
        void post_step() override {
            if (step() == warmup) *t0 = std::chrono::steady_clock::now();
            *t1 = std::chrono::steady_clock::now();
        }
    };
    auto timer_owner = std::make_unique<BenchTimer>();
    timer_owner->warmup = warmup;
    timer_owner->t0 = &t0;
    timer_owner->t1 = &t1;
    train::Trainer* trainer_ptr = nullptr;
    RunOptions opts;
    opts.bench = true;
    opts.customize = [&](train::Trainer& t) {
        t.add_callback("bench_timer", std::move(timer_owner));
        trainer_ptr = &t;
    };
    double flops_per_token = 0, peak = 0;
    int64_t tokens_per_step = cfg.data_loader.global_batch_size / cfg.launch.nproc;
    auto orig_customize = opts.customize;
    opts.customize = [&](train::Trainer& t) {
        orig_customize(t);
        flops_per_token = static_cast<double>(t.train_module().num_flops_per_token(cfg.dataset.sequence_length));
        auto dtype = cfg.model.dtype == config::DType::bfloat16 ? torch::kBFloat16 : torch::kFloat32;
        peak = train::measure_peak_flops(t.env().device(), dtype);
        tokens_per_step = t.data_loader().rank_batch_size();
    };
    int rc = run_worker(cfg, opts);
    if (rc != kExitOk) return rc;
    double secs = std::chrono::duration<double>(t1 - t0).count();
    double tps = static_cast<double>(steps * tokens_per_step) / secs;
    double achieved = tps * flops_per_token;
    nlohmann::json out = {{"config", cfg.run_name},
                          {"steps", steps},
                          {"step_time_s", secs / static_cast<double>(steps)},
                          {"tokens_per_s", tps},
                          {"flops_per_token", flops_per_token},
                          {"achieved_gflops", achieved / 1e9},
                          {"peak_gflops", peak / 1e9},
                          {"mfu", achieved / peak},
                          {"threads", torch::get_num_threads()},
                          {"dtype", config::enum_to_string(cfg.model.dtype)}};
    (void)trainer_ptr;
    std::cout << out.dump() << std::endl;
    return kExitOk;
}

int cmd_inspect(const Args& args) {
    if (args.size() != 1) {
        std::cerr << "usage: lathe-engine inspect CHECKPOINT_DIR|RUN_DIR\n";
        return kExitUsage;
    }
    const std::string& path = args[0];
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
        std::cerr << "lathe-engine inspect: " << path << ": no such folder\n";
        return kExitUsage;
    }
    nlohmann::json out;
    if (std::filesystem::exists(path + "/train", ec) || std::filesystem::exists(path + "/.metadata.json", ec)) {
        out = checkpoint::inspect_checkpoint(path);
    } else {
        out["run_folder"] = path;
        out["checkpoints"] = nlohmann::json::array();
        for (const auto& c : checkpoint::Checkpointer::find_checkpoints(path)) {
            auto info = checkpoint::inspect_checkpoint(c.path);
            info.erase("files");
            out["checkpoints"].push_back(info);
        }
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
}

}  // namespace lathe::cli
