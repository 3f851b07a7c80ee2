// Lathe's model as Hugging Face transformers' causal LMs: one model (config::ModelConfig), several
// families. Each family is one file (olmo2.cpp, olmo3.cpp, llama.cpp, qwen2.cpp, qwen3.cpp) that
// says what its config.json fixes or adds; the parameter names and the common config fields are
// shared here. Torch-free.
//
//   Lathe (and OLMo-core)                    Hugging Face
//   embeddings.weight                        model.embed_tokens.weight
//   blocks.{i}.attention.w_q|w_k|w_v|w_out   model.layers.{i}.self_attn.q_proj|k_proj|v_proj|o_proj
//   blocks.{i}.attention.w_q|w_k|w_v.bias    model.layers.{i}.self_attn.q_proj|k_proj|v_proj.bias
//   blocks.{i}.attention.q_norm|k_norm       model.layers.{i}.self_attn.q_norm|k_norm
//   blocks.{i}.feed_forward.w1|w3|w2         model.layers.{i}.mlp.gate_proj|up_proj|down_proj
//   reordered_norm (OLMo2, OLMo3):
//   blocks.{i}.attention_norm                model.layers.{i}.post_attention_layernorm
//   blocks.{i}.feed_forward_norm             model.layers.{i}.post_feedforward_layernorm
//   default pre-norm (Llama, Qwen2, Qwen3):
//   blocks.{i}.attention_norm                model.layers.{i}.input_layernorm
//   blocks.{i}.feed_forward_norm             model.layers.{i}.post_attention_layernorm
//   lm_head_norm (OLMo-core: lm_head.norm)   model.norm
//   lm_head (OLMo-core: lm_head.w_out)       lm_head (absent when tie_word_embeddings)
#pragma once

#include "engine/config/config.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lathe::hf {

/// Reads the fields of one config.json; every failure names the file and the field.
class ConfigReader {
public:
    ConfigReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}
    const nlohmann::json& json() const { return j_; }
    bool has(const char* field) const { return j_.contains(field) && !j_[field].is_null(); }
    int64_t integer(const char* field) const;                 ///< required, >= 1
    double number(const char* field, double fallback) const;  ///< optional, > 0
    bool boolean(const char* field, bool fallback) const;
    /// Refuses `field` unless it is absent, null or `want`; `why` says what Lathe does instead.
    void must_be(const char* field, const nlohmann::json& want, const std::string& why) const;
    Error fail(const std::string& field, const std::string& why) const;

private:
    const nlohmann::json& j_;
    std::string path_;
};

/// One Hugging Face architecture.
struct Family {
    std::string architecture;  ///< "LlamaForCausalLM"
    std::string model_type;    ///< "llama"
    /// What the family fixes or reads beyond the common fields (block, QK-norm, biases, windows);
    /// throws through r.fail for what Lathe cannot be.
    std::function<void(const ConfigReader& r, config::ModelConfig& m)> read;
    /// Why `m` is not this family (naming the field); empty when it is.
    std::function<std::string(const config::ModelConfig& m)> refuse;
    /// The family's own fields of config.json, beside the common ones.
    std::function<void(const config::ModelConfig& m, nlohmann::json& j)> write;
};

const Family& olmo2_family();
const Family& olmo3_family();
const Family& llama_family();
const Family& qwen2_family();
const Family& qwen3_family();
/// Every family, in the order export tries them.
const std::vector<const Family*>& families();

/// The family `m` is written as: the first that takes it. Throws lathe::Error with each family's
/// reason when none does.
const Family& family_for(const config::ModelConfig& m);

/// The Hugging Face name of a Lathe parameter of model `m` ("blocks.0.attention.w_q.weight");
/// nullopt when it has none.
std::optional<std::string> hf_name(const std::string& lathe_param, const config::ModelConfig& m);
/// The Lathe parameter named `name` by Hugging Face or by OLMo-core in model `m`; nullopt when
/// neither names a parameter so.
std::optional<std::string> lathe_name(const std::string& name, const config::ModelConfig& m);

struct ExportTokens {
    std::optional<int64_t> bos, eos, pad;
};

/// config.json of model `m` as its family (family_for). `torch_dtype`: "float32" or "bfloat16".
nlohmann::json hf_config_json(const config::ModelConfig& m, const std::string& torch_dtype,
                              int64_t max_position_embeddings, const ExportTokens& tokens);

/// The model config of a Hugging Face config.json (`path` names it in errors), of any family
/// above. Throws lathe::Error naming the field for anything Lathe's model cannot be: another
/// architecture, biases it has no place for, another activation, an unknown RoPE scaling, an
/// intermediate size that the SwiGLU rule cannot give.
config::ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& path);

/// The fields of `want` that differ from `have`, as "model.FIELD: a in the saved model, b in the
/// config"; empty when the two build the same model.
std::vector<std::string> model_differences(const config::ModelConfig& have,
                                           const config::ModelConfig& want);

/// Whether a file is there: the local file system's answer by default; a bucket's for a remote
/// folder (remote::Storage::exists).
using FileExists = std::function<bool(const std::string& path)>;

/// True when `dir` holds a config.json and model.safetensors or model.safetensors.index.json,
/// asking `exists` (by default the local file system) for each: the one rule for what makes a
/// Hugging Face model folder, here or in a bucket.
bool is_hf_model_folder(const std::string& dir, const FileExists& exists = {});
/// The safetensors files of a Hugging Face folder: model.safetensors, or every shard named by
/// model.safetensors.index.json (each once, in order). Throws lathe::Error for a broken index.
std::vector<std::string> hf_weight_files(const std::string& dir);

namespace detail {
/// The per-layer windows of `m` as transformers' layer_types plus one sliding_window size;
/// nullopt (with `why`) when the layers use more than one window size.
struct LayerTypes {
    std::vector<std::string> types;
    std::optional<int64_t> window;
};
std::optional<LayerTypes> layer_types(const config::ModelConfig& m, std::string& why);
/// Reads layer_types + sliding_window into m.sliding_window; `default_types` gives the family's
/// types when the file has none.
void read_layer_types(const ConfigReader& r, config::ModelConfig& m,
                      const std::vector<std::string>& default_types);
/// OLMo2 and OLMo3's block: reordered norm, QK-norm over the whole projection, no biases; read
/// into `m` (refusing attention_bias), and why `m` is not such a block (empty when it is).
void read_olmo_block(const ConfigReader& r, config::ModelConfig& m, const std::string& family);
std::string olmo_block_problem(const config::ModelConfig& m, const std::string& family);
/// Qwen2/Qwen3's use_sliding_window, max_window_layers and layer_types, both ways.
void read_qwen_windows(const ConfigReader& r, config::ModelConfig& m);
void write_qwen_windows(const config::ModelConfig& m, nlohmann::json& j);
}  // namespace detail

}  // namespace lathe::hf
