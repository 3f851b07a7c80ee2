// console_logger: a progress line with the chosen metrics every metrics_log_interval steps.
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/glob.h"
#include "engine/util/log.h"

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

namespace lathe::train {

namespace {

std::string format_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    auto total = static_cast<int64_t>(std::llround(s));
    char buf[32];
    if (total >= 3600) {
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                      static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
    } else {
        std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(total / 60),
                      static_cast<long long>(total % 60));
    }
    return buf;
}

std::string format_value(double v) {
    char buf[32];
    double a = std::fabs(v);
    if (a != 0 && (a < 1e-3 || a >= 1e6)) {
        std::snprintf(buf, sizeof buf, "%.3e", v);
    } else {
        std::snprintf(buf, sizeof buf, "%.4g", v);
    }
    return buf;
}

std::string label(const std::string& name) {
    static const std::map<std::string, std::string> short_names = {
        {"train/CE loss", "loss"},
        {"train/Z loss", "z-loss"},
        {"optim/total grad norm", "grad norm"},
        {"optim/LR (group 0)", "lr"},
        {"throughput/device/TPS", "tok/s"},
        {"throughput/device/MFU", "MFU"},
        {"spike/SpikeScore", "spike"}};
    auto it = short_names.find(name);
    return it == short_names.end() ? name : it->second;
}

std::string format_metric(const std::string& name, double v) {
    char buf[32];
    if (name == "throughput/device/MFU") {
        std::snprintf(buf, sizeof buf, "%.1f%%", v);  // recorded in percent
        return buf;
    }
    if (name == "throughput/device/TPS") {
        if (v >= 1e3)
            std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
        else
            std::snprintf(buf, sizeof buf, "%.0f", v);
        return buf;
    }
    if (name.find("loss") != std::string::npos) {
        std::snprintf(buf, sizeof buf, "%.4f", v);
        return buf;
    }
    return format_value(v);
}

class ConsoleLogger : public Callback {
public:
    ConsoleLogger(const config::ConsoleLoggerConfig& c, int64_t collect) : cfg_(c) {
        interval_ = c.metrics_log_interval.value_or(collect);
    }
    void pre_train() override {
        start_ = std::chrono::steady_clock::now();
        start_step_ = step();
    }
    // OLMo-core's progress marker: on the steps that get no metrics line, every log_interval.
    void post_step() override {
        if (trainer().env().rank() != 0) return;
        const int64_t s = step();
        if (metrics_step(s) || s % cfg_.log_interval != 0) return;
        std::ostringstream line;
        progress(line, s);
        log::info("{}", line.str());
    }
    void log_metrics(int64_t s, const metrics::StepMetrics& m) override {
        if (trainer().env().rank() != 0) return;
        if (!metrics_step(s)) return;
        if (m.find("train/CE loss") == m.end()) {
            bool any = false;
            for (const auto& [name, v] : m) any = any || name.rfind("eval/", 0) == 0;
            if (!any) return;  // e.g. only a late checkpoint timing for an already printed step
        }
        std::ostringstream line;
        const int64_t total = trainer().max_steps();
        line << "step " << s << "/" << total;
        if (total > 0) line << " (" << (100 * s / total) << "%)";
        std::ostringstream eta;
        append_eta(eta, s);
        // In the order of the patterns, with short labels for the common metrics.
        for (const auto& p : cfg_.metrics) {
            for (const auto& [name, v] : m) {
                if (!glob_matches(p, name)) continue;
                if (name == "spike/SpikeScore" && v == 0) continue;
                line << " | " << label(name) << " " << format_metric(name, v);
            }
        }
        line << eta.str();
        log::info("{}", line.str());
    }

private:
    bool metrics_step(int64_t s) {
        return s > 0 && (s == 1 || s % interval_ == 0 || s == trainer().max_steps());
    }
    void progress(std::ostringstream& line, int64_t s) {
        const int64_t total = trainer().max_steps();
        line << "step " << s << "/" << total;
        if (total > 0) line << " (" << (100 * s / total) << "%)";
        append_eta(line, s);
    }
    void append_eta(std::ostringstream& line, int64_t s) {
        const int64_t total = trainer().max_steps();
        double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        int64_t done = s - start_step_;
        if (done > 0 && total > s)
            line << " | ETA "
                 << format_duration(elapsed / static_cast<double>(done) *
                                    static_cast<double>(total - s));
    }

    config::ConsoleLoggerConfig cfg_;
    int64_t interval_;
    std::chrono::steady_clock::time_point start_;
    int64_t start_step_ = 0;
};

}  // namespace

std::unique_ptr<Callback> make_console_logger(const config::ConsoleLoggerConfig& c,
                                              int64_t collect) {
    return std::make_unique<ConsoleLogger>(c, collect);
}

}  // namespace lathe::train
