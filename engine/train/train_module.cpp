#include "engine/train/train_module.h"

#include "engine/model/tensor_parallel.h"
#include "engine/train/compute_copies.h"
#include "engine/train/data_parallel.h"
#include "engine/train/fsdp.h"
#include "engine/train/scheduler.h"
#include "engine/train/state_tensors.h"
#include "engine/train/step_graphs.h"
#include "engine/train/trainer.h"
#include "engine/util/autocast.h"
#include "engine/util/error.h"
#include "engine/util/glob.h"
#include "engine/util/log.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

namespace lathe::train {

using config::ReduceType;

namespace {

struct GroupSpec {
    std::vector<std::string> globs;
    std::string where;  ///< config path of the override; "" for implicit groups
    ParamGroup options;
};

// The groups before assignment: the user's overrides, then decay_embeddings/decay_norms as one
// implicit no-decay group, then the default group.
std::vector<GroupSpec> group_specs(const config::OptimConfig& o) {
    ParamGroup base;
    base.lr = base.initial_lr = o.lr;
    base.beta1 = o.beta1;
    base.beta2 = o.resolved_beta2();
    base.eps = o.eps;
    base.weight_decay = o.resolved_weight_decay();
    std::vector<GroupSpec> out;
    for (std::size_t i = 0; i < o.group_overrides.size(); ++i) {
        const auto& go = o.group_overrides[i];
        GroupSpec g{go.params, "train_module.optim.group_overrides[" + std::to_string(i) + "]",
                    base};
        if (go.lr) g.options.lr = g.options.initial_lr = *go.lr;
        if (go.beta1) g.options.beta1 = *go.beta1;
        if (go.beta2) g.options.beta2 = *go.beta2;
        if (go.eps) g.options.eps = *go.eps;
        if (go.weight_decay) g.options.weight_decay = *go.weight_decay;
        out.push_back(std::move(g));
    }
    GroupSpec no_decay{{}, "", base};
    no_decay.options.weight_decay = 0.0;
    if (!o.decay_embeddings) no_decay.globs.emplace_back("embeddings.*");
    if (!o.decay_norms) no_decay.globs.emplace_back("*norm*");
    if (!no_decay.globs.empty()) out.push_back(std::move(no_decay));
    out.push_back(GroupSpec{{}, "", base});
    return out;
}

// The group index of every parameter. A user glob that matches nothing, or a parameter that two
// user groups claim, is an error naming the override (OLMo-core refuses both too).
std::vector<int> assign_groups(const std::vector<GroupSpec>& specs,
                               const std::vector<std::string>& names) {
    const int fallback = static_cast<int>(specs.size()) - 1;
    std::vector<int> out(names.size(), fallback);
    for (std::size_t g = 0; g + 1 < specs.size(); ++g) {
        const auto& spec = specs[g];
        for (std::size_t j = 0; j < spec.globs.size(); ++j) {
            bool any = false;
            for (std::size_t i = 0; i < names.size(); ++i) {
                if (!glob_matches(spec.globs[j], names[i])) continue;
                any = true;
                if (out[i] == fallback || out[i] == static_cast<int>(g)) {
                    out[i] = static_cast<int>(g);
                } else if (!spec.where.empty()) {
                    throw Error(spec.where + ".params[" + std::to_string(j) + "]: \"" +
                                spec.globs[j] + "\" matches parameter " + names[i] + ", which " +
                                specs[static_cast<std::size_t>(out[i])].where +
                                " already takes; a parameter belongs to one group");
                }
            }
            if (!any && !spec.where.empty()) {
                throw Error(spec.where + ".params[" + std::to_string(j) + "]: \"" + spec.globs[j] +
                            "\" matches no parameter (names look like " + names.front() + ", " +
                            names[std::min<std::size_t>(2, names.size() - 1)] + ", " +
                            names.back() + ")");
            }
        }
    }
    return out;
}

}  // namespace

TransformerTrainModule::TransformerTrainModule(const config::ExperimentConfig& cfg,
                                               dist::Environment& env)
    : cfg_(cfg.train_module), full_cfg_(cfg), env_(env) {
    model_ = model::Transformer(cfg.model);
    // Tensor parallelism first: the whole model was built and initialised on every rank, so
    // each keeps its slice of the same weights; data parallelism then wraps the slices.
    if (env.layout().tp > 1) model_->apply_tp(env.tp_group(), cfg_.tp_config.loss_parallel);
    const bool fsdp = env.dp_size() > 1 && cfg_.dp_config.name != config::DataParallelType::ddp;
    // FSDP shards the model while it is still on the host and moves only the shards to the device,
    // so a model that does not fit one GPU can still start.
    if (!fsdp) model_->to(env.device());
    model_->train();
    // Activation checkpointing; FSDP recomputes every block in backward already (it gathers the
    // block's parameters again), so there it would only recompute twice.
    if (!fsdp) {
        model_->set_activation_checkpointing(cfg_.ac_config);
    } else if (cfg_.ac_config.mode != config::ActivationCheckpointingMode::none &&
               env.rank() == 0) {
        log::info(
            "train_module.ac_config: FSDP recomputes every block in backward already; "
            "mode {} changes nothing",
            config::enum_to_string(cfg_.ac_config.mode));
    }

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
    // Parameter groups (OLMo-core's OptimConfig.build_groups): one per group override, in order,
    // then the parameters no override names; empty groups are dropped.
    auto specs = group_specs(cfg_.optim);
    std::vector<std::string> names;
    for (auto& p : model_->named_parameters()) names.push_back(p.key());
    std::vector<int> group_of_param = assign_groups(specs, names);
    // Renumber without the empty groups.
    std::vector<int> used(specs.size(), 0), index(specs.size(), -1);
    for (int g : group_of_param) used[static_cast<std::size_t>(g)] = 1;
    std::vector<ParamGroup> groups;
    for (std::size_t g = 0; g < specs.size(); ++g) {
        if (!used[g]) continue;
        index[g] = static_cast<int>(groups.size());
        groups.push_back(specs[g].options);
    }
    std::map<std::string, int> group_by_name;
    for (std::size_t i = 0; i < names.size(); ++i)
        group_by_name[names[i]] = index[static_cast<std::size_t>(group_of_param[i])];
    auto group_of = [&group_by_name](const std::string& name) { return group_by_name.at(name); };
    if (fsdp) {
        auto wrapper = std::make_unique<FullyShardedDataParallel>(
            model_, env.shard_group(), cfg_.dp_config, group_of, static_cast<int>(groups.size()),
            env.device(), &env.replicate_group());
        model_->to(env.device());  // what is left: buffers and the emptied parameter placeholders
        fsdp_ = wrapper.get();
        auto shards = wrapper->optimizer_groups();
        for (std::size_t g = 0; g < groups.size(); ++g) groups[g].params = shards[g];
        dp_ = std::move(wrapper);
    } else {
        // dp_config.param_dtype without FSDP: the model computes in copies of that dtype; the
        // optimizer, clipping and checkpoints see the fp32 masters.
        if (cfg_.dp_config.param_dtype && *cfg_.dp_config.param_dtype != config::DType::float32) {
            if (env.dp_size() > 1)
                throw Error(
                    "train_module.dp_config.param_dtype: DDP over " +
                    std::to_string(env.dp_size()) +
                    " ranks reduces the model's own gradients and has no compute copies; use "
                    "dp_config.name=fsdp (or hsdp), or unset param_dtype and use "
                    "autocast_precision");
            if (cfg.model.dtype != config::DType::float32)
                throw Error(
                    "train_module.dp_config.param_dtype: bf16 compute copies need fp32 "
                    "master weights (model.dtype=float32), not model.dtype=" +
                    config::enum_to_string(cfg.model.dtype));
            copies_ = std::make_unique<ComputeCopies>(trained_parameters(), torch::kBFloat16);
        }
        for (const auto& [name, p] : trained_parameters())
            groups[static_cast<std::size_t>(group_of(name))].params.push_back(p);
        if (env.dp_size() > 1) {
            dp_ = std::make_unique<DistributedDataParallel>(model_->parameters(), env.dp_group(),
                                                            cfg_.dp_config);
        } else {
            dp_ = std::make_unique<NoDataParallel>();
        }
        dp_->set_grad_params(copies_ ? copies_->master_tensors() : model_->parameters());
    }
    optim_ = std::make_unique<Optimizer>(cfg_.optim, std::move(groups));
    // No host sync in the step where the optimizer can skip on the device: fused AdamW on CUDA.
    // LATHE_SYNC_FREE_STEP=1 takes that path on any device (ATen's CPU kernel), for the tests.
    const char* force = std::getenv("LATHE_SYNC_FREE_STEP");
    sync_free_ = optim_->skips_on_device(force && std::string(force) == "1");
    if (cfg_.cuda_graphs) {
        if (!env.device().is_cuda() || env.world_size() > 1) {
            if (env.rank() == 0)
                log::warn(
                    "train_module.cuda_graphs: CUDA graphs need one rank on a CUDA device "
                    "(this run: {} rank(s) on {}); the run goes on without them",
                    env.world_size(), env.device().str());
        } else {
            graphs_ = std::make_unique<StepGraphs>([this](bool first) {
                // A failed capture may have left gradients that were never computed.
                torch::NoGradGuard no_grad;
                if (first) optim_->zero_grad();
                if (first || copies_)
                    for (auto& p : model_->parameters()) p.mutable_grad().reset();
            });
            // The optimizer step's graph reads each step's learning rates from device tensors
            // set before it runs (eager steps too, so that both do the same arithmetic).
            optim_->hold_learning_rates(sync_free_);
        }
    }
}

TransformerTrainModule::~TransformerTrainModule() = default;

std::vector<std::pair<std::string, torch::Tensor>> TransformerTrainModule::trained_parameters()
    const {
    if (copies_) return copies_->masters();
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : model_->named_parameters()) out.emplace_back(p.key(), p.value());
    return out;
}

std::optional<torch::ScalarType> TransformerTrainModule::compute_copy_dtype() const {
    if (!copies_) return std::nullopt;
    return copies_->dtype();
}

void TransformerTrainModule::pre_train(const data::DataLoader& loader) {
    const int64_t rank_tokens = loader.rank_batch_size();
    if (rank_tokens % cfg_.rank_microbatch_size != 0) {
        throw Error("rank batch of " + std::to_string(rank_tokens) +
                    " tokens is not divisible by train_module.rank_microbatch_size (" +
                    std::to_string(cfg_.rank_microbatch_size) + ")");
    }
}

namespace {

// Each position's label: the next token (none at the last position). OLMo-core's get_labels.
torch::Tensor shifted_labels(const data::Batch& batch, int64_t ignore_index) {
    // OLMo-core's get_labels: a token whose label mask is false is no one's label.
    const auto& ids = batch.input_ids;
    const int64_t seq = ids.size(1);
    auto labels = torch::full_like(ids, ignore_index);
    auto next = labels.narrow(1, 0, seq - 1);
    next.copy_(ids.narrow(1, 1, seq - 1));
    if (batch.label_mask.defined())
        next.masked_fill_(batch.label_mask.narrow(1, 1, seq - 1).logical_not(), ignore_index);
    // An instance the repetition filter masks is no one's label at all.
    if (batch.instance_mask.defined())
        labels.masked_fill_(batch.instance_mask.logical_not().unsqueeze(1), ignore_index);
    return labels;
}

}  // namespace

std::string TransformerTrainModule::all_masked_message(const data::Batch& batch) const {
    // The loss is a mean over the rank batch's trained labels: with none it is 0/0 (NaN).
    const auto& ds = trainer_->data_loader().dataset();
    std::string where;
    for (std::size_t i = 0; i < batch.index.size() && i < 4; ++i)
        where += (i ? "; " : "") + std::string("instance ") + std::to_string(batch.index[i]) +
                 " (" + ds.describe_instance(batch.index[i]) + ")";
    if (batch.index.size() > 4)
        where += "; and " + std::to_string(batch.index.size() - 4) + " more";
    return "step " + std::to_string(trainer_->global_step()) +
           ": every label of this rank's batch is masked, so there is no loss to take (0/0): " +
           where +
           ". Their label masks hold no trained token (data prepared with --chat trains on "
           "assistant turns only: a conversation longer than the sequence can leave a whole "
           "instance without one); check the data's label masks";
}

model::Documents TransformerTrainModule::documents(const data::Batch& batch,
                                                   const torch::Tensor& doc_ids, int64_t start,
                                                   int64_t len) const {
    if (!doc_ids.defined()) return {};
    // On CUDA the spans too, from the host's ids (no wait for the device), for varlen attention.
    model::Documents docs;
    if (env_.device().is_cuda() && model_->cfg.fused.varlen_attention)
        docs = model::document_spans(batch.doc_ids.narrow(0, start, len), env_.device());
    docs.ids = doc_ids.narrow(0, start, len);
    return docs;
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
    auto host_labels = shifted_labels(batch, cfg_.label_ignore_index);
    double num_loss_tokens =
        static_cast<double>((host_labels != cfg_.label_ignore_index).sum().item<int64_t>());
    auto input_ids = host_ids.to(env_.device(), /*non_blocking=*/true);
    auto labels = host_labels.to(env_.device(), /*non_blocking=*/true);
    // Document masking (dataset.generate_doc_lengths): each token's document.
    const auto doc_ids = batch.doc_ids.defined()
                             ? batch.doc_ids.to(env_.device(), /*non_blocking=*/true)
                             : torch::Tensor();
    trainer_->record_metric("train/masked labels (%)",
                            1.0 - num_loss_tokens / static_cast<double>(labels.numel()),
                            ReduceType::mean);
    if (batch.instance_mask.defined()) {
        // OLMo-core's train module: a masked instance still counts as sequence_length tokens in
        // the loss's divisor (zero loss for them), so that every rank's share weighs the same.
        const auto masked = batch.instance_mask.logical_not().sum().item<int64_t>();
        trainer_->record_metric(
            "train/masked instances (%)",
            static_cast<double>(masked) / static_cast<double>(batch.instance_mask.numel()),
            ReduceType::mean);
        num_loss_tokens += static_cast<double>(masked * seq);
    }
    if (num_loss_tokens == 0) throw Error(all_masked_message(batch));

    const int64_t mb_rows = cfg_.rank_microbatch_size / seq;
    const int64_t rows = input_ids.size(0);
    const int64_t n_micro = (rows + mb_rows - 1) / mb_rows;
    torch::Tensor ce_total = torch::zeros({}, torch::TensorOptions().device(env_.device()));
    torch::Tensor z_total;
    for (int64_t m = 0; m < n_micro; ++m) {
        const int64_t start = m * mb_rows, len = std::min(mb_rows, rows - start);
        model::LossOutput out;
        // train_module.autocast_precision: the forward pass under autocast to that dtype (the loss
        // is computed in fp32 regardless; RMSNorm and RoPE compute in fp32 as well).
        auto autocast = [this](std::optional<AutocastScope>& scope) {
            if (cfg_.autocast_precision)
                scope.emplace(env_.device().type(), true,
                              *cfg_.autocast_precision == config::DType::bfloat16 ? at::kBFloat16
                                                                                  : at::kFloat);
        };
        // train_module.cuda_graphs: the whole micro-batch as one graph replay where it can be.
        bool replayed = false;
        if (graphs_ && !doc_ids.defined() && trainer_->global_step() != inject_nan_step_) {
            auto body = [&](const torch::Tensor& ids, const torch::Tensor& labs,
                            const torch::Tensor& div) {
                model::LossOutput o;
                {
                    std::optional<AutocastScope> scope;
                    autocast(scope);
                    o = model_->forward_loss(ids, labs, 1.0, cfg_.z_loss_multiplier,
                                             cfg_.label_ignore_index, {}, div);
                }
                o.loss.backward();
                if (copies_) copies_->accumulate_grads();
                return o;
            };
            replayed = graphs_->run(trainer_->global_step(), m, input_ids.narrow(0, start, len),
                                    labels.narrow(0, start, len), num_loss_tokens, body, out);
        }
        if (!replayed) {
            {
                std::optional<AutocastScope> scope;
                autocast(scope);
                out = model_->forward_loss(input_ids.narrow(0, start, len),
                                           labels.narrow(0, start, len), num_loss_tokens,
                                           cfg_.z_loss_multiplier, cfg_.label_ignore_index,
                                           documents(batch, doc_ids, start, len));
            }
            dp_->before_backward(m == n_micro - 1);
            // Fault injection for tests: NaN gradients (the logged loss stays finite).
            if (trainer_->global_step() == inject_nan_step_)
                out.loss = out.loss * std::numeric_limits<double>::quiet_NaN();
            out.loss.backward();
            if (copies_) copies_->accumulate_grads();
        }
        ce_total += out.ce_loss;
        if (out.z_loss.defined()) z_total = z_total.defined() ? z_total + out.z_loss : out.z_loss;
    }
    dp_->finish_backward();
    if (trainer_->global_step() == inject_nan_loss_step_)
        ce_total = ce_total * std::numeric_limits<double>::quiet_NaN();
    if (optim_->skips_steps()) {
        // The skip-step optimizers judge this step by its loss averaged over the ranks now, as
        // OLMo-core's train module does for them.
        auto mean = ce_total.detach().reshape({1}).clone();
        if (env_.dp_size() > 1) {
            env_.dp_group().all_reduce(mean);
            mean.div_(static_cast<double>(env_.dp_size()));
        }
        optim_->set_latest_loss(mean);
    }
    trainer_->record_metric("train/CE loss", ce_total, ReduceType::mean);
    if (z_total.defined()) {
        trainer_->record_metric("train/Z loss", z_total, ReduceType::mean);
        trainer_->record_metric("train/Z loss unscaled", z_total / *cfg_.z_loss_multiplier,
                                ReduceType::mean);
    }
}

std::vector<torch::Tensor> TransformerTrainModule::step_grads() const {
    std::vector<torch::Tensor> grads;
    for (const auto& p : dp_->grad_params()) {
        if (p.grad().defined()) grads.push_back(p.grad());
    }
    return grads;
}

torch::Tensor TransformerTrainModule::total_grad_norm(const std::vector<torch::Tensor>& grads) {
    // Total gradient norm in fp32 (gradients are already averaged over ranks; FSDP sums its shards).
    torch::Tensor total =
        torch::zeros({}, torch::TensorOptions().device(env_.device()).dtype(torch::kFloat32));
    const int64_t tp = model_->tp.degree;
    if (tp == 1) {
        if (env_.device().is_cuda() && !grads.empty() && grads.front().is_cuda()) {
            // Two launches for every gradient together (torch's clip_grad_norm_ on CUDA) instead
            // of four per gradient: the step is launch-bound at small sizes.
            auto norms = torch::_foreach_norm(grads, 2, torch::kFloat32);
            total = torch::stack(norms).pow(2).sum();
        } else {
            for (const auto& g : grads) total += g.to(torch::kFloat32).pow(2).sum();
        }
        dp_->reduce_grad_norm_sq(total);
    } else {
        // Tensor parallelism: a split parameter's slices are summed over the TP group; a
        // replicated one has the same gradient on every TP rank, so each counts it 1/degree.
        const bool lp = model_->loss_parallel, head_norm = model_->cfg.use_head_qk_norm;
        auto weight = [tp, lp, head_norm](const std::string& name) {
            return model::tp_shard_dim(name, lp, head_norm) ? 1.0 : 1.0 / static_cast<double>(tp);
        };
        if (fsdp_) {
            total = fsdp_->weighted_grad_norm_sq(weight);
        } else {
            for (const auto& [name, p] : trained_parameters())
                if (p.grad().defined())
                    total += p.grad().to(torch::kFloat32).pow(2).sum() * weight(name);
        }
        dp_->reduce_grad_norm_sq(total);
        env_.tp_group().all_reduce(total);
    }
    return total.sqrt();
}

void TransformerTrainModule::optim_step() {
    torch::NoGradGuard no_grad;
    if (sync_free_) {
        sync_free_optim_step();
        return;
    }
    auto grads = step_grads();
    const auto total = total_grad_norm(grads);
    const double norm = total.item<double>();
    const bool finite = std::isfinite(norm);
    // OLMo-core records the norm only when it clips (torch's clip_grads_with_norm_: the factor is
    // a float32 tensor, clamped to 1, and always applied).
    if (cfg_.max_grad_norm) {
        trainer_->record_metric("optim/total grad norm", total, std::nullopt);
        optim_->set_latest_grad_norm(total);
        if (finite) {
            auto coef = (*cfg_.max_grad_norm / (total + 1e-6)).clamp_max(1.0);
            if (!grads.empty()) torch::_foreach_mul_(grads, coef);
        }
    }
    set_learning_rates();
    auto& tr = *trainer_;
    if (!finite) {
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
                step_optimizer();
                return;
            case config::StabilityAction::skip:
                log::warn("non-finite gradient norm ({}) at step {}; skipping the optimizer step",
                          std::isnan(norm) ? "nan" : "inf", tr.global_step());
                break;
        }
    }
    if (!finite) {
        trainer_->record_metric("optim/step skipped", 1.0, std::nullopt);
        return;
    }
    step_optimizer();
    if (optim_->skips_steps())
        trainer_->record_metric("optim/step skipped", optim_->step_skipped(), std::nullopt);
}

void TransformerTrainModule::set_learning_rates() {
    // LR for this step (OLMo-core sets it at the start of optim_step for the 1-based global step).
    auto& tr = *trainer_;
    const bool tokens = cfg_.scheduler.units == config::SchedulerUnits::tokens;
    const int64_t current = tokens ? tr.global_train_tokens_seen() : tr.global_step();
    const int64_t t_max = tokens ? tr.max_tokens() : tr.max_steps();
    auto& groups = optim_->groups();
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const double lr = scheduler_lr(cfg_.scheduler, groups[g].initial_lr, current, t_max);
        groups[g].lr = lr;
        trainer_->record_metric("optim/LR (group " + std::to_string(g) + ")", lr, std::nullopt);
    }
    if (graphs_) optim_->stage_learning_rates();
}

// The step without a host sync (fused AdamW on CUDA): the gradients are clipped only when the norm
// is finite, and the fused kernel skips the update when it is not, both decided on the device.
// What the host must know (to warn, or to stop) it learns one step later from a copy of the norm
// made without waiting, by when the device has long computed it. With CUDA graphs the device side
// is one graph replay (sync_free_update, captured once the micro-batch graphs own the gradients).
void TransformerTrainModule::sync_free_optim_step() {
    set_learning_rates();
    check_previous_norm();
    torch::Tensor total, skipped;
    std::vector<torch::Tensor> outs;
    const auto update = [this] {
        auto [norm, skip] = sync_free_update();
        return std::vector<torch::Tensor>{norm, skip};
    };
    if (graphs_ && graphs_->run_step(trainer_->global_step(), update, outs)) {
        total = outs[0];
        skipped = outs[1];
    } else {
        std::tie(total, skipped) = sync_free_update();
    }
    if (cfg_.max_grad_norm) {
        trainer_->record_metric("optim/total grad norm", total, std::nullopt);
        optim_->set_latest_grad_norm(total);
    }
    trainer_->record_metric("optim/step skipped", skipped, std::nullopt);
    // The norm's host copy, made when the device gets there; read at the next step. One buffer
    // and one event serve every step: the previous value was read above.
    auto& pending = pending_norm_;
    if (!pending.host.defined()) {
        pending.host = torch::empty(
            {}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(total.is_cuda()));
        if (!total.is_cpu()) pending.event = std::make_unique<c10::Event>(total.device().type());
    }
    pending.step = trainer_->global_step();
    pending.host.copy_(total, /*non_blocking=*/true);
    if (pending.event) {
        c10::impl::VirtualGuardImpl impl(total.device().type());
        pending.event->record(impl.getStream(total.device()));
    }
}

std::pair<torch::Tensor, torch::Tensor> TransformerTrainModule::sync_free_update() {
    auto grads = step_grads();
    const auto total = total_grad_norm(grads);
    const auto finite = torch::isfinite(total);
    if (cfg_.max_grad_norm) {
        auto coef = torch::where(finite, (*cfg_.max_grad_norm / (total + 1e-6)).clamp_max(1.0),
                                 torch::ones_like(total));
        if (!grads.empty()) torch::_foreach_mul_(grads, coef);
    }
    auto skipped = finite.logical_not().to(torch::kFloat32);
    const bool step_anyway = non_finite_action_ == config::StabilityAction::warn;
    step_optimizer(step_anyway ? torch::Tensor() : skipped.reshape({1}));
    return {total, skipped};
}

void TransformerTrainModule::step_optimizer(const torch::Tensor& found_inf) {
    optim_->step(found_inf);
    if (copies_) copies_->refresh();
}

void TransformerTrainModule::check_previous_norm() {
    auto& pending = pending_norm_;
    if (pending.step < 0) return;
    const int64_t step = pending.step;
    pending.step = -1;
    if (pending.event) pending.event->synchronize();
    const double norm = pending.host.item<double>();
    if (std::isfinite(norm)) return;
    const char* what = std::isnan(norm) ? "nan" : "inf";
    switch (non_finite_action_) {
        case config::StabilityAction::stop:
            throw Error("non-finite gradient norm (" + std::string(what) + ") at step " +
                        std::to_string(step) + " (its update was skipped)");
        case config::StabilityAction::warn:
            log::warn(
                "non-finite gradient norm ({}) at step {}; stepped anyway "
                "(non_finite_grads=warn)",
                what, step);
            return;
        case config::StabilityAction::skip:
            log::warn("non-finite gradient norm ({}) at step {}; the optimizer step was skipped",
                      what, step);
            return;
    }
}

void TransformerTrainModule::finish_steps() {
    if (sync_free_) check_previous_norm();
}

void TransformerTrainModule::zero_grads() {
    // Set to none, as OLMo-core does; gradients that CUDA graphs own are overwritten instead.
    if (graphs_ && graphs_->owns_gradients()) return;
    optim_->zero_grad();
}

std::pair<double, int64_t> TransformerTrainModule::eval_batch(const data::Batch& batch) {
    torch::NoGradGuard no_grad;
    model_->eval();
    auto input_ids = batch.input_ids.to(env_.device());
    auto labels = shifted_labels(batch, cfg_.label_ignore_index).to(env_.device());
    int64_t n = (labels != cfg_.label_ignore_index).sum().item<int64_t>();
    const auto doc_ids =
        batch.doc_ids.defined() ? batch.doc_ids.to(env_.device()) : torch::Tensor();
    auto out = model_->forward_loss(input_ids, labels, 1.0, std::nullopt, cfg_.label_ignore_index,
                                    documents(batch, doc_ids, 0, input_ids.size(0)));
    model_->train();
    return {out.ce_loss.item<double>(), n};
}

namespace {

// The dimension along which the state tensor `key` ("model.X" or "optim.state.X.<state>") is
// split under tensor parallelism; nullopt for a replicated one (and for a step counter, a scalar).
std::optional<int64_t> tp_dim_of_key(const std::string& key, bool loss_parallel,
                                     bool head_qk_norm) {
    std::string param;
    if (key.rfind("model.", 0) == 0) {
        param = key.substr(6);
    } else if (const std::string prefix = "optim.state."; key.rfind(prefix, 0) == 0) {
        const auto dot = key.rfind('.');
        if (key.substr(dot + 1) == "step") return std::nullopt;
        param = key.substr(prefix.size(), dot - prefix.size());
    }
    return model::tp_shard_dim(param, loss_parallel, head_qk_norm);
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> TransformerTrainModule::gather_tp(
    std::vector<std::pair<std::string, torch::Tensor>> local) {
    // Only the ranks that hold the data-parallel group's full tensors (dp index 0) gather, and
    // they all form one TP group; the tensors of the others are not used.
    if (!model_->tp.active() || env_.dp_rank() != 0) return local;
    const auto& group = env_.tp_group();
    for (auto& [key, t] : local) {
        const auto dim = tp_dim_of_key(key, model_->loss_parallel, model_->cfg.use_head_qk_norm);
        if (!dim) continue;
        const auto where = t.device();
        auto mine = t.detach().to(env_.device()).contiguous();
        std::vector<torch::Tensor> parts;
        group.all_gather(parts, mine);
        t = torch::cat(parts, *dim).to(where);
    }
    return local;
}

std::map<std::string, torch::Tensor> TransformerTrainModule::slice_tp(
    const std::map<std::string, torch::Tensor>& full) const {
    std::map<std::string, torch::Tensor> out;
    const auto& tp = model_->tp;
    for (const auto& [key, t] : full) {
        const auto dim = tp_dim_of_key(key, model_->loss_parallel, model_->cfg.use_head_qk_norm);
        if (!dim) {
            out.emplace(key, t);
            continue;
        }
        if (t.dim() <= *dim || t.size(*dim) % tp.degree != 0)
            throw Error("checkpoint tensor '" + key + "' has shape " + c10::str(t.sizes()) +
                        ", which train_module.tp_config.degree " + std::to_string(tp.degree) +
                        " cannot split along dimension " + std::to_string(*dim) +
                        " (a different model config?)");
        const int64_t part = t.size(*dim) / tp.degree;
        out.emplace(key, t.narrow(*dim, tp.rank * part, part));
    }
    return out;
}

std::vector<std::pair<std::string, torch::Tensor>> TransformerTrainModule::state_tensors() {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    if (fsdp_) {
        out = gather_tp(fsdp_->full_state(*optim_));
        if (env_.rank() == 0) {
            for (auto& h : optim_->history()) out.push_back(std::move(h));
        }
        return out;
    }
    for (auto& h : optim_->history()) out.push_back(std::move(h));
    std::map<const void*, std::string> names;
    for (const auto& [name, p] : trained_parameters()) {
        out.emplace_back("model." + name, p.detach());
        names[p.unsafeGetTensorImpl()] = name;
    }
    for (auto& group : optim_->groups()) {
        for (auto& p : group.params) {
            const std::string& name = names.at(p.unsafeGetTensorImpl());
            for (auto& [key, t] : optim_->state(p))
                out.emplace_back("optim.state." + name + "." + key, t);
        }
    }
    return gather_tp(std::move(out));
}

std::map<std::string, torch::Tensor> TransformerTrainModule::full_model_parameters() {
    std::map<std::string, torch::Tensor> out;
    if (fsdp_) {
        for (auto& [name, t] : gather_tp(fsdp_->full_state(*optim_, /*with_optimizer=*/false)))
            out.emplace(name.substr(6), std::move(t));  // without "model."
        return out;
    }
    if (model_->tp.active()) {
        std::vector<std::pair<std::string, torch::Tensor>> local;
        for (const auto& [name, p] : trained_parameters()) local.emplace_back("model." + name, p);
        for (auto& [name, t] : gather_tp(std::move(local))) out.emplace(name.substr(6), t);
        return out;
    }
    for (const auto& [name, p] : trained_parameters()) out.emplace(name, p);
    return out;
}

void TransformerTrainModule::load_state_tensors(const std::map<std::string, torch::Tensor>& full,
                                                bool load_optim) {
    torch::NoGradGuard no_grad;
    // Checkpoints hold whole tensors whatever the layout that saved them; under tensor
    // parallelism each rank takes its slice.
    std::map<std::string, torch::Tensor> sliced;
    if (model_->tp.active()) sliced = slice_tp(full);
    const auto& tensors = model_->tp.active() ? sliced : full;
    if (load_optim) optim_->set_history(tensors);
    if (fsdp_) {
        fsdp_->load_full_state(tensors, load_optim ? optim_.get() : nullptr);
        return;
    }
    const auto params = trained_parameters();
    for (const auto& [name, p] : params)
        p.copy_(checkpoint_tensor(tensors, "model." + name, p.sizes()));
    if (copies_) copies_->refresh();
    if (!load_optim) return;
    std::map<const void*, std::string> names;
    for (const auto& [name, p] : params) names[p.unsafeGetTensorImpl()] = name;
    for (auto& group : optim_->groups()) {
        for (auto& p : group.params) {
            auto st = saved_optimizer_state(
                *optim_, tensors, names.at(p.unsafeGetTensorImpl()),
                [&](const std::string& key) { return checkpoint_tensor(tensors, key, p.sizes()); });
            if (st) optim_->set_state(p, *st);
        }
    }
}

}  // namespace lathe::train
