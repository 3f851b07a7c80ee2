// Chat templates as transformers applies them (`tokenizer.apply_chat_template`): the model's Jinja
// `chat_template`, rendered with trim_blocks and lstrip_blocks, the tokenizer's special tokens
// (bos_token, eos_token, pad_token, unk_token) as variables, `raise_exception` and `strftime_now`.
// The Jinja engine is minja (engine/chat/minja/README.md), hidden behind this header.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

namespace lathe::chat {

class ChatTemplate {
public:
    /// Parses `source`. `origin` names it in errors ("…/tokenizer_config.json"); `special_tokens`
    /// maps bos_token, eos_token … to their strings. Throws lathe::Error "origin: chat template:
    /// reason (row R, column C)" for a syntax error.
    ChatTemplate(std::string source, std::string origin, nlohmann::json special_tokens);
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    /// Reads a template from `path`: a model or tokenizer folder (chat_template.jinja there, as
    /// transformers prefers it, else tokenizer_config.json's chat_template), a
    /// tokenizer_config.json, or a .jinja file. Special tokens come from the tokenizer_config.json
    /// beside it. Throws lathe::Error naming the file when there is no template.
    static ChatTemplate load(const std::string& path);

    /// The template for a tokenizer file (tokenizer.json / tokenizer.model): its folder's, or
    /// nullopt when that folder has none.
    static std::optional<ChatTemplate> beside_tokenizer(const std::string& tokenizer_file);

    /// The text of `messages` (a JSON array of message objects, handed to the template as they
    /// are, keys in their order), as apply_chat_template(messages, tokenize=False, add_generation_prompt=…) gives it.
    /// Throws lathe::Error "origin: chat template: reason" when rendering fails (raise_exception
    /// included).
    std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;

    const std::string& source() const { return source_; }
    const std::string& origin() const { return origin_; }
    /// FNV-1a 64 of the source and the special tokens: what a prepared folder records.
    std::string id() const;
    const nlohmann::json& special_tokens() const { return special_; }

private:
    struct Parsed;
    std::string source_, origin_;
    nlohmann::json special_;
    std::unique_ptr<Parsed> parsed_;
};

}  // namespace lathe::chat
