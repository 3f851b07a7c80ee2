#include "engine/train/optimizer.h"

#include "engine/util/error.h"

#include <cmath>

namespace lathe::train {

using config::OptimizerName;

Optimizer::Optimizer(const config::OptimConfig& cfg, std::vector<ParamGroup> groups)
    : name_(cfg.name),
      adam_(cfg.name == OptimizerName::adamw || cfg.name == OptimizerName::skip_step_adamw),
      skip_(cfg.skips_steps()),
      rolling_(cfg.rolling_interval_length),
      sigma_(static_cast<double>(cfg.sigma_factor)),
      fused_(cfg.fused && cfg.name == OptimizerName::adamw),
      groups_(std::move(groups)) {
    element_names_ = adam_ ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
                           : std::vector<std::string>{"exp_avg"};
}

void Optimizer::set_latest_loss(const torch::Tensor& loss) {
    if (!skip_) return;
    losses_.push_back(loss.detach().to(torch::kFloat32).reshape({}));
    while (static_cast<int64_t>(losses_.size()) > rolling_ + 1) losses_.erase(losses_.begin());
}

void Optimizer::set_latest_grad_norm(const torch::Tensor& norm) {
    if (!skip_) return;
    grad_norms_.push_back(norm.detach().to(torch::kFloat32).reshape({}));
    while (static_cast<int64_t>(grad_norms_.size()) > rolling_ + 1)
        grad_norms_.erase(grad_norms_.begin());
}

// OLMo-core's SkipStepOptimizer.get_step_factor: 1 until half the interval is seen, then 0 when
// the latest loss (and grad norm, when recorded) exceeds mean + sigma * std of the ones before.
torch::Tensor Optimizer::step_factor() {
    torch::Device device = torch::kCPU;
    for (const auto& g : groups_) {
        for (const auto& p : g.params) {
            if (p.numel() > 0) {
                device = p.device();
                break;
            }
        }
    }
    if (static_cast<int64_t>(losses_.size()) < std::max<int64_t>(2, rolling_ / 2))
        return torch::tensor(1.0f, torch::TensorOptions().device(device));
    auto within = [&](const std::vector<torch::Tensor>& h) {
        auto past = torch::stack(std::vector<torch::Tensor>(h.begin(), h.end() - 1));
        auto [std, mean] = torch::std_mean(past);
        return (h.back() - mean) <= sigma_ * std;
    };
    torch::Tensor ok = within(losses_);
    if (!grad_norms_.empty()) ok = torch::logical_and(ok, within(grad_norms_));
    return ok.to(torch::kFloat32).to(device);
}

torch::Tensor Optimizer::step_skipped() const {
    return skipped_.defined() ? skipped_ : torch::zeros({});
}

bool Optimizer::skips_on_device(bool any_device) const {
    if (!fused_) return false;
    for (const auto& g : groups_)
        if (!g.params.empty() && !(any_device || g.params.front().is_cuda())) return false;
    return true;
}

void Optimizer::step(const torch::Tensor& found_inf) {
    torch::NoGradGuard no_grad;
    // Without the fused kernel, whoever asks for a device-side skip pays a host read here.
    if (found_inf.defined() && !skips_on_device(/*any_device=*/true) &&
        found_inf.item<float>() != 0)
        return;
    torch::Tensor factor;
    if (skip_) {
        factor = step_factor();
        skipped_ = 1 - factor;
    } else if (!adam_) {
        factor = torch::tensor(1.0f);  // plain Lion: OLMo-core's per-parameter step_factor of 1
    }
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
        auto& g = groups_[gi];
        if (fused_ && !g.params.empty() && (g.params.front().is_cuda() || found_inf.defined())) {
            fused_adamw(gi, found_inf);
            continue;
        }
        for (auto& p : g.params) {
            if (!p.grad().defined()) continue;
            auto& s = state_[p.unsafeGetTensorImpl()];
            switch (name_) {
                case OptimizerName::adamw:
                    adamw(g, p, s);
                    break;
                case OptimizerName::skip_step_adamw:
                    skip_step_adamw(g, p, s, factor);
                    break;
                case OptimizerName::lion:
                case OptimizerName::skip_step_lion:
                    lion(g, p, s, factor.device() == p.device() ? factor : factor.to(p.device()));
                    break;
            }
        }
    }
}

// torch.optim.AdamW, _single_tensor_adam with decoupled weight decay, in its order.
void Optimizer::adamw(ParamGroup& g, torch::Tensor& p, State& s) {
    const auto& grad = p.grad();
    if (!s.exp_avg.defined()) {
        s.exp_avg = torch::zeros_like(p);
        s.exp_avg_sq = torch::zeros_like(p);
    }
    s.steps += 1;
    if (g.weight_decay != 0) p.mul_(1 - g.lr * g.weight_decay);
    s.exp_avg.lerp_(grad, 1 - g.beta1);
    s.exp_avg_sq.mul_(g.beta2).addcmul_(grad, grad, 1 - g.beta2);
    const double step = static_cast<double>(s.steps);
    const double bias_correction1 = 1 - std::pow(g.beta1, step);
    const double bias_correction2 = 1 - std::pow(g.beta2, step);
    const double step_size = g.lr / bias_correction1;
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    auto denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(g.eps);
    p.addcdiv_(s.exp_avg, denom, -step_size);
}

// torch.optim.AdamW(fused=True): the same update as adamw() for every parameter of the group in
// one kernel; its bias corrections are computed in fp32 on the device from a step tensor per
// parameter (torch's state_steps), which s.step holds, kept equal to s.steps.
void Optimizer::fused_adamw(std::size_t group, const torch::Tensor& found_inf) {
    auto& g = groups_[group];
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (auto& p : g.params) {
        if (!p.grad().defined()) continue;
        auto& s = state_[p.unsafeGetTensorImpl()];
        if (!s.exp_avg.defined()) {
            s.exp_avg = torch::zeros_like(p);
            s.exp_avg_sq = torch::zeros_like(p);
        }
        if (!s.step.defined())
            s.step = torch::full({}, static_cast<float>(s.steps),
                                 torch::TensorOptions().dtype(torch::kFloat32).device(p.device()));
        s.steps += 1;
        s.counted_on_device = true;
        params.push_back(p);
        grads.push_back(p.grad());
        exp_avgs.push_back(s.exp_avg);
        exp_avg_sqs.push_back(s.exp_avg_sq);
        steps.push_back(s.step);
    }
    if (params.empty()) return;
    // On CUDA the rate is a device tensor (the same arithmetic whether or not a graph replays it);
    // held rates are read from it on any device.
    torch::Tensor lr;
    if (params.front().is_cuda() || lr_held_) {
        lr = lr_tensor(group, params.front().device());
        if (!lr_held_) lr.fill_(g.lr);
    }
    fused_adamw_step(params, grads, exp_avgs, exp_avg_sqs, steps, g,
                     found_inf.defined() ? found_inf.to(params.front().device()) : found_inf, lr);
}

torch::Tensor& Optimizer::lr_tensor(std::size_t group, const torch::Device& device) {
    if (lr_tensors_.size() < groups_.size()) lr_tensors_.resize(groups_.size());
    auto& t = lr_tensors_[group];
    if (!t.defined() || t.device() != device)
        t = torch::full({}, static_cast<float>(groups_[group].lr),
                        torch::TensorOptions().dtype(torch::kFloat32).device(device));
    return t;
}

void Optimizer::stage_learning_rates() {
    torch::NoGradGuard no_grad;
    if (!fused_) return;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
        const auto& g = groups_[gi];
        if (!g.params.empty() && (g.params.front().is_cuda() || lr_held_))
            lr_tensor(gi, g.params.front().device()).fill_(g.lr);
    }
}

void fused_adamw_step(const std::vector<torch::Tensor>& params,
                      const std::vector<torch::Tensor>& grads,
                      const std::vector<torch::Tensor>& exp_avgs,
                      const std::vector<torch::Tensor>& exp_avg_sqs,
                      const std::vector<torch::Tensor>& steps, const ParamGroup& g,
                      const torch::Tensor& found_inf, const torch::Tensor& lr) {
    torch::NoGradGuard no_grad;
    torch::_foreach_add_(steps, 1);
    std::optional<torch::Tensor> inf;
    if (found_inf.defined()) inf = found_inf;
    if (lr.defined())
        at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr,
                          g.beta1, g.beta2, g.weight_decay, g.eps, /*amsgrad=*/false,
                          /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
    else
        at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, g.lr,
                          g.beta1, g.beta2, g.weight_decay, g.eps, /*amsgrad=*/false,
                          /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
    // A skipped update does not count (torch.optim.AdamW undoes the increment the same way).
    if (inf)
        torch::_foreach_sub_(steps,
                             std::vector<torch::Tensor>(steps.size(), found_inf.reshape({})));
}

// OLMo-core's foreach_adamw_step (SkipStepAdamW's default), one tensor at a time.
void Optimizer::skip_step_adamw(ParamGroup& g, torch::Tensor& p, State& s,
                                const torch::Tensor& factor_any) {
    const auto factor = factor_any.to(p.device());
    if (!s.exp_avg.defined()) {
        s.step = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(p.device()));
        s.exp_avg = torch::zeros_like(p);
        s.exp_avg_sq = torch::zeros_like(p);
    }
    auto grad = p.grad().to(s.exp_avg.scalar_type());
    p.mul_(1 - factor * (g.lr * g.weight_decay));
    auto w1 = factor * (1 - g.beta1);
    s.exp_avg.mul_(1.0 - w1);
    s.exp_avg.add_(grad * w1);
    auto w2 = factor * (1 - g.beta2);
    s.exp_avg_sq.mul_(1.0 - w2);
    s.exp_avg_sq.add_((grad * grad) * w2);
    auto bias_correction1 = 1 - torch::pow(g.beta1, s.step + 1);
    auto bias_correction2 = 1 - torch::pow(g.beta2, s.step + 1);
    auto step_size = g.lr / bias_correction1;
    auto denom = torch::sqrt(s.exp_avg_sq);
    denom.div_(bias_correction2.sqrt());
    denom.add_(g.eps);
    auto update = torch::div(s.exp_avg, denom);
    update.mul_(-factor * step_size);
    p.add_(update);
    s.step.add_(factor);
}

// OLMo-core's lion_step.
void Optimizer::lion(ParamGroup& g, torch::Tensor& p, State& s, const torch::Tensor& factor) {
    const auto& grad = p.grad();
    if (!s.exp_avg.defined()) s.exp_avg = torch::zeros_like(p);
    p.mul_(1 - factor * (g.lr * g.weight_decay));
    auto update = s.exp_avg * g.beta1 + grad * (1 - g.beta1);
    update.mul_(factor);
    p.add_(torch::sign(update), -g.lr);
    s.exp_avg.mul_(1 - factor * (1 - g.beta2)).add_(factor * grad, 1 - g.beta2);
}

void Optimizer::zero_grad() {
    for (auto& g : groups_) {
        for (auto& p : g.params) {
            if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
        }
    }
}

std::map<std::string, torch::Tensor> Optimizer::state(const torch::Tensor& param) const {
    std::map<std::string, torch::Tensor> out;
    auto it = state_.find(param.unsafeGetTensorImpl());
    if (it == state_.end() || !it->second.exp_avg.defined()) return out;
    const auto& s = it->second;
    out["exp_avg"] = s.exp_avg;
    if (adam_) {
        out["exp_avg_sq"] = s.exp_avg_sq;
        // The device's count where there is one: skip-step AdamW's, and fused AdamW's (whose
        // device-side skips the host never sees).
        const int64_t steps = name_ == OptimizerName::skip_step_adamw || s.counted_on_device
                                  ? static_cast<int64_t>(std::llround(s.step.item<double>()))
                                  : s.steps;
        out["step"] = torch::tensor({steps}, torch::kInt64);
    }
    return out;
}

void Optimizer::set_state(const torch::Tensor& param,
                          const std::map<std::string, torch::Tensor>& in) {
    auto get = [&](const std::string& k) {
        auto it = in.find(k);
        if (it == in.end()) throw Error("optimizer state has no '" + k + "'");
        return it->second;
    };
    State s;
    s.exp_avg = get("exp_avg").to(param.device(), param.scalar_type()).clone();
    if (adam_) {
        s.exp_avg_sq = get("exp_avg_sq").to(param.device(), param.scalar_type()).clone();
        s.steps = get("step").to(torch::kCPU).reshape({-1})[0].item<int64_t>();
        s.step = torch::full({}, static_cast<float>(s.steps),
                             torch::TensorOptions().dtype(torch::kFloat32).device(param.device()));
    }
    state_[param.unsafeGetTensorImpl()] = std::move(s);
}

std::vector<std::pair<std::string, torch::Tensor>> Optimizer::history() const {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    if (!skip_) return out;
    auto pack = [](const std::vector<torch::Tensor>& h) {
        return h.empty() ? torch::zeros({0}, torch::kFloat32)
                         : torch::stack(h).to(torch::kCPU).reshape({-1}).clone();
    };
    out.emplace_back("optim.skip_step.losses", pack(losses_));
    out.emplace_back("optim.skip_step.grad_norms", pack(grad_norms_));
    return out;
}

void Optimizer::set_history(const std::map<std::string, torch::Tensor>& tensors) {
    if (!skip_) return;
    torch::Device device = torch::kCPU;
    if (!groups_.empty() && !groups_[0].params.empty()) device = groups_[0].params[0].device();
    auto unpack = [&](const char* key, std::vector<torch::Tensor>& h) {
        h.clear();
        auto it = tensors.find(key);
        if (it == tensors.end()) return;  // saved by another optimizer: start the history afresh
        auto flat = it->second.to(torch::kFloat32).reshape({-1});
        for (int64_t i = 0; i < flat.numel(); ++i) h.push_back(flat[i].clone().to(device));
    };
    unpack("optim.skip_step.losses", losses_);
    unpack("optim.skip_step.grad_norms", grad_norms_);
}

}  // namespace lathe::train
