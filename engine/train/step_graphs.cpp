#include "engine/train/step_graphs.h"

#include "engine/util/log.h"

#include <ATen/autocast_mode.h>

#include <utility>

#ifdef LATHE_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace lathe::train {

struct StepGraphs::Graph {
#ifdef LATHE_WITH_CUDA
    at::cuda::CUDAGraph graph;
#endif
    bool captured = false;
    torch::Tensor ids, labels, div;      // static inputs
    model::LossOutput out;               // static outputs
    std::vector<torch::Tensor> outputs;  // the optimizer step's
};

#ifdef LATHE_WITH_CUDA
namespace {

using Pool = decltype(std::declval<at::cuda::CUDAGraph&>().pool());

// Captures what `work` launches into `graph` on a side stream (CUDA refuses the default one),
// ordered after the work so far and before what follows, with the autocast cache off (its casts
// would outlive the capture). Returns an empty string, or why the capture failed.
std::string capture(at::cuda::CUDAGraph& graph, const torch::Device& device, const Pool& pool,
                    const std::function<void()>& work) {
    auto current = c10::cuda::getCurrentCUDAStream(device.index());
    auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    c10::cuda::CUDAStreamGuard guard(side);
    {
        c10::Event ready(c10::DeviceType::CUDA);
        ready.record(current);
        ready.block(side);
    }
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
    std::string why;
    try {
        // Thread-local: the bookkeeping and checkpoint threads keep using CUDA meanwhile.
        graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
        try {
            work();
        } catch (...) {
            try {
                graph.capture_end();
            } catch (...) {
            }
            throw;
        }
        graph.capture_end();
    } catch (const std::exception& e) {
        why = e.what();
        if (why.empty()) why = "unknown error";
    }
    at::autocast::set_autocast_cache_enabled(cache);
    {
        c10::Event done(c10::DeviceType::CUDA);
        done.record(side);
        done.block(current);
    }
    return why;
}

}  // namespace
#endif

StepGraphs::StepGraphs(OnFailure on_failure, int64_t warmup)
    : on_failure_(std::move(on_failure)), warmup_(warmup) {}

StepGraphs::~StepGraphs() = default;

bool StepGraphs::run(int64_t step, int64_t index, const torch::Tensor& ids,
                     const torch::Tensor& labels, double div, const Body& body,
                     model::LossOutput& out) {
#ifndef LATHE_WITH_CUDA
    (void)step, (void)index, (void)ids, (void)labels, (void)div, (void)body, (void)out;
    return false;
#else
    if (failed_ || !ids.is_cuda()) return false;
    auto& slot = index == 0 ? first_ : rest_;
    if (slot && slot->captured) {
        if (ids.size(0) != rows_ || ids.size(1) != seq_) return false;
        // Graphs replay only once every graph of a step exists (owns_gradients_): a step never
        // mixes graph-owned and set-to-none gradients.
    } else {
        // Capture on the first step past the warm-up, for each micro-batch kind as it comes.
        if (step <= warmup_) return false;
        if (index > 0 && !(first_ && first_->captured)) return false;
        if (rows_ == 0) {
            rows_ = ids.size(0);
            seq_ = ids.size(1);
        }
        if (ids.size(0) != rows_ || ids.size(1) != seq_) return false;
        slot = std::make_unique<Graph>();
        auto& g = *slot;
        g.ids = torch::empty_like(ids);
        g.labels = torch::empty_like(labels);
        g.div = torch::empty({}, ids.options().dtype(torch::kFloat32));
        g.ids.copy_(ids);
        g.labels.copy_(labels);
        g.div.fill_(div);
        // The later micro-batches' graph shares the first's memory pool: they never run at once,
        // and what the first keeps (the gradients) stays its own.
        const std::string why =
            capture(g.graph, ids.device(), index == 0 ? Pool{0, 0} : first_->graph.pool(),
                    [&] { g.out = body(g.ids, g.labels, g.div); });
        const bool ok = why.empty();
        if (!ok) {
            // From now on every micro-batch runs eagerly and the gradients are set to none after
            // each step again (this step's, partly from the first graph, stay right).
            failed_ = true;
            owns_gradients_ = false;
            slot.reset();
            if (on_failure_) on_failure_(index == 0);
            log::warn(
                "train_module.cuda_graphs: capturing micro-batch {}'s graph failed; the run "
                "goes on without CUDA graphs: {}",
                index == 0 ? "0" : std::to_string(index), why.substr(0, 500));
            return false;
        }
        g.captured = true;
        if (index == 0) owns_gradients_ = true;
        // The warm-up's cached blocks are not needed next to the graph's own pool.
        c10::cuda::CUDACachingAllocator::emptyCache();
        log::info(
            "train_module.cuda_graphs: captured the {} micro-batch graph ({} x {} tokens) at "
            "step {}",
            index == 0 ? "first" : "later", rows_, seq_, step);
        // A capture records without running: replay it now for this micro-batch (below).
    }
    auto& g = *slot;
    g.ids.copy_(ids, /*non_blocking=*/true);
    g.labels.copy_(labels, /*non_blocking=*/true);
    g.div.fill_(div);
    g.graph.replay();
    // The losses are read later (metrics): copies, as the next replay overwrites the outputs.
    out.ce_loss = g.out.ce_loss.clone();
    out.loss = out.ce_loss;
    if (g.out.z_loss.defined()) out.z_loss = g.out.z_loss.clone();
    return true;
#endif
}

bool StepGraphs::run_step(int64_t step, const StepBody& body, std::vector<torch::Tensor>& out) {
#ifndef LATHE_WITH_CUDA
    (void)step, (void)body, (void)out;
    return false;
#else
    // Only over gradients the graphs own: set-to-none ones would move between steps.
    if (failed_ || optimizer_failed_ || !owns_gradients_ || step <= warmup_) return false;
    if (!optimizer_) {
        auto g = std::make_unique<Graph>();
        // It shares the micro-batch graphs' pool: it runs after them, never beside them.
        const std::string why = capture(g->graph, first_->ids.device(), first_->graph.pool(),
                                        [&] { g->outputs = body(); });
        if (!why.empty()) {
            optimizer_failed_ = true;
            log::warn(
                "train_module.cuda_graphs: capturing the optimizer step's graph failed; it runs "
                "eagerly for the rest of the run: {}",
                why.substr(0, 500));
            return false;
        }
        g->captured = true;
        optimizer_ = std::move(g);
        c10::cuda::CUDACachingAllocator::emptyCache();
        log::info("train_module.cuda_graphs: captured the optimizer step's graph at step {}", step);
    }
    optimizer_->graph.replay();
    // Copies: the host reads them later (metrics, the norm check), after the next replay.
    out.clear();
    for (const auto& t : optimizer_->outputs) out.push_back(t.clone());
    return true;
#endif
}

}  // namespace lathe::train
