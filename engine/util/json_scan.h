// JSON text walked without parsing: the structural characters outside strings. One scanner for
// the config documents' error positions and depth limit (config/documents.cpp) and the control
// channel's depth limit (protocol/messages.cpp), both checked before nlohmann's recursive parser
// sees the text.
#pragma once

#include <cstddef>
#include <string_view>

namespace lathe::util {

/// Walks JSON text calling on(byte, ch) for each structural character outside strings
/// ({ } [ ] , :) and with '"' at the opening quote of each string; brackets inside strings (and
/// escaped quotes) are skipped. Stops where `on` returns true and returns that byte;
/// text.size() when it never does.
template <class On>
std::size_t scan_json(std::string_view text, On&& on) {
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (ch == '\\') {
                escaped = true;
            } else if (ch == '"') {
                in_string = false;
            }
        } else if (ch == '"') {
            in_string = true;
            if (on(i, ch)) return i;
        } else if (ch == '[' || ch == '{' || ch == ']' || ch == '}' || ch == ',' || ch == ':') {
            if (on(i, ch)) return i;
        }
    }
    return text.size();
}

/// The byte at which JSON text first nests deeper than `max_depth` arrays and objects;
/// text.size() when it never does.
inline std::size_t first_too_deep(std::string_view text, int max_depth) {
    int depth = 0;
    return scan_json(text, [&](std::size_t, char ch) {
        if (ch == '[' || ch == '{') return ++depth > max_depth;
        if (ch == ']' || ch == '}') --depth;
        return false;
    });
}

}  // namespace lathe::util
