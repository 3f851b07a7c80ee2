// transformers' Qwen3ForCausalLM: pre-norm blocks, QK-norm per head (over head_dim), no biases;
// sliding windows per layer_types.
#include "engine/hf/family.h"

namespace lathe::hf {

const Family& qwen3_family() {
    static const Family f{
        "Qwen3ForCausalLM",
        "qwen3",
        [](const ConfigReader& r, config::ModelConfig& m) {
            r.must_be("attention_bias", false,
                      "Lathe's attention has no output-projection bias (Qwen3's attention_bias "
                      "adds one to o_proj)");
            m.block_name = config::BlockName::default_;
            m.qk_norm = true;
            m.use_head_qk_norm = true;
            detail::read_qwen_windows(r, m);
        },
        [](const config::ModelConfig& m) -> std::string {
            if (m.block_name != config::BlockName::default_)
                return "model.block_name is not default (pre-norm)";
            if (!m.qk_norm || !m.use_head_qk_norm)
                return "Qwen3 normalises queries and keys per head (model.qk_norm and "
                       "use_head_qk_norm true)";
            if (m.qkv_bias) return "model.qkv_bias: Qwen3 has no biases";
            std::string why;
            if (!detail::layer_types(m, why)) return why;
            if (m.sliding_window.own_rope())
                return "model.sliding_window.rope_theta / rope_scaling: Qwen gives every layer "
                       "the same RoPE";
            return {};
        },
        [](const config::ModelConfig& m, nlohmann::json& j) {
            j["attention_bias"] = false;
            detail::write_qwen_windows(m, j);
        },
    };
    return f;
}

}  // namespace lathe::hf
