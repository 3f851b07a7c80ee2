#include "engine/train/train_module.h"

#include "engine/train/autocast.h"
#include "engine/train/data_parallel.h"
#include "engine/train/fsdp.h"
#include "engine/train/scheduler.h"
#include "engine/train/trainer.h"
#include "engine/util/error.h"
#include "engine/util/log.h"

#include <cstdlib>
#include <limits>
#include <optional>

#include <cmath>

namespace lathe::train {

using config::ReduceType;

TransformerTrainModule::TransformerTrainModule(const config::ExperimentConfig& cfg,
                                               dist::Environment& env)
    : cfg_(cfg.train_module), full_cfg_(cfg), env_(env) {
    model_ = model::Transformer(cfg.model);
    const bool fsdp = env.distributed() && cfg_.dp_config.name == config::DataParallelType::fsdp;
    // FSDP shards the model while it is still on the host and moves only the shards to the device,
    // so a model that does not fit one GPU can still start.
    if (!fsdp) model_->to(env.device());
    model_->train();

    // Parameter groups: group 0 decays; group 1 (only when something is excluded) does not.
    const auto& o = cfg_.optim;
    auto is_no_decay = [&o](const std::string& name) {
        bool is_embedding = name.rfind("embeddings.", 0) == 0;
        bool is_norm = name.find("norm") != std::string::npos;
        return (is_embedding && !o.decay_embeddings) || (is_norm && !o.decay_norms);
    };
    if (const char* nan_step = std::getenv("LATHE_INJECT_NAN_STEP"))
        inject_nan_step_ = std::atoll(nan_step);
    // LATHE_INJECT_NAN_LOSS=STEP: the recorded train/CE loss of that step is NaN (gradients stay finite).
    if (const char* nan_loss = std::getenv("LATHE_INJECT_NAN_LOSS"))
        inject_nan_loss_step_ = std::atoll(nan_loss);
    // Fault injection for tests: LATHE_INJECT_FAULT=RANK:STEP makes that rank fail at that step.
    if (const char* fault = std::getenv("LATHE_INJECT_FAULT")) {
        std::string f(fault);
        auto colon = f.find(':');
        if (colon != std::string::npos && std::atoi(f.substr(0, colon).c_str()) == env.rank()) {
            inject_fault_step_ = std::atoll(f.substr(colon + 1).c_str());
        }
    }
    std::vector<std::vector<torch::Tensor>> groups_params;
    if (fsdp) {
        auto wrapper = std::make_unique<FullyShardedDataParallel>(
            model_, env.dp_group(), cfg_.dp_config, is_no_decay, env.device());
        model_->to(env.device());  // what is left: buffers and the emptied parameter placeholders
        fsdp_ = wrapper.get();
        groups_params = wrapper->optimizer_groups();
        dp_ = std::move(wrapper);
    } else {
        std::vector<torch::Tensor> decay, no_decay;
        for (auto& p : model_->named_parameters())
            (is_no_decay(p.key()) ? no_decay : decay).push_back(p.value());
        groups_params.push_back(decay);
        if (!no_decay.empty()) groups_params.push_back(no_decay);
        if (env.distributed()) {
            dp_ = std::make_unique<DistributedDataParallel>(model_->parameters(), env.dp_group(),
                                                            cfg_.dp_config);
        } else {
            dp_ = std::make_unique<NoDataParallel>();
        }
        dp_->set_grad_params(model_->parameters());
    }
    auto opts = torch::optim::AdamWOptions(o.lr)
                    .betas({o.beta1, o.beta2})
                    .eps(o.eps)
                    .weight_decay(o.weight_decay);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    for (std::size_t g = 0; g < groups_params.size(); ++g) {
        auto go = opts;
        if (g == 1) go.weight_decay(0.0);
        groups.emplace_back(groups_params[g], std::make_unique<torch::optim::AdamWOptions>(go));
        initial_lrs_.push_back(o.lr);
    }
    param_groups_ = groups_params;
    optim_ = std::make_unique<torch::optim::AdamW>(groups, opts);
}

TransformerTrainModule::~TransformerTrainModule() = default;

void TransformerTrainModule::pre_train(const data::DataLoader& loader) {
    const int64_t rank_tokens = loader.rank_batch_size();
    if (rank_tokens % cfg_.rank_microbatch_size != 0) {
        throw Error("rank batch of " + std::to_string(rank_tokens) +
                    " tokens is not divisible by train_module.rank_microbatch_size (" +
                    std::to_string(cfg_.rank_microbatch_size) + ")");
    }
}

void TransformerTrainModule::train_batch(const data::Batch& batch) {
    if (trainer_->global_step() == inject_fault_step_) {
        throw Error("injected fault at step " + std::to_string(inject_fault_step_) +
                    " (LATHE_INJECT_FAULT)");
    }
    model_->train();
    // Labels: inputs shifted left; the last position has no label. Made and counted on the host,
    // so that counting them does not wait for the device.
    const auto& host_ids = batch.input_ids;
    const int64_t seq = host_ids.size(1);
    auto host_labels = torch::full_like(host_ids, cfg_.label_ignore_index);
    host_labels.narrow(1, 0, seq - 1).copy_(host_ids.narrow(1, 1, seq - 1));
    const double num_loss_tokens =
        static_cast<double>((host_labels != cfg_.label_ignore_index).sum().item<int64_t>());
    auto input_ids = host_ids.to(env_.device(), /*non_blocking=*/true);
    auto labels = host_labels.to(env_.device(), /*non_blocking=*/true);
    trainer_->record_metric("train/masked labels (%)",
                            1.0 - num_loss_tokens / static_cast<double>(labels.numel()),
                            ReduceType::mean);

    const int64_t mb_rows = cfg_.rank_microbatch_size / seq;
    const int64_t rows = input_ids.size(0);
    const int64_t n_micro = (rows + mb_rows - 1) / mb_rows;
    torch::Tensor ce_total = torch::zeros({}, torch::TensorOptions().device(env_.device()));
    torch::Tensor z_total;
    for (int64_t m = 0; m < n_micro; ++m) {
        const int64_t start = m * mb_rows, len = std::min(mb_rows, rows - start);
        model::LossOutput out;
        {
            // train_module.autocast_precision: the forward pass under autocast to that dtype (the
            // loss is computed in fp32 regardless; RMSNorm and RoPE compute in fp32 as well).
            std::optional<AutocastScope> autocast;
            if (cfg_.autocast_precision) {
                autocast.emplace(env_.device().type(), true,
                                 *cfg_.autocast_precision == config::DType::bfloat16 ? at::kBFloat16
                                                                                     : at::kFloat);
            }
            out = model_->forward_loss(input_ids.narrow(0, start, len),
                                       labels.narrow(0, start, len), num_loss_tokens,
                                       cfg_.z_loss_multiplier, cfg_.label_ignore_index);
        }
        dp_->before_backward(m == n_micro - 1);
        // Fault injection for tests: NaN gradients (the logged loss stays finite).
        if (trainer_->global_step() == inject_nan_step_)
            out.loss = out.loss * std::numeric_limits<double>::quiet_NaN();
        out.loss.backward();
        ce_total += out.ce_loss;
        if (out.z_loss.defined()) z_total = z_total.defined() ? z_total + out.z_loss : out.z_loss;
    }
    dp_->finish_backward();
    if (trainer_->global_step() == inject_nan_loss_step_)
        ce_total = ce_total * std::numeric_limits<double>::quiet_NaN();
    trainer_->record_metric("train/CE loss", ce_total, ReduceType::mean);
    if (z_total.defined()) trainer_->record_metric("train/Z loss", z_total, ReduceType::mean);
}

void TransformerTrainModule::optim_step() {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (const auto& p : dp_->grad_params()) {
        if (p.grad().defined()) grads.push_back(p.grad());
    }
    // Total gradient norm in fp32 (gradients are already averaged over ranks; FSDP sums its shards).
    torch::Tensor total =
        torch::zeros({}, torch::TensorOptions().device(env_.device()).dtype(torch::kFloat32));
    for (const auto& g : grads) total += g.to(torch::kFloat32).pow(2).sum();
    dp_->reduce_grad_norm_sq(total);
    total = total.sqrt();
    const double norm = total.item<double>();
    last_grads_finite_ = std::isfinite(norm);
    trainer_->record_metric("optim/total grad norm", total, std::nullopt);
    if (cfg_.max_grad_norm && last_grads_finite_) {
        const double coef = *cfg_.max_grad_norm / (norm + 1e-6);
        if (coef < 1.0) {
            for (auto& g : grads) g.mul_(coef);
        }
    }
    // LR for this step (OLMo-core sets it at the start of optim_step for the 1-based global step).
    auto& tr = *trainer_;
    const bool tokens = cfg_.scheduler.units == config::SchedulerUnits::tokens;
    const int64_t current = tokens ? tr.global_train_tokens_seen() : tr.global_step();
    const int64_t t_max = tokens ? tr.max_tokens() : tr.max_steps();
    auto& groups = optim_->param_groups();
    for (std::size_t g = 0; g < groups.size(); ++g) {
        double lr = scheduler_lr(cfg_.scheduler, initial_lrs_[g], current, t_max);
        static_cast<torch::optim::AdamWOptions&>(groups[g].options()).lr(lr);
        trainer_->record_metric("optim/LR (group " + std::to_string(g) + ")", lr, std::nullopt);
    }
    if (!last_grads_finite_) {
        switch (non_finite_action_) {
            case config::StabilityAction::stop:
                throw Error("non-finite gradient norm (" +
                            std::string(std::isnan(norm) ? "nan" : "inf") + ") at step " +
                            std::to_string(tr.global_step()));
            case config::StabilityAction::warn:
                log::warn(
                    "non-finite gradient norm ({}) at step {}; stepping anyway "
                    "(non_finite_grads=warn)",
                    std::isnan(norm) ? "nan" : "inf", tr.global_step());
                optim_->step();
                return;
            case config::StabilityAction::skip:
                log::warn("non-finite gradient norm ({}) at step {}; skipping the optimizer step",
                          std::isnan(norm) ? "nan" : "inf", tr.global_step());
                break;
        }
    }
    if (skip_next_ || !last_grads_finite_) {
        skip_next_ = false;
        trainer_->record_metric("optim/step skipped", 1.0, std::nullopt);
        return;
    }
    optim_->step();
}

void TransformerTrainModule::zero_grads() {
    optim_->zero_grad(/*set_to_none=*/true);
}

std::pair<double, int64_t> TransformerTrainModule::eval_batch(const data::Batch& batch) {
    torch::NoGradGuard no_grad;
    model_->eval();
    auto input_ids = batch.input_ids.to(env_.device());
    const int64_t seq = input_ids.size(1);
    auto labels = torch::full_like(input_ids, cfg_.label_ignore_index);
    labels.narrow(1, 0, seq - 1).copy_(input_ids.narrow(1, 1, seq - 1));
    int64_t n = (labels != cfg_.label_ignore_index).sum().item<int64_t>();
    auto out = model_->forward_loss(input_ids, labels, 1.0, std::nullopt, cfg_.label_ignore_index);
    model_->train();
    return {out.ce_loss.item<double>(), n};
}

std::vector<std::pair<std::string, torch::Tensor>> TransformerTrainModule::state_tensors() {
    if (fsdp_) return fsdp_->full_state(*optim_);
    std::vector<std::pair<std::string, torch::Tensor>> out;
    std::map<const void*, std::string> names;
    for (auto& p : model_->named_parameters()) {
        out.emplace_back("model." + p.key(), p.value().detach());
        names[p.value().unsafeGetTensorImpl()] = p.key();
    }
    auto& state = optim_->state();
    for (auto& group : optim_->param_groups()) {
        for (auto& p : group.params()) {
            auto it = state.find(p.unsafeGetTensorImpl());
            if (it == state.end()) continue;
            auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
            const std::string& name = names.at(p.unsafeGetTensorImpl());
            out.emplace_back("optim.state." + name + ".exp_avg", s.exp_avg());
            out.emplace_back("optim.state." + name + ".exp_avg_sq", s.exp_avg_sq());
            out.emplace_back("optim.state." + name + ".step",
                             torch::tensor({s.step()}, torch::kInt64));
        }
    }
    return out;
}

void TransformerTrainModule::load_state_tensors(const std::map<std::string, torch::Tensor>& tensors,
                                                bool load_optim) {
    torch::NoGradGuard no_grad;
    if (fsdp_) {
        fsdp_->load_full_state(tensors, load_optim ? optim_.get() : nullptr);
        return;
    }
    auto get = [&](const std::string& key, const torch::Tensor& like) -> const torch::Tensor& {
        auto it = tensors.find(key);
        if (it == tensors.end()) throw Error("checkpoint has no tensor '" + key + "'");
        if (it->second.sizes() != like.sizes()) {
            throw Error("checkpoint tensor '" + key + "' has shape " +
                        c10::str(it->second.sizes()) + " but the model needs " +
                        c10::str(like.sizes()) + " (a different model config?)");
        }
        return it->second;
    };
    for (auto& p : model_->named_parameters()) p.value().copy_(get("model." + p.key(), p.value()));
    if (!load_optim) return;
    std::map<const void*, std::string> names;
    for (auto& p : model_->named_parameters()) names[p.value().unsafeGetTensorImpl()] = p.key();
    auto& state = optim_->state();
    for (auto& group : optim_->param_groups()) {
        for (auto& p : group.params()) {
            const std::string& name = names.at(p.unsafeGetTensorImpl());
            std::string prefix = "optim.state." + name + ".";
            if (tensors.find(prefix + "step") == tensors.end()) continue;  // no state yet (step 0)
            auto s = std::make_unique<torch::optim::AdamWParamState>();
            s->step(tensors.at(prefix + "step").item<int64_t>());
            s->exp_avg(get(prefix + "exp_avg", p).clone().to(p.device()));
            s->exp_avg_sq(get(prefix + "exp_avg_sq", p).clone().to(p.device()));
            state[p.unsafeGetTensorImpl()] = std::move(s);
        }
    }
}

}  // namespace lathe::train
