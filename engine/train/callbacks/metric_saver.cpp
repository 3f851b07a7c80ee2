// metric_saver: metrics.jsonl, metrics.csv and a TensorBoard event file in the run folder (rank 0),
// written by a background writer so the training step never waits on the disk. A failing file
// (disk full, permissions) logs one error and the run goes on.
#include "engine/checkpoint/checkpointer.h"
#include "engine/sinks/async_sink_writer.h"
#include "engine/sinks/run_sinks.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <ctime>

namespace lathe::train {

namespace {

double thread_cpu_seconds() {
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class MetricSaver : public Callback {
public:
    explicit MetricSaver(const config::MetricSaverConfig& c) : cfg_(c) {}

    void pre_train() override {
        auto& t = trainer();
        if (t.env().rank() != 0) return;
        sinks::RunSinkOptions o;
        o.jsonl = cfg_.jsonl;
        o.csv = cfg_.csv;
        o.tensorboard = cfg_.tensorboard;
        // Resuming continues the same files.
        o.mode = t.checkpoint_loaded() ? sinks::OpenMode::append : sinks::OpenMode::truncate;
        auto list = sinks::make_run_sinks(t.save_folder(), o,
                                          [](const std::string& msg) { log::error("{}", msg); });
        for (auto& s : list) s->open();
        writer_ = std::make_unique<sinks::AsyncSinkWriter>(std::move(list));
    }

    void log_metrics(int64_t step, const metrics::StepMetrics& m) override {
        if (!writer_) return;
        const double cpu0 = thread_cpu_seconds();
        sinks::MetricRecord r;
        r.step = step;
        r.tokens = step * trainer().tokens_per_batch();
        r.wall_time = sinks::unix_time_now();
        for (const auto& [name, v] : m) r.add(name, v);
        writer_->submit(std::move(r));
        ++stats_.records;
        stats_.submit_cpu_s += thread_cpu_seconds() - cpu0;
    }

    void close() override {
        if (!writer_) return;
        writer_->close();
        stats_.writer_cpu_s = writer_->thread_cpu_seconds();
        if (stats_.records > 0) {
            log::debug(
                "metric files: {} records; writer thread {:.1f} us of CPU per record, submit "
                "{:.1f} us",
                stats_.records, 1e6 * stats_.writer_cpu_s / static_cast<double>(stats_.records),
                1e6 * stats_.submit_cpu_s / static_cast<double>(stats_.records));
        }
    }

    MetricSaverStats stats() const { return stats_; }

private:
    config::MetricSaverConfig cfg_;
    std::unique_ptr<sinks::AsyncSinkWriter> writer_;
    MetricSaverStats stats_;
};

}  // namespace

std::unique_ptr<Callback> make_metric_saver(const config::MetricSaverConfig& c) {
    return std::make_unique<MetricSaver>(c);
}

std::optional<MetricSaverStats> metric_saver_stats(const Callback* cb) {
    const auto* saver = dynamic_cast<const MetricSaver*>(cb);
    if (!saver) return std::nullopt;
    return saver->stats();
}

}  // namespace lathe::train
