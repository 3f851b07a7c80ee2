#include "engine/train/fsdp.h"

#include "engine/train/state_tensors.h"

#include "engine/util/autocast.h"

#include "engine/util/error.h"

#include <torch/csrc/autograd/custom_function.h>

namespace lathe::train {

namespace {

torch::ScalarType to_scalar(config::DType d) {
    return d == config::DType::bfloat16 ? torch::kBFloat16 : torch::kFloat32;
}

// One unit as an autograd function: gather -> run -> free; backward: gather -> recompute -> grads
// -> reduce-scatter into the shards.
struct UnitFunction : public torch::autograd::Function<UnitFunction> {
    // `shards` (one per optimizer group; a placeholder where the unit has none) are the inputs
    // whose gradients backward returns.
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 at::TensorList shards, FullyShardedDataParallel* fsdp,
                                 int64_t unit) {
        ctx->saved_data["fsdp"] = reinterpret_cast<int64_t>(fsdp);
        ctx->saved_data["unit"] = unit;
        const auto type = x.device().type();
        ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(type);
        ctx->saved_data["autocast_dtype"] =
            static_cast<int64_t>(at::autocast::get_autocast_dtype(type));
        ctx->save_for_backward({x});
        auto& u = fsdp->units()[static_cast<std::size_t>(unit)];
        std::vector<torch::Tensor> fulls;
        for (const auto& g : u.groups)
            fulls.push_back(g.total > 0 ? fsdp->gather(g) : torch::Tensor());
        fsdp->bind(u, fulls);
        torch::Tensor out;
        {
            torch::NoGradGuard no_grad;
            out = fsdp->model()->run_unit(unit, x);
        }
        fsdp->unbind(u);  // the gathered parameters are freed here
        (void)shards;
        return out;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad_out) {
        auto* fsdp = reinterpret_cast<FullyShardedDataParallel*>(ctx->saved_data["fsdp"].toInt());
        const int64_t unit = ctx->saved_data["unit"].toInt();
        auto x = ctx->get_saved_variables()[0];
        auto& u = fsdp->units()[static_cast<std::size_t>(unit)];
        std::vector<torch::Tensor> leaves;
        for (const auto& g : u.groups) {
            leaves.push_back(g.total > 0 ? fsdp->gather(g).detach().requires_grad_(true)
                                         : torch::Tensor());
        }
        torch::Tensor xin = x.detach();
        const bool x_grad = xin.is_floating_point();
        if (x_grad) xin.requires_grad_(true);
        {
            torch::AutoGradMode enable(true);
            fsdp->bind(u, leaves);
            torch::Tensor out;
            {
                // The forward's autocast state for the recomputation only: backward runs outside
                // the train step's autocast scope (and on a GPU, on another thread), and its own
                // operations run without autocast, as they do without FSDP.
                AutocastScope autocast(
                    x.device().type(), ctx->saved_data["autocast"].toBool(),
                    static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
                out = fsdp->model()->run_unit(unit, xin);
            }
            torch::autograd::backward({out}, {grad_out[0]});
            fsdp->unbind(u);
        }
        // x, each group's shard, then the two non-tensor arguments.
        torch::autograd::variable_list grads(1 + u.groups.size() + 2);
        grads[0] = x_grad ? xin.grad() : torch::Tensor();
        for (std::size_t g = 0; g < u.groups.size(); ++g) {
            if (u.groups[g].total == 0) continue;
            auto full_grad = leaves[g].grad();
            if (!full_grad.defined()) full_grad = torch::zeros_like(leaves[g]);
            grads[1 + g] = fsdp->scatter_grad(full_grad, u.groups[g]);
        }
        return grads;
    }
};

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(
    model::Transformer& model, const dist::Group& group, const config::DataParallelConfig& cfg,
    const std::function<int(const std::string&)>& group_of, int num_groups,
    const torch::Device& device, const dist::Group* replicate)
    : model_(model),
      group_(group),
      replicate_(replicate && replicate->distributed() ? replicate : nullptr),
      reduce_dtype_(to_scalar(cfg.reduce_dtype)),
      device_(device) {
    if (cfg.param_dtype) param_dtype_ = to_scalar(*cfg.param_dtype);
    const int64_t world = group.size(), rank = group.rank();
    // Shards, placeholders and optimizer state live on the rank's device; the full parameters are
    // read where the model is (the host) and freed unit by unit.
    empty_ = torch::empty({0}, torch::TensorOptions().device(device_));
    torch::NoGradGuard no_grad;
    for (int64_t ui = 0; ui < model->num_units(); ++ui) {
        Unit u;
        u.index = ui;
        u.groups.resize(static_cast<std::size_t>(num_groups));
        for (auto& [name, member] : model->unit_parameters(ui)) {
            auto& g = u.groups.at(static_cast<std::size_t>(group_of(name)));
            g.names.push_back(name);
            g.members.push_back(member);
            g.shapes.push_back(member->sizes().vec());
            g.offsets.push_back(g.total);
            g.numels.push_back(member->numel());
            g.total += member->numel();
        }
        for (auto& g : u.groups) {
            if (g.total == 0) continue;
            g.padded = (g.total + world - 1) / world * world;
            const auto where = g.members[0]->device();
            auto flat = torch::zeros({g.padded},
                                     torch::TensorOptions().dtype(torch::kFloat32).device(where));
            for (std::size_t i = 0; i < g.members.size(); ++i) {
                flat.narrow(0, g.offsets[i], g.numels[i])
                    .copy_(g.members[i]->reshape({-1}).to(torch::kFloat32));
            }
            const int64_t per = g.padded / world;
            g.shard = flat.narrow(0, rank * per, per)
                          .to(device_, /*non_blocking=*/false, /*copy=*/true)
                          .set_requires_grad(true);
            // Free the full parameter: the module keeps an empty placeholder until a unit runs.
            for (auto* m : g.members) m->set_data(empty_);
        }
        units_.push_back(std::move(u));
    }
    model->unit_runner = [this](int64_t unit, const torch::Tensor& x) { return run(unit, x); };
}

std::string FullyShardedDataParallel::describe() const {
    return (replicate_ ? "HSDP: " + std::to_string(replicate_->size()) + " replicas, each "
                       : std::string()) +
           "FSDP over " + std::to_string(group_.size()) + " ranks, " +
           std::to_string(units_.size()) + " units" +
           (param_dtype_ ? std::string(", params in ") + c10::toString(*param_dtype_)
                         : std::string());
}

torch::Tensor FullyShardedDataParallel::gather(const FlatGroup& g) const {
    std::vector<torch::Tensor> parts;
    auto shard = g.shard.detach();
    group_.all_gather(parts, shard);
    auto full = torch::cat(parts);
    return param_dtype_ ? full.to(*param_dtype_) : full;
}

torch::Tensor FullyShardedDataParallel::scatter_grad(const torch::Tensor& full_grad,
                                                     const FlatGroup& g) const {
    // Sum over ranks in reduce_dtype straight into this rank's slice (a reduce-scatter: each rank
    // receives only its shard), then average.
    auto buf = full_grad.to(reduce_dtype_).contiguous();
    const int64_t per = g.padded / group_.size();
    std::vector<torch::Tensor> chunks;
    chunks.reserve(static_cast<std::size_t>(group_.size()));
    for (int r = 0; r < group_.size(); ++r) chunks.push_back(buf.narrow(0, r * per, per));
    auto mine = torch::empty({per}, buf.options());
    group_.reduce_scatter(mine, chunks);
    auto out = mine.to(torch::kFloat32).div_(static_cast<double>(group_.size()));
    if (replicate_) {
        // HSDP: the same shard's gradient from every replica, averaged.
        replicate_->all_reduce(out);
        out.div_(static_cast<double>(replicate_->size()));
    }
    return out;
}

torch::Tensor FullyShardedDataParallel::weighted_grad_norm_sq(
    const std::function<double(const std::string&)>& weight) const {
    auto total = torch::zeros({}, torch::TensorOptions().device(device_).dtype(torch::kFloat32));
    const int64_t rank = group_.rank();
    for (const auto& u : units_) {
        for (const auto& g : u.groups) {
            if (g.total == 0 || !g.shard.grad().defined()) continue;
            const auto grad = g.shard.grad();
            const int64_t per = g.padded / group_.size(), lo = rank * per, hi = lo + per;
            // Each parameter's part of this rank's slice.
            for (std::size_t i = 0; i < g.names.size(); ++i) {
                const int64_t from = std::max(lo, g.offsets[i]);
                const int64_t to = std::min(hi, g.offsets[i] + g.numels[i]);
                if (from >= to) continue;
                total += grad.narrow(0, from - lo, to - from).to(torch::kFloat32).pow(2).sum() *
                         weight(g.names[i]);
            }
        }
    }
    return total;
}

void FullyShardedDataParallel::bind(Unit& u, const std::vector<torch::Tensor>& fulls) {
    for (std::size_t gi = 0; gi < u.groups.size(); ++gi) {
        auto& g = u.groups[gi];
        if (g.total == 0) continue;
        for (std::size_t i = 0; i < g.members.size(); ++i) {
            *g.members[i] = fulls[gi].narrow(0, g.offsets[i], g.numels[i]).view(g.shapes[i]);
        }
    }
}

void FullyShardedDataParallel::unbind(Unit& u) {
    for (auto& g : u.groups) {
        for (auto* m : g.members) *m = empty_;
    }
}

torch::Tensor FullyShardedDataParallel::run(int64_t unit, const torch::Tensor& x) {
    auto& u = units_[static_cast<std::size_t>(unit)];
    torch::Tensor in = x;
    if (param_dtype_ && in.is_floating_point()) in = in.to(*param_dtype_);
    // Autograd needs defined inputs: an empty group passes an empty placeholder.
    std::vector<torch::Tensor> shards;
    for (const auto& g : u.groups) shards.push_back(g.total > 0 ? g.shard : empty_);
    return UnitFunction::apply(in, at::TensorList(shards), this, unit);
}

std::vector<torch::Tensor> FullyShardedDataParallel::grad_params() const {
    std::vector<torch::Tensor> out;
    for (const auto& u : units_) {
        for (const auto& g : u.groups) {
            if (g.total > 0) out.push_back(g.shard);
        }
    }
    return out;
}

std::vector<std::vector<torch::Tensor>> FullyShardedDataParallel::optimizer_groups() const {
    std::vector<std::vector<torch::Tensor>> out(units_.empty() ? 0 : units_[0].groups.size());
    for (const auto& u : units_) {
        for (std::size_t gi = 0; gi < u.groups.size(); ++gi) {
            if (u.groups[gi].total > 0) out[gi].push_back(u.groups[gi].shard);
        }
    }
    return out;
}

std::vector<std::pair<std::string, torch::Tensor>> FullyShardedDataParallel::full_state(
    Optimizer& optim, bool with_optimizer) {
    std::vector<std::pair<std::string, torch::Tensor>> model_part, optim_part;
    const bool keep = group_.rank() == 0;
    const auto& element_names = optim.element_state_names();
    auto gather_f32 = [&](const torch::Tensor& shard) {
        std::vector<torch::Tensor> parts;
        auto s = shard.detach().to(torch::kFloat32).contiguous();
        group_.all_gather(parts, s);
        return torch::cat(parts);
    };
    for (auto& u : units_) {
        for (auto& g : u.groups) {
            if (g.total == 0) continue;
            auto full = gather_f32(g.shard);
            auto state =
                with_optimizer ? optim.state(g.shard) : std::map<std::string, torch::Tensor>{};
            // Every rank has state, or none has (they step together); gather each state tensor.
            std::vector<torch::Tensor> elements;
            for (const auto& name : with_optimizer ? element_names : std::vector<std::string>{}) {
                auto it = state.find(name);
                elements.push_back(
                    gather_f32(it != state.end() ? it->second : torch::zeros_like(g.shard)));
            }
            if (!keep) continue;
            // To host memory now, so the device holds one unit's full state at a time.
            full = full.to(torch::kCPU);
            for (auto& e : elements) e = e.to(torch::kCPU);
            for (std::size_t i = 0; i < g.names.size(); ++i) {
                auto piece = [&](const torch::Tensor& flat) {
                    return flat.narrow(0, g.offsets[i], g.numels[i]).view(g.shapes[i]).clone();
                };
                model_part.emplace_back("model." + g.names[i], piece(full));
                if (state.empty()) continue;
                const std::string p = "optim.state." + g.names[i] + ".";
                for (std::size_t k = 0; k < element_names.size(); ++k)
                    optim_part.emplace_back(p + element_names[k], piece(elements[k]));
                if (auto it = state.find("step"); it != state.end())
                    optim_part.emplace_back(p + "step", it->second.clone());
            }
        }
    }
    model_part.insert(model_part.end(), optim_part.begin(), optim_part.end());
    return model_part;
}

void FullyShardedDataParallel::load_full_state(const std::map<std::string, torch::Tensor>& tensors,
                                               Optimizer* optim) {
    torch::NoGradGuard no_grad;
    const int64_t world = group_.size(), rank = group_.rank();
    for (auto& u : units_) {
        for (auto& g : u.groups) {
            if (g.total == 0) continue;
            const int64_t per = g.padded / world;
            auto slice = [&](const std::string& suffix, bool is_model) {
                auto flat = torch::zeros({g.padded}, torch::kFloat32);
                for (std::size_t i = 0; i < g.names.size(); ++i) {
                    std::string key = is_model ? "model." + g.names[i]
                                               : "optim.state." + g.names[i] + "." + suffix;
                    flat.narrow(0, g.offsets[i], g.numels[i])
                        .copy_(checkpoint_tensor(tensors, key, g.shapes[i])
                                   .reshape({-1})
                                   .to(torch::kFloat32));
                }
                return flat.narrow(0, rank * per, per)
                    .to(device_, /*non_blocking=*/false, /*copy=*/true);
            };
            g.shard.copy_(slice("", true));
            if (!optim) continue;
            const std::string prefix = "optim.state." + g.names[0] + ".";
            auto st = saved_optimizer_state(
                *optim, tensors, g.names[0],
                [&](const std::string& key) { return slice(key.substr(prefix.size()), false); });
            if (st) optim->set_state(g.shard, *st);
        }
    }
}

}  // namespace lathe::train
