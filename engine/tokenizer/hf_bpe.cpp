// Hugging Face tokenizer.json, byte-level BPE: what `tokenizers` does for GPT-2, Llama-3 and
// OLMo2's dolma2 tokenizers, step by step:
//   1. added tokens are split out of the text first (leftmost, then longest);
//   1b. the normalizer (NFC, NFD, NFKC, NFKD or a Sequence of them, as Qwen's NFC) normalises
//      the rest, through utf8proc;
//   2. the pre-tokenizer splits the rest: Split (a regex, PCRE2 with Unicode properties) and
//      ByteLevel (optional prefix space, GPT-2's regex, bytes to GPT-2's printable characters);
//   3. BPE merges each piece by rank (ignore_merges: a piece that is a whole token is kept);
//   4. the post-processor adds BOS/EOS (TemplateProcessing), on request.
// Decoding maps the characters back to bytes (ByteLevel decoder) and reads them as lossy UTF-8.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/kinds.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "engine/util/error.h"
#include "engine/util/hash.h"

#include <pcre2.h>
#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace lathe::tokenizer {

namespace {

using Json = nlohmann::json;

// GPT-2's table: every byte as a printable character.
struct ByteTable {
    std::array<std::string, 256> to_char;
    std::unordered_map<uint32_t, uint8_t> to_byte;
    ByteTable() {
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + n++;
            append_utf8(to_char[b], cp);
            to_byte[cp] = static_cast<uint8_t>(b);
        }
    }
};
const ByteTable& byte_table() {
    static const ByteTable t;
    return t;
}

// Decodes one code point at s[i] (valid UTF-8 assumed); advances i.
uint32_t next_cp(std::string_view s, std::size_t& i) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n && i + k < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += n;
    return cp;
}

const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Regex {
public:
    Regex(const std::string& pattern, const std::string& where) {
        int err = 0;
        PCRE2_SIZE offset = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
        if (!code_) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            throw Error(where + ": the regex does not compile at offset " + std::to_string(offset) +
                        ": " + reinterpret_cast<char*>(msg));
        }
        pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
    }
    ~Regex() { pcre2_code_free(code_); }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    /// [begin, end) of every non-overlapping match, left to right (an empty match advances one
    /// character, as Rust's find_iter does).
    std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const {
        std::vector<std::pair<std::size_t, std::size_t>> out;
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
        std::size_t start = 0;
        while (start <= s.size()) {
            const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(),
                                       start, PCRE2_NO_UTF_CHECK, md, nullptr);
            if (rc < 0) break;
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
            if (ov[1] == ov[0]) {
                if (ov[0] >= s.size()) break;
                std::size_t next = ov[0];
                next_cp(s, next);
                start = next;
                continue;
            }
            out.emplace_back(ov[0], ov[1]);
            start = ov[1];
        }
        pcre2_match_data_free(md);
        return out;
    }

private:
    pcre2_code* code_ = nullptr;
};

enum class SplitBehavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };

struct PreTokenizer {
    enum class Kind { split, byte_level } kind = Kind::byte_level;
    std::shared_ptr<Regex> regex;
    SplitBehavior behavior = SplitBehavior::isolated;
    bool add_prefix_space = false;
    bool use_regex = true;
};

// Splits `piece` by `re` with `behavior`.
std::vector<std::string> split(const std::string& piece, const Regex& re, SplitBehavior behavior) {
    std::vector<std::string> out;
    std::size_t last = 0;
    const auto matches = re.find_all(piece);
    std::string pending;  // merged_with_next: a match waiting for what follows
    auto push = [&](std::string s) {
        if (!s.empty()) out.push_back(std::move(s));
    };
    for (const auto& [b, e] : matches) {
        std::string gap = piece.substr(last, b - last), match = piece.substr(b, e - b);
        switch (behavior) {
            case SplitBehavior::isolated:
                push(gap);
                push(match);
                break;
            case SplitBehavior::removed:
                push(gap);
                break;
            case SplitBehavior::merged_with_previous:
                push(gap + match);
                break;
            case SplitBehavior::merged_with_next:
                push(pending + gap);
                pending = match;
                break;
            case SplitBehavior::contiguous:
                if (gap.empty() && !out.empty() && last == b && last > 0)
                    out.back() += match;
                else {
                    push(gap);
                    push(match);
                }
                break;
        }
        last = e;
    }
    std::string tail = piece.substr(last);
    if (behavior == SplitBehavior::merged_with_next)
        push(pending + tail);
    else
        push(tail);
    return out;
}

struct AddedToken {
    int64_t id = 0;
    std::string content;
    bool special = false, lstrip = false, rstrip = false;
};

bool is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

class HfBpeTokenizer : public Tokenizer {
public:
    HfBpeTokenizer(const std::string& path, const std::string& text) {
        path_ = path;
        Json j;
        try {
            j = Json::parse(text);
        } catch (const std::exception& e) {
            throw Error(path + ": not a tokenizer file (not JSON: " + e.what() + ")");
        }
        auto fail = [&](const std::string& why) { return Error(path + ": " + why); };
        if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
            throw fail("not a Hugging Face tokenizer.json (no \"model\" object)");
        const Json& model = j["model"];
        const std::string type = model.value("type", "BPE");
        if (type != "BPE")
            throw fail("model.type is \"" + type + "\"; Lathe reads byte-level BPE tokenizers");
        for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (model.contains(k) && !model[k].is_null() && model[k] != "")
                throw fail(std::string("model.") + k + " is not supported");
        if (model.value("byte_fallback", false)) throw fail("model.byte_fallback is not supported");
        if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0)
            throw fail("model.dropout is not supported");
        ignore_merges_ = model.value("ignore_merges", false);
        if (!model.contains("vocab") || !model["vocab"].is_object())
            throw fail("model.vocab is not an object");
        for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
            if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0)
                throw fail("model.vocab[\"" + it.key() + "\"] is not an id");
            const int64_t id = it.value().get<int64_t>();
            vocab_[it.key()] = id;
            set_token(id, it.key());
        }
        if (!model.contains("merges") || !model["merges"].is_array())
            throw fail("model.merges is not a list");
        int64_t rank = 0;
        for (const auto& m : model["merges"]) {
            std::string a, b;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const auto sp = s.find(' ');
                if (sp == std::string::npos) throw fail("merge \"" + s + "\" is not \"a b\"");
                a = s.substr(0, sp);
                b = s.substr(sp + 1);
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                a = m[0].get<std::string>();
                b = m[1].get<std::string>();
            } else {
                throw fail("merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
            }
            const auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
            if (ia == vocab_.end() || ib == vocab_.end() || iab == vocab_.end())
                throw fail("merge " + std::to_string(rank) + " (\"" + a + "\", \"" + b +
                           "\") names tokens that are not in the vocabulary");
            merges_.emplace(pair_key(ia->second, ib->second), std::make_pair(rank, iab->second));
            ++rank;
        }
        if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
            for (const auto& t : j["added_tokens"]) {
                AddedToken a;
                a.id = t.value("id", int64_t{-1});
                a.content = t.value("content", std::string());
                a.special = t.value("special", false);
                a.lstrip = t.value("lstrip", false);
                a.rstrip = t.value("rstrip", false);
                if (a.id < 0 || a.content.empty())
                    throw fail("an added token has no id or content");
                set_token(a.id, a.content);
                special_[a.id] = a.special;
                added_.push_back(a);
            }
        }
        parse_normalizer(j.value("normalizer", Json()), fail);
        parse_pre_tokenizer(j.value("pre_tokenizer", Json()), path);
        bool byte_level = false;
        for (const auto& p : pre_)
            byte_level = byte_level || p.kind == PreTokenizer::Kind::byte_level;
        if (!byte_level) throw fail("the pre_tokenizer has no ByteLevel step: not byte-level BPE");
        const Json dec = j.value("decoder", Json());
        if (!dec.is_null() && dec.value("type", "") != "ByteLevel")
            throw fail("decoder \"" + dec.value("type", std::string("?")) +
                       "\" is not implemented (byte-level BPE decodes with ByteLevel)");
        parse_post_processor(j.value("post_processor", Json()), path);
        for (const auto& a : added_) {
            if (!a.special) continue;
            for (const char* name :
                 {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>"})
                if (a.content == name && !eos_) eos_ = a.id;
        }
        // The longest added tokens first, so that at one position the longest wins.
        std::sort(added_.begin(), added_.end(),
                  [](const auto& x, const auto& y) { return x.content.size() > y.content.size(); });
    }

    std::vector<int64_t> encode(std::string_view text, bool add_special) const override {
        if (auto bad = first_invalid_utf8(text))
            throw Error("text is not valid UTF-8 at byte " + std::to_string(*bad));
        std::vector<int64_t> out;
        if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
        std::size_t pos = 0;
        while (pos < text.size()) {
            // The next added token: leftmost, then longest.
            std::size_t best = std::string_view::npos;
            const AddedToken* tok = nullptr;
            for (const auto& a : added_) {
                const std::size_t f = text.find(a.content, pos);
                if (f != std::string_view::npos && f < best) {
                    best = f;
                    tok = &a;
                }
            }
            std::size_t seg_end = tok ? best : text.size();
            std::size_t after = tok ? best + tok->content.size() : text.size();
            if (tok && tok->lstrip)
                while (seg_end > pos && is_space(static_cast<unsigned char>(text[seg_end - 1])))
                    --seg_end;
            if (normalizers_.empty())
                encode_segment(text.substr(pos, seg_end - pos), out);
            else
                encode_segment(normalize(text.substr(pos, seg_end - pos)), out);
            if (!tok) break;
            out.push_back(tok->id);
            if (tok->rstrip)
                while (after < text.size() && is_space(static_cast<unsigned char>(text[after])))
                    ++after;
            pos = after;
        }
        if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
        return out;
    }

    std::string decode(const std::vector<int64_t>& ids, bool skip_special) const override {
        const auto& table = byte_table();
        std::string bytes;
        for (auto id : ids) {
            if (id < 0 || id >= static_cast<int64_t>(tokens_.size()) || !has_token_[id])
                throw Error("token id " + std::to_string(id) + " is not in the vocabulary of " +
                            path_);
            auto sp = special_.find(id);
            if (skip_special && sp != special_.end() && sp->second) continue;
            const std::string& t = tokens_[id];
            // Each character back to its byte; a token with a character outside the table (an
            // added token) is taken as it is, as tokenizers' ByteLevel decoder does.
            std::string mapped;
            bool ok = true;
            for (std::size_t i = 0; i < t.size() && ok;) {
                const uint32_t cp = next_cp(t, i);
                auto it = table.to_byte.find(cp);
                if (it == table.to_byte.end())
                    ok = false;
                else
                    mapped += static_cast<char>(it->second);
            }
            bytes += ok ? mapped : t;
        }
        return lossy_utf8(bytes);
    }

    int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
    std::optional<int64_t> eos_id() const override { return eos_; }
    std::string kind() const override { return "byte-level BPE (tokenizer.json)"; }
    std::string file_name() const override { return "tokenizer.json"; }
    std::optional<int64_t> bos_id() const override { return bos_; }

    void set_id(std::string id) { id_ = std::move(id); }

private:
    static uint64_t pair_key(int64_t a, int64_t b) {
        return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b);
    }

    void set_token(int64_t id, const std::string& t) {
        if (id >= static_cast<int64_t>(tokens_.size())) {
            tokens_.resize(id + 1);
            has_token_.resize(id + 1, false);
        }
        tokens_[id] = t;
        has_token_[id] = true;
    }

    // tokenizers' Unicode normalizers, each as utf8proc options.
    template <class Fail>
    void parse_normalizer(const Json& n, const Fail& fail) {
        if (n.is_null()) return;
        const std::string type = n.value("type", std::string("?"));
        if (type == "Sequence") {
            for (const auto& m : n.value("normalizers", Json::array())) parse_normalizer(m, fail);
            return;
        }
        const int stable = UTF8PROC_STABLE;
        if (type == "NFC")
            normalizers_.push_back(stable | UTF8PROC_COMPOSE);
        else if (type == "NFD")
            normalizers_.push_back(stable | UTF8PROC_DECOMPOSE);
        else if (type == "NFKC")
            normalizers_.push_back(stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
        else if (type == "NFKD")
            normalizers_.push_back(stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
        else
            throw fail("normalizer \"" + type +
                       "\" is not implemented (Lathe has NFC, NFD, NFKC, NFKD and Sequence)");
    }

    std::string normalize(std::string_view text) const {
        std::string s(text);
        for (int options : normalizers_) {
            utf8proc_uint8_t* out = nullptr;
            const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                        static_cast<utf8proc_ssize_t>(s.size()), &out,
                                        static_cast<utf8proc_option_t>(options));
            if (n < 0) throw Error(std::string("Unicode normalisation: ") + utf8proc_errmsg(n));
            s.assign(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
            std::free(out);
        }
        return s;
    }

    void parse_pre_tokenizer(const Json& p, const std::string& path) {
        if (p.is_null()) return;
        const std::string type = p.value("type", "");
        if (type == "Sequence") {
            for (const auto& q : p.value("pretokenizers", Json::array()))
                parse_pre_tokenizer(q, path);
            return;
        }
        PreTokenizer t;
        if (type == "ByteLevel") {
            t.kind = PreTokenizer::Kind::byte_level;
            t.add_prefix_space = p.value("add_prefix_space", false);
            t.use_regex = p.value("use_regex", true);
            if (t.use_regex) t.regex = std::make_shared<Regex>(kGpt2Pattern, path);
        } else if (type == "Split") {
            t.kind = PreTokenizer::Kind::split;
            const Json pat = p.value("pattern", Json());
            std::string pattern;
            if (pat.contains("Regex") && pat["Regex"].is_string()) {
                pattern = pat["Regex"].get<std::string>();
            } else if (pat.contains("String") && pat["String"].is_string()) {
                // A literal: quote every character for PCRE2.
                pattern = "\\Q" + pat["String"].get<std::string>() + "\\E";
            } else {
                throw Error(path + ": pre_tokenizer Split has no Regex or String pattern");
            }
            if (p.value("invert", false))
                throw Error(path + ": pre_tokenizer Split with invert is not implemented");
            const std::string b = p.value("behavior", "Isolated");
            static const std::map<std::string, SplitBehavior> behaviors = {
                {"Isolated", SplitBehavior::isolated},
                {"Removed", SplitBehavior::removed},
                {"MergedWithPrevious", SplitBehavior::merged_with_previous},
                {"MergedWithNext", SplitBehavior::merged_with_next},
                {"Contiguous", SplitBehavior::contiguous}};
            auto it = behaviors.find(b);
            if (it == behaviors.end())
                throw Error(path + ": pre_tokenizer Split behavior \"" + b + "\" is unknown");
            t.behavior = it->second;
            t.regex = std::make_shared<Regex>(pattern, path + ": pre_tokenizer Split");
        } else {
            throw Error(path + ": pre_tokenizer \"" + type +
                        "\" is not implemented (Lathe has Split, ByteLevel and Sequence)");
        }
        pre_.push_back(std::move(t));
    }

    void parse_post_processor(const Json& p, const std::string& path) {
        if (p.is_null()) return;
        const std::string type = p.value("type", "");
        if (type == "Sequence") {
            for (const auto& q : p.value("processors", Json::array()))
                parse_post_processor(q, path);
            return;
        }
        if (type == "ByteLevel") return;  // offsets only
        if (type != "TemplateProcessing")
            throw Error(path + ": post_processor \"" + type + "\" is not implemented");
        const Json specials = p.value("special_tokens", Json::object());
        bool seen_sequence = false;
        for (const auto& item : p.value("single", Json::array())) {
            if (item.contains("Sequence")) {
                seen_sequence = true;
                continue;
            }
            if (!item.contains("SpecialToken")) continue;
            const std::string name = item["SpecialToken"].value("id", "");
            if (!specials.contains(name) || !specials[name].contains("ids"))
                throw Error(path + ": post_processor names special token \"" + name +
                            "\" without ids");
            for (const auto& id : specials[name]["ids"]) {
                (seen_sequence ? suffix_ : prefix_).push_back(id.get<int64_t>());
                if (!seen_sequence && !bos_) bos_ = id.get<int64_t>();
            }
        }
    }

    void encode_segment(std::string_view text, std::vector<int64_t>& out) const {
        if (text.empty()) return;
        std::vector<std::string> pieces{std::string(text)};
        for (const auto& p : pre_) {
            std::vector<std::string> next;
            for (auto& piece : pieces) {
                if (p.kind == PreTokenizer::Kind::byte_level) {
                    if (p.add_prefix_space && piece[0] != ' ') piece.insert(0, " ");
                    if (!p.use_regex) {
                        next.push_back(std::move(piece));
                        continue;
                    }
                }
                for (auto& s :
                     split(piece, *p.regex,
                           p.kind == PreTokenizer::Kind::byte_level ? SplitBehavior::isolated
                                                                    : p.behavior))
                    next.push_back(std::move(s));
            }
            pieces = std::move(next);
        }
        for (const auto& piece : pieces) bpe(piece, out);
    }

    // One pre-tokenized piece (raw bytes) through the merges.
    void bpe(const std::string& piece, std::vector<int64_t>& out) const {
        {
            std::lock_guard<std::mutex> lock(cache_mutex_);
            auto it = cache_.find(piece);
            if (it != cache_.end()) {
                out.insert(out.end(), it->second.begin(), it->second.end());
                return;
            }
        }
        const auto& table = byte_table();
        std::vector<int64_t> syms;
        std::string word;
        for (unsigned char c : piece) word += table.to_char[c];
        if (auto whole = vocab_.find(word); ignore_merges_ && whole != vocab_.end()) {
            syms.push_back(whole->second);
        } else {
            for (unsigned char c : piece) {
                auto it = vocab_.find(table.to_char[c]);
                if (it == vocab_.end())
                    throw Error(path_ + ": byte " + std::to_string(c) +
                                " has no token (a byte-level vocabulary holds all 256)");
                syms.push_back(it->second);
            }
            merge_all(syms);
        }
        out.insert(out.end(), syms.begin(), syms.end());
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_.size() > 200000) cache_.clear();
        cache_.emplace(piece, std::move(syms));
    }

    // Applies the merges to `syms` by rank, the lowest first and the leftmost of equal pairs
    // first, as `tokenizers` does (word.rs merge_all). Rescanning every pair after each merge is
    // quadratic (200,000 x "a": a minute); instead a heap holds the pairs as (rank, position of
    // the left symbol) over a linked list of symbols, and an entry whose pair has changed since
    // it was pushed is skipped when it comes up. Every pair the list holds has an entry, and list
    // order is position order, so the entry that comes up valid is the lowest-ranked, leftmost
    // pair, the one a rescan would find.
    void merge_all(std::vector<int64_t>& syms) const {
        const std::size_t n = syms.size();
        if (n < 2) return;
        constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
        std::vector<std::size_t> prev(n), next(n);
        for (std::size_t i = 0; i < n; ++i) {
            prev[i] = i == 0 ? kNone : i - 1;
            next[i] = i + 1 == n ? kNone : i + 1;
        }
        std::vector<bool> gone(n, false);
        using Entry = std::pair<int64_t, std::size_t>;  // (rank, left position)
        std::vector<Entry> heap;
        const auto later = std::greater<Entry>();
        auto rank_at = [&](std::size_t i) -> const std::pair<int64_t, int64_t>* {
            if (next[i] == kNone) return nullptr;
            const auto it = merges_.find(pair_key(syms[i], syms[next[i]]));
            return it == merges_.end() ? nullptr : &it->second;
        };
        auto push = [&](std::size_t i) {
            if (const auto* m = rank_at(i)) {
                heap.emplace_back(m->first, i);
                std::push_heap(heap.begin(), heap.end(), later);
            }
        };
        for (std::size_t i = 0; i + 1 < n; ++i) push(i);
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            const auto [rank, i] = heap.back();
            heap.pop_back();
            if (gone[i]) continue;
            // The pair at i now may be another one (either side merged since): its rank says.
            const auto* m = rank_at(i);
            if (!m || m->first != rank) continue;
            const std::size_t right = next[i];
            syms[i] = m->second;
            gone[right] = true;
            next[i] = next[right];
            if (next[i] != kNone) prev[next[i]] = i;
            if (prev[i] != kNone) push(prev[i]);
            push(i);
        }
        std::size_t kept = 0;
        for (std::size_t i = 0; i < n; ++i)
            if (!gone[i]) syms[kept++] = syms[i];
        syms.resize(kept);
    }

    std::unordered_map<std::string, int64_t> vocab_;
    std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges_;  // pair -> (rank, id)
    std::vector<std::string> tokens_;
    std::vector<bool> has_token_;
    std::unordered_map<int64_t, bool> special_;
    std::vector<AddedToken> added_;
    std::vector<PreTokenizer> pre_;
    std::vector<int> normalizers_;  // utf8proc options, applied in order
    std::vector<int64_t> prefix_, suffix_;
    std::optional<int64_t> bos_, eos_;
    bool ignore_merges_ = false;
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_hf_bpe(const std::string& path, const std::string& text) {
    auto t = std::make_unique<HfBpeTokenizer>(path, text);
    t->set_id(file_id_of(text));
    return t;
}

}  // namespace lathe::tokenizer
