// train, bench, inspect.
#include "engine/checkpoint/checkpointer.h"
#include "engine/cli/cli.h"
#include "engine/cli/run.h"
#include "engine/config/io.h"
#include "engine/hf/finetune.h"
#include "engine/protocol/bench_output.h"
#include "engine/protocol/cli_output.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/layout.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/op_kinds.h"
#include "engine/train/trainer.h"
#include "engine/util/error.h"

#include <unistd.h>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

namespace lathe::cli {

bool load_config(const ParsedArgs& p, const char* cmd, config::ExperimentConfig& out) {
    if (!p.errors.empty()) {
        for (const auto& e : p.errors) std::cerr << "lathe-engine " << cmd << ": " << e << "\n";
        return false;
    }
    auto loaded = hf::load_spec(p.spec, p.overrides);
    if (!loaded.ok()) {
        std::cerr << "lathe-engine " << cmd << ": invalid config " << loaded.origin << ":\n";
        for (const auto& issue : loaded.issues) std::cerr << "  " << issue.to_string() << "\n";
        return false;
    }
    out = loaded.config;
    return true;
}

namespace {

std::string timer_async_name(const config::ExperimentConfig& cfg) {
    return cfg.trainer.callbacks.checkpointer.save_async.value_or(true) ? "async" : "sync";
}

}  // namespace

int cmd_train(const Args& args) {
    auto p = parse_args(args, {"--control-socket", "--runs-dir", "--resume-from"}, {"--force"});
    config::ExperimentConfig cfg;
    if (!load_config(p, "train", cfg)) return kExitUsage;
    RunOptions opts;
    opts.force = p.has("--force");
    opts.resume_from = p.option("--resume-from");
    opts.control_socket = p.option("--control-socket");
    opts.runs_dir = p.option("--runs-dir");
    const bool is_worker =
        std::getenv("RANK") || std::getenv("WORLD_SIZE") || std::getenv("SLURM_PROCID");
    if (!is_worker && !layout_runs(cfg, cfg.launch.nproc, 1)) return kExitUsage;
    if (cfg.launch.nproc > 1 && !is_worker)
        return launch_from_train(cfg, args, "train", resolve_save_folder(cfg, opts.runs_dir));
    return run_worker(cfg, opts);
}

// bench's JSON line: throughput and MFU, and what --memory, --checkpoint-every and --callbacks
// measured.
struct BenchRun {
    int64_t steps = 0, tokens_per_step = 0, world = 1;
    double flops_per_token = 0, peak = 0;
    bool with_callbacks = false;
};

protocol::BenchReport bench_report(const config::ExperimentConfig& cfg, const BenchRun& run,
                                   const train::BenchResults& r) {
    const double secs = std::chrono::duration<double>(r.t1 - r.t0).count();
    double tps = static_cast<double>(run.steps * run.tokens_per_step) / secs;  // all ranks together
    double achieved = tps / static_cast<double>(run.world) * run.flops_per_token;  // per device
    protocol::BenchReport out;
    out.config = cfg.run_name;
    out.steps = run.steps;
    out.world_size = run.world;
    out.step_time_s = secs / static_cast<double>(run.steps);
    out.tokens_per_s = tps;
    out.flops_per_token = run.flops_per_token;
    out.achieved_gflops = achieved / 1e9;
    out.peak_gflops = run.peak / 1e9;
    out.mfu = std::min(1.0, achieved / run.peak);  // above 1 the peak was measured low
    out.threads = torch::get_num_threads();
    out.dtype = train::compute_dtype(cfg) == torch::kBFloat16 ? "bfloat16" : "float32";
    out.callbacks = run.with_callbacks;
    if (!r.peaks.empty()) {
        // The peak of each rank, in GiB: the process's RSS (ru_maxrss, everything: LibTorch,
        // model, gradients, optimizer state, activations), and on a GPU the allocator's peak.
        protocol::BenchMemory memory;
        memory.ac_mode = config::enum_to_string(cfg.train_module.ac_config.mode);
        memory.dp = run.world > cfg.train_module.tp_config.degree
                        ? config::enum_to_string(cfg.train_module.dp_config.name)
                        : "none";
        memory.tp = cfg.train_module.tp_config.degree;
        for (const auto& [rss, cuda] : r.peaks) {
            protocol::BenchRankMemory rank;
            rank.peak_rss_gib = static_cast<double>(rss) / (1 << 30);
            if (cuda > 0) rank.peak_cuda_gib = static_cast<double>(cuda) / (1 << 30);
            memory.ranks.push_back(rank);
        }
        out.memory = std::move(memory);
    }
    if (r.saves > 0) {
        out.checkpoint_mode = timer_async_name(cfg);
        out.checkpoints = r.saves;
        out.checkpoint_blocking_s = r.blocked_s / static_cast<double>(r.saves);
    }
    if (!r.profile_ns.empty()) {
        // Where the timed steps' time went (op_kinds.h); each kind's share and ms per step.
        int64_t total = 0;
        for (auto ns : r.profile_ns) total += ns;
        protocol::BenchProfile profile;
        for (int k = 0; k < train::kOpKinds; ++k) {
            const auto ns = static_cast<double>(r.profile_ns[static_cast<std::size_t>(k)]);
            profile.kinds[train::op_kind_name(static_cast<train::OpKind>(k))] = {
                {"share", total > 0 ? ns / static_cast<double>(total) : 0.0},
                {"ms_per_step", ns / 1e6 / static_cast<double>(run.steps)}};
        }
        profile.time = r.profile_cuda ? "GPU kernels" : "CPU operators' self time";
        profile.ms_per_step = static_cast<double>(total) / 1e6 / static_cast<double>(run.steps);
        out.profile = std::move(profile);
    }
    const auto& sink_stats = r.sink_stats;
    if (sink_stats && sink_stats->records > 0) {
        // CPU the metric files cost, off the training thread: the writer thread plus handing each
        // record over. Over the step's CPU budget (step time x threads), it bounds the slowdown
        // when every core is busy training; with a spare core it costs the step nothing.
        const double per_step = (sink_stats->writer_cpu_s + sink_stats->submit_cpu_s) /
                                static_cast<double>(sink_stats->records);
        protocol::BenchMetricFiles files;
        files.records = static_cast<int64_t>(sink_stats->records);
        files.cpu_ms_per_step = 1e3 * per_step;
        files.cpu_share = per_step / (secs / static_cast<double>(run.steps) *
                                      static_cast<double>(torch::get_num_threads()));
        out.metric_files = files;
    }
    return out;
}

int cmd_bench(const Args& args) {
    auto p = parse_args(args, {"--steps", "--warmup", "--nproc", "--checkpoint-every"},
                        {"--callbacks", "--memory", "--profile"});
    config::ExperimentConfig cfg;
    if (!load_config(p, "bench", cfg)) return kExitUsage;
    int64_t steps = 0, warmup = 0, nproc = 0, ckpt_every = 0;
    try {
        steps = std::stoll(p.option("--steps", "20"));
        warmup = std::stoll(p.option("--warmup", "3"));
        nproc = std::stoll(p.option("--nproc", std::to_string(cfg.launch.nproc)));
        ckpt_every = std::stoll(p.option("--checkpoint-every", "0"));
    } catch (const std::exception&) {
        std::cerr << "lathe-engine bench: --steps, --warmup, --nproc and --checkpoint-every take "
                     "integers\n";
        return kExitUsage;
    }
    if (steps < 1 || warmup < 1 || nproc < 1 || ckpt_every < 0) {
        std::cerr << "lathe-engine bench: --steps, --warmup and --nproc must be >= 1\n";
        return kExitUsage;
    }
    const bool is_worker = std::getenv("RANK") || std::getenv("WORLD_SIZE");
    if (!is_worker && !layout_runs(cfg, nproc, 1)) return kExitUsage;
    if (nproc > 1 && !is_worker) {
        // Same arguments for every rank (minus --nproc); the launcher sets launch.nproc.
        Args worker_args;
        for (std::size_t i = 0; i < args.size(); ++i) {
            if (args[i] == "--nproc") {
                ++i;
                continue;
            }
            if (args[i].rfind("--nproc=", 0) == 0) continue;
            worker_args.push_back(args[i]);
        }
        cfg.launch.nproc = nproc;
        return launch_from_train(cfg, worker_args, "bench");
    }
    const bool with_callbacks = p.has("--callbacks");
    cfg.trainer.max_duration = config::Duration::steps(warmup + steps);
    cfg.trainer.hard_stop.reset();
    cfg.trainer.no_checkpoints = true;
    cfg.trainer.no_evals = true;
    if (!with_callbacks) cfg.trainer.metrics_collect_interval = 1000000;
    // Files (metrics, checkpoints) go to a scratch folder that is removed afterwards. A remote
    // trainer.save_folder takes the checkpoints (--checkpoint-every measures remote saves); the
    // ones the benchmark saved there are deleted afterwards as well.
    std::string scratch;
    const std::string remote_folder =
        remote::is_remote_path(cfg.trainer.save_folder) ? cfg.trainer.save_folder : "";
    if (with_callbacks || ckpt_every > 0) {
        // One folder for every rank of the job: named after the job's port, or this process.
        const char* port = std::getenv("MASTER_PORT");
        scratch = std::string("/tmp/lathe-bench-") + (port ? port : std::to_string(::getpid()));
        cfg.trainer.save_folder = remote_folder.empty() ? scratch : remote_folder;
        cfg.trainer.work_dir = scratch;
        if (!remote_folder.empty()) cfg.run_name = scratch.substr(scratch.rfind('/') + 1);
    } else {
        cfg.trainer.save_folder = "/nonexistent-bench";
    }

    // The trainer (and so its callbacks) is gone when run_worker returns: results live out here.
    auto results = std::make_shared<train::BenchResults>();
    train::BenchTimerOptions timer;
    timer.warmup = warmup;
    timer.checkpoint_every = ckpt_every;
    timer.async = cfg.trainer.callbacks.checkpointer.save_async.value_or(true);
    timer.memory = p.has("--memory");
    timer.profile = p.has("--profile");

    double flops_per_token = 0, peak = 0;
    int64_t tokens_per_step = 0, world = 1;
    RunOptions opts;
    opts.bench = !with_callbacks;
    opts.customize = [&](train::Trainer& t) {
        t.add_callback("bench_timer", train::make_bench_timer(timer, results));
        // Its checkpoints hold what a run's do (without the other callbacks, in plain bench).
        if (ckpt_every > 0 && !with_callbacks && cfg.trainer.callbacks.config_saver.enabled)
            t.add_callback("config_saver",
                           train::make_config_saver(cfg.trainer.callbacks.config_saver));
        flops_per_token =
            static_cast<double>(t.train_module().num_flops_per_token(cfg.dataset.sequence_length));
        peak = train::measure_mfu_peak(t.env().device(), train::compute_dtype(cfg));
        tokens_per_step = t.data_loader().global_batch_size();
        world = t.env().world_size();
    };
    RunOptions remote_opts = opts;
    if (!remote_folder.empty()) remote_opts.runs_dir = "/tmp";  // the run folder is the scratch
    int rc = run_worker(cfg, remote_opts);
    const bool rank0 = !std::getenv("RANK") || std::string(std::getenv("RANK")) == "0";
    if (!scratch.empty() && rank0) std::filesystem::remove_all(scratch);
    if (!remote_folder.empty() && rank0) {
        for (const auto& dir : results->saved) {
            try {
                remote::storage_for(dir)->remove_all(dir);
            } catch (const std::exception& e) {
                std::cerr << "lathe-engine bench: cannot remove " << dir << ": " << e.what()
                          << "\n";
            }
        }
    }
    if (rc != kExitOk) return rc;
    if (std::getenv("RANK") && std::string(std::getenv("RANK")) != "0") return kExitOk;
    BenchRun run;
    run.steps = steps;
    run.tokens_per_step = tokens_per_step;
    run.world = world;
    run.flops_per_token = flops_per_token;
    run.peak = peak;
    run.with_callbacks = with_callbacks;
    std::cout << protocol::write_output(bench_report(cfg, run, *results)) << std::endl;
    return kExitOk;
}

int cmd_inspect(const Args& args) {
    bool verify = false;
    Args paths;
    for (const auto& a : args) {
        if (a == "--verify")
            verify = true;
        else
            paths.push_back(a);
    }
    if (paths.size() != 1 || paths[0].rfind("--", 0) == 0) {
        std::cerr << "usage: lathe-engine inspect [--verify] CHECKPOINT_DIR|RUN_DIR\n";
        return kExitUsage;
    }
    const std::string& path = paths[0];
    std::error_code ec;
    const bool remote = remote::is_remote_path(path);
    if (!remote && !std::filesystem::is_directory(path, ec)) {
        std::cerr << "lathe-engine inspect: " << path
                  << (std::filesystem::exists(path, ec)
                          ? ": is a file, not a checkpoint folder or run folder\n"
                          : ": no such folder\n");
        return kExitUsage;
    }
    // One checkpoint, or a folder of them (a run folder, a remote checkpoint folder). An HTTP
    // folder cannot be listed: it is taken as one checkpoint.
    const auto storage = remote::storage_for(path);
    const bool one = (remote && path.rfind("s3://", 0) != 0) ||
                     storage->exists(run_folder::join(path, run_folder::kCheckpointMetadataFile)) ||
                     storage->exists(run_folder::join(path, run_folder::train_state_file(0)));
    bool all_verified = true;
    nlohmann::ordered_json out;
    if (one) {
        const auto info = checkpoint::inspect_checkpoint(path, verify);
        all_verified = info.verified;
        out = record_json::to_message(info);
    } else {
        protocol::CheckpointListing listing;
        (remote ? listing.checkpoint_folder : listing.run_folder) = path;
        for (const auto& c : checkpoint::Checkpointer::find_checkpoints(path)) {
            auto info = checkpoint::inspect_checkpoint(c.path, verify && c.complete);
            if (!c.complete) info.problem = c.problem;
            all_verified = all_verified && info.verified;
            info.files.reset();
            listing.checkpoints.push_back(std::move(info));
        }
        // An empty checkpoint folder, or an unfinished one holding only empty folders, has
        // nothing to verify: that is not a pass.
        if (listing.checkpoints.empty()) {
            all_verified = false;
            listing.problem =
                "no checkpoint here: an empty or unfinished checkpoint folder, or a run folder "
                "that holds none";
        }
        out = record_json::to_message(listing);
    }
    std::cout << out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    // --verify fails when anything did not verify, so scripts can rely on the exit code.
    return verify && !all_verified ? kExitFailure : kExitOk;
}

}  // namespace lathe::cli
