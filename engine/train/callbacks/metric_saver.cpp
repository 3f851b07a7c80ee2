// metric_saver: metrics.jsonl, metrics.csv and a TensorBoard event file in the run folder (rank 0),
// written by a background writer so the training step never waits on the disk. A file that cannot
// be written (disk full, permissions) logs one error and stops the run at the next metrics it
// logs, on every rank (through the bookkeeping's failure): a run whose curves are lost is not
// worth the compute, and a resume after the space is freed continues it exactly.
#include "engine/checkpoint/checkpointer.h"
#include "engine/sinks/async_sink_writer.h"
#include "engine/sinks/run_sinks.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/error.h"
#include "engine/util/log.h"

#include <ctime>
#include <memory>
#include <mutex>

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
        // Steps after the loaded one that an earlier run already logged are trained again:
        // TensorBoard shows the new values only (metrics.jsonl keeps both, for the GUI's
        // abandoned branches).
        o.first_step = t.checkpoint_loaded() ? step() + 1 : 0;
        auto list =
            sinks::make_run_sinks(t.save_folder(), o, [failure = failure_](const std::string& msg) {
                log::error("{}", msg);
                std::lock_guard<std::mutex> lock(failure->mu);
                if (failure->message.empty()) failure->message = msg;
            });
        for (auto& s : list) s->open();
        writer_ = std::make_unique<sinks::AsyncSinkWriter>(std::move(list));
    }

    void log_metrics(int64_t step, const metrics::StepMetrics& m) override {
        if (!writer_) return;
        throw_if_failed();
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

    // Taken with every checkpoint: the metrics of the steps before it must be on disk first, or a
    // run stopped by a full disk would resume from a checkpoint past its last saved metrics.
    nlohmann::json state_dict() const override {
        if (writer_) {
            writer_->flush();
            throw_if_failed();
        }
        return nullptr;
    }

    MetricSaverStats stats() const { return stats_; }

private:
    void throw_if_failed() const {
        std::lock_guard<std::mutex> lock(failure_->mu);
        if (!failure_->message.empty())
            throw Error(failure_->message + " (the run stops: its metrics could not be saved)");
    }

    struct Failure {
        std::mutex mu;
        std::string message;  // the first file error, from the writer's thread
    };
    config::MetricSaverConfig cfg_;
    std::shared_ptr<Failure> failure_ = std::make_shared<Failure>();
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
