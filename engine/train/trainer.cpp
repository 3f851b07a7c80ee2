#include "engine/train/trainer.h"
#include "engine/token_files/manifest.h"
#include "engine/tokenizer/tokenizer.h"

#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/hf_convert.h"
#include "engine/config/io.h"
#include "engine/hf/family.h"
#include "engine/remote/s3.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/util/error.h"
#include "engine/util/log.h"
#include "engine/util/stop_signals.h"
#include "engine/util/torch_error.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

namespace lathe::train {

using config::MetricMergeStrategy;
using config::ReduceType;

int64_t Callback::step() const {
    return trainer_->global_step();
}

namespace {

// The one place a global is unavoidable: a signal handler can only reach static storage.
std::atomic<ControlFlags*> g_signal_target{nullptr};
std::atomic<int> g_signal_number{0};

void on_signal(int sig, SignalSender sender) {
    if (g_signal_number.exchange(sig) != 0) {
        // A second signal while a graceful stop is under way: stop now, unless it is the parent
        // repeating itself (a dying workbench's death signal comes once per thread of it).
        if (sender == SignalSender::other) ::_exit(128 + sig);
        return;
    }
    if (auto* flags = g_signal_target.load()) flags->cancel = true;
}

// Routes SIGINT/SIGTERM to `flags` while it lives.
class SignalScope {
public:
    explicit SignalScope(ControlFlags* flags) {
        g_signal_number = 0;
        g_signal_target = flags;
    }
    ~SignalScope() { g_signal_target = nullptr; }

private:
    StopSignalHandler handler_{on_signal};
};

std::string to_hex(const torch::Tensor& bytes) {
    static const char* digits = "0123456789abcdef";
    auto c = bytes.contiguous();
    const auto* p = c.data_ptr<uint8_t>();
    std::string s;
    s.reserve(static_cast<std::size_t>(c.numel()) * 2);
    for (int64_t i = 0; i < c.numel(); ++i) {
        s += digits[p[i] >> 4];
        s += digits[p[i] & 15];
    }
    return s;
}

torch::Tensor from_hex(const std::string& s) {
    auto t = torch::empty({static_cast<int64_t>(s.size() / 2)}, torch::kUInt8);
    auto* p = t.data_ptr<uint8_t>();
    auto val = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    for (std::size_t i = 0; i + 1 < s.size(); i += 2)
        p[i / 2] = static_cast<uint8_t>(val(s[i]) * 16 + val(s[i + 1]));
    return t;
}

}  // namespace

Trainer::Trainer(const config::ExperimentConfig& cfg, dist::Environment& env,
                 TransformerTrainModule& train_module, data::DataLoader& data_loader,
                 std::string save_folder)
    : cfg_(cfg),
      env_(env),
      train_module_(train_module),
      data_loader_(data_loader),
      save_folder_(std::move(save_folder)) {
    checkpoint_folder_ =
        remote::is_remote_path(cfg.trainer.save_folder) ? cfg.trainer.save_folder : save_folder_;
    while (checkpoint_folder_.size() > 1 && checkpoint_folder_.back() == '/')
        checkpoint_folder_.pop_back();
    const auto& r = cfg.trainer.remote;
    remote::TransferOptions transfer;
    transfer.max_retries = static_cast<int>(r.max_retries);
    transfer.retry_delay_s = r.retry_delay_s;
    transfer.stall_timeout_s = r.stall_timeout_s;
    transfer.part_size = static_cast<uint64_t>(r.part_size_mb) << 20;
    transfer.parallel = static_cast<int>(r.parallel_transfers);
    remote::set_transfer_options(transfer);
    checkpointer_ = std::make_unique<checkpoint::Checkpointer>(env, cfg.trainer.save_overwrite);
    // Remote saves are staged here, on this machine's disk, and uploaded from there.
    checkpointer_->set_staging_dir(run_folder::join(work_dir(), ".checkpoint-staging"));
    bookkeeper_ = std::make_unique<metrics::Bookkeeper>(
        cfg.trainer.async_bookkeeping.value_or(true),
        static_cast<double>(cfg.trainer.bookkeeping_soft_timeout));
    train_module_.attach(this);
}

Trainer::~Trainer() {
    bookkeeper_->shutdown();
}

void Trainer::add_callback(const std::string& name, std::unique_ptr<Callback> cb) {
    cb->trainer_ = this;
    Callback* added = cb.get();
    // A callback under a name that is taken replaces the old one (OLMo-core's dict semantics).
    auto it = std::find_if(callbacks_.begin(), callbacks_.end(),
                           [&](const auto& p) { return p.first == name; });
    if (it != callbacks_.end()) {
        it->second = std::move(cb);
    } else {
        callbacks_.emplace_back(name, std::move(cb));
    }
    // Higher priority first; ties keep insertion order (stable sort). The order must be the same on
    // every rank because callbacks issue collectives.
    ordered_.clear();
    for (auto& [n, c] : callbacks_) ordered_.emplace_back(n, c.get());
    std::stable_sort(ordered_.begin(), ordered_.end(), [](const auto& a, const auto& b) {
        return a.second->priority() > b.second->priority();
    });
    added->post_attach();
}

Callback* Trainer::callback(const std::string& name) const {
    for (const auto& [n, c] : callbacks_) {
        if (n == name) return c.get();
    }
    return nullptr;
}

std::vector<std::pair<std::string, Callback*>> Trainer::callbacks_in_order() const {
    return ordered_;
}

std::string Trainer::persist_working_file(const std::string& relative) const {
    namespace fs = std::filesystem;
    const fs::path from = fs::path(work_dir()) / relative, to = fs::path(save_folder_) / relative;
    std::error_code ec;
    if (fs::equivalent(from, to, ec)) return to.string();
    fs::create_directories(to.parent_path());
    const fs::path tmp = to.string() + ".tmp";
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, to, ec);
    if (ec) {
        fs::remove(tmp);
        throw Error("cannot copy " + from.string() + " into the run folder (" + to.string() +
                    "): " + ec.message());
    }
    return to.string();
}

// ---- durations ----------------------------------------------------------------------------------

int64_t Trainer::max_steps() const {
    const auto& d = cfg_.trainer.max_duration;
    const int64_t tpb = tokens_per_batch();
    switch (d.unit) {
        case config::DurationUnit::steps:
            return d.value;
        case config::DurationUnit::tokens:
            return global_step_ +
                   (std::max<int64_t>(d.value - global_train_tokens_seen_, 0) + tpb - 1) / tpb;
        case config::DurationUnit::epochs: {
            if (epoch_ > d.value) return global_step_;
            int64_t remaining = std::max<int64_t>(
                data_loader_.total_batches() - data_loader_.batches_processed(), 0);
            return global_step_ + remaining + (d.value - epoch_) * data_loader_.total_batches();
        }
    }
    return 0;
}

int64_t Trainer::max_tokens() const {
    const auto& d = cfg_.trainer.max_duration;
    if (d.unit == config::DurationUnit::tokens) return d.value;
    return global_train_tokens_seen_ + (max_steps() - global_step_) * tokens_per_batch();
}

bool Trainer::training_complete() {
    // Distributed, a bookkeeping error (a non-finite loss) reaches every rank at the same step
    // through the control op instead (sync_control), so no rank runs ahead into a collective the
    // others will never join.
    if (!env_.distributed()) bookkeeper_->check_error();
    if (canceled_) return true;
    const auto& t = cfg_.trainer;
    if (t.max_duration.due(global_step_, global_train_tokens_seen_, epoch_)) return true;
    return t.hard_stop && t.hard_stop->due(global_step_, global_train_tokens_seen_, epoch_);
}

// ---- metrics ------------------------------------------------------------------------------------

void Trainer::record_metric(const std::string& name, const torch::Tensor& value,
                            std::optional<ReduceType> reduce, MetricMergeStrategy merge) {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    auto rt = reduce_types_.find(name);
    if (rt == reduce_types_.end()) {
        reduce_types_.emplace(name, reduce);
    } else if (rt->second != reduce) {
        throw Error("metric '" + name + "' was recorded with reduce type " +
                    (rt->second ? config::enum_to_string(*rt->second) : std::string("none")) +
                    " and now with " +
                    (reduce ? config::enum_to_string(*reduce) : std::string("none")) +
                    "; it may not change");
    }
    auto v = value.detach().to(torch::kFloat64).reshape({});
    auto& step_metrics = metrics_[global_step_];
    auto it = step_metrics.find(name);
    if (it == step_metrics.end()) {
        step_metrics.emplace(name, v);
        return;
    }
    auto& old = it->second;
    switch (merge) {
        case MetricMergeStrategy::warn:
            log::warn("metric '{}' recorded twice at step {}; keeping the first value", name,
                      global_step_);
            break;
        case MetricMergeStrategy::latest:
            old = v;
            break;
        case MetricMergeStrategy::oldest:
            break;
        case MetricMergeStrategy::mean:
            old = (old + v) / 2;
            break;
        case MetricMergeStrategy::sum:
            old = old + v;
            break;
        case MetricMergeStrategy::max:
            old = torch::maximum(old, v);
            break;
        case MetricMergeStrategy::min:
            old = torch::minimum(old, v);
            break;
    }
}

void Trainer::record_metric(const std::string& name, double value, std::optional<ReduceType> reduce,
                            MetricMergeStrategy merge) {
    record_metric(name, torch::tensor(value, torch::kFloat64), reduce, merge);
}

void Trainer::flush_metrics(bool before_current_step) {
    std::map<int64_t, std::map<std::string, torch::Tensor>> taken;
    std::map<std::string, std::optional<ReduceType>> types;
    {
        std::lock_guard<std::mutex> lock(metrics_mu_);
        taken.swap(metrics_);
        if (before_current_step) {
            auto it = taken.find(global_step_);
            if (it != taken.end()) {
                metrics_.insert(taken.extract(it));
            }
        }
        types = reduce_types_;
    }
    // One transfer for everything on the device, started here without waiting for it: the
    // bookkeeping thread waits for it (a CUDA event) before it reads the values, so the training
    // thread never stalls on the device. Metrics recorded as host values are read directly.
    std::vector<metrics::LocalMetric> local;
    std::vector<torch::Tensor> on_device;
    std::vector<std::size_t> device_slots;
    for (auto& [step, m] : taken) {
        for (auto& [name, t] : m) {
            local.push_back({step, name, types[name], 0.0});
            if (t.device().is_cpu()) {
                local.back().value = t.to(torch::kFloat64).item<double>();
            } else {
                device_slots.push_back(local.size() - 1);
                on_device.push_back(t.to(torch::kFloat64).reshape({1}));
            }
        }
    }
    torch::Tensor host;
    std::shared_ptr<c10::Event> copied;
    if (!on_device.empty()) {
        auto all = torch::cat(on_device);
        const bool cuda = all.is_cuda();
        host = torch::empty(all.sizes(),
                            torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(cuda));
        host.copy_(all, /*non_blocking=*/cuda);
        if (!all.is_cpu()) {
            c10::impl::VirtualGuardImpl impl(all.device().type());
            copied = std::make_shared<c10::Event>(all.device().type());
            copied->record(impl.getStream(all.device()));
        }
    }
    bookkeeper_->submit("reduce metrics", [this, local = std::move(local), host, copied,
                                           device_slots = std::move(device_slots)]() mutable {
        if (copied) copied->synchronize();
        if (host.defined()) {
            const double* p = host.data_ptr<double>();
            for (std::size_t i = 0; i < device_slots.size(); ++i)
                local[device_slots[i]].value = p[i];
        }
        auto reduced = metrics::reduce_metrics(local, env_.bookkeeping_group());
        for (auto& [step, m] : reduced) {
            metrics::check_and_derive(step, m);
            for (auto& [name, cb] : ordered_) cb->pre_log_metrics(step, m);
            for (auto& [name, cb] : ordered_) cb->log_metrics(step, m);
        }
    });
}

// ---- control ------------------------------------------------------------------------------------

void Trainer::cancel_run(const std::string& reason) {
    {
        std::lock_guard<std::mutex> lock(control_.mu);
        if (control_.cancel_reason.empty()) control_.cancel_reason = reason;
    }
    control_.cancel = true;
}

void Trainer::apply_control(int64_t bits, const std::string& reason) {
    if (has(bits, ControlBit::bookkeeping_failed)) {
        bookkeeper_->join();
        bookkeeper_->check_error();  // this rank's own error, when it has one
        throw Error("stopping at step " + std::to_string(global_step_) +
                    ": the metrics bookkeeping of another rank failed");
    }
    checkpoint_now_ = has(bits, ControlBit::checkpoint);
    if (has(bits, ControlBit::no_final_checkpoint)) no_final_checkpoint_ = true;
    if (has(bits, ControlBit::cancel) && !canceled_) {
        canceled_ = true;
        cancel_reason_ = reason;
        log::info("stopping at step {}: {}", global_step_, reason);
    }
}

void Trainer::sync_control() {
    int64_t local = 0;
    if (control_.cancel.exchange(false)) local |= bit(ControlBit::cancel);
    if (control_.checkpoint.exchange(false)) local |= bit(ControlBit::checkpoint);
    if (control_.stop_without_checkpoint.exchange(false))
        local |= bit(ControlBit::no_final_checkpoint);
    std::string reason;
    if (has(local, ControlBit::cancel)) {
        std::lock_guard<std::mutex> lock(control_.mu);
        reason = control_.cancel_reason;
        if (reason.empty() && g_signal_number != 0) {
            reason = g_signal_number == SIGINT ? "SIGINT received" : "SIGTERM received";
        }
        if (reason.empty()) reason = "cancel requested";
    }
    if (!env_.distributed()) {
        apply_control(local, reason);
        return;
    }
    // Every rank submits one control op per step and applies the previous step's result, so all
    // ranks act on the same step. The op runs on the bookkeeping thread (the only user of its group).
    int64_t agreed = 0;
    if (control_future_.valid()) {
        control_future_.get();
        agreed = control_result_->load();
    }
    auto result = std::make_shared<std::atomic<int64_t>>(0);
    auto reason_out = std::make_shared<std::string>();
    auto group = &env_.bookkeeping_group();
    auto* bk = bookkeeper_.get();
    control_future_ = bookkeeper_->submit("control", [group, local, result, bk] {
        // bookkeeping_failed: operations run in order, so every failure of the metrics submitted
        // before this op is known here. One 0/1 entry per bit, reduced with max.
        const int64_t mine = local | (bk->failed() ? bit(ControlBit::bookkeeping_failed) : 0);
        std::vector<int64_t> flags;
        for (ControlBit b : kControlBits) flags.push_back(has(mine, b) ? 1 : 0);
        auto t = torch::tensor(flags, torch::kInt64);
        group->all_reduce(t, dist::ReduceOp::max);
        int64_t agreed_bits = 0;
        for (std::size_t i = 0; i < std::size(kControlBits); ++i)
            if (t[static_cast<int64_t>(i)].item<int64_t>() != 0)
                agreed_bits |= bit(kControlBits[i]);
        result->store(agreed_bits);
    });
    if (!reason.empty()) *control_reason_ = reason;
    control_result_ = result;
    apply_control(agreed, control_reason_ && !control_reason_->empty()
                              ? *control_reason_
                              : "canceled by another rank");
}

// ---- fit ----------------------------------------------------------------------------------------

void Trainer::fit() {
    canceled_ = false;
    control_reason_ = std::make_shared<std::string>();
    SignalScope signals(&control_);
    checkpoint_loaded_ = restorer().restore(*this, checkpoint_loaded_);
    env_.cpu_group().barrier();
    std::string order;
    for (auto& [n, c] : ordered_) order += (order.empty() ? "" : ", ") + n;
    log::info("callbacks: {}", order);
    log::info("training for {} steps ({} tokens per step)", max_steps(), tokens_per_batch());

    try {
        for_each_callback([](Callback& c) { c.pre_train(); });
        train_module_.pre_train(data_loader_);
        if (!canceled_) {
            while (!training_complete()) fit_epoch();
            train_module_.finish_steps();
        }
        for_each_callback([](Callback& c) { c.post_train(); });
    } catch (const std::exception& e) {
        log::error("training failed at step {}: {}", global_step_, message_of(e));
        if (has_backtrace(e)) log::debug("the error in full: {}", e.what());
        for_each_callback([&](Callback& c) {
            try {
                c.on_error(e);
            } catch (const std::exception& inner) {
                log::error("on_error of a callback failed: {}", inner.what());
            }
        });
        shutdown(false);
        throw;
    }
    shutdown(true);
}

void Trainer::fit_epoch() {
    data_loader_.reshuffle(epoch_);
    for_each_callback([](Callback& c) { c.pre_epoch(); });
    train_module_.zero_grads();
    bool first = true;
    while (true) {
        for_each_callback([](Callback& c) { c.pre_load_batch(); });
        auto batch = data_loader_.next();
        if (!batch) break;
        ++global_step_;
        record_async_checkpoint_duration();
        global_train_tokens_seen_ += data_loader_.global_batch_size();
        global_train_petaflops_ += static_cast<double>(train_module_.num_flops_per_token(
                                       data_loader_.dataset().sequence_length())) *
                                   static_cast<double>(data_loader_.global_batch_size()) / 1e15;
        bool skip = false;
        for (const auto& r : cfg_.trainer.steps_to_skip)
            skip = skip || (r.start <= global_step_ && global_step_ < r.stop);
        // A mixture's realised share: the step's tokens of each source, summed over the ranks.
        const auto& sources = data_loader_.dataset().source_names();
        for (std::size_t s = 0; s < sources.size() && s < batch->source_tokens.size(); ++s)
            record_metric("data/source/" + sources[s] + " tokens",
                          static_cast<double>(batch->source_tokens[s]), ReduceType::sum);
        for_each_callback([&](Callback& c) { c.pre_step(*batch); });
        if (skip) {
            log::warn("skipping training on step {} intentionally (trainer.steps_to_skip)",
                      global_step_);
        } else {
            train_module_.train_batch(*batch);
            for_each_callback([](Callback& c) { c.pre_optim_step(); });
            train_module_.optim_step();
            train_module_.zero_grads();
        }
        sync_control();
        for_each_callback([](Callback& c) { c.post_train_batch(); });
        for_each_callback([](Callback& c) { c.post_step(); });
        // The last step is flushed by shutdown(), after post_train's final checkpoint, so that each
        // step reaches the callbacks exactly once.
        if (training_complete()) return;
        if (first || global_step_ % cfg_.trainer.metrics_collect_interval == 0) flush_metrics();
        first = false;
    }
    flush_metrics(/*before_current_step=*/true);
    for_each_callback([](Callback& c) { c.post_epoch(); });
    ++epoch_;
    data_loader_.reset();
}

void Trainer::record_async_checkpoint_duration() {
    double d = pending_async_duration_.exchange(-1.0);
    if (d >= 0) record_metric("checkpoint/save_async_duration_s", d, ReduceType::max);
    if (pending_load_duration_ >= 0) {
        record_metric("checkpoint/load_duration_s", pending_load_duration_, ReduceType::max);
        pending_load_duration_ = -1;
    }
}

void Trainer::shutdown(bool gracefully) {
    if (gracefully) {
        checkpointer_->wait();
        record_async_checkpoint_duration();
        flush_metrics();
        bookkeeper_->join();
        checkpointer_->wait();
    } else if (!env_.distributed()) {
        // After an error other ranks may never answer: a distributed run does not wait on
        // collectives here (the launcher stops the rest of the job).
        bookkeeper_->join();
        try {
            checkpointer_->wait();
        } catch (const std::exception& e) {
            log::error("{}", e.what());
        }
    }
    for_each_callback([](Callback& c) {
        try {
            c.close();
        } catch (const std::exception& e) {
            log::error("close of a callback failed: {}", e.what());
        }
    });
    if (!gracefully && env_.distributed()) return;
    bookkeeper_->shutdown();
    if (gracefully) {
        bookkeeper_->check_error();
        env_.cpu_group().barrier();
    }
}

// ---- checkpoints --------------------------------------------------------------------------------

std::vector<std::pair<std::string, torch::Tensor>> Trainer::state_tensors() {
    return train_module_.state_tensors();
}

void Trainer::load_state_tensors(const std::map<std::string, torch::Tensor>& tensors,
                                 bool load_optim) {
    const auto& mapping = cfg_.train_module.load_key_mapping;
    if (!mapping || mapping->empty()) {
        train_module_.load_state_tensors(tensors, load_optim);
        return;
    }
    // train_module.load_key_mapping: a parameter's tensors (its weights and optimizer state) are
    // read under its name in the checkpoint.
    for (const auto& [current, saved] : *mapping) {
        if (!tensors.count("model." + saved))
            throw Error("train_module.load_key_mapping: the checkpoint has no parameter '" + saved +
                        "' (mapped from '" + current + "')");
    }
    std::map<std::string, torch::Tensor> renamed, mapped;
    for (const auto& [key, t] : tensors) {
        std::string name;
        for (const auto& [current, saved] : *mapping) {
            for (const std::string prefix : {"model.", "optim.state."}) {
                const std::string from = prefix + saved;
                if (key == from || key.rfind(from + ".", 0) == 0)
                    name = prefix + current + key.substr(from.size());
            }
        }
        (name.empty() ? renamed[key] : mapped[name]) = t;
    }
    // A mapped tensor wins over one the checkpoint has under the target's own name.
    for (auto& [name, t] : mapped) renamed[name] = t;
    train_module_.load_state_tensors(renamed, load_optim);
}

nlohmann::json Trainer::state_dict() const {
    nlohmann::json cbs = nlohmann::json::object();
    for (const auto& [n, c] : callbacks_) {
        auto s = c->state_dict();
        if (!s.is_null()) cbs[n] = s;
    }
    auto gen = at::detail::getDefaultCPUGenerator();
    torch::Tensor rng;
    {
        std::lock_guard<std::mutex> lock(gen.mutex());
        rng = gen.get_state();
    }
    return {{"global_step", global_step_},
            {"global_train_tokens_seen", global_train_tokens_seen_},
            {"global_train_petaflops", global_train_petaflops_},
            {"max_steps", max_steps()},
            {"data_loader", data_loader_.state_dict()},
            {"epoch", epoch_},
            {"world_size", env_.world_size()},
            {"rng", {{"torch", to_hex(rng)}, {"torch_version", TORCH_VERSION}}},
            {"callbacks", cbs}};
}

void Trainer::load_state_dict(const nlohmann::json& s) {
    try {
        data_loader_.load_state_dict(s.at("data_loader"));
        global_step_ = s.at("global_step").get<int64_t>();
        global_train_tokens_seen_ = s.at("global_train_tokens_seen").get<int64_t>();
        global_train_petaflops_ = s.value("global_train_petaflops", 0.0);
        epoch_ = s.at("epoch").get<int64_t>();
        if (s.contains("callbacks")) {
            for (auto& [n, c] : callbacks_) {
                if (s["callbacks"].contains(n)) c->load_state_dict(s["callbacks"][n]);
            }
        }
        int saved_world = s.value("world_size", 1);
        if (saved_world == env_.world_size() && s.contains("rng")) {
            auto gen = at::detail::getDefaultCPUGenerator();
            std::lock_guard<std::mutex> lock(gen.mutex());
            gen.set_state(from_hex(s["rng"].at("torch").get<std::string>()));
        } else if (saved_world != env_.world_size()) {
            log::warn(
                "checkpoint was written by {} rank(s), this run has {}: model and optimizer state "
                "carry over, "
                "RNG states do not",
                saved_world, env_.world_size());
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("trainer state is malformed: ") + e.what());
    }
}

std::string Trainer::save_checkpoint(bool ephemeral, bool async) {
    std::string dir =
        run_folder::join(checkpoint_folder_, run_folder::checkpoint_folder_name(global_step_));
    // Metrics first, so callback state tied to them is current in the checkpoint.
    flush_metrics(/*before_current_step=*/true);
    bookkeeper_->join();
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<std::string, std::string>> extra_files;
    for_each_callback([&](Callback& c) { c.checkpoint_files(extra_files); });
    // The run's tokenizer travels with its checkpoints (generate, export).
    if (cfg_.dataset.tokenizer) {
        if (tokenizer_file_.empty()) {
            tokenizer_file_ = run_folder::read_text_file(*cfg_.dataset.tokenizer);
            // The chat template and special tokens the data was rendered with (a prepare-data
            // --chat folder's copy), else those beside the tokenizer (a Hugging Face model's
            // folder), so `generate --chat`, Try it and exports find them in the checkpoint.
            auto tokenizer_dir = std::filesystem::path(*cfg_.dataset.tokenizer).parent_path();
            for (const auto& p : cfg_.dataset.paths) {
                std::error_code ec;
                if (token_files::has_manifest(p) &&
                    std::filesystem::is_regular_file(
                        std::filesystem::path(p) / "chat_template.jinja", ec)) {
                    tokenizer_dir = p;
                    break;
                }
            }
            for (const char* name : {"tokenizer_config.json", "chat_template.jinja"}) {
                std::error_code ec;
                if (std::filesystem::is_regular_file(tokenizer_dir / name, ec))
                    tokenizer_companions_.emplace_back(
                        name, run_folder::read_text_file((tokenizer_dir / name).string()));
            }
        }
        extra_files.emplace_back(tokenizer::canonical_file_name(tokenizer_file_), tokenizer_file_);
        for (const auto& f : tokenizer_companions_) extra_files.push_back(f);
    }
    checkpointer_->save(dir, *this, ephemeral, async, extra_files,
                        [this, dir, async](double seconds) {
                            // Recorded by the training thread at its next step (this may run on the writer thread).
                            if (async) pending_async_duration_ = seconds;
                            last_checkpoint_write_s_ = seconds;
                            for_each_callback([&](Callback& c) { c.post_checkpoint_saved(dir); });
                        });
    record_metric("checkpoint/save_duration_s",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  ReduceType::max);
    return dir;
}

checkpoint::Restorer Trainer::restorer() {
    return checkpoint::Restorer(
        *checkpointer_, env_,
        checkpoint::RestoreSettings::of(cfg_.trainer, save_folder_, checkpoint_folder_));
}

bool Trainer::maybe_load_checkpoint(const std::string& dir, std::optional<bool> load_trainer_state,
                                    std::optional<bool> load_optim_state) {
    return restorer().load_from(*this, dir, load_trainer_state, load_optim_state);
}

void Trainer::load_checkpoint(const std::string& dir, bool trainer_state, bool optim_state) {
    restoring_hf_ = false;
    checkpointer_->load(dir, *this, trainer_state, optim_state);
}

void Trainer::load_hf_model(const std::string& dir) {
    restoring_hf_ = true;
    const checkpoint::ModelSource source(dir);
    const auto diffs = hf::model_differences(source.model(), cfg_.model);
    if (!diffs.empty()) {
        std::string list;
        for (const auto& d : diffs) list += "\n  " + d;
        throw Error("cannot load " + dir + ": its model differs from the config's:" + list);
    }
    std::map<std::string, torch::Tensor> tensors;
    for (auto& [name, t] : source.weights(cfg_.model, cfg_.train_module.load_key_mapping.value_or(
                                                          std::map<std::string, std::string>{})))
        tensors.emplace("model." + name, std::move(t));
    // The names are already mapped (load_key_mapping applied by the source).
    train_module_.load_state_tensors(tensors, /*load_optim=*/false);
}

void Trainer::restored(const std::string& dir, double seconds) {
    // Recorded with the first step trained after loading, so the loaded step is not logged twice.
    pending_load_duration_ = seconds;
    if (restoring_hf_)
        log::info("loaded the weights of Hugging Face model {}; trainer and optimizer start fresh",
                  dir);
    else
        log::info("loaded checkpoint {} (step {})", dir, global_step_);
    for_each_callback([&](Callback& c) { c.post_checkpoint_loaded(dir); });
    checkpoint_loaded_ = true;
}

}  // namespace lathe::train
