// control_channel: rank 0's end of the GUI's control channel (docs/protocol.md). Sends hello,
// metrics (from the async metric logging), status, checkpoint, error and bye; applies the GUI's
// checkpoint and stop commands at the next step boundary (the trainer then agrees on them across
// ranks, so every rank acts on the same step).
#include "engine/config/io.h"
#include "engine/protocol/control_client.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"
#include "engine/util/torch_error.h"

#include <chrono>
#include <regex>

namespace lathe::train {

namespace {

using Clock = std::chrono::steady_clock;

class ControlChannel : public Callback {
public:
    explicit ControlChannel(std::string socket) : socket_(std::move(socket)) {}
    int priority() const override {
        return 2;
    }  // before the checkpointer, so "checkpointing" is sent first

    void post_attach() override {
        std::string err;
        if (!client_.connect(socket_, &err))
            log::error("control channel: cannot connect to {}: {}", socket_, err);
        else
            was_connected_ = true;
    }

    void pre_train() override {
        auto& t = trainer();
        start_ = Clock::now();
        start_step_ = step();
        protocol::Hello h;
        h.world_size = t.env().world_size();
        h.device = t.env().device().str();
        h.run_dir = t.save_folder();
        h.config = config::to_json(t.config());
        client_.send(h);
        send_status(protocol::RunState::running, true);
    }

    void pre_step(const data::Batch&) override { poll(); }

    void post_train_batch() override {
        if (trainer().checkpoint_requested_this_step())
            send_status(protocol::RunState::checkpointing, true);
    }

    void post_step() override {
        check_connection();
        send_status(
            trainer().is_canceled() ? protocol::RunState::stopping : protocol::RunState::running,
            false);
    }

    void log_metrics(int64_t s, const metrics::StepMetrics& m) override {
        protocol::Metrics e;
        e.step = s;
        e.tokens = s * trainer().tokens_per_batch();
        e.wall_time = std::chrono::duration<double>(Clock::now() - start_).count();
        for (const auto& [name, v] : m) e.values.emplace_back(name, v);
        client_.send(e);
    }

    void post_checkpoint_saved(const std::string& path) override {
        static const std::regex re(R"(step(\d+)$)");
        std::smatch m;
        protocol::CheckpointSaved c;
        c.path = path;
        if (std::regex_search(path, m, re)) c.step = std::stoll(m[1]);
        c.duration_s = trainer().last_checkpoint_write_s();
        client_.send(c);
    }

    void on_samples(int64_t s, const nlohmann::json& samples) override {
        protocol::Samples m;
        m.step = s;
        for (const auto& x : samples)
            m.samples.push_back({x.value("prompt", std::string()), x.value("text", std::string())});
        client_.send(m);
    }

    void on_error(const std::exception& e) override {
        client_.send(protocol::ErrorEvent{message_of(e)});
        send_status(protocol::RunState::failed, true);
        client_.send(protocol::Bye{protocol::ExitReason::failed});
        failed_ = true;
    }

    void close() override {
        check_connection(/*stop=*/false);
        if (!failed_) {
            bool stopped = trainer().is_canceled();
            send_status(protocol::RunState::finished, true);
            client_.send(protocol::Bye{stopped ? protocol::ExitReason::stopped
                                               : protocol::ExitReason::finished});
        }
        auto lines = invalid_log_.feed(client_.poll_invalid(), Clock::now());
        for (auto& line : invalid_log_.finish()) lines.push_back(std::move(line));
        for (const auto& line : lines) log::warn("control channel: {}", line);
        client_.close();
    }

private:
    // The workbench closed the channel without a stop (it was killed, or crashed): stop at this
    // step with the final checkpoint, as on SIGTERM, and leave "interrupted" in status.json.
    void check_connection(bool stop = true) {
        if (!was_connected_ || lost_ || client_.connected()) return;
        lost_ = true;
        auto& t = trainer();
        t.control().controller_lost = true;
        if (!stop || t.is_canceled()) return;
        log::warn(
            "control channel: the workbench is gone (its connection closed); stopping at step "
            "{} with a final checkpoint",
            step());
        t.cancel_run(kControllerLostReason);
    }

    void poll() {
        check_connection();
        for (const auto& line : invalid_log_.feed(client_.poll_invalid(), Clock::now()))
            log::warn("control channel: {}", line);
        for (const auto& c : client_.poll_commands()) {
            auto& t = trainer();
            if (std::holds_alternative<protocol::SaveCheckpoint>(c)) {
                log::info("control channel: checkpoint requested");
                t.request_checkpoint();
            } else if (const auto* stop = std::get_if<protocol::Stop>(&c)) {
                log::info("control channel: stop requested{}",
                          stop->checkpoint ? "" : " (no final checkpoint)");
                if (!stop->checkpoint) t.control().stop_without_checkpoint = true;
                t.cancel_run("stop requested from the GUI");
                send_status(protocol::RunState::stopping, true);
            }
        }
    }

    void send_status(protocol::RunState state, bool force) {
        auto now = Clock::now();
        if (!force && now - last_status_ < std::chrono::milliseconds(200)) return;
        last_status_ = now;
        auto& t = trainer();
        protocol::Status s;
        s.state = state;
        s.step = step();
        s.total_steps = t.max_steps();
        double elapsed = std::chrono::duration<double>(now - start_).count();
        int64_t done = step() - start_step_;
        if (done > 0 && elapsed > 0) {
            s.tokens_per_s = static_cast<double>(done * t.tokens_per_batch()) / elapsed;
            s.eta_s = elapsed / static_cast<double>(done) *
                      static_cast<double>(std::max<int64_t>(0, t.max_steps() - step()));
        }
        client_.send(s);
    }

    std::string socket_;
    protocol::ControlClient client_;
    protocol::InvalidCommandLog invalid_log_;
    Clock::time_point start_ = Clock::now(), last_status_{};
    int64_t start_step_ = 0;
    bool failed_ = false;
    bool was_connected_ = false;
    bool lost_ = false;
};

}  // namespace

std::unique_ptr<Callback> make_control_channel(const std::string& socket_path) {
    return std::make_unique<ControlChannel>(socket_path);
}

}  // namespace lathe::train
