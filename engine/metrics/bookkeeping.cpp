#include "engine/metrics/bookkeeping.h"

#include "engine/util/error.h"
#include "engine/util/log.h"

#include <chrono>
#include <cmath>
#include <set>

namespace lathe::metrics {

MetricsByStep reduce_metrics(const std::vector<LocalMetric>& local, const dist::Group& group) {
    MetricsByStep out;
    if (!group.distributed()) {
        for (const auto& m : local) out[m.step][m.name] = m.value;
        return out;
    }
    // 1. Agree on the union of (step, name, reduce type) keys: all-gather each rank's key list.
    std::string mine;
    for (const auto& m : local) {
        if (!m.reduce) continue;
        mine += std::to_string(m.step) + '\t' + m.name + '\t' + config::enum_to_string(*m.reduce) +
                '\n';
    }
    auto len = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kInt64);
    std::vector<torch::Tensor> lens;
    group.all_gather(lens, len);
    int64_t max_len = 0;
    for (auto& l : lens) max_len = std::max(max_len, l.item<int64_t>());
    auto buf = torch::zeros({std::max<int64_t>(max_len, 1)}, torch::kUInt8);
    std::memcpy(buf.data_ptr<uint8_t>(), mine.data(), mine.size());
    std::vector<torch::Tensor> bufs;
    group.all_gather(bufs, buf);
    struct Key {
        int64_t step;
        std::string name;
        config::ReduceType reduce;
        bool operator<(const Key& o) const {
            return std::tie(step, name) < std::tie(o.step, o.name);
        }
    };
    std::set<Key> keys;
    for (std::size_t r = 0; r < bufs.size(); ++r) {
        std::string s(reinterpret_cast<const char*>(bufs[r].data_ptr<uint8_t>()),
                      static_cast<std::size_t>(lens[r].item<int64_t>()));
        std::size_t pos = 0;
        while (pos < s.size()) {
            auto nl = s.find('\n', pos);
            std::string line = s.substr(pos, nl - pos);
            pos = nl + 1;
            auto t1 = line.find('\t'), t2 = line.rfind('\t');
            Key k{std::stoll(line.substr(0, t1)), line.substr(t1 + 1, t2 - t1 - 1),
                  *config::enum_from_string<config::ReduceType>(line.substr(t2 + 1))};
            auto it = keys.find(k);
            if (it != keys.end() && it->reduce != k.reduce) {
                throw Error("metric '" + k.name + "' is reduced with " +
                            config::enum_to_string(it->reduce) + " on one rank and " +
                            config::enum_to_string(k.reduce) + " on another");
            }
            keys.insert(k);
        }
    }
    // 2. One SUM all-reduce of [values..., counts...] and one MAX all-reduce.
    std::map<std::pair<int64_t, std::string>, double> have;
    for (const auto& m : local) {
        if (m.reduce) have[{m.step, m.name}] = m.value;
    }
    const auto n = static_cast<int64_t>(keys.size());
    auto sums = torch::zeros({2 * n}, torch::kFloat64);
    auto maxes = torch::full({n}, -INFINITY, torch::kFloat64);
    auto* sp = sums.data_ptr<double>();
    auto* mp = maxes.data_ptr<double>();
    int64_t i = 0;
    for (const auto& k : keys) {
        auto it = have.find({k.step, k.name});
        if (it != have.end()) {
            double v = it->second;
            sp[i] = k.reduce == config::ReduceType::l2_norm ? v * v : v;
            sp[n + i] = 1.0;
            mp[i] = v;
        }
        ++i;
    }
    if (n > 0) {
        group.all_reduce(sums, dist::ReduceOp::sum);
        group.all_reduce(maxes, dist::ReduceOp::max);
    }
    i = 0;
    for (const auto& k : keys) {
        double v = 0;
        switch (k.reduce) {
            case config::ReduceType::mean:
                v = sp[n + i] > 0 ? sp[i] / sp[n + i] : 0.0;
                break;
            case config::ReduceType::sum:
                v = sp[i];
                break;
            case config::ReduceType::l2_norm:
                v = std::sqrt(sp[i]);
                break;
            case config::ReduceType::max:
                v = mp[i];
                break;
        }
        out[k.step][k.name] = v;
        ++i;
    }
    for (const auto& m : local) {
        if (!m.reduce) out[m.step][m.name] = m.value;
    }
    return out;
}

Bookkeeper::Bookkeeper(bool async, double soft_timeout_s, SlowHandler on_slow)
    : async_(async), soft_timeout_s_(soft_timeout_s), on_slow_(std::move(on_slow)) {
    if (!on_slow_) {
        on_slow_ = [](const std::string& name, double seconds, double limit) {
            log::warn(
                "bookkeeping operation '{}' took {:.1f} s, more than "
                "trainer.bookkeeping_soft_timeout ({:g} s): a slow peer, file system or network",
                name, seconds, limit);
        };
    }
    if (async_) thread_ = std::thread([this] { loop(); });
}

Bookkeeper::~Bookkeeper() {
    shutdown();
}

std::shared_future<void> Bookkeeper::submit(std::string name, std::function<void()> op) {
    std::packaged_task<void()> task([this, name, op = std::move(op)] {
        const auto start = std::chrono::steady_clock::now();
        auto timed = [&] {
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (s > soft_timeout_s_) on_slow_(name, s, soft_timeout_s_);
        };
        try {
            op();
        } catch (...) {
            failed_ = true;
            timed();
            throw;
        }
        timed();
    });
    std::shared_future<void> fut = task.get_future().share();
    if (!async_) {
        task();
        try {
            fut.get();
        } catch (...) {
            if (!error_) error_ = std::current_exception();
        }
        return fut;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) throw Error("bookkeeping operation '" + name + "' submitted after shutdown");
        queue_.emplace_back(std::move(name), std::move(task));
        pending_.push_back(fut);
    }
    cv_.notify_all();
    return fut;
}

void Bookkeeper::loop() {
    while (true) {
        std::pair<std::string, std::packaged_task<void()>> item;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;
            item = std::move(queue_.front());
            queue_.pop_front();
        }
        item.second();
    }
}

void Bookkeeper::join() {
    std::vector<std::shared_future<void>> pending;
    {
        std::lock_guard<std::mutex> lock(mu_);
        pending.swap(pending_);
    }
    for (auto& f : pending) {
        try {
            f.get();
        } catch (...) {
            std::lock_guard<std::mutex> lock(mu_);
            if (!error_) error_ = std::current_exception();
        }
    }
}

void Bookkeeper::check_error() {
    std::exception_ptr e;
    {
        std::lock_guard<std::mutex> lock(mu_);
        // Harvest finished futures so errors surface without waiting for unfinished ones.
        for (auto it = pending_.begin(); it != pending_.end();) {
            if (it->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
                try {
                    it->get();
                } catch (...) {
                    if (!error_) error_ = std::current_exception();
                }
                it = pending_.erase(it);
            } else {
                ++it;
            }
        }
        e = error_;
    }
    if (e) std::rethrow_exception(e);
}

void Bookkeeper::shutdown() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void check_and_derive(int64_t step, StepMetrics& metrics) {
    const auto ce = metrics.find("train/CE loss");
    if (ce == metrics.end()) return;
    if (!std::isfinite(ce->second)) {
        throw Error("non-finite loss (" + std::to_string(ce->second) + ") at step " +
                    std::to_string(step));
    }
    if (ce->second < 10) metrics["train/PPL"] = std::exp(ce->second);
}

}  // namespace lathe::metrics
