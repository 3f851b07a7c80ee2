#include "cli/run.h"

#include "checkpoint/checkpointer.h"
#include "checkpoint/tensor_file.h"
#include "cli/cli.h"
#include "config/io.h"
#include "data/data_loader.h"
#include "distributed/env.h"
#include "train/callbacks/builtin.h"
#include "train/data_parallel.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/torch_info.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <sstream>

namespace lathe::cli {

namespace fs = std::filesystem;

std::string default_runs_dir() {
    if (const char* d = std::getenv("LATHE_RUNS_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/lathe/runs";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.local/share/lathe/runs";
}

std::string resolve_save_folder(const config::ExperimentConfig& cfg, const std::string& runs_dir) {
    if (!cfg.trainer.save_folder.empty()) return cfg.trainer.save_folder;
    return (runs_dir.empty() ? default_runs_dir() : runs_dir) + "/" + cfg.run_name;
}

namespace {

std::string iso_now() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

std::string human(double v) {
    char buf[32];
    if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", v / 1e9);
    else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
    else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
    else std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

// Keeps status.json in the run folder current (rank 0) and collects the end-of-run summary.
class RunStatus : public train::Callback {
public:
    RunStatus(std::string folder, std::string model) : folder_(std::move(folder)), model_(std::move(model)) {}
    int priority() const override { return -3; }
    void pre_train() override {
        start_ = std::chrono::steady_clock::now();
        start_step_ = step();
        started_at_ = iso_now();
        write("running", "");
    }
    void log_metrics(int64_t s, const metrics::StepMetrics& m) override {
        auto it = m.find("train/CE loss");
        if (it != m.end()) {
            if (!first_loss_) first_loss_ = it->second;
            last_loss_ = it->second;
        }
        last_logged_step_ = s;
        if (s % 10 == 0) write("running", "");
    }
    void post_train() override { ended_ok_ = true; }
    void on_error(const std::exception& e) override { write("failed", e.what()); failed_ = true; }
    void close() override {
        if (failed_) return;
        auto& t = trainer();
        std::string state = t.is_canceled() ? "stopped" : "finished";
        write(state, t.is_canceled() ? t.cancel_reason() : "");
    }
    void write(const std::string& state, const std::string& reason) {
        if (trainer().env().rank() != 0) return;
        auto& t = trainer();
        nlohmann::json s = {{"state", state},
                            {"reason", reason},
                            {"pid", ::getpid()},
                            {"started_at", started_at_},
                            {"updated_at", iso_now()},
                            {"elapsed_s", elapsed()},
                            {"step", t.global_step()},
                            {"max_steps", t.max_steps()},
                            {"tokens", t.global_train_tokens_seen()},
                            {"max_tokens", t.max_tokens()},
                            {"world_size", t.env().world_size()},
                            {"model", model_},
                            {"last_loss", last_loss_ ? nlohmann::json(*last_loss_) : nlohmann::json(nullptr)}};
        try {
            checkpoint::write_file_atomic(folder_ + "/status.json", s.dump(2) + "\n");
        } catch (const std::exception& e) {
            log::warn("cannot write status.json: {}", e.what());
        }
    }
    double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
    std::optional<double> first_loss_, last_loss_;
    int64_t start_step_ = 0, last_logged_step_ = 0;

private:
    std::string folder_, model_, started_at_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    bool ended_ok_ = false, failed_ = false;
};

}  // namespace

namespace {

void flatten(const nlohmann::ordered_json& j, const std::string& path, std::map<std::string, std::string>& out) {
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
    } else {
        out[path] = j.dump();
    }
}

bool is_unsafe_change(const std::string& path) {
    return path.rfind("model.", 0) == 0 || path == "dataset.sequence_length" ||
           path == "train_module.max_sequence_length";
}

}  // namespace

std::vector<ConfigChange> config_changes(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after,
                                         std::vector<ConfigChange>* unsafe) {
    std::map<std::string, std::string> a, b;
    flatten(before, "", a);
    flatten(after, "", b);
    std::vector<ConfigChange> out;
    for (const auto& [path, v] : b) {
        auto it = a.find(path);
        std::string old = it == a.end() ? "(absent)" : it->second;
        if (old == v) continue;
        // Where the run lives and how it was started are not changes of the run itself.
        if (path == "trainer.save_folder" || path.rfind("trainer.load_", 0) == 0 || path == "trainer.hard_stop" ||
            path.rfind("launch.", 0) == 0) {
            continue;
        }
        ConfigChange c{path, old, v};
        if (is_unsafe_change(path) && unsafe) unsafe->push_back(c);
        out.push_back(c);
    }
    return out;
}

namespace {

// Sets aside the checkpoints newer than `resume_dir` and notes the resume in history.jsonl.
void prepare_resume(const std::string& folder, const std::string& resume_dir, const config::ExperimentConfig& cfg) {
    if (!checkpoint::Checkpointer::dir_is_checkpoint(resume_dir)) {
        throw Error("--resume-from " + resume_dir + ": not a complete checkpoint");
    }
    nlohmann::json saved_state = nlohmann::json::parse(checkpoint::read_text_file(resume_dir + "/train/rank0.json"));
    const int64_t from = saved_state.at("global_step").get<int64_t>();
    std::vector<ConfigChange> unsafe, changes;
    std::error_code ec;
    if (fs::exists(resume_dir + "/config.json", ec)) {
        auto before = nlohmann::ordered_json::parse(checkpoint::read_text_file(resume_dir + "/config.json"));
        changes = config_changes(before, config::to_json(cfg), &unsafe);
    }
    if (!unsafe.empty()) {
        std::string msg = "cannot resume " + resume_dir + " with a different model or sequence length:";
        for (const auto& c : unsafe) msg += "\n  " + c.path + ": " + c.before + " -> " + c.after;
        throw Error(msg);
    }
    nlohmann::json abandoned = nlohmann::json::array();
    if (fs::equivalent(fs::path(resume_dir).parent_path(), folder, ec)) {
        for (const auto& c : checkpoint::Checkpointer::find_checkpoints(folder)) {
            if (c.step <= from) continue;
            std::string to = c.path + ".abandoned";
            for (int i = 1; fs::exists(to, ec); ++i) to = c.path + ".abandoned" + std::to_string(i);
            fs::rename(c.path, to, ec);
            if (ec) throw Error("cannot set aside " + c.path + ": " + ec.message());
            abandoned.push_back(fs::path(to).filename().string());
        }
    }
    nlohmann::json changed = nlohmann::json::array();
    for (const auto& c : changes) changed.push_back({{"path", c.path}, {"before", c.before}, {"after", c.after}});
    nlohmann::json entry = {{"event", "resumed"},      {"time", iso_now()},   {"from_step", from},
                            {"checkpoint", resume_dir}, {"abandoned", abandoned}, {"config_changes", changed}};
    std::ofstream(folder + "/history.jsonl", std::ios::app) << entry.dump() << "\n";
    log::info("resuming from {} (step {}){}", resume_dir, from,
              abandoned.empty() ? "" : "; newer checkpoints set aside: " + abandoned.dump());
    for (const auto& c : changes) log::warn("config changed on resume: {}: {} -> {}", c.path, c.before, c.after);
}

}  // namespace

int run_worker(config::ExperimentConfig cfg, const RunOptions& opts) {
    dist::EnvironmentOptions eo;
    eo.seed = cfg.seed;
    eo.backend = cfg.launch.backend;
    eo.device = cfg.launch.device;
    eo.num_threads = cfg.launch.num_threads;
    eo.log_filter_type = cfg.launch.log_filter_type;
    auto env = dist::prepare_training_environment(eo);
    const int rank = env->rank();
    const std::string folder = resolve_save_folder(cfg, opts.runs_dir);
    cfg.trainer.save_folder = folder;  // config.json then resumes the same run
    std::string log_file;
    if (!opts.bench) {
        if (rank == 0) {
            fs::create_directories(folder + "/logs");
            checkpoint::write_file_atomic(folder + "/config.json", config::to_json(cfg).dump(2) + "\n");
        }
        env->cpu_group().barrier();
        log_file = folder + "/logs/rank" + std::to_string(rank) + ".log";
    }
    log::setup(rank, dist::should_log(env->world(), cfg.launch.log_filter_type), log_file);

    auto split = data::build_split(cfg.dataset, cfg.model.vocab_size);
    train::TransformerTrainModule tm(cfg, *env);
    data::DataLoader loader(split.train, cfg.data_loader, rank, env->world_size());
    train::Trainer trainer(cfg, *env, tm, loader, folder);
    RunStatus* status = nullptr;
    if (!opts.bench) {
        train::add_builtin_callbacks(trainer, split.validation);
        const auto& m = cfg.model;
        auto s = std::make_unique<RunStatus>(folder, std::to_string(m.d_model) + "d x " + std::to_string(m.n_layers) +
                                                         " layers, vocab " + std::to_string(m.vocab_size));
        status = s.get();
        trainer.add_callback("run_status", std::move(s));
    }
    if (!opts.resume_from.empty()) {
        if (rank == 0) prepare_resume(folder, opts.resume_from, cfg);
        env->cpu_group().barrier();
        if (!trainer.maybe_load_checkpoint(opts.resume_from, true, true)) {
            throw Error("--resume-from " + opts.resume_from + ": no checkpoint loaded");
        }
    }
    if (!opts.control_socket.empty() && rank == 0) {
        trainer.add_callback("control_channel", train::make_control_channel(opts.control_socket));
    }
    if (opts.customize) opts.customize(trainer);

    auto& model = tm.model();
    log::info("{}", version_line("lathe-engine"));
    log::info("run '{}' in {}", cfg.run_name, folder);
    log::info("world: {} rank(s) ({}), device {}, {} CPU thread(s) per rank", env->world_size(), env->world().source,
              env->device().str(), torch::get_num_threads());
    log::info("model: {} parameters ({} non-embedding), {} FLOPs/token", human(static_cast<double>(model->num_params())),
              human(static_cast<double>(model->num_non_embedding_params())),
              human(static_cast<double>(model->num_flops_per_token(cfg.dataset.sequence_length))));
    log::info("data: {}: {} train instances of {} tokens, {} batches per epoch; parallelism: {}",
              split.train->description(), split.train->num_instances(), cfg.dataset.sequence_length,
              loader.total_batches(), tm.data_parallel().describe());

    trainer.fit();

    if (status && rank == 0) {
        double secs = status->elapsed();
        int64_t steps = trainer.global_step() - status->start_step_;
        double tokens = static_cast<double>(steps) * static_cast<double>(trainer.tokens_per_batch());
        std::ostringstream os;
        os << "\n" << (trainer.is_canceled() ? "Stopped" : "Finished") << " '" << cfg.run_name << "' at step "
           << trainer.global_step() << "/" << trainer.max_steps() << " ("
           << human(static_cast<double>(trainer.global_train_tokens_seen())) << " tokens)";
        if (trainer.is_canceled()) os << ": " << trainer.cancel_reason();
        os << "\n";
        if (status->first_loss_) {
            char buf[128];
            std::snprintf(buf, sizeof buf, "  loss: %.4f -> %.4f\n", *status->first_loss_, *status->last_loss_);
            os << buf;
        }
        if (secs > 0 && steps > 0) {
            char buf[128];
            std::snprintf(buf, sizeof buf, "  %d steps in %.1f s: %s tokens/s\n", static_cast<int>(steps), secs,
                          human(tokens / secs).c_str());
            os << buf;
        }
        os << "  run folder: " << folder << "\n";
        auto cks = checkpoint::Checkpointer::complete_checkpoints(folder);
        if (!cks.empty()) {
            os << "  latest checkpoint: " << cks.back().path << "\n";
            if (trainer.global_step() < trainer.max_steps()) {
                os << "  resume: lathe-engine train " << folder << "/config.json\n";
            }
        }
        std::cout << os.str() << std::flush;
    }
    bool by_signal = trainer.is_canceled() && trainer.cancel_reason().rfind("SIG", 0) == 0;
    dist::teardown_training_environment(*env);
    return by_signal ? kExitInterrupted : kExitOk;
}

}  // namespace lathe::cli
