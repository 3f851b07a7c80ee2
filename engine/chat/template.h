// Chat templates as transformers applies them (`tokenizer.apply_chat_template`): the model's Jinja
// `chat_template`, rendered with trim_blocks and lstrip_blocks, the tokenizer's special tokens
// (bos_token, eos_token, pad_token, unk_token) as variables, `raise_exception` and `strftime_now`.
// The Jinja engine is minja (engine/chat/minja/README.md), hidden behind this header.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lathe::chat {

/// What one render may take: templates are untrusted input (a model folder from anywhere), so a
/// render that passes a limit stops with an error naming it, never a crash or a hang.
struct RenderLimits {
    std::size_t max_call_depth = 200;            ///< nested macro calls (and recursive loops)
    std::size_t max_output_bytes = 64ull << 20;  ///< the output, and any one string built
    int64_t max_range = 100000;                  ///< items of one range(), jinja2 sandbox's cap
    double max_seconds = 10;                     ///< per render (one conversation)
};

class ChatTemplate {
public:
    /// Parses `source`. `origin` names it in errors ("…/tokenizer_config.json"); `special_tokens`
    /// maps bos_token, eos_token … to their strings. Throws lathe::Error "origin: chat template:
    /// reason (row R, column C)" for a syntax error.
    ChatTemplate(std::string source, std::string origin, nlohmann::json special_tokens);
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    /// Another instance of the same template and kwargs (a worker's own: minja's parse tree is
    /// not shared between threads).
    ChatTemplate copy() const;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    /// Reads a template from `path`: a model or tokenizer folder (chat_template.jinja there, as
    /// transformers prefers it, else tokenizer_config.json's chat_template), a
    /// tokenizer_config.json, a .jinja file, or "builtin:NAME" (builtin()). Special tokens come from the tokenizer_config.json
    /// beside it. Throws lathe::Error naming the file when there is no template.
    static ChatTemplate load(const std::string& path);

    /// Writes the template where a tokenizer goes (a prepared data folder, an export):
    /// `dir`/chat_template.jinja (the source, as transformers saves it) and the entries
    /// tokenizer_config.json needs for load() to give this template back: the special tokens
    /// and, when set, `chat_template_kwargs`. `tokenizer_config` holds the file's other entries
    /// (written as they are). Atomic, file by file.
    void save(const std::string& dir,
              nlohmann::json tokenizer_config = nlohmann::json::object()) const;

    /// Lathe's own templates for models without one, by name ("chatml", "llama3"): the common
    /// chat formats, each with the special tokens it ends turns with. `load("builtin:NAME")`
    /// gives them too. Throws lathe::Error listing the names for an unknown one.
    static ChatTemplate builtin(const std::string& name);
    static std::vector<std::string> builtin_names();

    /// The template for a tokenizer file (tokenizer.json / tokenizer.model): its folder's, or
    /// nullopt when that folder has none.
    static std::optional<ChatTemplate> beside_tokenizer(const std::string& tokenizer_file);

    /// The text of `messages` (a JSON array of message objects, handed to the template as they
    /// are, keys in their order), as apply_chat_template(messages, tools=…, documents=…,
    /// tokenize=False, add_generation_prompt=…, **kwargs()) gives it. `context` is an object
    /// with a conversation's `tools` and `documents` (each null when absent, as transformers
    /// passes them). Throws lathe::Error "origin: chat template: reason" when rendering fails
    /// (raise_exception included).
    std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                       const nlohmann::ordered_json& context = nlohmann::ordered_json()) const;

    /// A render with where its `{% generation %}` blocks landed (byte ranges of `text`), as
    /// transformers' return_assistant_tokens_mask finds them. Throws lathe::Error for a block
    /// rendered inside a macro or a {% set %} block (whose place in the text is unknown).
    struct Marked {
        std::string text;
        std::vector<std::pair<std::size_t, std::size_t>> generation;
    };
    Marked render_marked(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                         const nlohmann::ordered_json& context = nlohmann::ordered_json()) const;
    /// Whether the template marks the assistant's output with {% generation %} blocks.
    bool has_generation_blocks() const { return generation_blocks_; }

    /// Template variables for every render (transformers' apply_chat_template **kwargs, as
    /// `--template-arg enable_thinking=false` gives them); they take part in id().
    void set_kwargs(nlohmann::ordered_json kwargs);
    /// The limits each render runs under (RenderLimits' defaults unless set).
    void set_limits(const RenderLimits& limits) { limits_ = limits; }
    const RenderLimits& limits() const { return limits_; }
    /// Adds `more` to kwargs(), replacing those of the same name (--template-arg over the
    /// variables a template was saved with).
    void update_kwargs(const nlohmann::ordered_json& more);
    const nlohmann::ordered_json& kwargs() const { return kwargs_; }

    const std::string& source() const { return source_; }
    const std::string& origin() const { return origin_; }
    /// FNV-1a 64 of the source and the special tokens: what a prepared folder records.
    std::string id() const;
    const nlohmann::json& special_tokens() const { return special_; }

private:
    struct Parsed;
    std::string source_, origin_;
    nlohmann::json special_;
    nlohmann::ordered_json kwargs_ = nlohmann::ordered_json::object();
    RenderLimits limits_;
    bool generation_blocks_ = false;
    std::unique_ptr<Parsed> parsed_;
};

/// Adds one `--template-arg KEY=VALUE` to `kwargs`: VALUE is read as JSON when it is JSON
/// (false, 3, "x", [1, 2]), else taken as a string. Throws lathe::Error naming the argument for
/// a missing '=' or a name the renderer sets itself (messages, tools, documents,
/// add_generation_prompt, the special tokens).
void add_template_arg(nlohmann::ordered_json& kwargs, const std::string& arg);

}  // namespace lathe::chat
