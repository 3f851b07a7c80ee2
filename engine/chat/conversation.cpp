#include "engine/chat/conversation.h"
#include "engine/util/error.h"

#include <algorithm>
#include <map>

namespace lathe::chat {

namespace {
constexpr const char* kRoles[] = {"system", "developer", "user",    "assistant",
                                  "tool",   "ipython",   "function"};
}  // namespace

bool known_role(const std::string& role) {
    return std::any_of(std::begin(kRoles), std::end(kRoles),
                       [&](const char* r) { return role == r; });
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
        if (!known_role(r)) {
            std::string known;
            for (const char* k : kRoles) known += std::string(known.empty() ? "" : ", ") + k;
            throw Error(at + ": unknown role \"" + r + "\" (known: " + known + ")");
        }
        auto content = m.find("content");
        if (content != m.end() && !content->is_string() && !content->is_null()) {
            if (!content->is_array())
                throw Error(at + " (" + r +
                            "): \"content\" is neither a string, null nor a list of parts");
            for (std::size_t k = 0; k < content->size(); ++k)
                if (!(*content)[k].is_object())
                    throw Error(at + " (" + r + "): content part " + std::to_string(k + 1) +
                                " is not an object ({\"type\": \"text\", \"text\": ...})");
        }
        assistant = assistant || r == "assistant";
    }
    if (!assistant && need_assistant)
        throw Error(where + ": the conversation has no assistant turn: nothing to train on");
}

void check_context(const nlohmann::ordered_json& context, const std::string& where) {
    if (context.is_null()) return;
    if (!context.is_object()) throw Error(where + ": the template context is not an object");
    if (auto t = context.find("tools"); t != context.end() && !t->is_null()) {
        if (!t->is_array()) throw Error(where + ": \"tools\" is not a list of tool schemas");
        for (std::size_t k = 0; k < t->size(); ++k)
            if (!(*t)[k].is_object())
                throw Error(where + ": tool " + std::to_string(k + 1) + " is not an object");
    }
    if (auto d = context.find("documents"); d != context.end() && !d->is_null() && !d->is_array())
        throw Error(where + ": \"documents\" is not a list");
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
                            const std::string& where, const nlohmann::ordered_json& context) {
    check_conversation(messages, where);
    check_context(context, where);
    Encoded out;
    try {
        out.text = tmpl.render(messages, false, context);
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
            text = tmpl.render(head, generation_prompt, context);
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
