#include "engine/train/compute_copies.h"

namespace lathe::train {

ComputeCopies::ComputeCopies(const std::vector<std::pair<std::string, torch::Tensor>>& params,
                             torch::ScalarType dtype)
    : dtype_(dtype) {
    torch::NoGradGuard no_grad;
    masters_.reserve(params.size());
    copies_.reserve(params.size());
    for (const auto& [name, p] : params) {
        auto master = p.detach().to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
        masters_.emplace_back(name, master);
        // set_data keeps the parameter's identity (the module's member and its registration) and
        // its requires_grad; only its storage and dtype change, as Module::to(dtype) does.
        auto copy = p;
        copy.set_data(master.to(dtype));
        copies_.push_back(copy);
    }
}

std::vector<torch::Tensor> ComputeCopies::master_tensors() const {
    std::vector<torch::Tensor> out;
    out.reserve(masters_.size());
    for (const auto& m : masters_) out.push_back(m.second);
    return out;
}

void ComputeCopies::accumulate_grads() {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < copies_.size(); ++i) {
        auto& g = copies_[i].mutable_grad();
        if (!g.defined()) continue;
        auto& master = masters_[i].second;
        auto& mg = master.mutable_grad();
        if (mg.defined())
            mg.add_(g);  // fp32 += bf16: the sum is formed in fp32
        else
            mg = g.to(torch::kFloat32);
        g.reset();
    }
}

void ComputeCopies::refresh() {
    torch::NoGradGuard no_grad;
    if (!copies_.empty()) torch::_foreach_copy_(copies_, master_tensors());
}

}  // namespace lathe::train
