#include "engine/config/null_defaults.h"

#include <cstdio>
#include <regex>

namespace lathe::config {

std::map<std::string, Json> null_field_defaults(const ExperimentConfig& cfg) {
    std::map<std::string, Json> out;
    const auto& m = cfg.model;
    out["model.n_kv_heads"] = m.n_heads;
    if (m.n_heads > 0) out["model.head_dim"] = m.d_model / m.n_heads;
    out["model.hidden_size_multiplier"] = 1.0;
    out["train_module.optim.beta2"] = cfg.train_module.optim.resolved_beta2();
    out["train_module.optim.weight_decay"] = cfg.train_module.optim.resolved_weight_decay();
    out["trainer.callbacks.console_logger.metrics_log_interval"] =
        cfg.trainer.metrics_collect_interval;
    out["trainer.callbacks.checkpointer.save_async"] = true;
    return out;
}

std::string null_placeholder(const std::string& description, const Json* value) {
    if (value) {
        if (value->is_boolean())
            return std::string("default: ") + (value->get<bool>() ? "on" : "off");
        if (value->is_number_float()) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", value->get<double>());
            return std::string("default: ") + buf;
        }
        return "default: " + (value->is_string() ? value->get<std::string>() : value->dump());
    }
    // "null means X", "null disables", "Null: X", "null keeps X", up to the end of the sentence.
    // (A point inside a word, as in model.dtype or 0.1, does not end the sentence.)
    static const std::regex null_words(
        R"((?:^|[^A-Za-z])[Nn]ull(?::| means| is)? ((?:[^.;]|\.(?=\S))+))");
    std::smatch match;
    if (std::regex_search(description, match, null_words)) {
        std::string words = match[1].str();
        if (words.rfind("disables", 0) == 0) words = "off" + words.substr(8);
        if (words.size() > 48) words = words.substr(0, 47) + "…";
        return "unset: " + words;
    }
    return "unset";
}

}  // namespace lathe::config
