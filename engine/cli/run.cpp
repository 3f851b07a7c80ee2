#include "engine/cli/run.h"

#include "engine/config/layout.h"

#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/resume.h"
#include "engine/cli/cli.h"
#include "engine/cli/torch_info.h"
#include "engine/config/io.h"
#include "engine/config/memory_estimate.h"
#include "engine/data/data_loader.h"
#include "engine/distributed/env.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/callbacks/run_status.h"
#include "engine/train/data_parallel.h"
#include "engine/train/trainer.h"
#include "engine/util/error.h"
#include "engine/util/log.h"
#include "engine/util/torch_error.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

namespace lathe::cli {

namespace fs = std::filesystem;

std::string resolve_save_folder(const config::ExperimentConfig& cfg, const std::string& runs_dir) {
    if (!cfg.trainer.save_folder.empty() && !remote::is_remote_path(cfg.trainer.save_folder))
        return cfg.trainer.save_folder;
    return run_folder::join(runs_dir.empty() ? run_folder::default_runs_root() : runs_dir,
                            cfg.run_name);
}

namespace {

// Every rank writes into the run folder (its log, its part of each checkpoint) and reads the
// checkpoints back: the folder must be one that all ranks see. Across machines without a shared
// filesystem each would see its own folder, and the first resume would find mixed checkpoints;
// refused here instead, before any work. Rank 0 writes a random token that every rank reads back.
void check_shared_folder(const std::string& folder, dist::Environment& env) {
    const auto& group = env.cpu_group();
    std::string token;
    if (env.rank() == 0)
        token = std::to_string(std::random_device{}()) + "-" + std::to_string(::getpid());
    token = group.broadcast_string(token);
    const std::string marker =
        run_folder::join(folder, std::string(run_folder::kLogsDir) + "/.shared-check-" + token);
    if (env.rank() == 0) {
        std::ofstream(marker) << token;
    }
    group.barrier();
    std::string seen;
    {
        std::ifstream in(marker);
        std::getline(in, seen);
    }
    auto mine = torch::tensor({seen == token ? 1 : 0}, torch::kInt64);
    std::vector<torch::Tensor> all;
    group.all_gather(all, mine);
    if (env.rank() == 0) {
        std::error_code ec;
        fs::remove(marker, ec);
    }
    std::string blind;
    for (std::size_t r = 0; r < all.size(); ++r) {
        if (all[r].item<int64_t>() == 0) blind += (blind.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!blind.empty()) {
        throw Error("the run folder " + folder + " is not shared by every rank: rank(s) " + blind +
                    " cannot see the file rank 0 wrote there (machines without a shared "
                    "filesystem?). Every rank writes its part of each checkpoint into it, so it "
                    "must be on a filesystem all nodes mount (trainer.save_folder)");
    }
}

// OLMo-core's rule, on every rank alike: a local save folder needs each rank to be its
// filesystem's rank (launch.shared_filesystem, OLMO_SHARED_FS, FS_LOCAL_RANK). `launch` refuses
// an unshared filesystem across nodes before this; here every worker checks, torchrun's too.
void refuse_unshared_save_folder(const std::string& folder, dist::Environment& env) {
    const auto& w = env.world();
    auto mine = torch::tensor({w.fs_local_rank != w.rank ? 1 : 0}, torch::kInt64);
    std::vector<torch::Tensor> all;
    env.cpu_group().all_gather(all, mine);
    std::string ranks;
    for (std::size_t r = 0; r < all.size(); ++r) {
        if (all[r].item<int64_t>() != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    if (ranks.empty()) return;
    const bool by_variable = std::getenv("FS_LOCAL_RANK") != nullptr;
    throw Error("trainer.save_folder " + folder +
                " is a local folder, which every rank writes its part of each checkpoint into, "
                "but " +
                (by_variable ? std::string("FS_LOCAL_RANK") : env.shared_filesystem().source) +
                " makes rank(s) " + ranks +
                " another filesystem's: save to an s3:// folder, or put the folder on a "
                "filesystem every node mounts and " +
                (by_variable ? "unset FS_LOCAL_RANK"
                             : "set launch.shared_filesystem=true (OLMO_SHARED_FS=1)"));
}

// Free memory of `device` in bytes: CUDA's free figure for the device; on the CPU MemAvailable,
// or what the cgroup still allows when that is less. 0 when unknown (then nothing is checked).
int64_t free_memory(const torch::Device& device) {
    if (device.is_cuda()) {
        // From the CUDA runtime LibTorch has loaded (linking it here would tie the executable to
        // one CUDA major version); cudaSuccess is 0.
        using MemGetInfo = int (*)(size_t*, size_t*);
        auto get = reinterpret_cast<MemGetInfo>(::dlsym(RTLD_DEFAULT, "cudaMemGetInfo"));
        size_t free = 0, total = 0;
        if (get && get(&free, &total) == 0) return static_cast<int64_t>(free);
        return 0;
    }
    return config::host_available_memory();
}

// Refuses (exit 2, on every rank) a run whose expected peak (the training state, and a
// micro-batch's activations and logits) exceeds the device's free memory, before anything is
// allocated; --force starts it anyway. An out-of-memory error later quotes the estimate.
bool model_fits(const config::ExperimentConfig& cfg, dist::Environment& env, bool force) {
    const auto estimate = config::estimate_training_memory(cfg, env.world_size());
    set_memory_note(estimate.describe_peak());
    const int64_t sharing = env.device().is_cuda() ? 1 : env.world().local_world_size;
    std::string refusal = config::memory_refusal(estimate, free_memory(env.device()),
                                                 env.device().str(), sharing, &cfg);
    if (force && !refusal.empty() && !estimate.saturated) {
        log::warn("--force: starting although {}", refusal);
        refusal.clear();
    }
    auto refused = torch::tensor({static_cast<int64_t>(refusal.empty() ? 0 : 1)});
    env.cpu_group().all_reduce(refused, dist::ReduceOp::max);
    if (refused.item<int64_t>() == 0) {
        log::info("memory: {}", estimate.describe());
        return true;
    }
    log::error("{}", refusal.empty() ? "the model does not fit on another rank's device" : refusal);
    return false;
}

// The distributed environment's options from the launch section. The layout callback reads cfg,
// which must outlive the call to prepare_training_environment.
dist::EnvironmentOptions environment_options(const config::ExperimentConfig& cfg, bool remote) {
    dist::EnvironmentOptions eo;
    eo.seed = cfg.seed;
    eo.backend = cfg.launch.backend;
    eo.device = cfg.launch.device;
    eo.num_threads = cfg.launch.num_threads;
    eo.log_filter_type = cfg.launch.log_filter_type;
    eo.timeout = std::chrono::milliseconds(std::llround(cfg.launch.timeout_minutes * 60'000.0));
    eo.layout = [&cfg](int64_t world, int64_t nodes) {
        return config::parallel_layout(cfg, world, nodes);
    };
    eo.shared_filesystem = dist::resolve_shared_filesystem(cfg.launch.shared_filesystem, remote);
    return eo;
}

// The run folder's logs folder, made by each filesystem's first rank once the folder is known to
// be usable by every rank; returns this rank's log file. Only the logs folder now: config.json
// and status.json are written once the run has started (run_status), so a start that fails
// leaves the run folder as it was.
std::string open_logs_folder(const std::string& folder, bool remote, dist::Environment& env) {
    if (env.distributed() && !remote) refuse_unshared_save_folder(folder, env);
    // With a remote checkpoint folder and no shared filesystem each machine keeps its own run
    // folder (its ranks' logs).
    if (env.fs_local_rank() == 0)
        fs::create_directories(run_folder::join(folder, run_folder::kLogsDir));
    env.cpu_group().barrier();
    if (env.distributed() && !remote) check_shared_folder(folder, env);
    return run_folder::join(folder, run_folder::rank_log_file(env.rank()));
}

// dataset.tokenizer, when set, must fit the model's vocabulary.
void check_tokenizer(const config::ExperimentConfig& cfg) {
    if (!cfg.dataset.tokenizer) return;
    const auto tok = tokenizer::load_tokenizer(*cfg.dataset.tokenizer);
    if (tok->vocab_size() > cfg.model.vocab_size)
        throw Error("dataset.tokenizer: " + *cfg.dataset.tokenizer + " has " +
                    std::to_string(tok->vocab_size()) + " tokens, more than model.vocab_size (" +
                    std::to_string(cfg.model.vocab_size) + ")");
    log::info("tokenizer: {} ({}, {} tokens)", *cfg.dataset.tokenizer, tok->id(),
              tok->vocab_size());
}

// The log's opening lines: version, run folder, world, model size, data and parallelism.
void log_run_start(const config::ExperimentConfig& cfg, const RunOptions& opts,
                   const std::string& folder, const dist::Environment& env,
                   train::TransformerTrainModule& tm, const data::DataSplit& split,
                   const data::DataLoader& loader) {
    auto& model = tm.model();
    log::info("{}", version_line("lathe-engine"));
    // A benchmark writes no run folder: naming one would point at a folder that never exists.
    if (opts.bench)
        log::info("benchmark of '{}' (no run folder, no files)", cfg.run_name);
    else
        log::info("run '{}' in {}", cfg.run_name, folder);
    log::info("world: {} rank(s) ({}), layout {}, device {}, {} CPU thread(s) per rank",
              env.world_size(), env.world().source, env.layout().describe(), env.device().str(),
              torch::get_num_threads());
    log::info("model: {} parameters ({} non-embedding), {} FLOPs/token",
              config::human_count(static_cast<double>(model->num_params())),
              config::human_count(static_cast<double>(model->num_non_embedding_params())),
              config::human_count(
                  static_cast<double>(model->num_flops_per_token(cfg.dataset.sequence_length))));
    std::string parallelism = tm.data_parallel().describe();
    if (const auto copy = tm.compute_copy_dtype())
        parallelism +=
            std::string(", params in ") + c10::toString(*copy) + " (fp32 master weights)";
    if (env.layout().tp > 1)
        parallelism =
            (env.dp_size() > 1 ? parallelism + "; " : std::string()) + "tensor parallel over " +
            std::to_string(env.layout().tp) + " ranks" +
            (cfg.train_module.tp_config.loss_parallel ? " (vocabulary-parallel loss)" : "");
    log::info("data: {}: {} train instances of {} tokens, {} batches per epoch; parallelism: {}",
              split.train->description(), split.train->num_instances(), cfg.dataset.sequence_length,
              loader.total_batches(), parallelism);
}

// What rank 0 prints on the console when the run ends: where it stopped, the loss, the speed,
// and how to resume.
void print_run_end(const config::ExperimentConfig& cfg, train::Trainer& trainer,
                   const train::RunStatusCallback& status, const std::string& folder,
                   const std::string& checkpoint_folder, bool remote) {
    const double secs = status.elapsed_s();
    const int64_t steps = trainer.global_step() - status.start_step();
    const double tokens =
        static_cast<double>(steps) * static_cast<double>(trainer.tokens_per_batch());
    std::ostringstream os;
    os << "\n"
       << (trainer.is_canceled() ? "Stopped" : "Finished") << " '" << cfg.run_name << "' at step "
       << trainer.global_step() << "/" << trainer.max_steps() << " ("
       << config::human_count(static_cast<double>(trainer.global_train_tokens_seen()))
       << " tokens)";
    if (trainer.is_canceled()) os << ": " << trainer.cancel_reason();
    os << "\n";
    if (status.first_loss()) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "  loss: %.4f -> %.4f\n", *status.first_loss(),
                      *status.last_loss());
        os << buf;
    }
    if (secs > 0 && steps > 0) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "  %d steps in %.1f s: %s tokens/s\n",
                      static_cast<int>(steps), secs, config::human_count(tokens / secs).c_str());
        os << buf;
    }
    os << "  run folder: " << folder << "\n";
    if (remote) os << "  checkpoints: " << checkpoint_folder << "\n";
    auto cks = checkpoint::Checkpointer::complete_checkpoints(checkpoint_folder);
    if (!cks.empty()) {
        os << "  latest checkpoint: " << cks.back().path << "\n";
        if (trainer.global_step() < trainer.max_steps()) {
            os << "  resume: lathe-engine train "
               << run_folder::join(folder, run_folder::kConfigFile) << "\n";
        }
    }
    std::cout << os.str() << std::flush;
}

// Removes a run folder this process made when the run never started (no status.json).
class NewRunFolderGuard {
public:
    NewRunFolderGuard(std::string folder, bool armed) : folder_(std::move(folder)), armed_(armed) {}
    NewRunFolderGuard(const NewRunFolderGuard&) = delete;
    NewRunFolderGuard& operator=(const NewRunFolderGuard&) = delete;
    ~NewRunFolderGuard() {
        if (!armed_) return;
        std::error_code ec;
        if (fs::exists(run_folder::join(folder_, run_folder::kStatusFile), ec) || ec) return;
        fs::remove_all(folder_, ec);
        if (!ec) log::info("removed {}: the run did not start", folder_);
    }

private:
    std::string folder_;
    bool armed_;
};

}  // namespace

int run_worker(config::ExperimentConfig cfg, const RunOptions& opts) {
    const bool remote = remote::is_remote_path(cfg.trainer.save_folder);
    auto env = dist::prepare_training_environment(environment_options(cfg, remote));
    const int rank = env->rank();
    const std::string folder = resolve_save_folder(cfg, opts.runs_dir);
    // config.json then resumes the same run (a remote folder stays as given: it holds only the
    // checkpoints, and config.json records where they are).
    if (remote) {
        if (remote::storage_for(cfg.trainer.save_folder)->remote() &&
            cfg.trainer.save_folder.rfind("s3://", 0) != 0)
            throw Error("trainer.save_folder " + cfg.trainer.save_folder +
                        ": HTTP folders are read only; save to a local or s3:// folder");
    } else {
        cfg.trainer.save_folder = folder;
    }
    const std::string checkpoint_folder = remote ? cfg.trainer.save_folder : folder;
    // A new run that is refused before it starts (too big, a bad tokenizer, a checkpoint it
    // cannot load) takes its folder with it: the runs list shows no empty run and the name stays
    // free (issue 45 item 4). Once status.json is written the run has started, and all stays.
    // Rank 0's folder only: it is the one that gets status.json (without a shared filesystem
    // another machine's first rank keeps its logs in a folder of its own, which must stay).
    std::error_code exists_error;
    NewRunFolderGuard guard(folder, !opts.bench && rank == 0 && !fs::exists(folder, exists_error));
    const std::string log_file =
        opts.bench ? std::string() : open_logs_folder(folder, remote, *env);
    log::setup(rank, dist::should_log(env->world(), cfg.launch.log_filter_type), log_file);
    if (!model_fits(cfg, *env, opts.force)) {
        dist::teardown_training_environment(*env);
        return kExitUsage;
    }

    check_tokenizer(cfg);
    auto split = data::build_split(
        cfg.dataset, cfg.model.vocab_size,
        remote ? std::string() : run_folder::join(folder, run_folder::kTokenRangesFile),
        cfg.data_loader.global_batch_size);
    train::TransformerTrainModule tm(cfg, *env);
    // Batches are split over the data-parallel ranks; the ranks of a TP group read the same.
    data::DataLoader loader(split.train, cfg.data_loader, env->dp_rank(), env->dp_size());
    train::Trainer trainer(cfg, *env, tm, loader, folder);
    train::RunStatusCallback* status = nullptr;
    if (!opts.bench) {
        train::add_builtin_callbacks(trainer, split.validation);
        const auto& m = cfg.model;
        auto s = std::make_unique<train::RunStatusCallback>(
            folder,
            std::to_string(m.d_model) + "d x " + std::to_string(m.n_layers) + " layers, vocab " +
                std::to_string(m.vocab_size),
            config::to_json(cfg).dump(2) + "\n");
        status = s.get();
        trainer.add_callback("run_status", std::move(s));
    }
    if (!opts.resume_from.empty()) {
        if (rank == 0)
            checkpoint::prepare_resume(folder, checkpoint_folder, opts.resume_from,
                                       config::to_json(cfg));
        env->cpu_group().barrier();
        if (!trainer.maybe_load_checkpoint(opts.resume_from, true, true)) {
            throw Error("--resume-from " + opts.resume_from + ": no checkpoint loaded");
        }
    }
    if (!opts.control_socket.empty() && rank == 0) {
        trainer.add_callback("control_channel", train::make_control_channel(opts.control_socket));
    }
    // The run folder's drop-box: checkpoint and stop requests from `lathe-engine control` (a
    // cluster job, a shell), read by rank 0 of the machine whose run folder it is.
    if (!opts.bench && rank == 0)
        trainer.add_callback("control_dropbox", train::make_control_dropbox(folder));
    if (opts.customize) opts.customize(trainer);
    log_run_start(cfg, opts, folder, *env, tm, split, loader);

    trainer.fit();

    if (status && rank == 0)
        print_run_end(cfg, trainer, *status, folder, checkpoint_folder, remote);
    const bool by_signal = trainer.is_canceled() && trainer.cancel_reason().rfind("SIG", 0) == 0;
    dist::teardown_training_environment(*env);
    return by_signal ? kExitInterrupted : kExitOk;
}

}  // namespace lathe::cli
