// The bookkeeping thread and cross-rank metric reduction.
//
// One background thread runs bookkeeping operations strictly in submission order. Every operation
// that uses the bookkeeping process group runs here and only here, so the collectives of all ranks
// stay in step as long as every rank submits the same operations in the same order (which the
// trainer guarantees: flushes and control checks happen at the same steps on every rank).
#pragma once

#include "engine/config/config.h"
#include "engine/distributed/env.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace lathe::metrics {

/// step -> name -> value, as handed to callbacks.
using StepMetrics = std::map<std::string, double>;
using MetricsByStep = std::map<int64_t, StepMetrics>;

/// What the trainer adds to and checks in a step's reduced metrics before the callbacks see them:
/// throws lathe::Error naming the step when train/CE loss is not finite (the run must stop), and
/// adds train/PPL = exp(CE loss) when the loss is below 10 (above, the perplexity says nothing).
void check_and_derive(int64_t step, StepMetrics& metrics);

/// One unreduced metric value of one step on this rank.
struct LocalMetric {
    int64_t step;
    std::string name;
    std::optional<config::ReduceType> reduce;  ///< nullopt: rank-local, not reduced
    double value;
};

/// Reduces metrics across the ranks of `group` (identity for a one-rank group). Handles metrics
/// present on only some ranks: `mean` divides by the number of ranks that have the metric; `sum`
/// and `l2_norm` treat missing as 0; `max` ignores missing. Rank-local metrics keep this rank's value.
MetricsByStep reduce_metrics(const std::vector<LocalMetric>& local, const dist::Group& group);

class Bookkeeper {
public:
    /// Called on the bookkeeping thread when an operation took longer than the soft timeout:
    /// (operation name, seconds it took, the timeout). The default logs a warning.
    using SlowHandler = std::function<void(const std::string&, double, double)>;
    /// `soft_timeout_s`: trainer.bookkeeping_soft_timeout.
    explicit Bookkeeper(bool async, double soft_timeout_s = 30.0, SlowHandler on_slow = {});
    ~Bookkeeper();
    Bookkeeper(const Bookkeeper&) = delete;
    Bookkeeper& operator=(const Bookkeeper&) = delete;

    /// Runs `op` on the bookkeeping thread (or right here when not async). Exceptions are kept and
    /// rethrown by check_error().
    std::shared_future<void> submit(std::string name, std::function<void()> op);
    /// Waits for everything submitted so far.
    void join();
    /// Rethrows the first error of a finished operation, if any.
    void check_error();
    /// Whether an operation has failed so far; safe from any thread, including inside an operation
    /// (which then sees the failures of every operation submitted before it).
    bool failed() const { return failed_; }
    /// Stops the thread after draining the queue.
    void shutdown();
    bool async() const { return async_; }

private:
    void loop();
    bool async_;
    double soft_timeout_s_;
    SlowHandler on_slow_;
    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::pair<std::string, std::packaged_task<void()>>> queue_;
    std::vector<std::shared_future<void>> pending_;
    std::exception_ptr error_;
    std::atomic<bool> failed_{false};
    bool stop_ = false;
};

}  // namespace lathe::metrics
