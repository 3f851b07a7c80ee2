// transformers' Olmo2ForCausalLM: reordered-norm blocks, QK-norm over the whole projection, no
// biases, full attention everywhere.
#include "engine/hf/family.h"

namespace lathe::hf {

const Family& olmo2_family() {
    static const Family f{
        "Olmo2ForCausalLM",
        "olmo2",
        [](const ConfigReader& r, config::ModelConfig& m) {
            detail::read_olmo_block(r, m, "OLMo2");
        },
        [](const config::ModelConfig& m) -> std::string {
            if (auto why = detail::olmo_block_problem(m, "Olmo2"); !why.empty()) return why;
            if (m.sliding_window.enabled()) return "model.sliding_window: Olmo2 attends fully";
            return {};
        },
        [](const config::ModelConfig&, nlohmann::json& j) { j["attention_bias"] = false; },
    };
    return f;
}

}  // namespace lathe::hf
