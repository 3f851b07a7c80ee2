#include "engine/train/state_tensors.h"

#include "engine/util/error.h"

namespace lathe::train {

const torch::Tensor& checkpoint_tensor(const StateTensors& tensors, const std::string& key,
                                       c10::IntArrayRef shape) {
    auto it = tensors.find(key);
    if (it == tensors.end()) throw Error("checkpoint has no tensor '" + key + "'");
    if (it->second.sizes() != shape) {
        throw Error("checkpoint tensor '" + key + "' has shape " + c10::str(it->second.sizes()) +
                    " but the model needs " + c10::str(shape) + " (a different model config?)");
    }
    return it->second;
}

std::optional<StateTensors> saved_optimizer_state(
    const Optimizer& optim, const StateTensors& tensors, const std::string& name,
    const std::function<torch::Tensor(const std::string& key)>& element) {
    const std::string prefix = "optim.state." + name + ".";
    if (tensors.find(prefix + "exp_avg") == tensors.end()) return std::nullopt;  // step 0
    StateTensors st;
    for (const auto& key : optim.element_state_names()) st[key] = element(prefix + key);
    if (optim.has_step_counter()) {
        auto it = tensors.find(prefix + "step");
        if (it == tensors.end())
            throw Error("checkpoint has no tensor '" + prefix + "step'" +
                        " (saved by another optimizer? set trainer.load_optim_state=false)");
        st["step"] = it->second;
    }
    return st;
}

}  // namespace lathe::train
