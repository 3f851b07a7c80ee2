// A small hand-written byte-level BPE tokenizer.json whose ids can be worked out by hand
// (test_tokenizer, test_prepare).
#pragma once

#include "engine/tokenizer/utf8.h"

#include <string>
#include <vector>

namespace lathe::testing {

// Byte-level vocabulary: the 256 byte characters (GPT-2's table), then merges. 'Ġ' is the space.
inline std::string tiny_tokenizer_json() {
    std::string vocab;
    int id = 0;
    auto add = [&](const std::string& t) {
        vocab += (vocab.empty() ? "" : ",") + std::string("\"") + t + "\":" + std::to_string(id++);
    };
    // Ids 0..255: each byte's character in GPT-2's table (printable bytes are themselves).
    std::vector<std::string> chars(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + n++;
        lathe::tokenizer::append_utf8(chars[b], cp);
    }
    for (int b = 0; b < 256; ++b) {
        std::string c = chars[b];
        if (c == "\"") c = "\\\"";
        if (c == "\\") c = "\\\\";
        add(c);
    }
    add("ab");   // 256
    add("abc");  // 257
    add("\xC4\xA0"
        "a");   // 258: "Ġa"
    add("bc");  // 259
    return R"({"added_tokens":[{"id":260,"content":"<eos>","special":true,"lstrip":true},
               {"id":261,"content":"<s>","special":true}],
        "normalizer":null,
        "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
        "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}},
               {"Sequence":{"id":"A"}}],"special_tokens":{"<s>":{"id":"<s>","ids":[261]}}},
        "decoder":{"type":"ByteLevel"},
        "model":{"type":"BPE","vocab":{)" +
           vocab + R"(},"merges":["b c","a b","ab c","Ġ a"]}})";
}

}  // namespace lathe::testing
