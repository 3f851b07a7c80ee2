// metric_saver: metrics.jsonl, metrics.csv and a TensorBoard event file in the run folder (rank 0),
// written by a background writer so the training step never waits on the disk. A failing file
// (disk full, permissions) logs one error and the run goes on.
#include "checkpoint/checkpointer.h"
#include "sinks/async_sink_writer.h"
#include "sinks/run_sinks.h"
#include "train/callbacks/builtin.h"
#include "train/trainer.h"
#include "util/log.h"

namespace lathe::train {

namespace {

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
        auto list = sinks::make_run_sinks(t.save_folder(), o, [](const std::string& msg) { log::error("{}", msg); });
        for (auto& s : list) s->open();
        writer_ = std::make_unique<sinks::AsyncSinkWriter>(std::move(list));
    }

    void log_metrics(int64_t step, const metrics::StepMetrics& m) override {
        if (!writer_) return;
        sinks::MetricRecord r;
        r.step = step;
        r.tokens = step * trainer().tokens_per_batch();
        r.wall_time = sinks::unix_time_now();
        for (const auto& [name, v] : m) r.add(name, v);
        writer_->submit(std::move(r));
    }

    void close() override {
        if (writer_) writer_->close();
    }

private:
    config::MetricSaverConfig cfg_;
    std::unique_ptr<sinks::AsyncSinkWriter> writer_;
};

}  // namespace

std::unique_ptr<Callback> make_metric_saver(const config::MetricSaverConfig& c) {
    return std::make_unique<MetricSaver>(c);
}

}  // namespace lathe::train
