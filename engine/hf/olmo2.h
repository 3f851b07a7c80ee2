// Lathe's model as Hugging Face's `Olmo2ForCausalLM` (transformers' olmo2) and as OLMo-core names
// its parameters: the parameter names each way and the model config each way. Torch-free.
//
//   Lathe (and OLMo-core)                    Hugging Face Olmo2
//   embeddings.weight                        model.embed_tokens.weight
//   blocks.{i}.attention.w_q|w_k|w_v|w_out   model.layers.{i}.self_attn.q_proj|k_proj|v_proj|o_proj
//   blocks.{i}.attention.q_norm|k_norm       model.layers.{i}.self_attn.q_norm|k_norm
//   blocks.{i}.attention_norm                model.layers.{i}.post_attention_layernorm
//   blocks.{i}.feed_forward.w1|w3|w2         model.layers.{i}.mlp.gate_proj|up_proj|down_proj
//   blocks.{i}.feed_forward_norm             model.layers.{i}.post_feedforward_layernorm
//   lm_head_norm (OLMo-core: lm_head.norm)   model.norm
//   lm_head (OLMo-core: lm_head.w_out)       lm_head
#pragma once

#include "engine/config/config.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace lathe::hf {

/// The Hugging Face name of a Lathe parameter ("blocks.0.attention.w_q.weight"); nullopt when it
/// has none.
std::optional<std::string> hf_name(const std::string& lathe_param);
/// The Lathe parameter named `name` by Hugging Face's Olmo2 or by OLMo-core; nullopt when neither
/// names a parameter so.
std::optional<std::string> lathe_name(const std::string& name);

struct ExportTokens {
    std::optional<int64_t> bos, eos, pad;
};

/// config.json of an Olmo2ForCausalLM with model `m`. `torch_dtype`: "float32" or "bfloat16".
/// Throws lathe::Error when `m` is not expressible as Olmo2 (no QK-norm).
nlohmann::json olmo2_config_json(const config::ModelConfig& m, const std::string& torch_dtype,
                                 int64_t max_position_embeddings, const ExportTokens& tokens);

/// The model config of a Hugging Face config.json (`path` names it in errors). Throws lathe::Error
/// naming the field for anything Lathe's model cannot be: another architecture, biases, tied
/// embeddings, RoPE scaling, another activation, an intermediate size that the SwiGLU rule cannot
/// give.
config::ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& path);

/// The fields of `want` that differ from `have`, as "model.FIELD: a in the saved model, b in the
/// config";
/// empty when the two build the same model.
std::vector<std::string> model_differences(const config::ModelConfig& have,
                                           const config::ModelConfig& want);

/// True when `dir` holds a config.json and model.safetensors or model.safetensors.index.json.
bool is_hf_model_folder(const std::string& dir);
/// The safetensors files of a Hugging Face folder: model.safetensors, or every shard named by
/// model.safetensors.index.json (each once, in order). Throws lathe::Error for a broken index.
std::vector<std::string> hf_weight_files(const std::string& dir);

}  // namespace lathe::hf
