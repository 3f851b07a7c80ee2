#include "engine/hf/finetune.h"

#include "engine/hf/family.h"
#include "engine/run_folder/file_io.h"

#include <algorithm>
#include <filesystem>

namespace lathe::hf {

config::Json finetune_document(const std::string& dir) {
    namespace fs = std::filesystem;
    if (!is_hf_model_folder(dir))
        throw Error(dir +
                    ": not a Hugging Face model folder (config.json and model.safetensors "
                    "or model.safetensors.index.json)");
    const std::string file = (fs::path(dir) / "config.json").string();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(run_folder::read_text_file(file));
    } catch (const nlohmann::json::exception& e) {
        throw Error(file + ": not JSON: " + e.what());
    }
    config::ExperimentConfig whole;
    whole.model = model_config_from_hf(j, file);
    const auto model = config::to_json(whole)["model"];
    int64_t max_positions = 1024;
    if (j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number_integer())
        max_positions = std::max<int64_t>(1, j["max_position_embeddings"].get<int64_t>());
    const int64_t seq = std::min<int64_t>(max_positions, 1024);

    std::string name = fs::path(dir).lexically_normal().filename().string();
    if (name.empty()) name = fs::path(dir).lexically_normal().parent_path().filename().string();
    std::replace(name.begin(), name.end(), '/', '-');
    const std::string folder = fs::absolute(dir).lexically_normal().string();

    config::Json dataset = {{"source", "numpy"},
                            {"paths", config::Json::array()},
                            {"token_dtype", whole.model.vocab_size > 65536 ? "uint32" : "uint16"},
                            {"sequence_length", seq}};
    for (const char* tok : {"tokenizer.json", "tokenizer.model"}) {
        std::error_code ec;
        if (fs::is_regular_file(fs::path(folder) / tok, ec)) {
            dataset["tokenizer"] = (fs::path(folder) / tok).string();
            break;
        }
    }
    return {
        {"run_name", (name.empty() ? std::string("model") : name) + "-finetune"},
        {"model", model},
        {"dataset", dataset},
        {"data_loader", {{"global_batch_size", 8 * seq}}},
        {"train_module",
         {{"rank_microbatch_size", 2 * seq},
          {"max_sequence_length", seq},
          {"optim", {{"lr", 2e-5}, {"weight_decay", 0.0}}},
          // Warmup as a share of the run: a small dataset's one epoch (a few steps) still ends
          // after its warmup, not before it.
          {"scheduler",
           {{"name", "cos_with_warmup"}, {"warmup", nullptr}, {"warmup_fraction", 0.03}}}}},
        {"trainer",
         {{"load_path", folder},
          {"max_duration", "1epochs"},
          {"callbacks", {{"checkpointer", {{"save_interval", 100}}}}}}},
    };
}

config::Loaded load_spec(const std::string& spec, const std::vector<std::string>& overrides) {
    if (spec.empty() || !is_hf_model_folder(spec)) return config::load(spec, overrides);
    config::Loaded r;
    r.origin = spec;
    config::Json doc;
    try {
        doc = finetune_document(spec);
    } catch (const std::exception& e) {
        r.issues.push_back({spec, e.what()});
        return r;
    }
    auto issues = config::apply_overrides(doc, overrides);
    if (!issues.empty()) {
        r.issues = std::move(issues);
        return r;
    }
    r = config::load_document(doc, spec);
    return r;
}

}  // namespace lathe::hf
