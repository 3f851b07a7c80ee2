// Stateful: what a checkpoint saves of a component and gives back to it. The checkpointer knows
// only this interface (no trainer, no model); the train module (model and optimizer tensors), the
// data loader (its position) and the trainer (the two, plus step counters, RNG and callbacks)
// implement it.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lathe::stateful {

class Stateful {
public:
    virtual ~Stateful() = default;

    /// Full (unsharded) named tensors. Every rank calls it (a sharded module gathers here); rank
    /// 0's are written. None by default.
    virtual std::vector<std::pair<std::string, torch::Tensor>> state_tensors() { return {}; }
    /// Takes back what state_tensors() gave; `load_optim` false keeps the optimizer state fresh.
    /// Throws lathe::Error naming the key on a mismatch.
    virtual void load_state_tensors(const std::map<std::string, torch::Tensor>& tensors,
                                    bool load_optim) {
        (void)tensors;
        (void)load_optim;
    }
    /// This rank's JSON state; null when there is none.
    virtual nlohmann::json state_dict() const { return nullptr; }
    /// Takes back what state_dict() gave. Throws lathe::Error when it is malformed.
    virtual void load_state_dict(const nlohmann::json& state) { (void)state; }
};

}  // namespace lathe::stateful
