// run_status: writes the run folder's config.json and keeps its status.json
// (engine/run_folder/records.h) current on rank 0: at start, every 10 logged steps and at the end
// (finished, stopped with the reason, or failed with the error). Both are first written at
// pre_train, after every check and any checkpoint load has passed, so a start that fails (a
// config the checkpoint cannot take, say) leaves the run folder as it was. It also remembers what
// the end-of-run summary needs.
#pragma once

#include "engine/train/callback.h"

#include <chrono>
#include <optional>
#include <string>

namespace lathe::train {

class RunStatusCallback : public Callback {
public:
    /// `folder`: the run folder; `model`: a one-line description ("64d x 2 layers, vocab 256");
    /// `config_text`: the resolved config, written as config.json.
    RunStatusCallback(std::string folder, std::string model, std::string config_text);

    int priority() const override { return -3; }
    void pre_train() override;
    void log_metrics(int64_t step, const metrics::StepMetrics& m) override;
    void on_error(const std::exception& e) override;
    void close() override;

    /// Seconds since pre_train().
    double elapsed_s() const;
    /// The step training started from (after any checkpoint was loaded).
    int64_t start_step() const { return start_step_; }
    std::optional<double> first_loss() const { return first_loss_; }
    std::optional<double> last_loss() const { return last_loss_; }

private:
    void write(const char* state, const std::string& reason);

    std::string folder_, model_, config_text_, started_at_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    int64_t start_step_ = 0;
    std::optional<double> first_loss_, last_loss_;
    bool started_ = false, failed_ = false;
};

}  // namespace lathe::train
