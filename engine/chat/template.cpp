#include "engine/chat/template.h"
#include "engine/run_folder/file_io.h"
#include "engine/util/error.h"
#include "engine/util/hash.h"

#include <minja.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <regex>
#include <sstream>
#include <vector>

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

// The messages as transformers hands them to the template (apply_chat_template's
// _normalize_chat_messages and _alias_reasoning_fields): keys whose value is null dropped (an
// OpenAI `content: null` is absent, not "None"); a message's reasoning, under any of
// reasoning_content, thinking or reasoning, given under `thinking` (first) and
// `reasoning_content` (last) as well.
nlohmann::ordered_json normalized_messages(const nlohmann::ordered_json& messages) {
    if (!messages.is_array()) return messages;
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& m : messages) {
        if (!m.is_object()) {
            out.push_back(m);
            continue;
        }
        nlohmann::ordered_json kept = nlohmann::ordered_json::object();
        for (const auto& [k, v] : m.items())
            if (!v.is_null()) kept[k] = v;
        const nlohmann::ordered_json* reasoning = nullptr;
        for (const char* key : {"reasoning_content", "thinking", "reasoning"})
            if (auto it = kept.find(key); !reasoning && it != kept.end()) reasoning = &*it;
        if (!reasoning) {
            out.push_back(std::move(kept));
            continue;
        }
        const nlohmann::ordered_json r = *reasoning;
        nlohmann::ordered_json aliased = {{"thinking", r}};
        for (const auto& [k, v] : kept.items()) aliased[k] = k == "thinking" ? r : v;
        aliased["reasoning_content"] = r;
        out.push_back(std::move(aliased));
    }
    return out;
}

// Python's json.dumps(value, ensure_ascii=, indent=, separators=, sort_keys=), as transformers'
// `tojson` filter calls it (minja's took `indent` alone and ignored the rest).
struct PyJson {
    bool ascii = false, sort_keys = false;
    int indent = -1;  // None
    std::string item_sep, key_sep;

    void write(const nlohmann::ordered_json& v, std::string& out, int level) const {
        auto newline = [&](int l) {
            if (indent < 0) return;
            out += '\n';
            out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(l), ' ');
        };
        if (v.is_array()) {
            if (v.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            newline(level + 1);
            for (std::size_t i = 0; i < v.size(); ++i) {
                if (i) {
                    out += item_sep;
                    newline(level + 1);
                }
                write(v[i], out, level + 1);
            }
            newline(level);
            out += ']';
        } else if (v.is_object()) {
            if (v.empty()) {
                out += "{}";
                return;
            }
            std::vector<std::string> keys;
            for (const auto& [k, _] : v.items()) keys.push_back(k);
            if (sort_keys) std::sort(keys.begin(), keys.end());
            out += '{';
            newline(level + 1);
            for (std::size_t i = 0; i < keys.size(); ++i) {
                if (i) {
                    out += item_sep;
                    newline(level + 1);
                }
                out += nlohmann::ordered_json(keys[i]).dump(-1, ' ', ascii);
                out += key_sep;
                write(v[keys[i]], out, level + 1);
            }
            newline(level);
            out += '}';
        } else {
            out += v.dump(-1, ' ', ascii);
        }
    }
};

minja::Value tojson(const std::shared_ptr<minja::Context>&, minja::ArgumentsValue& args) {
    if (args.args.empty()) throw std::runtime_error("tojson: no value");
    if (args.args[0].is_undefined())
        throw std::runtime_error("TypeError: Object of type Undefined is not JSON serializable");
    PyJson j;
    auto named = [&](const char* name, std::size_t position) -> minja::Value {
        if (args.args.size() > position) return args.args[position];
        return args.get_named(name);
    };
    for (const auto& [k, _] : args.kwargs)
        if (k != "ensure_ascii" && k != "indent" && k != "separators" && k != "sort_keys")
            throw std::runtime_error("tojson: unexpected keyword argument '" + k + "'");
    if (const auto a = named("ensure_ascii", 1); !a.is_null()) j.ascii = a.to_bool();
    if (const auto i = named("indent", 2); !i.is_null()) {
        j.indent = i.is_string() ? -1 : static_cast<int>(i.get<int64_t>());
        if (j.indent < 0) j.indent = 0;
    }
    j.item_sep = j.indent >= 0 ? "," : ", ";
    j.key_sep = ": ";
    if (const auto sep = named("separators", 3); !sep.is_null()) {
        if (!sep.is_array() || sep.size() != 2)
            throw std::runtime_error("tojson: separators must be a pair of strings");
        const auto pair = sep.get<nlohmann::ordered_json>();
        if (!pair[0].is_string() || !pair[1].is_string())
            throw std::runtime_error("tojson: separators must be a pair of strings");
        j.item_sep = pair[0].get<std::string>();
        j.key_sep = pair[1].get<std::string>();
    }
    if (const auto sk = named("sort_keys", 4); !sk.is_null()) j.sort_keys = sk.to_bool();
    std::string out;
    j.write(args.args[0].get<nlohmann::ordered_json>(), out, 0);
    return minja::Value(out);
}

// jinja2 filters minja lacks that chat templates use (first, last, sum, max, min, int, float,
// abs, round, reverse, replace, wordcount), as jinja2 defines them; set beside tojson.
using Json = nlohmann::ordered_json;
using Filter = std::function<minja::Value(const Json& value, const minja::ArgumentsValue& args)>;

Json arg_or(const minja::ArgumentsValue& args, std::size_t position, const char* name,
            Json fallback) {
    if (args.args.size() > position) return args.args[position].get<Json>();
    for (const auto& [k, v] : args.kwargs)
        if (k == name) return v.get<Json>();
    return fallback;
}

double number_of(const Json& v, const char* filter) {
    if (v.is_number()) return v.get<double>();
    if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
    throw std::runtime_error(std::string(filter) + ": not a number: " + v.dump());
}

// The filters over sequences: first, last, reverse, sum, max, min.
std::vector<std::pair<std::string, Filter>> sequence_filters() {
    auto items = [](const Json& v, const char* filter) {
        if (v.is_array()) return v;
        if (v.is_string()) {  // a string's characters
            Json out = Json::array();
            const auto& str = v.get_ref<const std::string&>();
            for (std::size_t i = 0; i < str.size();) {
                std::size_t n = 1;
                while (i + n < str.size() &&
                       (static_cast<unsigned char>(str[i + n]) & 0xC0) == 0x80)
                    ++n;
                out.push_back(str.substr(i, n));
                i += n;
            }
            return out;
        }
        if (v.is_object()) {
            Json out = Json::array();
            for (const auto& [k, _] : v.items()) out.push_back(k);
            return out;
        }
        throw std::runtime_error(std::string(filter) + ": not a sequence: " + v.dump());
    };
    auto extreme = [items](bool max) {
        return [items, max](const Json& v, const minja::ArgumentsValue&) -> minja::Value {
            const Json xs = items(v, max ? "max" : "min");
            if (xs.empty()) return minja::Value();
            Json best = xs[0];
            for (const auto& x : xs) {
                const bool more = x.is_string() && best.is_string()
                                      ? x.get<std::string>() > best.get<std::string>()
                                      : number_of(x, "max") > number_of(best, "max");
                const bool less = x.is_string() && best.is_string()
                                      ? x.get<std::string>() < best.get<std::string>()
                                      : number_of(x, "min") < number_of(best, "min");
                if (max ? more : less) best = x;
            }
            return minja::Value(best);
        };
    };
    return {
        {"first",
         [items](const Json& v, const minja::ArgumentsValue&) {
             const Json xs = items(v, "first");
             return xs.empty() ? minja::Value() : minja::Value(xs.front());
         }},
        {"last",
         [items](const Json& v, const minja::ArgumentsValue&) {
             const Json xs = items(v, "last");
             return xs.empty() ? minja::Value() : minja::Value(xs.back());
         }},
        {"reverse",
         [items](const Json& v, const minja::ArgumentsValue&) {
             Json xs = items(v, "reverse");
             std::reverse(xs.begin(), xs.end());
             if (!v.is_string()) return minja::Value(xs);
             std::string out;
             for (const auto& c : xs) out += c.get<std::string>();
             return minja::Value(out);
         }},
        {"sum",
         [items](const Json& v, const minja::ArgumentsValue& args) {
             const Json start = arg_or(args, 2, "start", 0);
             bool integral = start.is_number_integer();
             double total = number_of(start, "sum");
             for (const auto& x : items(v, "sum")) {
                 integral = integral && x.is_number_integer();
                 total += number_of(x, "sum");
             }
             return integral ? minja::Value(static_cast<int64_t>(total)) : minja::Value(total);
         }},
        {"max", extreme(true)},
        {"min", extreme(false)},
    };
}

// The filters over numbers and strings: int, float, abs, round, replace, wordcount.
std::vector<std::pair<std::string, Filter>> scalar_filters() {
    return {
        {"int",
         [](const Json& v, const minja::ArgumentsValue& args) {
             const Json fallback = arg_or(args, 1, "default", 0);
             if (v.is_number()) return minja::Value(static_cast<int64_t>(v.get<double>()));
             if (v.is_boolean()) return minja::Value(static_cast<int64_t>(v.get<bool>()));
             if (v.is_string()) {
                 try {
                     std::size_t used = 0;
                     const auto& str = v.get_ref<const std::string&>();
                     const double d = std::stod(str, &used);
                     if (used == str.size()) return minja::Value(static_cast<int64_t>(d));
                 } catch (const std::exception&) {
                 }
             }
             return minja::Value(fallback);
         }},
        {"float",
         [](const Json& v, const minja::ArgumentsValue& args) {
             const Json fallback = arg_or(args, 1, "default", 0.0);
             if (v.is_number()) return minja::Value(v.get<double>());
             if (v.is_string()) {
                 try {
                     std::size_t used = 0;
                     const auto& str = v.get_ref<const std::string&>();
                     const double d = std::stod(str, &used);
                     if (used == str.size()) return minja::Value(d);
                 } catch (const std::exception&) {
                 }
             }
             return minja::Value(fallback);
         }},
        {"abs",
         [](const Json& v, const minja::ArgumentsValue&) {
             if (v.is_number_integer()) return minja::Value(std::abs(v.get<int64_t>()));
             return minja::Value(std::abs(number_of(v, "abs")));
         }},
        {"round",
         [](const Json& v, const minja::ArgumentsValue& args) {
             const int64_t digits = arg_or(args, 1, "precision", 0).get<int64_t>();
             const std::string method = arg_or(args, 2, "method", "common").get<std::string>();
             const double scale = std::pow(10.0, static_cast<double>(digits));
             const double x = number_of(v, "round") * scale;
             const double r = method == "floor"  ? std::floor(x)
                              : method == "ceil" ? std::ceil(x)
                                                 : std::round(x);
             return minja::Value(r / scale);
         }},
        {"replace",
         [](const Json& v, const minja::ArgumentsValue& args) {
             std::string str = v.is_string() ? v.get<std::string>() : minja::Value(v).to_str();
             const std::string from = arg_or(args, 1, "old", "").get<std::string>();
             const std::string to = arg_or(args, 2, "new", "").get<std::string>();
             int64_t count = arg_or(args, 3, "count", -1).get<int64_t>();
             if (from.empty()) return minja::Value(str);
             std::string out;
             std::size_t at = 0;
             for (std::size_t hit; count != 0 && (hit = str.find(from, at)) != std::string::npos;
                  --count) {
                 out.append(str, at, hit - at);
                 out += to;
                 at = hit + from.size();
             }
             out.append(str, at, std::string::npos);
             return minja::Value(out);
         }},
        {"wordcount",
         [](const Json& v, const minja::ArgumentsValue&) {
             const std::string str =
                 v.is_string() ? v.get<std::string>() : minja::Value(v).to_str();
             int64_t words = 0;
             bool in_word = false;
             for (const char c : str) {
                 const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                   (static_cast<unsigned char>(c) & 0x80);
                 words += word && !in_word;
                 in_word = word;
             }
             return minja::Value(words);
         }},
    };
}

std::vector<std::pair<std::string, Filter>> extra_filters() {
    auto all = sequence_filters();
    for (auto& f : scalar_filters()) all.push_back(std::move(f));
    return all;
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
    static const std::regex generation(R"(\{%-?\s*generation\s*-?%\})");
    generation_blocks_ = std::regex_search(source_, generation);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::copy() const {
    ChatTemplate c(source_, origin_, special_);
    c.kwargs_ = kwargs_;
    c.limits_ = limits_;
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

namespace {
// Lathe's own templates (written here, in the formats' published layouts): name -> source and
// special tokens. A message's content that is not a string (absent on a tool-calling turn) is "".
struct Builtin {
    const char* name;
    const char* source;
    const char* bos;
    const char* eos;
};
constexpr Builtin kBuiltins[] = {
    {"chatml",
     "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}"
     "{{ m['content'] if m['content'] is string else '' }}{{ '<|im_end|>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "", "<|im_end|>"},
    {"llama3",
     "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
     "'<|end_header_id|>\\n\\n' }}{{ (m['content'] if m['content'] is string else '') | trim }}"
     "{{ '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
     "<|begin_of_text|>", "<|eot_id|>"},
};
}  // namespace

std::vector<std::string> ChatTemplate::builtin_names() {
    std::vector<std::string> out;
    for (const auto& b : kBuiltins) out.emplace_back(b.name);
    return out;
}

ChatTemplate ChatTemplate::builtin(const std::string& name) {
    for (const auto& b : kBuiltins) {
        if (name != b.name) continue;
        nlohmann::json special = {{"eos_token", b.eos}};
        if (*b.bos) special["bos_token"] = b.bos;
        return ChatTemplate(b.source, "builtin:" + name, special);
    }
    std::string names;
    for (const auto& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("builtin:" + name + ": no such built-in chat template (known: " + names + ")");
}

ChatTemplate ChatTemplate::load(const std::string& path) {
    if (path.rfind("builtin:", 0) == 0) return builtin(path.substr(8));
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
    return render_marked(messages, add_generation_prompt, context).text;
}

ChatTemplate::Marked ChatTemplate::render_marked(const nlohmann::ordered_json& messages,
                                                 bool add_generation_prompt,
                                                 const nlohmann::ordered_json& context) const {
    // transformers: render(messages=, tools=, documents=, add_generation_prompt=,
    // **special_tokens_map, **kwargs); tools and documents are None when not given.
    nlohmann::ordered_json vars = {{"messages", normalized_messages(messages)},
                                   {"tools", nullptr},
                                   {"documents", nullptr},
                                   {"add_generation_prompt", add_generation_prompt}};
    if (context.is_object())
        for (const auto& [k, v] : context.items()) vars[k] = v;
    for (const auto& [k, v] : special_.items()) vars[k] = v;
    for (const auto& [k, v] : kwargs_.items()) vars[k] = v;
    // The limits hold for this thread's render only (prepare-data renders on several threads).
    struct Limits {
        explicit Limits(const RenderLimits& l) {
            auto& m = minja::render_limits();
            m = minja::RenderLimits{};
            m.max_call_depth = l.max_call_depth;
            m.max_string_bytes = l.max_output_bytes;
            m.max_range = l.max_range;
            m.seconds = l.max_seconds;
            if (l.max_seconds > 0)
                m.deadline = std::chrono::steady_clock::now() +
                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(l.max_seconds));
        }
        ~Limits() { minja::render_limits() = minja::RenderLimits{}; }
        Limits(const Limits&) = delete;
        Limits& operator=(const Limits&) = delete;
    } limits(limits_);
    try {
        auto context = minja::Context::make(minja::Value(vars));
        context->set("tojson", minja::Value::callable(tojson));
        static const auto filters = extra_filters();
        for (const auto& [name, f] : filters)
            context->set(
                name, minja::Value::callable([f = f](const std::shared_ptr<minja::Context>&,
                                                     minja::ArgumentsValue& args) -> minja::Value {
                    if (args.args.empty()) return minja::Value();
                    return f(args.args[0].get<Json>(), args);
                }));
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
        std::ostringstream out;
        auto& tracked = minja::render_limits();
        tracked.top = &out;
        parsed_->root->render(out, context);
        Marked marked{out.str(), tracked.generation};
        if (tracked.generation_nested)
            throw std::runtime_error(
                "a {% generation %} block is rendered inside a macro or a {% set %} block, so "
                "where it lands in the text is unknown (transformers' masks have the same "
                "limit); put it in the template's own output");
        return marked;
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
