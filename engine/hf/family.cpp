#include "engine/hf/family.h"

#include "engine/run_folder/file_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

namespace lathe::hf {

// ---- ConfigReader ---------------------------------------------------------------------------

Error ConfigReader::fail(const std::string& field, const std::string& why) const {
    return Error(path_ + ": " + field + ": " + why);
}

int64_t ConfigReader::integer(const char* field) const {
    if (!has(field) || !j_[field].is_number_integer() || j_[field].get<int64_t>() < 1)
        throw fail(field, "missing or not a positive integer");
    return j_[field].get<int64_t>();
}

double ConfigReader::number(const char* field, double fallback) const {
    if (!has(field)) return fallback;
    if (!j_[field].is_number() || !(j_[field].get<double>() > 0))
        throw fail(field, "not a positive number");
    return j_[field].get<double>();
}

bool ConfigReader::boolean(const char* field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!j_[field].is_boolean()) throw fail(field, "not true or false");
    return j_[field].get<bool>();
}

void ConfigReader::must_be(const char* field, const nlohmann::json& want,
                           const std::string& why) const {
    if (has(field) && j_[field] != want) throw fail(field, "is " + j_[field].dump() + "; " + why);
}

// ---- Families -------------------------------------------------------------------------------

const std::vector<const Family*>& families() {
    static const std::vector<const Family*> all = {
        &olmo2_family(), &olmo3_family(), &llama_family(), &qwen2_family(), &qwen3_family()};
    return all;
}

const Family& family_for(const config::ModelConfig& m) {
    std::string reasons;
    for (const auto* f : families()) {
        const auto why = f->refuse(m);
        if (why.empty()) return *f;
        reasons += "\n  " + f->architecture + ": " + why;
    }
    throw Error("this model has no Hugging Face form that transformers can load:" + reasons);
}

// ---- Names ----------------------------------------------------------------------------------

namespace {

// Block parameter suffixes: Lathe's, then Hugging Face's; the norms depend on the block type.
const std::vector<std::pair<std::string, std::string>> kBlockNames = {
    {"attention.w_q.weight", "self_attn.q_proj.weight"},
    {"attention.w_k.weight", "self_attn.k_proj.weight"},
    {"attention.w_v.weight", "self_attn.v_proj.weight"},
    {"attention.w_q.bias", "self_attn.q_proj.bias"},
    {"attention.w_k.bias", "self_attn.k_proj.bias"},
    {"attention.w_v.bias", "self_attn.v_proj.bias"},
    {"attention.w_out.weight", "self_attn.o_proj.weight"},
    {"attention.q_norm.weight", "self_attn.q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
};
const std::vector<std::pair<std::string, std::string>> kReorderedNormNames = {
    {"attention_norm.weight", "post_attention_layernorm.weight"},
    {"feed_forward_norm.weight", "post_feedforward_layernorm.weight"},
};
const std::vector<std::pair<std::string, std::string>> kPreNormNames = {
    {"attention_norm.weight", "input_layernorm.weight"},
    {"feed_forward_norm.weight", "post_attention_layernorm.weight"},
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

// The block suffix pairs of model m: the parameters it has, nothing else.
std::vector<std::pair<std::string, std::string>> block_names(const config::ModelConfig& m) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& pair : kBlockNames) {
        const bool bias = pair.first.find(".bias") != std::string::npos;
        const bool norm = pair.first.find("_norm.") != std::string::npos;
        if ((bias && !m.qkv_bias) || (norm && !m.qk_norm)) continue;
        out.push_back(pair);
    }
    const auto& norms =
        m.block_name == config::BlockName::default_ ? kPreNormNames : kReorderedNormNames;
    out.insert(out.end(), norms.begin(), norms.end());
    return out;
}

}  // namespace

std::optional<std::string> hf_name(const std::string& p, const config::ModelConfig& m) {
    if (p == "embeddings.weight") return "model.embed_tokens.weight";
    if (p == "lm_head_norm.weight") return "model.norm.weight";
    if (p == "lm_head.weight" && !m.tie_word_embeddings) return "lm_head.weight";
    if (auto s = split_layer(p, "blocks.")) {
        for (const auto& [lathe, hf] : block_names(m))
            if (s->second == lathe) return "model.layers." + s->first + "." + hf;
    }
    return std::nullopt;
}

std::optional<std::string> lathe_name(const std::string& n, const config::ModelConfig& m) {
    if (n == "model.embed_tokens.weight" || n == "embeddings.weight") return "embeddings.weight";
    if (n == "model.norm.weight" || n == "lm_head.norm.weight" || n == "lm_head_norm.weight")
        return "lm_head_norm.weight";
    if (n == "lm_head.weight" || n == "lm_head.w_out.weight")
        return m.tie_word_embeddings ? std::nullopt : std::optional<std::string>("lm_head.weight");
    const auto names = block_names(m);
    if (auto s = split_layer(n, "model.layers.")) {
        for (const auto& [lathe, hf] : names)
            if (s->second == hf) return "blocks." + s->first + "." + lathe;
    }
    if (auto s = split_layer(n, "blocks.")) {
        for (const auto& [lathe, hf] : names)
            if (s->second == lathe) return n;
    }
    return std::nullopt;
}

// ---- Sliding windows ------------------------------------------------------------------------

namespace detail {

std::optional<LayerTypes> layer_types(const config::ModelConfig& m, std::string& why) {
    LayerTypes out;
    for (int64_t i = 0; i < m.n_layers; ++i) {
        const auto w = m.sliding_window.window(i, m.n_layers);
        if (w == -1) {
            out.types.emplace_back("full_attention");
            continue;
        }
        out.types.emplace_back("sliding_attention");
        if (out.window && *out.window != w) {
            why = "model.sliding_window.pattern: windows of " + std::to_string(*out.window) +
                  " and " + std::to_string(w) +
                  " tokens; transformers' config has one sliding_window size";
            return std::nullopt;
        }
        out.window = w;
    }
    return out;
}

void read_olmo_block(const ConfigReader& r, config::ModelConfig& m, const std::string& family) {
    r.must_be("attention_bias", false, "Lathe's " + family + " attention has no biases");
    m.block_name = config::BlockName::reordered_norm;
    m.qk_norm = true;
    m.use_head_qk_norm = false;
}

std::string olmo_block_problem(const config::ModelConfig& m, const std::string& family) {
    if (m.block_name != config::BlockName::reordered_norm)
        return "model.block_name is not reordered_norm";
    if (!m.qk_norm || m.use_head_qk_norm)
        return family +
               " normalises whole query and key projections (model.qk_norm true, "
               "use_head_qk_norm false)";
    if (m.qkv_bias) return "model.qkv_bias: " + family + " has no biases";
    return {};
}

void read_layer_types(const ConfigReader& r, config::ModelConfig& m,
                      const std::vector<std::string>& default_types) {
    std::vector<std::string> types = default_types;
    if (r.has("layer_types")) {
        const auto& lt = r.json()["layer_types"];
        if (!lt.is_array() || static_cast<int64_t>(lt.size()) != m.n_layers)
            throw r.fail("layer_types", "not a list of num_hidden_layers (" +
                                            std::to_string(m.n_layers) + ") entries");
        types.clear();
        for (std::size_t i = 0; i < lt.size(); ++i) {
            if (lt[i] != "full_attention" && lt[i] != "sliding_attention")
                throw r.fail(
                    "layer_types[" + std::to_string(i) + "]",
                    "is " + lt[i].dump() + "; Lathe has full_attention and sliding_attention");
            types.push_back(lt[i].get<std::string>());
        }
    }
    const bool any_sliding =
        std::find(types.begin(), types.end(), "sliding_attention") != types.end();
    if (!any_sliding || !r.has("sliding_window")) {
        m.sliding_window = {};
        return;
    }
    const auto window = r.integer("sliding_window");
    std::vector<int64_t> pattern;
    pattern.reserve(types.size());
    for (const auto& t : types) pattern.push_back(t == "sliding_attention" ? window : -1);
    // The shortest period that repeats into the whole list, as OLMo-core writes patterns.
    std::size_t period = pattern.size();
    for (std::size_t p = 1; p < pattern.size(); ++p) {
        bool repeats = true;
        for (std::size_t i = p; i < pattern.size() && repeats; ++i)
            repeats = pattern[i] == pattern[i % p];
        if (repeats) {
            period = p;
            break;
        }
    }
    pattern.resize(period);
    m.sliding_window.pattern = pattern;
    m.sliding_window.force_full_attention_on_first_layer = false;
    m.sliding_window.force_full_attention_on_last_layer = false;
}

}  // namespace detail

// ---- config.json ----------------------------------------------------------------------------

namespace {

// One RoPE as transformers' rope_parameters.
nlohmann::json rope_json(double theta, const config::RoPEScalingConfig& s) {
    using Name = config::RoPEScalingName;
    nlohmann::json p = {{"rope_theta", theta}};
    switch (s.name) {
        case Name::none:
            p["rope_type"] = "default";
            break;
        case Name::pi:
            p["rope_type"] = "linear";
            p["factor"] = s.factor;
            break;
        case Name::stepwise:
            p["rope_type"] = "llama3";
            p["factor"] = s.factor;
            p["low_freq_factor"] = 1.0 / (1.0 - s.low_freq_proportion);
            p["high_freq_factor"] = 1.0 / s.high_freq_proportion;
            p["original_max_position_embeddings"] = s.old_context_len;
            break;
        case Name::yarn:
            p["rope_type"] = "yarn";
            p["factor"] = s.factor;
            p["original_max_position_embeddings"] = s.old_context_len;
            p["beta_fast"] = s.beta_fast;
            p["beta_slow"] = s.beta_slow;
            if (s.attention_rescale_factor) p["attention_factor"] = *s.attention_rescale_factor;
            break;
    }
    return p;
}

// The model's RoPE as transformers 5 writes it: one object, or one per layer type where the
// windowed layers rotate differently (Olmo3).
nlohmann::json rope_parameters(const config::ModelConfig& m) {
    auto full = rope_json(m.rope_theta, m.rope_scaling);
    const auto& sw = m.sliding_window;
    if (!sw.own_rope()) return full;
    return {{"full_attention", full},
            {"sliding_attention", rope_json(sw.rope_theta.value_or(m.rope_theta),
                                            sw.rope_scaling.value_or(m.rope_scaling))}};
}

// One RoPE as transformers writes it: {rope_type, rope_theta, factor, ...} at `at` (a dotted
// path ending in "."). `theta` comes in as the value to use when the object has none.
struct Rope {
    double theta = 10000.0;
    config::RoPEScalingConfig scaling;
};

// The keys a RoPE object may have: anything else is refused rather than ignored.
bool known_rope_key(const std::string& key) {
    static const std::set<std::string> known = {"rope_type",
                                                "type",
                                                "rope_theta",
                                                "factor",
                                                "low_freq_factor",
                                                "high_freq_factor",
                                                "original_max_position_embeddings",
                                                "beta_fast",
                                                "beta_slow",
                                                "attention_factor",
                                                "mscale",
                                                "mscale_all_dim",
                                                "truncate",
                                                "partial_rotary_factor"};
    return known.count(key) > 0;
}

Rope read_rope_object(const ConfigReader& r, const nlohmann::json& rp, const std::string& at,
                      double theta, const std::set<std::string>& also_allowed = {}) {
    using Name = config::RoPEScalingName;
    for (const auto& [key, value] : rp.items())
        if (!known_rope_key(key) && also_allowed.count(key) == 0)
            throw r.fail(at + key,
                         "is not a RoPE field Lathe knows (it reads rope_type, "
                         "rope_theta, factor, low_freq_factor, high_freq_factor, "
                         "original_max_position_embeddings, beta_fast, beta_slow, "
                         "attention_factor)");
    auto num = [&](const char* key, std::optional<double> fallback) -> double {
        if (!rp.contains(key) || rp[key].is_null()) {
            if (fallback) return *fallback;
            throw r.fail(at + key, "missing");
        }
        if (!rp[key].is_number() || !(rp[key].get<double>() > 0))
            throw r.fail(at + key, "not a positive number");
        return rp[key].get<double>();
    };
    Rope out;
    out.theta = num("rope_theta", theta);
    std::string type = "default";
    if (rp.contains("rope_type") && rp["rope_type"].is_string())
        type = rp["rope_type"].get<std::string>();
    else if (rp.contains("type") && rp["type"].is_string())
        type = rp["type"].get<std::string>();
    const std::string type_field = at + (rp.contains("rope_type") ? "rope_type" : "type");
    if (rp.contains("partial_rotary_factor") && num("partial_rotary_factor", 1.0) != 1.0)
        throw r.fail(at + "partial_rotary_factor", "Lathe rotates the whole head");
    auto& s = out.scaling;
    const double max_pos = r.has("max_position_embeddings")
                               ? static_cast<double>(r.integer("max_position_embeddings"))
                               : 0.0;
    auto old_len = [&]() -> int64_t {
        const double v = num("original_max_position_embeddings",
                             max_pos > 0 ? std::optional<double>(max_pos) : std::nullopt);
        if (v != std::floor(v))
            throw r.fail(at + "original_max_position_embeddings", "not an integer");
        return static_cast<int64_t>(v);
    };
    if (type == "default") {
        s.name = Name::none;
    } else if (type == "linear") {
        s.name = Name::pi;
        s.factor = num("factor", std::nullopt);
    } else if (type == "llama3") {
        s.name = Name::stepwise;
        s.factor = num("factor", std::nullopt);
        const double low = num("low_freq_factor", std::nullopt);
        const double high = num("high_freq_factor", std::nullopt);
        if (!(low >= 1)) throw r.fail(at + "low_freq_factor", "must be at least 1");
        if (!(high >= low))
            throw r.fail(at + "high_freq_factor", "must be at least low_freq_factor");
        s.low_freq_proportion = 1.0 - 1.0 / low;
        s.high_freq_proportion = 1.0 / high;
        s.old_context_len = old_len();
    } else if (type == "yarn") {
        s.name = Name::yarn;
        s.old_context_len = old_len();
        s.factor = rp.contains("factor") && !rp["factor"].is_null()
                       ? num("factor", std::nullopt)
                       : max_pos / static_cast<double>(s.old_context_len);
        s.beta_fast = num("beta_fast", 32.0);
        s.beta_slow = num("beta_slow", 1.0);
        if (rp.contains("attention_factor") && !rp["attention_factor"].is_null())
            s.attention_rescale_factor = num("attention_factor", std::nullopt);
        for (const char* key : {"mscale", "mscale_all_dim"})
            if (rp.contains(key) && !rp[key].is_null())
                throw r.fail(at + key, "Lathe's YaRN takes attention_factor, not mscale");
        if (rp.contains("truncate") && rp["truncate"] != true)
            throw r.fail(at + "truncate", "Lathe's YaRN truncates the correction range");
    } else {
        throw r.fail(type_field,
                     "is \"" + type + "\"; Lathe has default, linear, llama3 and yarn RoPE");
    }
    if (s.name != Name::none && !(s.factor >= 1)) throw r.fail(at + "factor", "must be at least 1");
    return out;
}

// Returns whether the file gives RoPE per layer type.
bool read_rope(const ConfigReader& r, config::ModelConfig& m) {
    const double theta = r.number("rope_theta", 10000.0);  // transformers' default
    // transformers 5 writes rope_parameters (theta inside); older releases rope_scaling.
    const char* field = r.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
    m.rope_scaling = {};
    m.sliding_window.rope_theta.reset();
    m.sliding_window.rope_scaling.reset();
    if (!r.has(field)) {
        m.rope_theta = theta;
        return false;
    }
    const auto& rp = r.json()[field];
    const std::string at = std::string(field) + ".";
    if (!rp.is_object()) throw r.fail(field, "not an object");
    static const char* kFull = "full_attention";
    static const char* kSliding = "sliding_attention";
    if (!rp.contains(kFull) && !rp.contains(kSliding)) {
        const Rope one = read_rope_object(r, rp, at, theta);
        m.rope_theta = one.theta;
        m.rope_scaling = one.scaling;
        return false;
    }
    // Per layer type (transformers 5's Olmo3): each type's own object is what transformers uses;
    // the flat keys beside them (an older spelling of the same) must still be ones Lathe knows.
    for (const auto& [key, value] : rp.items()) {
        if (key == kFull || key == kSliding) {
            if (!value.is_object()) throw r.fail(at + key, "not an object");
        } else if (!known_rope_key(key)) {
            throw r.fail(at + key,
                         "is not a layer type Lathe knows (full_attention, "
                         "sliding_attention) nor a RoPE field");
        }
    }
    read_rope_object(r, rp, at, theta, {kFull, kSliding});  // checks the flat keys
    const Rope full = rp.contains(kFull) ? read_rope_object(r, rp[kFull], at + kFull + ".", theta)
                                         : read_rope_object(r, rp, at, theta, {kFull, kSliding});
    m.rope_theta = full.theta;
    m.rope_scaling = full.scaling;
    if (!rp.contains(kSliding)) return true;
    const Rope sliding = read_rope_object(r, rp[kSliding], at + kSliding + ".", theta);
    // Kept only where it differs; the family drops it when no layer is windowed.
    if (sliding.theta != full.theta) m.sliding_window.rope_theta = sliding.theta;
    if (rope_json(1, sliding.scaling) != rope_json(1, full.scaling))
        m.sliding_window.rope_scaling = sliding.scaling;
    return true;
}

// The SwiGLU hidden size: Lathe derives it from d_model (OLMo-core's rule), so pick the rule's
// parameters that give intermediate_size exactly.
void read_intermediate_size(const ConfigReader& r, config::ModelConfig& m) {
    const int64_t want = r.integer("intermediate_size");
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
        throw r.fail("intermediate_size", std::to_string(want) +
                                              " cannot be expressed by hidden_size_multiplier and "
                                              "hidden_size_multiple_of");
}

}  // namespace

nlohmann::json hf_config_json(const config::ModelConfig& m, const std::string& torch_dtype,
                              int64_t max_position_embeddings, const ExportTokens& tokens) {
    const Family& family = family_for(m);
    auto id = [](const std::optional<int64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    const auto rope = rope_parameters(m);
    nlohmann::json scaling = nullptr;  // the spelling of transformers 4
    if (m.rope_scaling.name != config::RoPEScalingName::none) {
        scaling = rope_json(m.rope_theta, m.rope_scaling);  // the full-attention layers'
        scaling.erase("rope_theta");
    }
    nlohmann::json j = {
        {"architectures", {family.architecture}},
        {"model_type", family.model_type},
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
        // Both spellings: transformers 5 reads rope_parameters, older releases rope_theta and
        // rope_scaling.
        {"rope_theta", m.rope_theta},
        {"rope_parameters", rope},
        {"rope_scaling", scaling},
        {"attention_dropout", 0.0},
        {"tie_word_embeddings", m.tie_word_embeddings},
        {"use_cache", true},
        {"torch_dtype", torch_dtype},
        {"dtype", torch_dtype},
        {"bos_token_id", id(tokens.bos)},
        {"eos_token_id", id(tokens.eos)},
        {"pad_token_id", id(tokens.pad)},
    };
    family.write(m, j);
    return j;
}

config::ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& path) {
    if (!j.is_object()) throw Error(path + ": not a JSON object");
    const ConfigReader r(j, path);
    const auto arch = j.value("architectures", nlohmann::json::array());
    const std::string model_type = j.value("model_type", "");
    const Family* family = nullptr;
    // As transformers' Auto classes: without `architectures` the model_type decides.
    const bool no_architectures = !arch.is_array() || arch.empty();
    for (const auto* f : families())
        if (no_architectures ? model_type == f->model_type
                             : arch.size() == 1 && arch[0] == f->architecture &&
                                   (model_type.empty() || model_type == f->model_type))
            family = f;
    if (!family && no_architectures) {
        std::string known;
        for (const auto* f : families()) known += (known.empty() ? "" : ", ") + f->model_type;
        throw r.fail(
            "model_type",
            "is \"" + model_type + "\" and there is no architectures list; Lathe reads " + known);
    }
    if (!family) {
        std::string known;
        for (const auto* f : families()) known += (known.empty() ? "" : ", ") + f->architecture;
        throw r.fail("architectures", "is " + arch.dump() + " (model_type \"" + model_type +
                                          "\"); Lathe reads " + known);
    }
    r.must_be("hidden_act", "silu", "Lathe's feed-forward is SwiGLU (silu)");
    r.must_be("mlp_bias", false, "Lathe's feed-forward has no biases");

    config::ModelConfig m;
    m.d_model = r.integer("hidden_size");
    m.n_layers = r.integer("num_hidden_layers");
    m.n_heads = r.integer("num_attention_heads");
    m.vocab_size = r.integer("vocab_size");
    if (r.has("num_key_value_heads")) {
        const auto kv = r.integer("num_key_value_heads");
        if (kv != m.n_heads) m.n_kv_heads = kv;
        if (m.n_heads % kv != 0)
            throw r.fail("num_key_value_heads", std::to_string(kv) + " does not divide " +
                                                    "num_attention_heads " +
                                                    std::to_string(m.n_heads));
    }
    if (r.has("head_dim")) {
        const auto hd = r.integer("head_dim");
        if (hd != m.d_model / m.n_heads || m.d_model % m.n_heads != 0) m.head_dim = hd;
    } else if (m.d_model % m.n_heads != 0) {
        throw r.fail("hidden_size", std::to_string(m.d_model) + " is not a multiple of " +
                                        "num_attention_heads and there is no head_dim");
    }
    if (m.resolved_head_dim() % 2 != 0)
        throw r.fail("head_dim", std::to_string(m.resolved_head_dim()) +
                                     " is odd; rotary embeddings need an even head size");
    m.layer_norm_eps = r.number("rms_norm_eps", 1e-5);
    m.init_std = r.number("initializer_range", 0.02);
    m.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
    const bool rope_per_layer_type = read_rope(r, m);
    read_intermediate_size(r, m);
    family->read(r, m);
    if (rope_per_layer_type && family != &olmo3_family())
        throw r.fail("rope_parameters",
                     "is given per layer type, which Lathe reads for Olmo3 only");
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
            s << std::boolalpha << "model." << field << ": " << a << " in the saved model, " << b
              << " in the config";
            out.push_back(s.str());
        }
    };
    auto windows = [](const config::ModelConfig& m) {
        std::string s;
        for (int64_t i = 0; i < m.n_layers; ++i)
            s += (i ? "," : "") + std::to_string(m.sliding_window.window(i, m.n_layers));
        return "[" + s + "]";
    };
    auto rope = [](const config::ModelConfig& m) { return rope_parameters(m).dump(); };
    cmp("d_model", have.d_model, want.d_model);
    cmp("n_layers", have.n_layers, want.n_layers);
    cmp("n_heads", have.n_heads, want.n_heads);
    cmp("n_kv_heads", have.kv_heads(), want.kv_heads());
    cmp("head_dim", have.resolved_head_dim(), want.resolved_head_dim());
    cmp("vocab_size", have.vocab_size, want.vocab_size);
    cmp("hidden_size (SwiGLU)", have.hidden_size(), want.hidden_size());
    cmp("rope_theta", have.rope_theta, want.rope_theta);
    cmp("rope_scaling", rope(have), rope(want));  // per layer type where the windows differ
    cmp("layer_norm_eps", have.layer_norm_eps, want.layer_norm_eps);
    cmp("block_name", config::enum_to_string(have.block_name),
        config::enum_to_string(want.block_name));
    cmp("qk_norm", have.qk_norm, want.qk_norm);
    if (have.qk_norm && want.qk_norm)
        cmp("use_head_qk_norm", have.use_head_qk_norm, want.use_head_qk_norm);
    cmp("qkv_bias", have.qkv_bias, want.qkv_bias);
    cmp("tie_word_embeddings", have.tie_word_embeddings, want.tie_word_embeddings);
    cmp("sliding_window (window per layer)", windows(have), windows(want));
    return out;
}

bool is_hf_model_folder(const std::string& dir, const FileExists& exists) {
    namespace fs = std::filesystem;
    const FileExists there = exists ? exists : [](const std::string& path) {
        std::error_code ec;
        return fs::is_regular_file(path, ec);
    };
    const auto in = [&dir](const char* name) {
        return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
    };
    return there(in("config.json")) &&
           (there(in("model.safetensors")) || there(in("model.safetensors.index.json")));
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
