// transformers' LlamaForCausalLM (Llama 2/3, SmolLM, TinyLlama): pre-norm blocks, no QK-norm, no
// biases, full attention; RoPE scaling (llama3, linear, yarn) is read by family.cpp.
#include "engine/hf/family.h"

namespace lathe::hf {

const Family& llama_family() {
    static const Family f{
        "LlamaForCausalLM",
        "llama",
        [](const ConfigReader& r, config::ModelConfig& m) {
            r.must_be("attention_bias", false,
                      "Lathe's attention has no output-projection bias (Llama's attention_bias "
                      "adds one to o_proj)");
            if (r.has("pretraining_tp") && r.json()["pretraining_tp"] != 1)
                throw r.fail("pretraining_tp", "is " + r.json()["pretraining_tp"].dump() +
                                                   "; Lathe reads the weights whole (1)");
            m.block_name = config::BlockName::default_;
            m.qk_norm = false;
        },
        [](const config::ModelConfig& m) -> std::string {
            if (m.block_name != config::BlockName::default_)
                return "model.block_name is not default (pre-norm)";
            if (m.qk_norm) return "model.qk_norm: Llama has no QK-norm";
            if (m.qkv_bias)
                return "model.qkv_bias: Llama's attention_bias would add an o_proj bias";
            if (m.sliding_window.enabled()) return "model.sliding_window: Llama attends fully";
            return {};
        },
        [](const config::ModelConfig&, nlohmann::json& j) {
            j["attention_bias"] = false;
            j["mlp_bias"] = false;
            j["pretraining_tp"] = 1;
        },
    };
    return f;
}

}  // namespace lathe::hf
