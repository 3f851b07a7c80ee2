// The optimizers of OLMo-core's optim package, over parameter groups: AdamW (the arithmetic of
// torch.optim.AdamW's single-tensor path, which OLMo-core's AdamWConfig builds on a CPU),
// SkipStepAdamW (its foreach path, OLMo-core's default), Lion and SkipStepLion. The skip-step
// variants multiply every update by a step factor that is 0 when the step's loss or gradient norm
// lies more than sigma_factor std above the mean of the previous rolling_interval_length steps.
#pragma once

#include "engine/config/config.h"

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lathe::train {

struct ParamGroup {
    std::vector<torch::Tensor> params;
    double lr = 1e-3;
    double initial_lr = 1e-3;  ///< the peak the scheduler scales
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.0;
};

class Optimizer {
public:
    Optimizer(const config::OptimConfig& cfg, std::vector<ParamGroup> groups);

    std::vector<ParamGroup>& groups() { return groups_; }
    const std::vector<ParamGroup>& groups() const { return groups_; }

    /// Skip-step optimizers: this step's loss (already averaged over ranks) and, when clipping is
    /// on, its total gradient norm; set both before step(). Others ignore them.
    void set_latest_loss(const torch::Tensor& loss);
    void set_latest_grad_norm(const torch::Tensor& norm);
    bool skips_steps() const { return skip_; }
    /// 1 when the last step() was skipped, else 0 (a tensor: reading it waits for the device).
    torch::Tensor step_skipped() const;

    /// One update of every group. `found_inf`, when given, is a one-element fp32 tensor on the
    /// parameters' device, 1 to skip this update (a non-finite gradient norm) and 0 to make it:
    /// the fused AdamW kernel reads it on the device, so the host never waits for the norm (the
    /// step counters are restored as torch's GradScaler path does); other optimizers read it.
    void step(const torch::Tensor& found_inf = {});
    /// Whether step(found_inf) decides on the device, without a host sync: fused AdamW with its
    /// parameters on CUDA (or on any device when `any_device`, ATen's CPU kernel included).
    bool skips_on_device(bool any_device = false) const;
    void zero_grad();

    /// Fused AdamW on CUDA reads each group's learning rate from a one-element fp32 tensor on
    /// the device. step() sets it from ParamGroup::lr unless held: then the caller sets it with
    /// stage_learning_rates() before each step, and step() launches only device work that reads
    /// what it was given (for a CUDA graph of the step, whose replays must see each step's rate).
    /// Held rates are read from their tensors on the CPU too.
    void hold_learning_rates(bool held) { lr_held_ = held; }
    void stage_learning_rates();

    /// The state kept per parameter, by name: per-element tensors shaped like the parameter, and
    /// "step" (AdamW kinds) as a one-element int64 tensor. Empty before the first step.
    std::map<std::string, torch::Tensor> state(const torch::Tensor& param) const;
    void set_state(const torch::Tensor& param, const std::map<std::string, torch::Tensor>& state);
    /// The per-element state tensors' names, in a fixed order ("exp_avg", "exp_avg_sq" for AdamW).
    const std::vector<std::string>& element_state_names() const { return element_names_; }
    bool has_step_counter() const { return adam_; }

    /// Skip-step optimizers: the rolling loss and grad-norm history, so that a resumed run skips
    /// exactly the steps the uninterrupted one does ("optim.skip_step.losses", "...grad_norms";
    /// OLMo-core keeps it in memory only). Empty for the others.
    std::vector<std::pair<std::string, torch::Tensor>> history() const;
    void set_history(const std::map<std::string, torch::Tensor>& tensors);

private:
    struct State {
        torch::Tensor exp_avg, exp_avg_sq;
        torch::Tensor step;  ///< float32 scalar on the device (skip-step AdamW counts un-skipped;
                             ///< fused AdamW: the count, which a device-side skip does not advance)
        int64_t steps = 0;   ///< AdamW (fused: the updates launched, skipped or not)
        bool counted_on_device = false;  ///< fused AdamW stepped it: `step` is the count
    };
    torch::Tensor step_factor();
    void adamw(ParamGroup& g, torch::Tensor& p, State& s);
    /// optim.fused on CUDA: the group's AdamW update as torch's fused multi-tensor kernel.
    void fused_adamw(std::size_t group, const torch::Tensor& found_inf);
    /// Group `group`'s learning-rate tensor on `device` (made at first use).
    torch::Tensor& lr_tensor(std::size_t group, const torch::Device& device);
    void skip_step_adamw(ParamGroup& g, torch::Tensor& p, State& s, const torch::Tensor& factor);
    void lion(ParamGroup& g, torch::Tensor& p, State& s, const torch::Tensor& factor);

    config::OptimizerName name_;
    bool adam_ = true;
    bool skip_ = false;
    int64_t rolling_ = 128;
    double sigma_ = 6.0;
    bool fused_ = false;  ///< optim.fused (AdamW only)
    bool lr_held_ = false;
    std::vector<torch::Tensor> lr_tensors_;  ///< per group, fused AdamW on CUDA
    std::vector<ParamGroup> groups_;
    std::map<const void*, State> state_;
    std::vector<torch::Tensor> losses_, grad_norms_;
    torch::Tensor skipped_;
    std::vector<std::string> element_names_;
};

/// One step of torch's fused AdamW (ATen's _fused_adamw_: a CUDA and a CPU kernel) over tensors of
/// one device with the options of group `g`; `steps` are per-parameter fp32 step counts, advanced
/// by one first as torch.optim.AdamW does. The same update as Optimizer's reference adamw(). With
/// `lr` (a one-element fp32 tensor on the device) the rate comes from it instead of g.lr.
void fused_adamw_step(const std::vector<torch::Tensor>& params,
                      const std::vector<torch::Tensor>& grads,
                      const std::vector<torch::Tensor>& exp_avgs,
                      const std::vector<torch::Tensor>& exp_avg_sqs,
                      const std::vector<torch::Tensor>& steps, const ParamGroup& g,
                      const torch::Tensor& found_inf = {}, const torch::Tensor& lr = {});

}  // namespace lathe::train
