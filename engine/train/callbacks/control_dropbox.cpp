// control_dropbox: rank 0 takes the requests of the run folder's control drop-box
// (run_folder/control_requests.h; `lathe-engine control RUN_DIR checkpoint|stop`) at step
// boundaries and acts on them as the GUI's control channel does: the trainer then agrees on them
// across ranks, so every rank checkpoints or stops at the same step. The folder is looked at
// most every 200 ms, so a fast run pays one stat() a few times a second.
#include "engine/run_folder/control_requests.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <chrono>
#include <ctime>

namespace lathe::train {

namespace {

using Clock = std::chrono::steady_clock;

class ControlDropbox : public Callback {
public:
    explicit ControlDropbox(std::string run_dir) : run_dir_(std::move(run_dir)) {}

    void pre_train() override {
        run_folder::make_control_dir(run_dir_);
        started_ = std::time(nullptr);
        take();  // stale requests of an earlier run are removed (and said) now
    }

    void pre_step(const data::Batch&) override {
        const auto now = Clock::now();
        if (now - last_look_ < std::chrono::milliseconds(200)) return;
        last_look_ = now;
        take();
    }

private:
    void take() {
        std::vector<std::string> problems;
        const auto requests = run_folder::take_control_requests(run_dir_, started_, problems);
        for (const auto& p : problems) log::warn("control drop-box: {}", p);
        auto& t = trainer();
        for (const auto& r : requests) {
            switch (r.command) {
                case run_folder::ControlCommand::checkpoint:
                    log::info("control drop-box: checkpoint requested ({})", r.path);
                    t.request_checkpoint();
                    break;
                case run_folder::ControlCommand::stop_without_checkpoint:
                    t.control().stop_without_checkpoint = true;
                    [[fallthrough]];
                case run_folder::ControlCommand::stop:
                    log::info("control drop-box: stop requested{} ({})",
                              r.command == run_folder::ControlCommand::stop
                                  ? ""
                                  : " (no final checkpoint)",
                              r.path);
                    t.cancel_run("stop requested through the control drop-box");
                    break;
            }
        }
    }

    std::string run_dir_;
    std::time_t started_ = 0;
    Clock::time_point last_look_{};
};

}  // namespace

std::unique_ptr<Callback> make_control_dropbox(const std::string& run_dir) {
    return std::make_unique<ControlDropbox>(run_dir);
}

}  // namespace lathe::train
