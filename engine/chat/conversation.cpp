#include "engine/chat/conversation.h"
#include "engine/util/error.h"

#include <algorithm>
#include <map>

namespace lathe::chat {

bool known_role(const std::string& role) {
    return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

void check_conversation(const nlohmann::ordered_json& messages, const std::string& where,
                        bool need_assistant) {
    if (!messages.is_array() || messages.empty())
        throw Error(where + ": \"messages\" is not a non-empty list of messages");
    bool assistant = false;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        const std::string at = where + ": message " + std::to_string(i + 1);
        if (!m.is_object()) throw Error(at + " is not an object");
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) throw Error(at + " has no \"role\" string");
        const std::string r = role->get<std::string>();
        if (!known_role(r))
            throw Error(at + ": unknown role \"" + r + "\" (known: system, user, assistant, tool)");
        auto content = m.find("content");
        if (content == m.end() || !content->is_string())
            throw Error(at + " (" + r + ") has no \"content\" string");
        assistant = assistant || r == "assistant";
    }
    if (!assistant && need_assistant)
        throw Error(where + ": the conversation has no assistant turn: nothing to train on");
}

namespace {

// The number of leading tokens `prefix` shares with `ids` when tokenized alone.
std::size_t token_boundary(const tokenizer::Tokenizer& tok, const std::string& prefix,
                           const std::vector<int64_t>& ids) {
    const auto p = tok.encode(prefix, false);
    const std::size_t n = std::min(p.size(), ids.size());
    std::size_t k = 0;
    while (k < n && p[k] == ids[k]) ++k;
    return k;
}

}  // namespace

Encoded encode_conversation(const ChatTemplate& tmpl, const tokenizer::Tokenizer& tok,
                            const nlohmann::ordered_json& messages, TrainOn train_on,
                            const std::string& where) {
    check_conversation(messages, where);
    Encoded out;
    try {
        out.text = tmpl.render(messages, false);
    } catch (const Error& e) {
        throw Error(where, e);
    }
    out.ids = tok.encode(out.text, false);
    out.mask.assign(out.ids.size(), train_on == TrainOn::all ? 1 : 0);
    if (train_on == TrainOn::all) return out;

    // Character boundaries of each assistant turn, then their token boundaries (each prefix
    // tokenized once).
    auto prefix_of = [&](std::size_t count, bool generation_prompt) -> std::size_t {
        if (count == 0) return 0;
        nlohmann::ordered_json head(messages.begin(),
                                    messages.begin() + static_cast<std::ptrdiff_t>(count));
        std::string text;
        try {
            text = tmpl.render(head, generation_prompt);
        } catch (const Error& e) {
            throw Error(where + ": rendering the turns before message " +
                            std::to_string(count + (generation_prompt ? 1 : 0)),
                        e);
        }
        if (out.text.compare(0, text.size(), text) != 0)
            throw Error(where + ": " + tmpl.origin() + ": the chat template renders the first " +
                        std::to_string(count) +
                        " message(s) differently on their own than as the start of the whole "
                        "conversation, so the assistant's turns cannot be told apart; train on "
                        "every token instead (--train-on all)");
        return text.size();
    };
    std::map<std::size_t, std::size_t> token_at;  // character boundary -> token boundary
    auto tokens_before = [&](std::size_t chars) {
        auto it = token_at.find(chars);
        if (it != token_at.end()) return it->second;
        const std::size_t t = chars >= out.text.size()
                                  ? out.ids.size()
                                  : token_boundary(tok, out.text.substr(0, chars), out.ids);
        token_at.emplace(chars, t);
        return t;
    };
    for (std::size_t i = 0; i < messages.size(); ++i) {
        if (messages[i]["role"] != "assistant") continue;
        const std::size_t begin = tokens_before(prefix_of(i, true));
        const std::size_t end = tokens_before(prefix_of(i + 1, false));
        for (std::size_t t = begin; t < end && t < out.mask.size(); ++t) out.mask[t] = 1;
    }
    return out;
}

}  // namespace lathe::chat
