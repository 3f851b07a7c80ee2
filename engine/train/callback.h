// Callback: the extension point of the Trainer, with OLMo-core's hooks (see docs/callbacks.md).
// Higher priority runs first; ties keep the order in which callbacks were added.
#pragma once

#include "engine/data/data_loader.h"
#include "engine/metrics/bookkeeping.h"

#include <nlohmann/json.hpp>

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace lathe::train {

class Trainer;

class Callback {
public:
    virtual ~Callback() = default;
    virtual int priority() const { return 0; }

    virtual void post_attach() {}
    virtual void pre_train() {}
    virtual void pre_epoch() {}
    virtual void pre_load_batch() {}
    virtual void pre_step(const data::Batch&) {}
    virtual void pre_optim_step() {}
    virtual void post_train_batch() {}
    virtual void post_step() {}
    virtual void post_epoch() {}
    virtual void post_train() {}
    /// Runs on the bookkeeping thread (when async) for every step, in step order; may add metrics.
    virtual void pre_log_metrics(int64_t /*step*/, metrics::StepMetrics& /*metrics*/) {}
    /// Runs on the bookkeeping thread (when async) for every step, in step order.
    virtual void log_metrics(int64_t /*step*/, const metrics::StepMetrics& /*metrics*/) {}
    /// Before a checkpoint is written: files to write into it beside the model and trainer state,
    /// as (name, contents); appended to `files` (config_saver's config.json).
    virtual void checkpoint_files(std::vector<std::pair<std::string, std::string>>& /*files*/) {}
    virtual void post_checkpoint_saved(const std::string& /*path*/) {}
    virtual void post_checkpoint_loaded(const std::string& /*path*/) {}
    /// Rank 0: the sampler generated `samples` ([{"prompt", "text", ...}]) at `step`.
    virtual void on_samples(int64_t /*step*/, const nlohmann::json& /*samples*/) {}
    virtual void on_error(const std::exception& /*error*/) {}
    /// Always called last, on every exit path.
    virtual void close() {}

    /// Saved in every checkpoint's trainer state under the callback's name.
    virtual nlohmann::json state_dict() const { return nullptr; }
    virtual void load_state_dict(const nlohmann::json& /*state*/) {}

    Trainer& trainer() const { return *trainer_; }
    int64_t step() const;

private:
    friend class Trainer;
    Trainer* trainer_ = nullptr;
};

}  // namespace lathe::train
