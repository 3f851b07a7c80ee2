#include "engine/chat/template.h"
#include "engine/run_folder/file_io.h"
#include "engine/util/error.h"
#include "engine/util/hash.h"

#include <minja.hpp>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace fs = std::filesystem;

namespace lathe::chat {

struct ChatTemplate::Parsed {
    std::shared_ptr<minja::TemplateNode> root;
};

namespace {

// minja appends " at row R, column C:" and the lines around it once per frame it unwinds (the
// expression, the output block, the macro, the loop ...), so a raise_exception in a macro printed
// the template five times. Keep the message and the place it was raised: the first location.
std::string innermost_location(const std::string& what) {
    static const std::string kAt = " at row ";
    const auto first = what.find(kAt);
    if (first == std::string::npos) return what;
    const auto next = what.find("\n" + kAt, first + kAt.size());
    std::string out = what.substr(0, next == std::string::npos ? what.size() : next + 1);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path.string() + ": cannot read");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json read_json(const fs::path& path) {
    try {
        return nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
        throw Error(path.string() + ": not JSON: " + e.what());
    }
}

// transformers' special tokens map: each a string, or an AddedToken object with "content".
nlohmann::json special_tokens_of(const nlohmann::json& config) {
    nlohmann::json out = nlohmann::json::object();
    for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
        auto it = config.find(key);
        if (it == config.end() || it->is_null()) continue;
        if (it->is_string())
            out[key] = *it;
        else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
            out[key] = (*it)["content"];
    }
    return out;
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template} (the "default").
std::optional<std::string> template_in_config(const nlohmann::json& config, const fs::path& file) {
    auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array()) {
        for (const auto& t : *it) {
            if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
                t["template"].is_string())
                return t["template"].get<std::string>();
        }
        throw Error(file.string() + ": chat_template lists templates, none named \"default\"");
    }
    throw Error(file.string() + ": chat_template is neither a string nor a list of templates");
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string origin, nlohmann::json special_tokens)
    : source_(std::move(source)),
      origin_(std::move(origin)),
      special_(std::move(special_tokens)),
      parsed_(std::make_unique<Parsed>()) {
    try {
        // transformers: Jinja2 with trim_blocks and lstrip_blocks; keep_trailing_newline off.
        parsed_->root = minja::Parser::parse(source_, {/*trim_blocks=*/true,
                                                       /*lstrip_blocks=*/true,
                                                       /*keep_trailing_newline=*/false});
    } catch (const std::exception& e) {
        throw Error(origin_ + ": chat template does not parse: " + e.what());
    }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::copy() const {
    ChatTemplate c(source_, origin_, special_);
    c.kwargs_ = kwargs_;
    return c;
}

namespace {
// What save() records beside the template: its variables (`chat_template_kwargs`).
ChatTemplate with_saved_kwargs(ChatTemplate t, const nlohmann::json& config) {
    if (auto it = config.find("chat_template_kwargs"); it != config.end() && it->is_object())
        t.set_kwargs(nlohmann::ordered_json::parse(it->dump()));
    return t;
}
}  // namespace

ChatTemplate ChatTemplate::load(const std::string& path) {
    std::error_code ec;
    const fs::path p(path);
    if (fs::is_directory(p, ec)) {
        const fs::path jinja = p / "chat_template.jinja", config = p / "tokenizer_config.json";
        const nlohmann::json cfg =
            fs::is_regular_file(config, ec) ? read_json(config) : nlohmann::json::object();
        if (fs::is_regular_file(jinja, ec))
            return with_saved_kwargs(
                ChatTemplate(read_file(jinja), jinja.string(), special_tokens_of(cfg)), cfg);
        if (!fs::is_regular_file(config, ec))
            throw Error(path +
                        ": no chat template (neither chat_template.jinja nor "
                        "tokenizer_config.json)");
        auto source = template_in_config(cfg, config);
        if (!source) throw Error(config.string() + ": no chat_template");
        return with_saved_kwargs(
            ChatTemplate(std::move(*source), config.string(), special_tokens_of(cfg)), cfg);
    }
    if (!fs::is_regular_file(p, ec)) throw Error(path + ": no such file or folder");
    if (p.extension() == ".json") {
        const nlohmann::json cfg = read_json(p);
        if (!cfg.is_object()) throw Error(path + ": not a JSON object");
        auto source = template_in_config(cfg, p);
        if (!source) throw Error(path + ": no chat_template");
        return ChatTemplate(std::move(*source), path, special_tokens_of(cfg));
    }
    // A template file: special tokens from the tokenizer_config.json beside it, if any.
    const fs::path config = p.parent_path() / "tokenizer_config.json";
    const nlohmann::json cfg =
        fs::is_regular_file(config, ec) ? read_json(config) : nlohmann::json::object();
    return ChatTemplate(read_file(p), path, special_tokens_of(cfg));
}

void ChatTemplate::save(const std::string& dir, nlohmann::json tokenizer_config) const {
    for (const auto& [k, v] : special_.items()) tokenizer_config[k] = v;
    if (!kwargs_.empty())
        tokenizer_config["chat_template_kwargs"] = nlohmann::json::parse(kwargs_.dump());
    run_folder::write_file_atomic((fs::path(dir) / "chat_template.jinja").string(), source_);
    run_folder::write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(),
                                  tokenizer_config.dump(2) + "\n");
}

std::optional<ChatTemplate> ChatTemplate::beside_tokenizer(const std::string& tokenizer_file) {
    std::error_code ec;
    fs::path dir = fs::path(tokenizer_file).parent_path();
    if (dir.empty()) dir = ".";
    if (fs::is_regular_file(dir / "chat_template.jinja", ec)) return load(dir.string());
    const fs::path config = dir / "tokenizer_config.json";
    if (!fs::is_regular_file(config, ec)) return std::nullopt;
    const nlohmann::json cfg = read_json(config);
    if (!cfg.is_object() || !template_in_config(cfg, config)) return std::nullopt;
    return load(config.string());
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& context) const {
    // transformers: render(messages=, tools=, documents=, add_generation_prompt=,
    // **special_tokens_map, **kwargs); tools and documents are None when not given.
    nlohmann::ordered_json vars = {{"messages", messages},
                                   {"tools", nullptr},
                                   {"documents", nullptr},
                                   {"add_generation_prompt", add_generation_prompt}};
    if (context.is_object())
        for (const auto& [k, v] : context.items()) vars[k] = v;
    for (const auto& [k, v] : special_.items()) vars[k] = v;
    for (const auto& [k, v] : kwargs_.items()) vars[k] = v;
    try {
        auto context = minja::Context::make(minja::Value(vars));
        // transformers' strftime_now: the local time, formatted by strftime.
        context->set("strftime_now",
                     minja::Value::callable([](const std::shared_ptr<minja::Context>&,
                                               minja::ArgumentsValue& args) {
                         args.expectArgs("strftime_now", {1, 1}, {0, 0});
                         const auto format = args.args[0].get<std::string>();
                         const std::time_t now =
                             std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
                         std::tm local{};
                         localtime_r(&now, &local);
                         std::ostringstream out;
                         out << std::put_time(&local, format.c_str());
                         return minja::Value(out.str());
                     }));
        return parsed_->root->render(context);
    } catch (const std::exception& e) {
        throw Error(origin_ + ": chat template: " + innermost_location(e.what()));
    }
}

std::string ChatTemplate::id() const {
    return fnv1a_hex(source_ + "\n" + special_.dump() +
                     (kwargs_.empty() ? std::string() : "\n" + kwargs_.dump()));
}

void ChatTemplate::set_kwargs(nlohmann::ordered_json kwargs) {
    if (!kwargs.is_object()) throw Error(origin_ + ": template arguments must be a JSON object");
    kwargs_ = std::move(kwargs);
}

void ChatTemplate::update_kwargs(const nlohmann::ordered_json& more) {
    if (!more.is_object()) throw Error(origin_ + ": template arguments must be a JSON object");
    for (const auto& [k, v] : more.items()) kwargs_[k] = v;
}

void add_template_arg(nlohmann::ordered_json& kwargs, const std::string& arg) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0)
        throw Error("--template-arg " + arg + ": give NAME=VALUE (enable_thinking=false)");
    const std::string name = arg.substr(0, eq), value = arg.substr(eq + 1);
    for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt",
                                 "bos_token", "eos_token", "pad_token", "unk_token"})
        if (name == reserved)
            throw Error("--template-arg " + arg + ": " + name +
                        " is set by Lathe itself (from the data line, --generation-prompt or "
                        "the tokenizer config)");
    if (!kwargs.is_object()) kwargs = nlohmann::ordered_json::object();
    try {
        kwargs[name] = nlohmann::ordered_json::parse(value);
    } catch (const nlohmann::json::exception&) {
        kwargs[name] = value;  // not JSON: a string
    }
}

}  // namespace lathe::chat
