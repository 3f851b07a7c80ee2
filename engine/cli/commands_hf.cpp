// lathe-engine export, import and generate: models out to and in from Hugging Face, and text out
// of a model.
#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/hf_convert.h"
#include "engine/cli/cli.h"
#include "engine/hf/olmo2.h"
#include "engine/model/generate.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

// A remote (s3://, http(s)://) checkpoint or Hugging Face folder, downloaded into a temporary
// folder for as long as this lives; a local path as it is. A remote folder of checkpoints stands
// for its newest complete one.
class LocalCopy {
public:
    explicit LocalCopy(const std::string& path) : path_(path) {
        if (!checkpoint::is_remote_path(path)) return;
        std::string source = path;
        const auto storage = checkpoint::storage_for(path);
        const bool s3 = path.rfind("s3://", 0) == 0;
        if (s3 && !checkpoint::Checkpointer::dir_is_checkpoint(path) &&
            !storage->exists(run_folder::join(path, "config.json"))) {
            const auto found = checkpoint::Checkpointer::complete_checkpoints(path);
            if (found.empty())
                throw Error(path +
                            ": not a checkpoint, a Hugging Face model folder, or a folder "
                            "with a complete checkpoint");
            source = found.back().path;
        }
        static int counter = 0;
        const std::string temp =
            (fs::temp_directory_path() /
             ("lathe-fetch-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
        if (storage->files(source).empty()) throw Error(source + ": no files there");
        copy_ = std::make_unique<checkpoint::DownloadedFolder>(*storage, source, temp);
        path_ = copy_->path();
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::unique_ptr<checkpoint::DownloadedFolder> copy_;
};

}  // namespace

int cmd_export(const Args& args) {
    std::vector<std::string> positional;
    std::map<std::string, std::string> options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        const auto eq = a.find('=');
        const std::string name = a.substr(0, eq);
        if (name == "--dtype" || name == "--max-shard-size") {
            if (eq != std::string::npos) {
                options[name] = a.substr(eq + 1);
            } else if (i + 1 < args.size()) {
                options[name] = args[++i];
            } else {
                std::cerr << "lathe-engine export: " << name << " needs a value\n";
                return kExitUsage;
            }
        } else if (a.rfind("-", 0) == 0) {
            std::cerr << "lathe-engine export: unknown option " << a << "\n";
            return kExitUsage;
        } else {
            positional.push_back(a);
        }
    }
    if (positional.size() != 2) {
        std::cerr << "usage: lathe-engine export CHECKPOINT OUT_DIR [--dtype float32|bfloat16] "
                     "[--max-shard-size 5GB]\n";
        return kExitUsage;
    }
    hf::ExportOptions o;
    if (options.count("--dtype")) o.dtype = options["--dtype"];
    if (o.dtype != "float32" && o.dtype != "bfloat16") {
        std::cerr << "lathe-engine export: --dtype must be float32 or bfloat16, not " << o.dtype
                  << "\n";
        return kExitUsage;
    }
    if (options.count("--max-shard-size")) {
        try {
            o.max_shard_bytes = hf::parse_size(options["--max-shard-size"]);
        } catch (const Error& e) {
            std::cerr << "lathe-engine export: --max-shard-size " << e.what() << "\n";
            return kExitUsage;
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const LocalCopy source(positional[0]);
    const auto r = hf::export_checkpoint(source.path(), positional[1], o);
    nlohmann::json out = {
        {"exported", positional[1]},
        {"from", positional[0]},
        {"files", r.files},
        {"tensors", r.tensors},
        {"weight_bytes", r.weight_bytes},
        {"dtype", o.dtype},
        {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
    std::cout << out.dump() << "\n";
    return kExitOk;
}

int cmd_import(const Args& args) {
    if (args.size() != 2 || args[0].rfind("-", 0) == 0 || args[1].rfind("-", 0) == 0) {
        std::cerr << "usage: lathe-engine import HF_DIR OUT_CHECKPOINT\n";
        return kExitUsage;
    }
    const LocalCopy source(args[0]);
    const std::string& out_path = args[1];
    const bool remote_out = checkpoint::is_remote_path(out_path);
    // A remote checkpoint is written locally, then uploaded with .metadata.json last.
    const std::string local_out =
        remote_out
            ? (fs::temp_directory_path() / ("lathe-import-" + std::to_string(::getpid()))).string()
            : out_path;
    if (remote_out) {
        const auto storage = checkpoint::storage_for(out_path);
        if (storage->exists(run_folder::join(out_path, ".metadata.json")))
            throw Error(out_path + ": a checkpoint is already there");
    }
    try {
        hf::import_hf(source.path(), local_out);
        if (remote_out)
            checkpoint::upload_folder(local_out, *checkpoint::storage_for(out_path), out_path);
    } catch (...) {
        std::error_code ec;
        if (remote_out) fs::remove_all(local_out, ec);
        throw;
    }
    const auto m = hf::model_config_of(local_out);
    if (remote_out) {
        std::error_code ec;
        fs::remove_all(local_out, ec);
    }
    std::cout << nlohmann::json{{"imported", args[1]},
                                {"from", args[0]},
                                {"model",
                                 {{"d_model", m.d_model},
                                  {"n_layers", m.n_layers},
                                  {"n_heads", m.n_heads},
                                  {"n_kv_heads", m.kv_heads()},
                                  {"vocab_size", m.vocab_size},
                                  {"hidden_size", m.hidden_size()}}}}
                     .dump()
              << "\n";
    return kExitOk;
}

namespace {

// "1,2,3" -> ids.
std::vector<int64_t> parse_ids(const std::string& text) {
    std::vector<int64_t> out;
    std::stringstream s(text);
    std::string item;
    while (std::getline(s, item, ',')) {
        std::size_t used = 0;
        int64_t v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size())
            throw Error("--prompt-ids: '" + item + "' is not a token id (expected 1,2,3)");
        out.push_back(v);
    }
    if (out.empty()) throw Error("--prompt-ids: no ids");
    return out;
}

// A checkpoint folder, a Hugging Face folder, or a run folder (its newest complete checkpoint).
std::string resolve_model_path(const std::string& path) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec))
        throw Error(path +
                    ": is a file; give a checkpoint folder (stepN), a run folder or a Hugging "
                    "Face model folder");
    if (!fs::is_directory(path, ec)) throw Error(path + ": no such folder");
    if (hf::is_hf_model_folder(path) || checkpoint::Checkpointer::dir_is_checkpoint(path))
        return path;
    const auto found = checkpoint::Checkpointer::complete_checkpoints(path);
    if (found.empty())
        throw Error(path +
                    ": not a checkpoint, a Hugging Face model folder, or a run folder with "
                    "a complete checkpoint");
    return found.back().path;
}

// Whether the model's ids are bytes (the built-in corpus and text sources).
bool byte_tokens(const std::string& path) {
    if (hf::is_hf_model_folder(path)) {
        const auto j = nlohmann::json::parse(
            run_folder::read_text_file(run_folder::join(path, "config.json")), nullptr, false);
        return j.is_object() && j.contains("lathe") && j["lathe"].is_object() &&
               j["lathe"].value("tokenizer", "") == "bytes";
    }
    const auto j = nlohmann::json::parse(
        run_folder::read_text_file(run_folder::join(path, run_folder::kConfigFile)), nullptr,
        false);
    if (!j.is_object()) return false;
    // The built-in corpus and text files are bytes (config::DatasetConfig::tokens_are_bytes).
    const auto dataset = j.value("dataset", nlohmann::json::object());
    return !dataset.is_object() || dataset.value("source", "builtin") != "numpy";
}

// Bytes as text; an id that is no byte (a vocabulary wider than 256) becomes U+FFFD.
std::string bytes_text(const std::vector<int64_t>& ids) {
    std::string s;
    for (auto id : ids)
        s += id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : "\xEF\xBF\xBD";
    return s;
}

}  // namespace

int cmd_generate(const Args& args) {
    auto p =
        parse_args(args,
                   {"--prompt", "--prompt-ids", "--tokenizer", "--max-new-tokens", "--temperature",
                    "--top-k", "--top-p", "--seed", "--stop", "--device", "--threads"},
                   {"--json", "--no-kv-cache", "--logits"});
    auto usage = [](const std::string& why) {
        std::cerr << "lathe-engine generate: " << why
                  << "\nusage: lathe-engine generate CHECKPOINT|HF_DIR|RUN_DIR (--prompt TEXT | "
                     "--prompt-ids 1,2,3)... [--tokenizer FILE] [--max-new-tokens N] "
                     "[--temperature T] [--top-k K] "
                     "[--top-p P] [--seed S] [--stop TEXT] [--device cpu|cuda] [--threads N] "
                     "[--no-kv-cache] [--json [--logits]]\n";
        return kExitUsage;
    };
    for (const auto& e : p.errors) return usage(e);
    if (p.spec.empty()) return usage("no model given");
    if (!p.overrides.empty()) return usage("unexpected argument " + p.overrides[0]);
    model::GenerateOptions o;
    std::vector<std::string> stops;
    std::vector<std::vector<int64_t>> prompts;
    std::vector<std::string> prompt_texts;
    std::string device_name = "cpu";
    try {
        for (const auto& [name, value] : p.options) {
            if (name == "--prompt") prompt_texts.push_back(value);
            if (name == "--prompt-ids") prompts.push_back(parse_ids(value));
            if (name == "--max-new-tokens") o.max_new_tokens = std::stoll(value);
            if (name == "--temperature") o.temperature = std::stod(value);
            if (name == "--top-k") o.top_k = std::stoll(value);
            if (name == "--top-p") o.top_p = std::stod(value);
            if (name == "--seed") o.seed = std::stoull(value);
            if (name == "--stop") stops.push_back(value);
            if (name == "--device") device_name = value;
            if (name == "--threads") torch::set_num_threads(static_cast<int>(std::stoll(value)));
        }
    } catch (const Error& e) {
        return usage(e.what());
    } catch (const std::exception&) {
        return usage("a numeric option has a value that is not a number");
    }
    o.kv_cache = !p.has("--no-kv-cache");
    // (Written so that NaN fails every comparison, and so every check.)
    if (!(o.temperature >= 0 && std::isfinite(o.temperature)) || o.top_k < 0 ||
        o.max_new_tokens < 0 || !(o.top_p > 0 && o.top_p <= 1))
        return usage(
            "--temperature (a finite number), --top-k and --max-new-tokens must be >= 0, --top-p "
            "in (0, 1]");
    if (prompts.empty() && prompt_texts.empty()) return usage("give --prompt or --prompt-ids");

    const LocalCopy model(p.spec);
    const std::string path = resolve_model_path(model.path());
    // Text: through --tokenizer, else as bytes for byte-token runs.
    // The model folder's own tokenizer.json (a checkpoint of a run with dataset.tokenizer, an
    // export, a Hugging Face folder) unless --tokenizer names one.
    std::unique_ptr<tokenizer::Tokenizer> tok;
    std::string tokenizer_path = p.option("--tokenizer");
    if (!tokenizer_path.empty()) {
        tok = tokenizer::load_tokenizer(tokenizer_path);
    } else if (!tokenizer::find_tokenizer_file(path).empty()) {
        tokenizer_path = tokenizer::find_tokenizer_file(path);
        try {
            tok = tokenizer::load_tokenizer(tokenizer_path);
        } catch (const Error& e) {
            std::cerr << "lathe-engine generate: not using the folder's tokenizer: " << e.what()
                      << "\n";
        }
    }
    if (tok && tok->eos_id()) o.stop_ids.push_back(*tok->eos_id());
    if (tok) o.sample_vocab = tok->vocab_size();
    const bool bytes = !tok && byte_tokens(path);
    const bool has_text = tok || bytes;
    auto to_text = [&](const std::vector<int64_t>& ids) {
        return tok ? tok->decode(ids, /*skip_special=*/true) : bytes_text(ids);
    };
    if (!prompt_texts.empty() && !has_text)
        throw Error(path +
                    ": no tokenizer is known for this model, so --prompt TEXT cannot be encoded; "
                    "give --tokenizer FILE or --prompt-ids");
    if (!stops.empty() && !has_text)
        throw Error(path + ": --stop needs a tokenizer to read the text; give --tokenizer FILE");
    for (const auto& t : prompt_texts) {
        std::vector<int64_t> ids;
        if (tok) {
            ids = tok->encode(t);
        } else {
            for (unsigned char c : t) ids.push_back(c);
        }
        prompts.push_back(ids);
    }
    if (!stops.empty()) {
        o.stop = [&stops, &to_text](std::size_t, const std::vector<int64_t>& ids) {
            const std::string text = to_text(ids);
            for (const auto& s : stops)
                if (!s.empty() && text.size() >= s.size() &&
                    text.compare(text.size() - s.size(), s.size(), s) == 0)
                    return true;
            return false;
        };
    }
    torch::Device device(torch::kCPU);
    if (device_name == "cuda") {
        if (!torch::cuda::is_available()) throw Error("--device cuda: no CUDA device is available");
        device = torch::Device(torch::kCUDA);
    } else if (device_name != "cpu") {
        return usage("--device must be cpu or cuda");
    }

    const auto t_load = std::chrono::steady_clock::now();
    const auto m = hf::model_config_of(path);
    if (tok && tok->vocab_size() > m.vocab_size)
        throw Error(tokenizer_path + ": its vocabulary (" + std::to_string(tok->vocab_size()) +
                    ") is larger than the model's (" + std::to_string(m.vocab_size) +
                    "): not this model's tokenizer");
    auto weights = hf::is_hf_model_folder(path) ? hf::read_hf_weights(path, m)
                                                : hf::read_checkpoint_weights(path, m);
    model::Transformer net(m);
    {
        torch::NoGradGuard no_grad;
        for (auto& param : net->named_parameters()) param.value().copy_(weights.at(param.key()));
    }
    weights.clear();
    net->to(device);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    const auto t0 = std::chrono::steady_clock::now();
    const auto gens = model::generate(net, prompts, o);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t new_tokens = 0;
    for (const auto& g : gens) new_tokens += static_cast<int64_t>(g.ids.size());
    for (std::size_t i = 0; i < gens.size(); ++i) {
        const auto& g = gens[i];
        if (p.has("--json")) {
            nlohmann::json j = {{"prompt_ids", prompts[i]},
                                {"ids", g.ids},
                                {"logprobs", g.logprobs},
                                {"finish_reason", g.finish_reason}};
            if (has_text) {
                j["prompt"] = to_text(prompts[i]);
                j["text"] = to_text(g.ids);
            }
            if (p.has("--logits")) {
                // The training forward's logits at every prompt position: (T, vocab).
                torch::NoGradGuard no_grad;
                net->eval();
                auto ids = torch::tensor(prompts[i]).view({1, -1}).to(device);
                auto logits = net->forward(ids)[0].to(torch::kFloat64).cpu().contiguous();
                nlohmann::json rows = nlohmann::json::array();
                for (int64_t t = 0; t < logits.size(0); ++t) {
                    const double* row = logits[t].data_ptr<double>();
                    rows.push_back(std::vector<double>(row, row + logits.size(1)));
                }
                j["logits"] = std::move(rows);
            }
            std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        } else if (has_text) {
            if (gens.size() > 1) std::cout << "--- " << (i + 1) << " ---\n";
            std::cout << to_text(prompts[i]) << to_text(g.ids) << "\n";
        } else {
            for (std::size_t k = 0; k < g.ids.size(); ++k) std::cout << (k ? " " : "") << g.ids[k];
            std::cout << "\n";
        }
    }
    nlohmann::json summary = {{"model", checkpoint::is_remote_path(p.spec) ? p.spec : path},
                              {"prompts", gens.size()},
                              {"new_tokens", new_tokens},
                              {"load_seconds", load_s},
                              {"seconds", seconds},
                              {"tokens_per_second", seconds > 0 ? new_tokens / seconds : 0.0},
                              {"kv_cache", o.kv_cache},
                              {"device", device_name}};
    if (p.has("--json"))
        std::cout << nlohmann::json{{"summary", summary}}.dump() << "\n";
    else
        std::cerr << summary.dump() << "\n";
    return kExitOk;
}

}  // namespace lathe::cli
