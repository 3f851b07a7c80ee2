// Trainer: the composition root of a training run, after OLMo-core's Trainer.
//
// fit() reads like OLMo-core's: load a checkpoint if there is one, pre_train hooks, then epochs of
// steps (load batch -> forward/backward over micro-batches -> clip -> optimizer step -> callbacks),
// metrics flushed to the bookkeeping thread every metrics_collect_interval steps, and teardown on
// every exit path.
#pragma once

#include "engine/checkpoint/restore.h"
#include "engine/config/config.h"
#include "engine/data/data_loader.h"
#include "engine/distributed/env.h"
#include "engine/metrics/bookkeeping.h"
#include "engine/stateful/stateful.h"
#include "engine/train/callback.h"
#include "engine/train/train_module.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace lathe::checkpoint {
class Checkpointer;
}

namespace lathe::train {

/// Commands that reach the trainer from outside the training loop (signals, the GUI).
/// The cancel reason when the workbench that controlled the run went away.
inline constexpr const char* kControllerLostReason =
    "the workbench that controlled the run went away (its control connection closed)";

struct ControlFlags {
    std::atomic<bool> cancel{false};
    std::atomic<bool> checkpoint{false};
    std::atomic<bool> stop_without_checkpoint{false};
    /// The workbench that controlled the run went away (its control connection closed): the run
    /// stops with its final checkpoint and status.json says "interrupted".
    std::atomic<bool> controller_lost{false};
    std::mutex mu;
    std::string cancel_reason;
};

/// The bits of the per-step control op: each rank sets its own, and the op's max all-reduce makes
/// every rank apply the union at the same step.
enum class ControlBit : int64_t {
    cancel = 1,               ///< stop at this step (with the final checkpoint)
    checkpoint = 2,           ///< save a checkpoint now
    no_final_checkpoint = 4,  ///< stop without the final checkpoint
    bookkeeping_failed = 8,   ///< a rank's metrics bookkeeping failed (a non-finite loss)
};
inline constexpr ControlBit kControlBits[] = {ControlBit::cancel, ControlBit::checkpoint,
                                              ControlBit::no_final_checkpoint,
                                              ControlBit::bookkeeping_failed};
constexpr int64_t bit(ControlBit b) {
    return static_cast<int64_t>(b);
}
constexpr bool has(int64_t bits, ControlBit b) {
    return (bits & bit(b)) != 0;
}

// Also the RestoreTarget of checkpoint::Restorer, which decides what a run starts from.
class Trainer : public stateful::Stateful, private checkpoint::RestoreTarget {
public:
    Trainer(const config::ExperimentConfig& cfg, dist::Environment& env,
            TransformerTrainModule& train_module, data::DataLoader& data_loader,
            std::string save_folder);
    ~Trainer() override;
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    /// Adds a callback under `name` (names are unique; a later add replaces).
    void add_callback(const std::string& name, std::unique_ptr<Callback> cb);
    Callback* callback(const std::string& name) const;
    /// Callbacks in run order (priority, then insertion).
    std::vector<std::pair<std::string, Callback*>> callbacks_in_order() const;

    /// Trains until max_duration, hard_stop or a cancel. Rethrows the first error after on_error
    /// and close() have run.
    void fit();

    // ---- metrics ----
    void record_metric(const std::string& name, const torch::Tensor& value,
                       std::optional<config::ReduceType> reduce,
                       config::MetricMergeStrategy merge = config::MetricMergeStrategy::warn);
    void record_metric(const std::string& name, double value,
                       std::optional<config::ReduceType> reduce,
                       config::MetricMergeStrategy merge = config::MetricMergeStrategy::warn);
    /// Hands everything recorded so far to the bookkeeping thread (reduction, then callbacks).
    /// With `before_current_step`, the current step's metrics stay for the step's own flush, so
    /// every step reaches the callbacks exactly once.
    void flush_metrics(bool before_current_step = false);
    metrics::Bookkeeper& bookkeeper() { return *bookkeeper_; }

    // ---- control ----
    /// Asks every rank to stop at a step boundary (signal handlers, the GUI, callbacks).
    void cancel_run(const std::string& reason);
    void request_checkpoint() { control_.checkpoint = true; }
    bool is_canceled() const { return canceled_; }
    const std::string& cancel_reason() const { return cancel_reason_; }
    ControlFlags& control() { return control_; }
    /// True once a "checkpoint now" command reached this step on every rank.
    bool checkpoint_requested_this_step() const { return checkpoint_now_; }
    bool final_checkpoint_wanted() const { return !no_final_checkpoint_; }

    // ---- counters and durations ----
    int64_t global_step() const { return global_step_; }
    int64_t global_train_tokens_seen() const { return global_train_tokens_seen_; }
    int64_t epoch() const { return epoch_; }
    double global_train_petaflops() const { return global_train_petaflops_; }
    int64_t max_steps() const;
    int64_t max_tokens() const;
    int64_t steps_per_epoch() const { return data_loader_.total_batches(); }
    bool training_complete();

    // ---- checkpoints ----
    /// Saves checkpoint_folder/step{N}; returns the path (async saves complete in the background).
    std::string save_checkpoint(bool ephemeral, bool async);
    /// Seconds the latest completed save took to write (for an async save, on the writer thread);
    /// set before post_checkpoint_saved() runs, so callbacks can report it.
    double last_checkpoint_write_s() const { return last_checkpoint_write_s_; }
    /// Loads `dir` (a checkpoint, a folder of them, or a Hugging Face model folder) by the
    /// restore rules (checkpoint/restore.h). Returns false when none was found.
    bool maybe_load_checkpoint(const std::string& dir, std::optional<bool> load_trainer_state,
                               std::optional<bool> load_optim_state);
    bool checkpoint_loaded() const { return checkpoint_loaded_; }
    checkpoint::Checkpointer& checkpointer() { return *checkpointer_; }
    /// A checkpoint's content: the train module's tensors; step counters, data loader position,
    /// RNG and callback states as JSON.
    std::vector<std::pair<std::string, torch::Tensor>> state_tensors() override;
    void load_state_tensors(const std::map<std::string, torch::Tensor>& tensors,
                            bool load_optim) override;
    nlohmann::json state_dict() const override;
    void load_state_dict(const nlohmann::json& state) override;

    const config::ExperimentConfig& config() const { return cfg_; }
    const config::TrainerConfig& trainer_config() const { return cfg_.trainer; }
    dist::Environment& env() { return env_; }
    TransformerTrainModule& train_module() { return train_module_; }
    data::DataLoader& data_loader() { return data_loader_; }
    /// The run folder (local): metrics, logs, status, and the checkpoints unless
    /// trainer.save_folder is remote.
    const std::string& save_folder() const { return save_folder_; }
    /// Where checkpoints go: trainer.save_folder when it is remote (s3://), else the run folder.
    const std::string& checkpoint_folder() const { return checkpoint_folder_; }
    /// trainer.work_dir, or the save folder: where callbacks put working files.
    std::string work_dir() const { return cfg_.trainer.work_dir.value_or(save_folder_); }
    /// Copies `relative` (a path under work_dir) to the same path under the save folder, whole or
    /// not at all (OLMo-core's persist_working_file); a no-op when work_dir is the save folder.
    /// Returns the path in the save folder.
    std::string persist_working_file(const std::string& relative) const;
    int64_t tokens_per_batch() const { return data_loader_.global_batch_size(); }
    /// Hands the sampler's output at `step` to every callback's on_samples (rank 0).
    void publish_samples(int64_t step, const nlohmann::json& samples) {
        for_each_callback([&](Callback& c) { c.on_samples(step, samples); });
    }

private:
    void fit_epoch();
    void sync_control();
    void apply_control(int64_t bits, const std::string& reason);
    void shutdown(bool gracefully);
    void record_async_checkpoint_duration();
    template <class F>
    void for_each_callback(F&& f) {
        for (auto& [name, cb] : ordered_) f(*cb);
    }

    config::ExperimentConfig cfg_;
    dist::Environment& env_;
    TransformerTrainModule& train_module_;
    data::DataLoader& data_loader_;
    std::string save_folder_;
    std::string checkpoint_folder_;
    std::string tokenizer_file_;  ///< dataset.tokenizer's bytes, read at the first save
    /// tokenizer_config.json and chat_template.jinja beside dataset.tokenizer, carried with it
    std::vector<std::pair<std::string, std::string>> tokenizer_companions_;
    std::unique_ptr<checkpoint::Checkpointer> checkpointer_;
    std::unique_ptr<metrics::Bookkeeper> bookkeeper_;

    std::vector<std::pair<std::string, std::unique_ptr<Callback>>> callbacks_;
    std::vector<std::pair<std::string, Callback*>> ordered_;

    int64_t global_step_ = 0;
    int64_t global_train_tokens_seen_ = 0;
    double global_train_petaflops_ = 0;
    int64_t epoch_ = 1;
    bool checkpoint_loaded_ = false;
    bool canceled_ = false;
    bool checkpoint_now_ = false;
    bool no_final_checkpoint_ = false;
    std::string cancel_reason_;
    ControlFlags control_;
    std::shared_future<void> control_future_;
    std::shared_ptr<std::atomic<int64_t>> control_result_;
    std::shared_ptr<std::string> control_reason_;

    std::map<int64_t, std::map<std::string, torch::Tensor>> metrics_;
    std::map<std::string, std::optional<config::ReduceType>> reduce_types_;
    std::mutex metrics_mu_;
    std::atomic<double> pending_async_duration_{-1.0};
    std::atomic<double> last_checkpoint_write_s_{0.0};
    double pending_load_duration_ = -1.0;
    bool restoring_hf_ = false;  ///< the load under way is a Hugging Face model's weights

    // checkpoint::RestoreTarget
    void load_checkpoint(const std::string& dir, bool trainer_state, bool optim_state) override;
    void load_hf_model(const std::string& dir) override;
    void restored(const std::string& dir, double seconds) override;
    checkpoint::Restorer restorer();
};

}  // namespace lathe::train
