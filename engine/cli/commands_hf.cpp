// lathe-engine export, import and generate: models out to and in from Hugging Face, and text out
// of a model.
#include "engine/chat/conversation.h"
#include "engine/chat/template.h"
#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/hf_convert.h"
#include "engine/cli/cli.h"
#include "engine/hf/family.h"
#include "engine/model/generate.h"
#include "engine/protocol/cli_output.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
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
        if (!remote::is_remote_path(path)) return;
        std::string source = path;
        const auto storage = remote::storage_for(path);
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
        copy_ = std::make_unique<remote::DownloadedFolder>(*storage, source, temp);
        path_ = copy_->path();
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::unique_ptr<remote::DownloadedFolder> copy_;
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
        } else if (a.rfind('-', 0) == 0) {
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
    checkpoint::ExportOptions o;
    if (options.count("--dtype")) o.dtype = options["--dtype"];
    if (o.dtype != "float32" && o.dtype != "bfloat16") {
        std::cerr << "lathe-engine export: --dtype must be float32 or bfloat16, not " << o.dtype
                  << "\n";
        return kExitUsage;
    }
    if (options.count("--max-shard-size")) {
        try {
            o.max_shard_bytes = checkpoint::parse_size(options["--max-shard-size"]);
        } catch (const Error& e) {
            std::cerr << "lathe-engine export: --max-shard-size " << e.what() << "\n";
            return kExitUsage;
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const LocalCopy source(positional[0]);
    const auto r = checkpoint::export_checkpoint(source.path(), positional[1], o);
    protocol::ExportResult out;
    out.exported = positional[1];
    out.from = positional[0];
    out.files = r.files;
    out.tensors = r.tensors;
    out.weight_bytes = static_cast<int64_t>(r.weight_bytes);
    out.dtype = o.dtype;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << protocol::write_output(out) << "\n";
    return kExitOk;
}

int cmd_import(const Args& args) {
    if (args.size() != 2 || args[0].rfind('-', 0) == 0 || args[1].rfind('-', 0) == 0) {
        std::cerr << "usage: lathe-engine import HF_DIR OUT_CHECKPOINT\n";
        return kExitUsage;
    }
    const LocalCopy source(args[0]);
    const std::string& out_path = args[1];
    const bool remote_out = remote::is_remote_path(out_path);
    // A remote checkpoint is written locally, then uploaded with .metadata.json last.
    const std::string local_out =
        remote_out
            ? (fs::temp_directory_path() / ("lathe-import-" + std::to_string(::getpid()))).string()
            : out_path;
    if (remote_out) {
        const auto storage = remote::storage_for(out_path);
        if (storage->exists(run_folder::join(out_path, ".metadata.json")))
            throw Error(out_path + ": a checkpoint is already there");
    }
    try {
        checkpoint::import_hf(source.path(), local_out);
        if (remote_out) remote::upload_folder(local_out, *remote::storage_for(out_path), out_path);
    } catch (...) {
        std::error_code ec;
        if (remote_out) fs::remove_all(local_out, ec);
        throw;
    }
    const auto m = checkpoint::model_config_of(local_out);
    if (remote_out) {
        std::error_code ec;
        fs::remove_all(local_out, ec);
    }
    protocol::ImportResult out;
    out.imported = args[1];
    out.from = args[0];
    out.model = {m.d_model, m.n_layers, m.n_heads, m.kv_heads(), m.vocab_size, m.hidden_size()};
    std::cout << protocol::write_output(out) << "\n";
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

// The context the model at `path` was made for: a Hugging Face folder's max_position_embeddings,
// a checkpoint's training length (the longer of dataset.sequence_length and
// train_module.max_sequence_length); 0 when neither says.
int64_t model_context(const std::string& path) {
    const bool hf_folder = hf::is_hf_model_folder(path);
    const auto j =
        nlohmann::json::parse(run_folder::read_text_file(run_folder::join(
                                  path, hf_folder ? "config.json" : run_folder::kConfigFile)),
                              nullptr, false);
    if (!j.is_object()) return 0;
    auto integer = [](const nlohmann::json& o, const char* key) -> int64_t {
        return o.is_object() && o.contains(key) && o[key].is_number_integer()
                   ? o[key].get<int64_t>()
                   : 0;
    };
    if (hf_folder) return integer(j, "max_position_embeddings");
    return std::max(
        integer(j.value("dataset", nlohmann::json::object()), "sequence_length"),
        integer(j.value("train_module", nlohmann::json::object()), "max_sequence_length"));
}

// Refuses prompts plus --max-new-tokens past the model's context (issue 34): attention grows
// with every position, and RoPE positions past the trained length give text no better than
// noise. --max-context N raises the limit knowingly.
void check_context(const std::string& path, const std::vector<std::vector<int64_t>>& prompts,
                   int64_t max_new_tokens, int64_t max_context) {
    const int64_t context = max_context > 0 ? max_context : model_context(path);
    if (context <= 0) return;
    std::size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.size());
    const int64_t need = static_cast<int64_t>(longest) + max_new_tokens;
    if (need <= context) return;
    throw Error("the longest prompt (" + std::to_string(longest) +
                " tokens) plus --max-new-tokens " + std::to_string(max_new_tokens) + " is " +
                std::to_string(need) + " positions, past the model's context of " +
                std::to_string(context) +
                (max_context > 0                ? " (--max-context)"
                 : hf::is_hf_model_folder(path) ? " (max_position_embeddings in its config.json)"
                                                : " (the sequence length it was trained at)") +
                ". Generation does not slide a window: lower --max-new-tokens to " +
                std::to_string(std::max<int64_t>(0, context - static_cast<int64_t>(longest))) +
                ", or give --max-context N to go past it knowingly");
}

// Bytes as text; an id that is no byte (a vocabulary wider than 256) becomes U+FFFD.
std::string bytes_text(const std::vector<int64_t>& ids) {
    std::string s;
    for (auto id : ids)
        s += id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : "\xEF\xBF\xBD";
    return s;
}

}  // namespace

namespace {

// What `generate`'s options ask for.
struct GenerateRequest {
    model::GenerateOptions o;
    std::vector<std::string> stops;
    std::vector<std::vector<int64_t>> prompts;
    std::vector<std::string> prompt_texts;
    std::string device_name = "cpu";
    int64_t max_context = 0;
};

// The options of `p` into `r`; the usage message's reason when they are wrong, else empty.
std::string parse_generate(const ParsedArgs& p, GenerateRequest& r) {
    for (const auto& e : p.errors) return e;
    if (p.spec.empty()) return "no model given";
    if (!p.overrides.empty()) return "unexpected argument " + p.overrides[0];
    auto& o = r.o;
    try {
        for (const auto& [name, value] : p.options) {
            if (name == "--prompt") r.prompt_texts.push_back(value);
            if (name == "--prompt-ids") r.prompts.push_back(parse_ids(value));
            if (name == "--max-new-tokens") o.max_new_tokens = std::stoll(value);
            if (name == "--max-context") r.max_context = std::stoll(value);
            if (name == "--temperature") o.temperature = std::stod(value);
            if (name == "--top-k") o.top_k = std::stoll(value);
            if (name == "--top-p") o.top_p = std::stod(value);
            if (name == "--seed") o.seed = std::stoull(value);
            if (name == "--stop") r.stops.push_back(value);
            if (name == "--device") r.device_name = value;
            if (name == "--threads") torch::set_num_threads(static_cast<int>(std::stoll(value)));
        }
    } catch (const Error& e) {
        return e.what();
    } catch (const std::exception&) {
        return "a numeric option has a value that is not a number";
    }
    o.kv_cache = !p.has("--no-kv-cache");
    // (Written so that NaN fails every comparison, and so every check.)
    if (!(o.temperature >= 0 && std::isfinite(o.temperature)) || o.top_k < 0 ||
        o.max_new_tokens < 0 || !(o.top_p > 0 && o.top_p <= 1) || r.max_context < 0)
        return "--temperature (a finite number), --top-k, --max-new-tokens and --max-context "
               "must be >= 0, --top-p in (0, 1]";
    if (r.prompts.empty() && r.prompt_texts.empty() && !p.has("--messages"))
        return "give --prompt or --prompt-ids (or --chat --messages FILE)";
    if (r.device_name != "cpu" && r.device_name != "cuda") return "--device must be cpu or cuda";
    return {};
}

// How ids become text for the model at `path`: --tokenizer, else the folder's own tokenizer file
// (a checkpoint of a run with dataset.tokenizer, an export, a Hugging Face folder), else bytes
// for byte-token runs, else none (ids only).
struct TextCodec {
    std::unique_ptr<tokenizer::Tokenizer> tok;
    std::string tokenizer_path;
    bool bytes = false;
    bool has_text() const { return tok || bytes; }
    std::string text(const std::vector<int64_t>& ids) const {
        return tok ? tok->decode(ids, /*skip_special=*/true) : bytes_text(ids);
    }
    std::vector<int64_t> ids(const std::string& text) const {
        if (tok) return tok->encode(text);
        std::vector<int64_t> out;
        for (unsigned char c : text) out.push_back(c);
        return out;
    }
};

TextCodec text_codec(const checkpoint::ModelSource& source, const std::string& tokenizer_option) {
    const std::string& path = source.path();
    TextCodec c;
    c.tokenizer_path = tokenizer_option;
    if (!c.tokenizer_path.empty()) {
        c.tok = tokenizer::load_tokenizer(c.tokenizer_path);
    } else if (!source.tokenizer_file().empty()) {
        c.tokenizer_path = source.tokenizer_file();
        try {
            c.tok = tokenizer::load_tokenizer(c.tokenizer_path);
        } catch (const Error& e) {
            std::cerr << "lathe-engine generate: not using the folder's tokenizer: " << e.what()
                      << "\n";
        }
    }
    c.bytes = !c.tok && byte_tokens(path);
    return c;
}

// generate --chat --messages FILE: a JSON list of {"role", "content"} messages (as in a chat
// dataset's "messages"), or an object holding one under "messages".
nlohmann::ordered_json read_messages(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw Error(file + ": cannot read the conversation (--messages)");
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::ordered_json::parse(text.str(), nullptr, false);
    if (j.is_discarded())
        throw Error(file +
                    ": not JSON; --messages takes a list of {\"role\", \"content\"} messages");
    if (j.is_object() && j.contains("messages")) j = j["messages"];
    if (!j.is_array())
        throw Error(file + ": --messages takes a list of {\"role\", \"content\"} messages");
    return j;
}

// The chat template for generate --chat: --chat-template, else the tokenizer's folder's, else the
// model folder's.
chat::ChatTemplate chat_template_for(const std::string& option, const std::string& tokenizer_path,
                                     const std::string& model_path) {
    if (!option.empty()) return chat::ChatTemplate::load(option);
    if (auto t = chat::ChatTemplate::beside_tokenizer(tokenizer_path)) return std::move(*t);
    if (std::filesystem::is_directory(model_path)) {
        const auto dir = std::filesystem::path(model_path);
        if (std::filesystem::exists(dir / "chat_template.jinja") ||
            std::filesystem::exists(dir / "tokenizer_config.json"))
            return chat::ChatTemplate::load(model_path);
    }
    throw Error(model_path +
                ": --chat, but no chat template is known for this model (none beside " +
                tokenizer_path +
                "); give --chat-template FILE (a .jinja file, a "
                "tokenizer_config.json or the Hugging Face model folder it came from)");
}

// The model at `path` with its weights, on `device`.
model::Transformer load_model(const checkpoint::ModelSource& source, const TextCodec& codec,
                              const torch::Device& device) {
    const auto& m = source.model();
    if (codec.tok && codec.tok->vocab_size() > m.vocab_size)
        throw Error(codec.tokenizer_path + ": its vocabulary (" +
                    std::to_string(codec.tok->vocab_size()) + ") is larger than the model's (" +
                    std::to_string(m.vocab_size) + "): not this model's tokenizer");
    model::Transformer net(m);
    {
        // Freed before the move to the device: the host holds one copy of the model at a time.
        auto weights = source.weights(m);
        torch::NoGradGuard no_grad;
        for (auto& param : net->named_parameters()) param.value().copy_(weights.at(param.key()));
    }
    net->to(device);
    return net;
}

// One generation as --json prints it; with `logits`, the training forward's logits at every
// prompt position, (T, vocab).
protocol::Generation generation_output(const model::Generation& g,
                                       const std::vector<int64_t>& prompt, const TextCodec& codec,
                                       model::Transformer* logits_of, const torch::Device& device) {
    protocol::Generation j;
    j.prompt_ids = prompt;
    j.ids = g.ids;
    j.logprobs.assign(g.logprobs.begin(), g.logprobs.end());
    j.finish_reason = g.finish_reason;
    if (codec.has_text()) {
        j.prompt = codec.text(prompt);
        j.text = codec.text(g.ids);
        // The text without the stop token that ended it (an end-of-turn or EOS): a chat reply.
        std::vector<int64_t> reply = g.ids;
        if (g.finish_reason == "stop_id" && !reply.empty()) reply.pop_back();
        j.reply = codec.text(reply);
    }
    if (logits_of) {
        torch::NoGradGuard no_grad;
        auto& net = *logits_of;
        net->eval();
        auto ids = torch::tensor(prompt).view({1, -1}).to(device);
        auto logits = net->forward(ids)[0].to(torch::kFloat64).cpu().contiguous();
        std::vector<std::vector<double>> rows;
        for (int64_t t = 0; t < logits.size(0); ++t) {
            const double* row = logits[t].data_ptr<double>();
            rows.emplace_back(row, row + logits.size(1));
        }
        j.logits = std::move(rows);
    }
    return j;
}

// --chat: each prompt is the user's message, rendered with the model's chat template and its
// generation prompt (or, with --messages, the conversation so far with the prompts after it); the
// reply ends at the template's end-of-turn token.
void render_chat_prompts(const ParsedArgs& p, GenerateRequest& r, const TextCodec& codec,
                         const std::string& path) {
    auto& o = r.o;
    if (!p.has("--chat")) {
        if (p.has("--system") || p.has("--chat-template") || p.has("--messages") ||
            p.has("--template-arg"))
            throw Error("--system, --chat-template, --template-arg and --messages go with --chat");
        return;
    }
    if (!codec.tok)
        throw Error(path + ": --chat needs the model's tokenizer; give --tokenizer FILE");
    if (!r.prompts.empty()) throw Error("--chat takes --prompt TEXT, not --prompt-ids");
    auto tmpl = chat_template_for(p.option("--chat-template"), codec.tokenizer_path, path);
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    for (const auto& [name, value] : p.options)
        if (name == "--template-arg") chat::add_template_arg(kwargs, value);
    tmpl.update_kwargs(kwargs);
    const std::string system = p.option("--system");
    if (const std::string file = p.option("--messages"); !file.empty()) {
        // A conversation so far (multi-turn chat): the model writes the next assistant turn.
        auto messages = read_messages(file);
        if (!system.empty())
            messages.insert(messages.begin(),
                            nlohmann::ordered_json{{"role", "system"}, {"content", system}});
        for (const auto& t : r.prompt_texts)
            messages.push_back(nlohmann::ordered_json{{"role", "user"}, {"content", t}});
        chat::check_conversation(messages, file, false);
        if (messages.back()["role"] != "user")
            throw Error(file + ": the last message is the " +
                        messages.back()["role"].get<std::string>() +
                        "'s; it must be the user's (or give --prompt TEXT)");
        r.prompt_texts = {tmpl.render(messages, true)};
    } else {
        for (auto& t : r.prompt_texts) {
            nlohmann::ordered_json messages = nlohmann::ordered_json::array();
            if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
            messages.push_back({{"role", "user"}, {"content", t}});
            t = tmpl.render(messages, true);
        }
    }
    if (tmpl.special_tokens().contains("eos_token")) {
        const auto ids = codec.tok->encode(tmpl.special_tokens()["eos_token"].get<std::string>());
        if (ids.size() == 1) o.stop_ids.push_back(ids[0]);
    }
}

// --stop TEXT: generation ends once the text so far ends with one of the stop texts.
void stop_on_texts(GenerateRequest& r, const TextCodec& codec) {
    if (r.stops.empty()) return;
    r.o.stop = [&r, &codec](std::size_t, const std::vector<int64_t>& ids) {
        const std::string text = codec.text(ids);
        for (const auto& s : r.stops)
            if (!s.empty() && text.size() >= s.size() &&
                text.compare(text.size() - s.size(), s.size(), s) == 0)
                return true;
        return false;
    };
}

// Prints each generation: a JSON line each (--json), else the text, else the ids. Returns the
// tokens generated in all.
int64_t print_generations(const ParsedArgs& p, const GenerateRequest& r,
                          const std::vector<model::Generation>& gens, const TextCodec& codec,
                          model::Transformer* net, const torch::Device& device) {
    int64_t new_tokens = 0;
    for (std::size_t i = 0; i < gens.size(); ++i) {
        const auto& g = gens[i];
        new_tokens += static_cast<int64_t>(g.ids.size());
        if (p.has("--json")) {
            std::cout << protocol::write_output(generation_output(
                             g, r.prompts[i], codec, p.has("--logits") ? net : nullptr, device))
                      << "\n";
        } else if (codec.has_text()) {
            if (gens.size() > 1) std::cout << "--- " << (i + 1) << " ---\n";
            std::cout << codec.text(r.prompts[i]) << codec.text(g.ids) << "\n";
        } else {
            for (std::size_t k = 0; k < g.ids.size(); ++k) std::cout << (k ? " " : "") << g.ids[k];
            std::cout << "\n";
        }
    }
    return new_tokens;
}

}  // namespace

int cmd_generate(const Args& args) {
    auto p =
        parse_args(args,
                   {"--prompt", "--prompt-ids", "--tokenizer", "--max-new-tokens", "--temperature",
                    "--top-k", "--top-p", "--seed", "--stop", "--device", "--threads",
                    "--max-context", "--system", "--chat-template", "--messages", "--template-arg"},
                   {"--json", "--no-kv-cache", "--logits", "--chat"});
    GenerateRequest r;
    if (const auto why = parse_generate(p, r); !why.empty()) {
        std::cerr << "lathe-engine generate: " << why
                  << "\nusage: lathe-engine generate CHECKPOINT|HF_DIR|RUN_DIR (--prompt TEXT | "
                     "--prompt-ids 1,2,3)... [--tokenizer FILE] [--max-new-tokens N] "
                     "[--max-context N] [--temperature T] [--top-k K] [--top-p P] [--seed S] "
                     "[--stop TEXT] [--device cpu|cuda] [--threads N] [--no-kv-cache] "
                     "[--json [--logits]] [--chat [--system TEXT] [--chat-template FILE] "
                     "[--messages FILE] [--template-arg NAME=VALUE]...]\n";
        return kExitUsage;
    }
    auto& o = r.o;
    const LocalCopy model(p.spec);
    const std::string path = resolve_model_path(model.path());
    const checkpoint::ModelSource source(path);
    const TextCodec codec = text_codec(source, p.option("--tokenizer"));
    if (codec.tok && codec.tok->eos_id()) o.stop_ids.push_back(*codec.tok->eos_id());
    if (codec.tok) o.sample_vocab = codec.tok->vocab_size();
    if (!r.prompt_texts.empty() && !codec.has_text())
        throw Error(path +
                    ": no tokenizer is known for this model, so --prompt TEXT cannot be encoded; "
                    "give --tokenizer FILE or --prompt-ids");
    if (!r.stops.empty() && !codec.has_text())
        throw Error(path + ": --stop needs a tokenizer to read the text; give --tokenizer FILE");
    render_chat_prompts(p, r, codec, path);
    for (const auto& t : r.prompt_texts) r.prompts.push_back(codec.ids(t));
    stop_on_texts(r, codec);
    if (r.device_name == "cuda" && !torch::cuda::is_available())
        throw Error("--device cuda: no CUDA device is available");
    const torch::Device device(r.device_name == "cuda" ? torch::kCUDA : torch::kCPU);
    check_context(path, r.prompts, o.max_new_tokens, r.max_context);

    const auto t_load = std::chrono::steady_clock::now();
    auto net = load_model(source, codec, device);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    const auto t0 = std::chrono::steady_clock::now();
    const auto gens = model::generate(net, r.prompts, o);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t new_tokens = print_generations(p, r, gens, codec, &net, device);
    protocol::GenerationSummaryLine line;
    auto& summary = line.summary;
    summary.model = remote::is_remote_path(p.spec) ? p.spec : path;
    summary.prompts = static_cast<int64_t>(gens.size());
    summary.new_tokens = new_tokens;
    summary.load_seconds = load_s;
    summary.seconds = seconds;
    summary.tokens_per_second = seconds > 0 ? static_cast<double>(new_tokens) / seconds : 0.0;
    summary.kv_cache = o.kv_cache;
    summary.device = r.device_name;
    if (p.has("--json"))
        std::cout << protocol::write_output(line) << "\n";
    else
        std::cerr << protocol::write_output(summary) << "\n";
    return kExitOk;
}

}  // namespace lathe::cli
