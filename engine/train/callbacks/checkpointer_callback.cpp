// checkpointer: periodic, ephemeral, fixed-step, on-demand and final checkpoints, and retention
// (OLMo-core's CheckpointerCallback).
#include "engine/checkpoint/checkpointer.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <algorithm>
#include <deque>
#include <map>

namespace lathe::train {

namespace {

class CheckpointerCallback : public Callback {
public:
    explicit CheckpointerCallback(const config::CheckpointerConfig& c) : cfg_(c) {}
    int priority() const override { return 1; }

    void pre_train() override {
        async_ = cfg_.save_async.value_or(true);
        auto& t = trainer();
        if (t.checkpoint_loaded()) latest_saved_ = step();
        // Leftover checkpoints of an earlier run that this policy would have removed.
        if (cfg_.remove != config::CheckpointRemovalStrategy::never) {
            for (const auto& c :
                 checkpoint::Checkpointer::complete_checkpoints(t.checkpoint_folder())) {
                if (c.step == 0 || c.step > step() || is_permanent_step(c.step)) continue;
                if (cfg_.remove == config::CheckpointRemovalStrategy::all_non_permanent ||
                    c.ephemeral) {
                    ephemeral_.push_back(c.path);
                }
            }
        }
        // Retention (max_checkpoints) counts the periodic checkpoints only: one saved on demand
        // or at the end of a run is permanent, as in OLMo-core, here and in later runs.
        for (const auto& c :
             checkpoint::Checkpointer::complete_checkpoints(t.checkpoint_folder())) {
            if (!c.ephemeral && c.step <= step() && (c.step == 0 || is_permanent_step(c.step)))
                permanent_.push_back(c.path);
        }
        if (step() == 0 && cfg_.pre_train_checkpoint.value_or(!t.checkpoint_loaded()))
            save(Kind::periodic);
    }

    void post_train_batch() override {
        auto& t = trainer();
        // An error of the previous async save surfaces here.
        guarded([&] {
            if (t.checkpointer().poll()) succeeded();
        });
        const int64_t s = step();
        bool fixed = std::find(cfg_.fixed_steps.begin(), cfg_.fixed_steps.end(), s) !=
                     cfg_.fixed_steps.end();
        if (t.checkpoint_requested_this_step()) {
            log::info("checkpoint requested at step {} (permanent: retention never removes it)", s);
            save(Kind::on_demand);
        } else if (fixed || (cfg_.save_interval && s % *cfg_.save_interval == 0)) {
            save(Kind::periodic);
        } else if (cfg_.ephemeral_save_interval && s % *cfg_.ephemeral_save_interval == 0) {
            save(Kind::ephemeral);
        }
    }

    void post_train() override {
        auto& t = trainer();
        if (step() > latest_saved_ && t.final_checkpoint_wanted()) {
            // Final checkpoint: synchronous, so it is complete when the process exits.
            save(Kind::final_checkpoint, /*force_sync=*/true);
        }
        guarded([&] {
            t.checkpointer().wait();
            succeeded();
        });
    }

    void close() override { remove_scheduled(/*all=*/true); }

private:
    /// Why a checkpoint is saved: periodic ones (save_interval, fixed_steps, the pre-train one)
    /// are what max_checkpoints keeps the newest of; ephemeral ones are replaced by the next save;
    /// on-demand and final ones are never removed.
    enum class Kind { periodic, ephemeral, on_demand, final_checkpoint };

    bool is_permanent_step(int64_t s) const {
        if (std::find(cfg_.fixed_steps.begin(), cfg_.fixed_steps.end(), s) !=
            cfg_.fixed_steps.end())
            return true;
        return cfg_.save_interval && s % *cfg_.save_interval == 0;
    }

    // Runs `f` (a save, or waiting for one). A failed save is logged with its cause and training
    // goes on, until more than max_failed_saves in a row have failed: then the error stops it.
    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (const std::exception& e) {
            forget_failed();
            ++failures_;
            if (failures_ > cfg_.max_failed_saves) throw;
            log::error("{} ({} failed save(s) in a row; training goes on, and stops after {})",
                       e.what(), failures_, cfg_.max_failed_saves + 1);
        }
    }
    void succeeded() {
        if (!in_flight_.empty()) failures_ = 0;
        in_flight_.clear();
        scheduled_by_last_.clear();
    }
    // The failed checkpoint does not count, and what its save scheduled for removal stays.
    void forget_failed() {
        if (in_flight_.empty()) return;
        auto drop = [&](auto& v) { v.erase(std::remove(v.begin(), v.end(), in_flight_), v.end()); };
        drop(permanent_);
        drop(pending_ephemeral_);
        for (auto it = scheduled_by_last_.rbegin(); it != scheduled_by_last_.rend(); ++it) {
            to_remove_.erase(std::remove(to_remove_.begin(), to_remove_.end(), *it),
                             to_remove_.end());
            permanent_.push_front(*it);
        }
        scheduled_by_last_.clear();
        in_flight_.clear();
    }

    void save(Kind kind, bool force_sync = false) {
        const bool ephemeral = kind == Kind::ephemeral;
        auto& t = trainer();
        if (step() == latest_saved_) return;
        // The previous async save must finish before its files are counted or removed.
        bool previous_ok = true;
        guarded([&] {
            previous_ok = false;
            t.checkpointer().wait();
            previous_ok = true;
            succeeded();
        });
        if (previous_ok) remove_scheduled(false);
        latest_saved_ = step();
        std::string path;
        const bool async = async_ && !force_sync;
        guarded([&] {
            path = t.save_checkpoint(ephemeral, async);
            in_flight_ = path;
        });
        if (path.empty()) return;  // failed at once, and tolerated
        if (ephemeral) {
            // Only the newest ephemeral checkpoint is kept.
            for (auto& p : pending_ephemeral_) schedule(p, "an ephemeral checkpoint, superseded");
            pending_ephemeral_.assign(1, path);
        } else {
            if (kind == Kind::periodic) permanent_.push_back(path);
            for (auto& p : pending_ephemeral_) schedule(p, "an ephemeral checkpoint, superseded");
            pending_ephemeral_.clear();
            if (cfg_.max_checkpoints && cfg_.remove != config::CheckpointRemovalStrategy::never) {
                while (static_cast<int64_t>(permanent_.size()) > *cfg_.max_checkpoints) {
                    // Given back if this save fails.
                    scheduled_by_last_.push_back(permanent_.front());
                    schedule(permanent_.front(),
                             "max_checkpoints=" + std::to_string(*cfg_.max_checkpoints) +
                                 " keeps the newest periodic checkpoints");
                    permanent_.pop_front();
                }
            }
        }
        for (auto& p : ephemeral_)
            schedule(p, "left over from an earlier run, by remove=" +
                            config::enum_to_string(cfg_.remove));
        ephemeral_.clear();
        if (!async) guarded([&] { succeeded(); });
    }

    void remove_scheduled(bool all) {
        auto& t = trainer();
        if (!all && t.checkpointer().pending()) return;
        if (all) {
            try {
                t.checkpointer().wait();
            } catch (const std::exception&) {
                return;  // reported elsewhere; never delete while the newest save failed
            }
        }
        if (cfg_.remove == config::CheckpointRemovalStrategy::never) {
            to_remove_.clear();
            why_.clear();
            return;
        }
        for (const auto& p : to_remove_) {
            try {
                t.checkpointer().remove(p);
                log::info("removed checkpoint {}: {}", p, why_[p]);
            } catch (const std::exception& e) {
                log::warn("cannot remove old checkpoint {}: {}", p, e.what());
            }
        }
        to_remove_.clear();
        why_.clear();
    }

    void schedule(const std::string& path, const std::string& why) {
        to_remove_.push_back(path);
        why_[path] = why;
    }

    config::CheckpointerConfig cfg_;
    bool async_ = true;
    int64_t latest_saved_ = -1;
    std::deque<std::string> permanent_;
    std::vector<std::string> pending_ephemeral_;
    std::vector<std::string> ephemeral_;
    std::vector<std::string> to_remove_;
    std::map<std::string, std::string> why_;  ///< why each of to_remove_ goes (logged)
    std::string in_flight_;                   ///< the newest save, until it is known to be complete
    std::vector<std::string> scheduled_by_last_;  ///< what that save put into to_remove_
    int64_t failures_ = 0;                        ///< failed saves in a row
};

}  // namespace

std::unique_ptr<Callback> make_checkpointer(const config::CheckpointerConfig& c) {
    return std::make_unique<CheckpointerCallback>(c);
}

}  // namespace lathe::train
