// transformers' Olmo3ForCausalLM: OLMo2 plus sliding-window attention per layer (layer_types).
#include "engine/hf/family.h"

namespace lathe::hf {

const Family& olmo3_family() {
    static const Family f{
        "Olmo3ForCausalLM",
        "olmo3",
        [](const ConfigReader& r, config::ModelConfig& m) {
            detail::read_olmo_block(r, m, "OLMo3");
            // transformers' default: three sliding layers, then a full one.
            std::vector<std::string> types;
            for (int64_t i = 0; i < m.n_layers; ++i)
                types.emplace_back((i + 1) % 4 != 0 ? "sliding_attention" : "full_attention");
            if (!r.has("sliding_window"))
                throw r.fail("sliding_window", "missing (Olmo3 needs the window size)");
            detail::read_layer_types(r, m, types);
        },
        [](const config::ModelConfig& m) -> std::string {
            if (auto why = detail::olmo_block_problem(m, "Olmo3"); !why.empty()) return why;
            std::string why;
            const auto lt = detail::layer_types(m, why);
            if (!lt) return why;
            if (!lt->window) return "model.sliding_window: no layer has a window";
            return {};
        },
        [](const config::ModelConfig& m, nlohmann::json& j) {
            std::string why;
            const auto lt = detail::layer_types(m, why);
            j["attention_bias"] = false;
            j["layer_types"] = lt->types;
            j["sliding_window"] = *lt->window;
        },
    };
    return f;
}

}  // namespace lathe::hf
