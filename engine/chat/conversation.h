// Conversations for supervised fine-tuning: a JSONL line's `messages` (role/content objects, as
// OpenAI and Hugging Face chat datasets hold them) checked, rendered with the model's chat
// template and tokenized, with a label mask that trains on the assistant's turns only, or on all.
//
// The ids are those of tokenizer(apply_chat_template(messages, tokenize=False), without added
// special tokens), as transformers' apply_chat_template(tokenize=True) gives them. An assistant
// turn is the text between the conversation rendered up to it with add_generation_prompt (its
// header, masked) and the conversation rendered up to and including it (its content and end
// tokens, trained), as open-instruct's SFT masks do. Turn boundaries are placed on token
// boundaries by tokenizing each prefix; a token that straddles one (a merge across it) counts as
// the later turn's.
#pragma once

#include "engine/chat/template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::chat {

enum class TrainOn { assistant, all };

/// The roles chat data uses: "system", "developer" (OpenAI's system role for reasoning models),
/// "user", "assistant", "tool", "ipython" (Llama 3.1's tool results), "function" (OpenAI's older
/// tool results).
bool known_role(const std::string& role);

/// Checks a conversation: a non-empty array of objects, each with a known string `role` and a
/// `content` that is a string, null or absent (an assistant turn that only calls tools), or a
/// list of parts (objects, as `[{"type": "text", "text": ...}]`), at least one of them the
/// assistant's (when `need_assistant`: training data needs one, a prompt does not). The
/// template is handed each message as it is: other keys (tool_calls, reasoning_content, name)
/// too. Throws lathe::Error "where: reason".
void check_conversation(const nlohmann::ordered_json& messages, const std::string& where,
                        bool need_assistant = true);

/// Checks a line's context (a JSON object or null): `tools` a list of objects, `documents` a
/// list. Throws lathe::Error "where: reason".
void check_context(const nlohmann::ordered_json& context, const std::string& where);

/// A conversation whose assistant turns cannot be told apart in the rendered text (the template
/// rewrites a turn when it is not the last); prepare-data --unmaskable skip leaves such lines out.
struct Unmaskable : lathe::Error {
    using lathe::Error::Error;
};

struct Encoded {
    std::string text;           ///< the rendered conversation
    std::vector<int64_t> ids;   ///< its tokens
    std::vector<uint8_t> mask;  ///< 1 where the loss is taken, one per id
};

/// Checks, renders and tokenizes one conversation; `context` holds its `tools` and `documents`
/// (ChatTemplate::render). Errors name `where` (file:line).
Encoded encode_conversation(const ChatTemplate& tmpl, const tokenizer::Tokenizer& tok,
                            const nlohmann::ordered_json& messages, TrainOn train_on,
                            const std::string& where,
                            const nlohmann::ordered_json& context = nlohmann::ordered_json());

}  // namespace lathe::chat
