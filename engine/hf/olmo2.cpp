#include "engine/hf/olmo2.h"

#include "engine/run_folder/file_io.h"
#include "engine/util/error.h"

#include <filesystem>
#include <set>
#include <sstream>

namespace lathe::hf {

namespace {

// Block parameter suffixes: Lathe's, then Hugging Face's.
const std::vector<std::pair<std::string, std::string>> kBlockNames = {
    {"attention.w_q.weight", "self_attn.q_proj.weight"},
    {"attention.w_k.weight", "self_attn.k_proj.weight"},
    {"attention.w_v.weight", "self_attn.v_proj.weight"},
    {"attention.w_out.weight", "self_attn.o_proj.weight"},
    {"attention.q_norm.weight", "self_attn.q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight"},
    {"attention_norm.weight", "post_attention_layernorm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward_norm.weight", "post_feedforward_layernorm.weight"},
};

// "PREFIX{i}.REST" -> (i, REST).
std::optional<std::pair<std::string, std::string>> split_layer(const std::string& name,
                                                               const std::string& prefix) {
    if (name.rfind(prefix, 0) != 0) return std::nullopt;
    const auto dot = name.find('.', prefix.size());
    if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::make_pair(index, name.substr(dot + 1));
}

}  // namespace

std::optional<std::string> hf_name(const std::string& p) {
    if (p == "embeddings.weight") return "model.embed_tokens.weight";
    if (p == "lm_head_norm.weight") return "model.norm.weight";
    if (p == "lm_head.weight") return "lm_head.weight";
    if (auto s = split_layer(p, "blocks.")) {
        for (const auto& [lathe, hf] : kBlockNames)
            if (s->second == lathe) return "model.layers." + s->first + "." + hf;
    }
    return std::nullopt;
}

std::optional<std::string> lathe_name(const std::string& n) {
    if (n == "model.embed_tokens.weight" || n == "embeddings.weight") return "embeddings.weight";
    if (n == "model.norm.weight" || n == "lm_head.norm.weight" || n == "lm_head_norm.weight")
        return "lm_head_norm.weight";
    if (n == "lm_head.weight" || n == "lm_head.w_out.weight") return "lm_head.weight";
    if (auto s = split_layer(n, "model.layers.")) {
        for (const auto& [lathe, hf] : kBlockNames)
            if (s->second == hf) return "blocks." + s->first + "." + lathe;
    }
    if (auto s = split_layer(n, "blocks.")) {
        for (const auto& [lathe, hf] : kBlockNames)
            if (s->second == lathe) return n;
    }
    return std::nullopt;
}

nlohmann::json olmo2_config_json(const config::ModelConfig& m, const std::string& torch_dtype,
                                 int64_t max_position_embeddings, const ExportTokens& tokens) {
    if (!m.qk_norm)
        throw Error(
            "model.qk_norm is false, but Olmo2ForCausalLM always normalises queries and keys: "
            "this model has no Hugging Face Olmo2 form");
    auto id = [](const std::optional<int64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    return {
        {"architectures", {"Olmo2ForCausalLM"}},
        {"model_type", "olmo2"},
        {"vocab_size", m.vocab_size},
        {"hidden_size", m.d_model},
        {"intermediate_size", m.hidden_size()},
        {"num_hidden_layers", m.n_layers},
        {"num_attention_heads", m.n_heads},
        {"num_key_value_heads", m.kv_heads()},
        {"head_dim", m.resolved_head_dim()},
        {"hidden_act", "silu"},
        {"max_position_embeddings", max_position_embeddings},
        {"initializer_range", m.init_std},
        {"rms_norm_eps", m.layer_norm_eps},
        // Both spellings: transformers 5 reads rope_parameters, older releases rope_theta.
        {"rope_theta", m.rope_theta},
        {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", m.rope_theta}}},
        {"rope_scaling", nullptr},
        {"attention_bias", false},
        {"attention_dropout", 0.0},
        {"tie_word_embeddings", false},
        {"use_cache", true},
        {"torch_dtype", torch_dtype},
        {"dtype", torch_dtype},
        {"bos_token_id", id(tokens.bos)},
        {"eos_token_id", id(tokens.eos)},
        {"pad_token_id", id(tokens.pad)},
    };
}

config::ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& path) {
    auto fail = [&](const std::string& field, const std::string& why) {
        return Error(path + ": " + field + ": " + why);
    };
    if (!j.is_object()) throw Error(path + ": not a JSON object");
    const auto arch = j.value("architectures", nlohmann::json::array());
    const std::string model_type = j.value("model_type", "");
    const bool olmo2_arch = arch.is_array() && arch.size() == 1 && arch[0] == "Olmo2ForCausalLM";
    if (!olmo2_arch || (!model_type.empty() && model_type != "olmo2"))
        throw fail("architectures", "is " + arch.dump() + " (model_type \"" + model_type +
                                        "\"); Lathe reads Olmo2ForCausalLM only");
    auto integer = [&](const char* field) -> int64_t {
        if (!j.contains(field) || !j[field].is_number_integer() || j[field].get<int64_t>() < 1)
            throw fail(field, "missing or not a positive integer");
        return j[field].get<int64_t>();
    };
    auto number = [&](const char* field, double fallback) -> double {
        if (!j.contains(field) || j[field].is_null()) return fallback;
        if (!j[field].is_number() || !(j[field].get<double>() > 0))
            throw fail(field, "not a positive number");
        return j[field].get<double>();
    };
    auto must_be = [&](const char* field, const nlohmann::json& want, const std::string& why) {
        if (j.contains(field) && !j[field].is_null() && j[field] != want)
            throw fail(field, "is " + j[field].dump() + "; " + why);
    };
    must_be("hidden_act", "silu", "Lathe's feed-forward is SwiGLU (silu)");
    must_be("attention_bias", false, "Lathe's attention has no biases");
    must_be("tie_word_embeddings", false,
            "Lathe's LM head is its own matrix, not the embedding table");
    must_be("rope_scaling", nullptr, "Lathe has no RoPE scaling");

    config::ModelConfig m;
    m.d_model = integer("hidden_size");
    m.n_layers = integer("num_hidden_layers");
    m.n_heads = integer("num_attention_heads");
    m.vocab_size = integer("vocab_size");
    if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()) {
        const auto kv = integer("num_key_value_heads");
        if (kv != m.n_heads) m.n_kv_heads = kv;
        if (m.n_heads % kv != 0)
            throw fail("num_key_value_heads", std::to_string(kv) + " does not divide " +
                                                  "num_attention_heads " +
                                                  std::to_string(m.n_heads));
    }
    if (j.contains("head_dim") && !j["head_dim"].is_null()) {
        const auto hd = integer("head_dim");
        if (hd != m.d_model / m.n_heads) m.head_dim = hd;
    } else if (m.d_model % m.n_heads != 0) {
        throw fail("hidden_size", std::to_string(m.d_model) + " is not a multiple of " +
                                      "num_attention_heads and there is no head_dim");
    }
    m.layer_norm_eps = number("rms_norm_eps", 1e-5);
    m.init_std = number("initializer_range", 0.02);
    double theta = 10000.0;  // transformers' default
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
        const auto& rp = j["rope_parameters"];
        const std::string type = rp.value("rope_type", "default");
        if (type != "default")
            throw fail("rope_parameters.rope_type",
                       "is \"" + type + "\"; Lathe has the default RoPE only");
        if (rp.contains("rope_theta")) {
            if (!rp["rope_theta"].is_number() || !(rp["rope_theta"].get<double>() > 0))
                throw fail("rope_parameters.rope_theta", "not a positive number");
            theta = rp["rope_theta"].get<double>();
        }
    } else {
        theta = number("rope_theta", theta);
    }
    m.rope_theta = theta;
    m.qk_norm = true;
    // The SwiGLU hidden size: Lathe derives it from d_model (OLMo-core's rule), so pick the rule's
    // parameters that give intermediate_size exactly.
    const int64_t want = integer("intermediate_size");
    const int64_t base = static_cast<int64_t>(8.0 * static_cast<double>(m.d_model) / 3.0);
    if (m.hidden_size() != want) {
        m.hidden_size_multiple_of = want;  // rounds any size in (0, want] up to want
        if (base > want || base < 1) {
            m.hidden_size_multiple_of = 1;
            m.hidden_size_multiplier =
                (static_cast<double>(want) + 0.5) / static_cast<double>(std::max<int64_t>(base, 1));
        }
    }
    if (m.hidden_size() != want)
        throw fail("intermediate_size", std::to_string(want) +
                                            " cannot be expressed by hidden_size_multiplier and "
                                            "hidden_size_multiple_of");
    // The parameters stay float32 whatever the files hold (bf16 and fp16 widen exactly): the run
    // trains them, and model.dtype is the config's to choose.
    return m;
}

std::vector<std::string> model_differences(const config::ModelConfig& have,
                                           const config::ModelConfig& want) {
    std::vector<std::string> out;
    auto cmp = [&](const char* field, auto a, auto b) {
        if (a != b) {
            std::ostringstream s;
            s << "model." << field << ": " << a << " in the saved model, " << b << " in the config";
            out.push_back(s.str());
        }
    };
    cmp("d_model", have.d_model, want.d_model);
    cmp("n_layers", have.n_layers, want.n_layers);
    cmp("n_heads", have.n_heads, want.n_heads);
    cmp("n_kv_heads", have.kv_heads(), want.kv_heads());
    cmp("head_dim", have.resolved_head_dim(), want.resolved_head_dim());
    cmp("vocab_size", have.vocab_size, want.vocab_size);
    cmp("hidden_size (SwiGLU)", have.hidden_size(), want.hidden_size());
    cmp("rope_theta", have.rope_theta, want.rope_theta);
    cmp("layer_norm_eps", have.layer_norm_eps, want.layer_norm_eps);
    cmp("qk_norm", have.qk_norm, want.qk_norm);
    return out;
}

bool is_hf_model_folder(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    return fs::is_regular_file(fs::path(dir) / "config.json", ec) &&
           (fs::is_regular_file(fs::path(dir) / "model.safetensors", ec) ||
            fs::is_regular_file(fs::path(dir) / "model.safetensors.index.json", ec));
}

std::vector<std::string> hf_weight_files(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path single = fs::path(dir) / "model.safetensors";
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::is_regular_file(index, ec)) {
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(run_folder::read_text_file(index.string()));
        } catch (const std::exception& e) {
            throw Error(index.string() + ": not JSON: " + e.what());
        }
        if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            throw Error(index.string() + ": no weight_map object");
        std::vector<std::string> files;
        std::set<std::string> seen;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string())
                throw Error(index.string() + ": weight_map." + it.key() + " is not a file name");
            const auto f = it.value().get<std::string>();
            if (f.empty() || f.find('/') != std::string::npos || f == "..")
                throw Error(index.string() + ": weight_map." + it.key() + ": bad file name '" + f +
                            "'");
            if (seen.insert(f).second) files.push_back((fs::path(dir) / f).string());
        }
        if (files.empty()) throw Error(index.string() + ": weight_map is empty");
        return files;
    }
    if (fs::is_regular_file(single, ec)) return {single.string()};
    throw Error(dir + ": no model.safetensors or model.safetensors.index.json");
}

}  // namespace lathe::hf
