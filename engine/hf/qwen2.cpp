// transformers' Qwen2ForCausalLM (Qwen2, Qwen2.5): pre-norm blocks, biases on the q/k/v
// projections (always), no QK-norm; sliding windows per layer_types.
#include "engine/hf/family.h"

namespace lathe::hf {

namespace detail {
// As transformers' Qwen2Config and Qwen3Config derive layer_types when the file has none.
void read_qwen_windows(const ConfigReader& r, config::ModelConfig& m) {
    const bool use = r.boolean("use_sliding_window", false);
    std::vector<std::string> types;
    const int64_t from = r.has("max_window_layers") ? r.integer("max_window_layers") : 28;
    for (int64_t i = 0; i < m.n_layers; ++i)
        types.emplace_back(use && i >= from ? "sliding_attention" : "full_attention");
    if (!use) {
        m.sliding_window = {};
        return;
    }
    read_layer_types(r, m, types);
}

void write_qwen_windows(const config::ModelConfig& m, nlohmann::json& j) {
    std::string why;
    const auto lt = layer_types(m, why);
    j["use_sliding_window"] = lt->window.has_value();
    j["sliding_window"] = lt->window ? nlohmann::json(*lt->window) : nlohmann::json(nullptr);
    j["max_window_layers"] = m.n_layers;
    j["layer_types"] = lt->types;
}
}  // namespace detail

const Family& qwen2_family() {
    static const Family f{
        "Qwen2ForCausalLM",
        "qwen2",
        [](const ConfigReader& r, config::ModelConfig& m) {
            m.block_name = config::BlockName::default_;
            m.qk_norm = false;
            m.qkv_bias = true;
            detail::read_qwen_windows(r, m);
        },
        [](const config::ModelConfig& m) -> std::string {
            if (m.block_name != config::BlockName::default_)
                return "model.block_name is not default (pre-norm)";
            if (m.qk_norm) return "model.qk_norm: Qwen2 has no QK-norm";
            if (!m.qkv_bias) return "model.qkv_bias: Qwen2 always has q/k/v biases";
            std::string why;
            if (!detail::layer_types(m, why)) return why;
            if (m.sliding_window.own_rope())
                return "model.sliding_window.rope_theta / rope_scaling: Qwen gives every layer "
                       "the same RoPE";
            return {};
        },
        [](const config::ModelConfig& m, nlohmann::json& j) { detail::write_qwen_windows(m, j); },
    };
    return f;
}

}  // namespace lathe::hf
