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

// The tokens that overlap a {% generation %} block are trained, as transformers'
// return_assistant_tokens_mask does.
void mask_generation_blocks(const ChatTemplate& tmpl, const tokenizer::Tokenizer& tok,
                            const nlohmann::ordered_json& messages,
                            const nlohmann::ordered_json& context, const std::string& where,
                            Encoded& out) {
    ChatTemplate::Marked marked;
    try {
        marked = tmpl.render_marked(messages, false, context);
    } catch (const Error& e) {
        throw Error(where, e);
    }
    for (const auto& [begin, end] : marked.generation) {
        if (begin >= end) continue;
        const std::size_t first =
            begin == 0 ? 0 : token_boundary(tok, out.text.substr(0, begin), out.ids);
        std::size_t last = out.ids.size();
        if (end < out.text.size()) {
            const auto p = tok.encode(out.text.substr(0, end), false);
            last = 0;
            while (last < p.size() && last < out.ids.size() && p[last] == out.ids[last]) ++last;
            // A token that straddles the block's end overlaps it: trained.
            if (last < p.size()) ++last;
        }
        for (std::size_t t = first; t < last && t < out.mask.size(); ++t) out.mask[t] = 1;
    }
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

    // A template with {% generation %} blocks says itself what the assistant wrote.
    if (tmpl.has_generation_blocks()) {
        mask_generation_blocks(tmpl, tok, messages, context, where, out);
        return out;
    }

    // Character boundaries of each assistant turn, then their token boundaries (each prefix
    // tokenized once). A turn starts where the conversation rendered up to it with the generation
    // prompt ends, and ends where the conversation rendered up to and including it ends. Some
    // templates render a prefix differently from the start of the whole (a generation prompt that
    // opens a <think> block the finished turn closes or drops, an end-of-text token only at the
    // very end, earlier turns' reasoning dropped): then the turn starts where that prefix and the
    // whole agree, and ends where they agree after its content; a turn whose content is not
    // inside what was found cannot be told apart, and the line is refused.
    auto render_head = [&](std::size_t count, bool generation_prompt) {
        nlohmann::ordered_json head(messages.begin(),
                                    messages.begin() + static_cast<std::ptrdiff_t>(count));
        try {
            return tmpl.render(head, generation_prompt, context);
        } catch (const Error& e) {
            throw Error(where + ": rendering the turns before message " +
                            std::to_string(count + (generation_prompt ? 1 : 0)),
                        e);
        }
    };
    auto agreement = [&](const std::string& text) {
        std::size_t n = 0;
        while (n < text.size() && n < out.text.size() && text[n] == out.text[n]) ++n;
        return n;
    };
    std::size_t previous_end = 0;
    auto turn_chars = [&](std::size_t i) -> std::pair<std::size_t, std::size_t> {
        const std::string head = i == 0 ? std::string() : render_head(i, true);
        const std::size_t begin = std::max(previous_end, agreement(head));
        const std::string with = render_head(i + 1, false);
        std::size_t end = agreement(with);
        if (begin == head.size() && end == with.size()) {  // both prefixes of the whole
            previous_end = end;
            return {begin, end};
        }
        // The content as templates write it (most trim it).
        std::string content = messages[i].contains("content") && messages[i]["content"].is_string()
                                  ? messages[i]["content"].get<std::string>()
                                  : std::string();
        const auto first = content.find_first_not_of(" \t\r\n");
        content = first == std::string::npos
                      ? std::string()
                      : content.substr(first, content.find_last_not_of(" \t\r\n") - first + 1);
        if (end < with.size() && !content.empty()) {
            // The turn as the last one renders differently from inside the whole: it ends where
            // the text after its content agrees.
            const auto at = out.text.find(content, begin);
            const auto in_with = with.rfind(content);
            if (at != std::string::npos && in_with != std::string::npos &&
                at + content.size() > end) {
                std::size_t k = 0;
                const std::size_t a = at + content.size(), b = in_with + content.size();
                while (b + k < with.size() && a + k < out.text.size() &&
                       with[b + k] == out.text[a + k])
                    ++k;
                end = a + k;
            }
        }
        if (end < begin || (!content.empty() && out.text.find(content, begin) >= end))
            throw Unmaskable(
                where + ": " + tmpl.origin() + ": the chat template renders the first " +
                std::to_string(i + 1) +
                " message(s) differently on their own than as the start of the whole "
                "conversation, so the assistant's turn " +
                std::to_string(i + 1) +
                " cannot be told apart; give a template with {% generation %} blocks "
                "(--chat-template), skip such lines (--unmaskable skip) or train on every "
                "token (--train-on all)");
        previous_end = end;
        return {begin, end};
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
        const auto [first, last] = turn_chars(i);
        const std::size_t begin = tokens_before(first);
        const std::size_t end = tokens_before(last);
        for (std::size_t t = begin; t < end && t < out.mask.size(); ++t) out.mask[t] = 1;
    }
    return out;
}

}  // namespace lathe::chat
