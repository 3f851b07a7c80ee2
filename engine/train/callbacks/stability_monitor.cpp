// stability_monitor: loss and gradient-norm spikes, and what to do with a non-finite gradient.
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"

#include <cmath>
#include <deque>

namespace lathe::train {

using config::ReduceType;

namespace {

class StabilityMonitor : public Callback {
public:
    explicit StabilityMonitor(const config::StabilityMonitorConfig& c) : cfg_(c) {}
    void post_attach() override {
        trainer().train_module().set_non_finite_action(cfg_.non_finite_grads);
    }
    void pre_log_metrics(int64_t, metrics::StepMetrics& m) override {
        int spikes_now = 0;
        for (const char* name : {"train/CE loss", "optim/total grad norm"}) {
            auto it = m.find(name);
            if (it == m.end() || !std::isfinite(it->second)) continue;
            auto& w = windows_[name];
            if (static_cast<int64_t>(w.size()) >= std::min<int64_t>(cfg_.window_size, 16)) {
                double mean = 0, var = 0;
                for (double x : w) mean += x;
                mean /= static_cast<double>(w.size());
                for (double x : w) var += (x - mean) * (x - mean);
                double sd = std::sqrt(var / static_cast<double>(w.size()));
                if (it->second > mean + cfg_.threshold_std * sd) ++spikes_now;
            }
            w.push_back(it->second);
            if (static_cast<int64_t>(w.size()) > cfg_.window_size) w.pop_front();
        }
        ++observed_;
        spikes_ += spikes_now;
        m["spike/SpikeScore"] = static_cast<double>(spikes_now);
        m["spike/SpikeScore (total)"] =
            observed_ > 0 ? 100.0 * static_cast<double>(spikes_) / static_cast<double>(observed_)
                          : 0.0;
    }
    nlohmann::json state_dict() const override {
        return {{"spikes", spikes_}, {"observed", observed_}};
    }
    void load_state_dict(const nlohmann::json& s) override {
        spikes_ = s.value("spikes", int64_t(0));
        observed_ = s.value("observed", int64_t(0));
    }

private:
    config::StabilityMonitorConfig cfg_;
    std::map<std::string, std::deque<double>> windows_;
    int64_t spikes_ = 0, observed_ = 0;
};

}  // namespace

std::unique_ptr<Callback> make_stability_monitor(const config::StabilityMonitorConfig& c) {
    return std::make_unique<StabilityMonitor>(c);
}

}  // namespace lathe::train
