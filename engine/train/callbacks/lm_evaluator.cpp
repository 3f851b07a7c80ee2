// lm_evaluator: the loss and perplexity on held-out data every `eval_interval` steps.
#include "engine/data/data_loader.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <chrono>
#include <cmath>

namespace lathe::train {

using config::ReduceType;
using Clock = std::chrono::steady_clock;

namespace {

class LMEvaluator : public Callback {
public:
    LMEvaluator(const config::LMEvaluatorConfig& c, std::shared_ptr<data::TokenDataset> ds)
        : cfg_(c), ds_(std::move(ds)) {}
    void pre_train() override {
        if (cfg_.eval_on_startup) evaluate();
    }
    void post_step() override {
        if (step() > 1 && step() % cfg_.eval_interval == 0) evaluate();
    }
    void post_train() override {
        if (cfg_.eval_on_finish && step() != last_eval_) evaluate();
    }

    void evaluate() {
        auto& t = trainer();
        auto t0 = Clock::now();
        const auto& group = t.env().cpu_group();
        // Every data-parallel rank evaluates its share of the same instances (the ranks of one
        // tensor-parallel group share theirs); sums are reduced across ranks, counted once per
        // TP group.
        const int64_t seq = ds_->sequence_length();
        const int64_t rows =
            std::max<int64_t>(1, t.config().train_module.rank_microbatch_size / seq);
        const int64_t n = ds_->num_instances();
        const int64_t dp_rank = t.env().dp_rank(), dp_size = t.env().dp_size();
        const int64_t per_batch = rows * dp_size;
        int64_t max_batches = (n + per_batch - 1) / per_batch;
        if (cfg_.eval_batches) max_batches = std::min(max_batches, *cfg_.eval_batches);
        double loss_sum = 0;
        int64_t tokens = 0, batches = 0;
        for (int64_t b = 0; b < max_batches; ++b) {
            std::vector<int64_t> idx;
            for (int64_t r = 0; r < rows; ++r) {
                int64_t i = b * per_batch + dp_rank + r * dp_size;
                if (i < n) idx.push_back(i);
            }
            // A rank whose share of the last batch is empty still runs a forward pass (not
            // counted): under FSDP every forward gathers parameters from every rank.
            const bool filler = idx.empty();
            if (filler) idx.push_back(0);
            // The same rows as training reads them: label masks and document masking included.
            const data::Batch batch = data::read_batch(*ds_, idx);
            auto [l, k] = t.train_module().eval_batch(batch);
            if (filler) continue;
            loss_sum += l;
            tokens += k;
            ++batches;
        }
        auto sums = torch::tensor(
            {loss_sum, static_cast<double>(tokens), static_cast<double>(batches)}, torch::kFloat64);
        if (t.env().tp_rank() != 0) sums.zero_();
        group.all_reduce(sums);
        const std::string prefix = "eval/lm/" + cfg_.name + "/";
        if (sums[1].item<double>() == 0) {
            // Every label of the evaluated instances is masked: no loss to report (0/0), and a
            // CE loss of 0 would be false.
            log::warn(
                "eval at step {}: {}: every label of the {} evaluated instance(s) of {} is "
                "masked (their label masks hold no trained token); no {}CE loss recorded",
                step(), cfg_.name, std::min(n, max_batches * per_batch), ds_->description(),
                prefix);
            last_eval_ = step();
            return;
        }
        double ce = sums[0].item<double>() / sums[1].item<double>();
        t.record_metric(prefix + "CE loss", ce, std::nullopt, config::MetricMergeStrategy::latest);
        t.record_metric(prefix + "PPL", std::exp(ce), std::nullopt,
                        config::MetricMergeStrategy::latest);
        t.record_metric("throughput/in-loop eval time (s)",
                        std::chrono::duration<double>(Clock::now() - t0).count(), ReduceType::max,
                        config::MetricMergeStrategy::sum);
        t.record_metric("throughput/in-loop eval batches", sums[2].item<double>(), std::nullopt,
                        config::MetricMergeStrategy::sum);
        last_eval_ = step();
        log::info("eval at step {}: {} CE loss {:.4f}, PPL {:.3f}", step(), cfg_.name, ce,
                  std::exp(ce));
    }

private:
    config::LMEvaluatorConfig cfg_;
    std::shared_ptr<data::TokenDataset> ds_;
    int64_t last_eval_ = -1;
};

}  // namespace

std::unique_ptr<Callback> make_lm_evaluator(const config::LMEvaluatorConfig& c,
                                            std::shared_ptr<data::TokenDataset> ds) {
    return std::make_unique<LMEvaluator>(c, std::move(ds));
}

}  // namespace lathe::train
