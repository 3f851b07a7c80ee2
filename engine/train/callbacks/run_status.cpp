#include "engine/train/callbacks/run_status.h"

#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <unistd.h>

namespace lathe::train {

RunStatusCallback::RunStatusCallback(std::string folder, std::string model, std::string config_text)
    : folder_(std::move(folder)), model_(std::move(model)), config_text_(std::move(config_text)) {}

void RunStatusCallback::pre_train() {
    if (trainer().env().rank() == 0) {
        // A run of this folder that died without a final status (SIGKILL, a crash): say so
        // before its status.json is overwritten.
        const auto old = run_folder::read_record<run_folder::RunStatus>(
            run_folder::join(folder_, run_folder::kStatusFile));
        if (old && old->pid != static_cast<int64_t>(::getpid()) &&
            run_folder::effective_state(*old) == run_folder::RunStatus::kInterrupted)
            log::warn(
                "the previous run of this folder was interrupted at step {}: status.json said "
                "\"running\", but its process {} is gone (killed or crashed) without a final "
                "status; this run goes on from the newest complete checkpoint",
                old->step, old->pid);
        run_folder::write_file_atomic(run_folder::join(folder_, run_folder::kConfigFile),
                                      config_text_);
    }
    started_ = true;
    start_ = std::chrono::steady_clock::now();
    start_step_ = step();
    started_at_ = run_folder::iso_time_now();
    write(run_folder::RunStatus::kRunning, "");
}

void RunStatusCallback::log_metrics(int64_t s, const metrics::StepMetrics& m) {
    if (auto it = m.find("train/CE loss"); it != m.end()) {
        if (!first_loss_) first_loss_ = it->second;
        last_loss_ = it->second;
    }
    if (s % 10 == 0) write(run_folder::RunStatus::kRunning, "");
}

void RunStatusCallback::on_error(const std::exception& e) {
    failed_ = true;
    // Before pre_train nothing of this start is in the run folder (and the log says why).
    if (started_) write(run_folder::RunStatus::kFailed, e.what());
}

void RunStatusCallback::close() {
    if (failed_ || !started_) return;
    auto& t = trainer();
    if (t.is_canceled() && t.control().controller_lost) {
        // Stopped (with its final checkpoint) because the workbench that ran it was killed.
        // Whatever came first (the closed connection, or the workbench's death signal) stopped it.
        std::string why =
            std::string(kControllerLostReason) + "; stopped at step " + std::to_string(step());
        if (t.cancel_reason() != kControllerLostReason) why += " (" + t.cancel_reason() + ")";
        write(run_folder::RunStatus::kInterrupted, why);
    } else if (t.is_canceled()) {
        write(run_folder::RunStatus::kStopped, t.cancel_reason());
    } else {
        write(run_folder::RunStatus::kFinished, "");
    }
}

double RunStatusCallback::elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void RunStatusCallback::write(const char* state, const std::string& reason) {
    auto& t = trainer();
    if (t.env().rank() != 0) return;
    run_folder::RunStatus s;
    s.state = state;
    s.reason = reason;
    s.pid = ::getpid();
    s.started_at = started_at_;
    s.updated_at = run_folder::iso_time_now();
    s.elapsed_s = elapsed_s();
    s.step = t.global_step();
    s.max_steps = t.max_steps();
    s.tokens = t.global_train_tokens_seen();
    s.max_tokens = t.max_tokens();
    s.world_size = t.env().world_size();
    s.model = model_;
    s.last_loss = last_loss_;
    try {
        // A run that ends on a full disk must still say so: the final states overwrite the file
        // in place when no temporary file fits.
        const bool final_state = s.state != run_folder::RunStatus::kRunning;
        run_folder::write_record(
            run_folder::join(folder_, run_folder::kStatusFile), s,
            final_state ? run_folder::WhenFull::overwrite_in_place : run_folder::WhenFull::fail);
    } catch (const std::exception& e) {
        log::warn("cannot write status.json: {}", e.what());
    }
}

}  // namespace lathe::train
