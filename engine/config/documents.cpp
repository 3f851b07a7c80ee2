// JSON/YAML documents: parsing with positions, writing, and command-line overrides.
#include "engine/config/io.h"

#include "engine/util/json_scan.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

namespace lathe::config {

Format format_for_path(const std::string& path) {
    auto dot = path.rfind('.');
    std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return (ext == "yaml" || ext == "yml") ? Format::yaml : Format::json;
}

namespace {

// Line and column (from 1; the column counts bytes) of byte offsets in a text. Indexed once, as
// a document can have hundreds of thousands of places to report.
class LineIndex {
public:
    explicit LineIndex(const std::string& text) : size_(text.size()) {
        for (std::size_t i = 0; i < text.size(); ++i)
            if (text[i] == '\n') starts_.push_back(i + 1);
    }
    std::pair<std::size_t, std::size_t> line_col(std::size_t byte) const {
        byte = std::min(byte, size_);
        const auto line = static_cast<std::size_t>(
            std::upper_bound(starts_.begin(), starts_.end(), byte) - starts_.begin());
        return {line, byte - starts_[line - 1] + 1};
    }
    std::string at(const std::string& origin, std::size_t byte) const {
        const auto [line, col] = line_col(byte);
        return origin + ":" + std::to_string(line) + ":" + std::to_string(col);
    }

private:
    std::size_t size_;
    std::vector<std::size_t> starts_{0};
};

std::string at_byte(const std::string& origin, const std::string& text, std::size_t byte) {
    return LineIndex(text).at(origin, byte);
}

std::string at_mark(const std::string& origin, const YAML::Mark& mark) {
    if (mark.is_null()) return origin;
    return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string too_deep_message() {
    return "nested more than " + std::to_string(kMaxDocumentDepth) + " levels deep";
}

std::string too_large_message(std::size_t bytes) {
    return "too large (" + std::to_string(bytes) + " bytes): a config is at most " +
           std::to_string(kMaxDocumentBytes >> 20) + " MiB";
}

// Text as an error message shows it: cut when long, at a character boundary (the message may
// travel as JSON, which must be valid UTF-8).
std::string cut(const std::string& s) {
    if (s.size() <= 40) return s;
    std::size_t end = 37;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
    return s.substr(0, end) + "...";
}

std::string shown(const std::string& s) {
    return '"' + cut(s) + '"';
}

// The path of a value in the style of from_json's issues: "trainer.steps_to_skip[0].start".
std::string join_path(const std::vector<std::string>& parts) {
    std::string path;
    for (const auto& p : parts) path += (path.empty() || p.front() == '[' ? "" : ".") + p;
    return path;
}

// The byte at which JSON text first nests deeper than kMaxDocumentDepth (the parser stopped
// there).
std::size_t first_too_deep_byte(const std::string& text) {
    const std::size_t at = util::first_too_deep(text, kMaxDocumentDepth);
    return at < text.size() ? at : 0;
}

// A key met twice in one object: the object is the `container`-th opened in the text (objects
// and arrays counted together, from 0), the keys the `first`-th and `again`-th of its keys.
struct DuplicateKey {
    std::size_t container = 0, first = 0, again = 0;
    std::string key, path;  // path: the object's, "" at the top level
};

// The bytes of the opening quotes of each duplicate's two keys, in one pass (a flat object of
// 400,000 equal keys is 400,000 duplicates).
std::vector<std::pair<std::size_t, std::size_t>> duplicate_key_bytes(
    const std::string& text, const std::vector<DuplicateKey>& duplicates) {
    std::map<std::pair<std::size_t, std::size_t>, std::size_t> bytes;  // (container, key) -> byte
    for (const auto& d : duplicates) {
        bytes.emplace(std::make_pair(d.container, d.first), 0);
        bytes.emplace(std::make_pair(d.container, d.again), 0);
    }
    struct Open {
        std::size_t container = 0, keys = 0;
        bool object = false, expect_key = false;
    };
    std::vector<Open> open;
    std::size_t containers = 0;
    util::scan_json(text, [&](std::size_t i, char ch) {
        if (ch == '{' || ch == '[') {
            open.push_back({containers++, 0, ch == '{', ch == '{'});
        } else if (ch == '}' || ch == ']') {
            if (!open.empty()) open.pop_back();
        } else if (ch == ',') {
            if (!open.empty() && open.back().object) open.back().expect_key = true;
        } else if (ch == '"' && !open.empty() && open.back().expect_key) {
            Open& o = open.back();
            o.expect_key = false;
            auto it = bytes.find({o.container, o.keys++});
            if (it != bytes.end()) it->second = i;
        }
        return false;
    });
    std::vector<std::pair<std::size_t, std::size_t>> out;
    out.reserve(duplicates.size());
    for (const auto& d : duplicates)
        out.emplace_back(bytes[{d.container, d.first}], bytes[{d.container, d.again}]);
    return out;
}

// "model: duplicate key "d_model" (lines 2 and 4)": the object's path, the key, and where both
// are (the issue itself is placed at the second).
std::string duplicate_key_message(const std::string& path, const std::string& key,
                                  std::pair<std::size_t, std::size_t> first,
                                  std::pair<std::size_t, std::size_t> again) {
    const std::string where =
        first.first == again.first
            ? "twice on line " + std::to_string(first.first) + ", columns " +
                  std::to_string(first.second) + " and " + std::to_string(again.second)
            : "lines " + std::to_string(first.first) + " and " + std::to_string(again.first);
    return (path.empty() ? "" : path + ": ") + "duplicate key " + shown(key) + " (" + where + ")";
}

// Builds a document from nlohmann's SAX events instead of Json::parse, to stop at
// kMaxDocumentDepth before a deep document exists (its recursive copy and destruction overflow
// the stack), to say where a number out of range is (Json::parse throws that without a
// position), and to find keys given twice in an object (Json::parse keeps the last silently).
class JsonBuilder {
public:
    Json root;
    bool too_deep = false;
    std::size_t error_byte = 0;  ///< where parsing stopped on an error other than depth
    std::string error;
    std::vector<DuplicateKey> duplicates;

    bool null() { return add(nullptr); }
    bool boolean(bool v) { return add(v); }
    bool number_integer(Json::number_integer_t v) { return add(v); }
    bool number_unsigned(Json::number_unsigned_t v) { return add(v); }
    bool number_float(Json::number_float_t v, const Json::string_t&) { return add(v); }
    bool string(Json::string_t& v) { return add(std::move(v)); }
    bool binary(Json::binary_t& v) { return add(Json::binary(std::move(v))); }
    bool start_object(std::size_t) { return open(Json::object()); }
    bool start_array(std::size_t) { return open(Json::array()); }
    bool key(Json::string_t& k) {
        Level& l = levels_.back();
        const std::size_t index = l.key_count++;
        const auto [first, fresh] = l.keys.emplace(k, index);
        l.repeated = !fresh;
        if (!fresh) {
            std::vector<std::string> parts = path_parts();
            parts.pop_back();  // the previous key's: the object's path is what comes before
            duplicates.push_back({l.container, first->second, index, k, join_path(parts)});
        }
        l.key = std::move(k);
        return true;
    }
    bool end_object() {
        levels_.pop_back();
        return true;
    }
    bool end_array() {
        levels_.pop_back();
        return true;
    }
    bool parse_error(std::size_t byte, const std::string& token, const Json::exception& e) {
        if (e.id == 406) {  // out_of_range.406: a number beyond a double, 1e400
            error_byte = byte >= token.size() ? byte - token.size() : 0;
            const std::string where = join_path(path_parts());
            error = (where.empty() ? "" : where + ": ") + "number " + cut(token) +
                    " is out of range (a double holds up to about 1.8e308)";
            return false;
        }
        error_byte = byte == 0 ? 0 : byte - 1;
        error = e.what();
        // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1,
        // column 2: ";
        auto colon = error.find(": ");
        if (colon != std::string::npos) error = error.substr(colon + 2);
        error = "malformed JSON: " + error;
        return false;
    }

private:
    struct Level {
        Json* node;
        std::size_t container = 0;  // objects and arrays opened before this one
        std::string key;            // objects: the key of the value being read
        std::size_t key_count = 0;  // objects: the keys so far
        bool repeated = false;      // objects: whether `key` came before
        std::unordered_map<std::string, std::size_t> keys;  // objects: key -> its number
    };
    std::vector<Level> levels_;
    std::size_t containers_ = 0;

    Json* place(Json&& v) {
        if (levels_.empty()) {
            root = std::move(v);
            return &root;
        }
        Level& l = levels_.back();
        if (l.node->is_array()) {
            l.node->push_back(std::move(v));
            return &l.node->back();
        }
        // ordered_json looks keys up one by one: inserting each key of a flat object of 400,000
        // keys that way takes minutes. A new key is appended; a repeated one (an error, reported
        // once parsing is done) replaces the value.
        auto& object = l.node->get_ref<Json::object_t&>();
        if (!l.repeated) {
            object.emplace_back(l.key, std::move(v));
            return &object.back().second;
        }
        Json& slot = (*l.node)[l.key];
        slot = std::move(v);
        return &slot;
    }
    bool add(Json&& v) {
        place(std::move(v));
        return true;
    }
    bool open(Json&& container) {
        if (levels_.size() >= static_cast<std::size_t>(kMaxDocumentDepth)) {
            too_deep = true;
            return false;
        }
        Json* node = place(std::move(container));
        levels_.push_back({node, containers_++, {}, 0, false, {}});
        return true;
    }
    // The keys and [indices] down to the value being read.
    std::vector<std::string> path_parts() const {
        std::vector<std::string> parts;
        for (std::size_t i = 0; i < levels_.size(); ++i) {
            const Json& n = *levels_[i].node;
            if (n.is_object()) {
                parts.push_back(levels_[i].key);
            } else {
                // Outer arrays hold the open value as their last element; the innermost one has
                // not stored it yet.
                const std::size_t index = n.size() - (i + 1 < levels_.size() ? 1 : 0);
                parts.push_back("[" + std::to_string(index) + "]");
            }
        }
        return parts;
    }
};

Json parse_json(const std::string& text, const std::string& origin, std::vector<Issue>& issues) {
    JsonBuilder builder;
    if (!Json::sax_parse(text, &builder)) {
        if (builder.too_deep) {
            issues.push_back(
                {at_byte(origin, text, first_too_deep_byte(text)), too_deep_message()});
        } else {
            issues.push_back({at_byte(origin, text, builder.error_byte), builder.error});
        }
        return nullptr;
    }
    if (builder.duplicates.empty()) return std::move(builder.root);
    const auto bytes = duplicate_key_bytes(text, builder.duplicates);
    const LineIndex lines(text);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const DuplicateKey& d = builder.duplicates[i];
        issues.push_back({lines.at(origin, bytes[i].second),
                          duplicate_key_message(d.path, d.key, lines.line_col(bytes[i].first),
                                                lines.line_col(bytes[i].second))});
    }
    return nullptr;
}

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
// as nlohmann's parser requires of JSON: yaml-cpp passes any byte through, and the document
// would throw when written.
bool valid_utf8(const std::string& s) {
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = 1;
        std::uint32_t cp = c;
        if (c >= 0x80) {
            if ((c & 0xE0) == 0xC0) {
                len = 2;
                cp = c & 0x1F;
            } else if ((c & 0xF0) == 0xE0) {
                len = 3;
                cp = c & 0x0F;
            } else if ((c & 0xF8) == 0xF0) {
                len = 4;
                cp = c & 0x07;
            } else {
                return false;
            }
            if (i + len > s.size()) return false;
            for (std::size_t k = 1; k < len; ++k) {
                const auto cc = static_cast<unsigned char>(s[i + k]);
                if ((cc & 0xC0) != 0x80) return false;
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        }
        i += len;
    }
    return true;
}

// YAML 1.2 core-schema numbers, as ^[-+]?[0-9]+$ (integer) and
// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ (real), written out: std::regex
// recurses once per character and overflows the stack on a long scalar.
enum class NumberKind { none, integer, real };
NumberKind number_kind(const std::string& s) {
    const std::size_t n = s.size();
    std::size_t i = 0;
    auto digits = [&] {
        const std::size_t start = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
        return i - start;
    };
    auto sign = [&] {
        if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    };
    sign();
    const std::size_t whole = digits();
    bool real = false;
    if (i < n && s[i] == '.') {
        ++i;
        real = true;
        if (digits() == 0 && whole == 0) return NumberKind::none;
    } else if (whole == 0) {
        return NumberKind::none;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        real = true;
        sign();
        if (digits() == 0) return NumberKind::none;
    }
    if (i != n) return NumberKind::none;
    return real ? NumberKind::real : NumberKind::integer;
}

// Converts yaml-cpp's node graph to JSON. An alias shares the node of its anchor, so the document
// it stands for can be exponentially larger than the text (a 600-byte alias bomb stands for
// gigabytes): check_size() first counts values and depth without building anything, and throws
// Limit at the limits. Duplicate keys (which yaml-cpp keeps, and JSON would resolve silently) and
// numbers out of range are collected as issues.
class YamlConverter {
public:
    struct Limit {
        Issue issue;
    };

    YamlConverter(std::string origin, std::vector<Issue>& issues)
        : origin_(std::move(origin)), issues_(issues) {}

    // Counting is several times cheaper than building (and destroying) the values, so an alias
    // bomb is refused in a fraction of a second.
    void check_size(const YAML::Node& n, std::size_t depth = 0) {
        if (++values_ > kMaxDocumentValues) {
            throw Limit{{origin_, "too large: more than " + std::to_string(kMaxDocumentValues) +
                                      " values (counting each use of a YAML alias)"}};
        }
        if (n.IsSequence() || n.IsMap()) {
            if (depth >= static_cast<std::size_t>(kMaxDocumentDepth))
                throw Limit{{at_mark(origin_, n.Mark()), too_deep_message()}};
            const bool map = n.IsMap();
            for (const auto& e : n) {
                if (map) {
                    check_size(e.second, depth + 1);
                } else {
                    check_size(e, depth + 1);
                }
            }
        }
    }

    Json convert(const YAML::Node& n) {
        switch (n.Type()) {
            case YAML::NodeType::Null:
            case YAML::NodeType::Undefined:
                return nullptr;
            case YAML::NodeType::Scalar:
                return scalar(n);
            case YAML::NodeType::Sequence: {
                check_depth(n);
                Json a = Json::array();
                std::size_t index = 0;
                for (const auto& e : n) {
                    path_.push_back("[" + std::to_string(index++) + "]");
                    a.push_back(convert(e));
                    path_.pop_back();
                }
                return a;
            }
            case YAML::NodeType::Map: {
                check_depth(n);
                Json o = Json::object();
                // Appended directly: ordered_json's operator[] would look each key up one by one.
                auto& object = o.get_ref<Json::object_t&>();
                std::unordered_map<std::string, YAML::Mark> seen;
                for (const auto& kv : n) {
                    if (kv.first.IsMap() || kv.first.IsSequence()) {
                        report(kv.first.Mark(),
                               "a key must be a string, not a " +
                                   std::string(kv.first.IsMap() ? "mapping" : "sequence"));
                        continue;
                    }
                    std::string key = kv.first.as<std::string>();
                    if (!valid_utf8(key)) {
                        report(kv.first.Mark(), "invalid UTF-8 in a key (a config is UTF-8 text)");
                        continue;
                    }
                    auto [first, fresh] = seen.emplace(key, kv.first.Mark());
                    if (!fresh) {
                        report(
                            kv.first.Mark(),
                            duplicate_key_message(join_path(path_), key, line_col_of(first->second),
                                                  line_col_of(kv.first.Mark())));
                        continue;
                    }
                    path_.push_back(key);
                    Json value = convert(kv.second);
                    path_.pop_back();
                    object.emplace_back(std::move(key), std::move(value));
                }
                return o;
            }
        }
        return nullptr;
    }

private:
    std::string origin_;
    std::vector<Issue>& issues_;
    std::size_t values_ = 0;
    std::vector<std::string> path_;  // keys and [indices] down to the value being converted
    // An aliased node is met once per use, with another path each time: one issue per place.
    std::set<std::pair<int, std::string>> reported_;

    static std::pair<std::size_t, std::size_t> line_col_of(const YAML::Mark& mark) {
        return {static_cast<std::size_t>(mark.line) + 1, static_cast<std::size_t>(mark.column) + 1};
    }

    void check_depth(const YAML::Node& n) {
        if (path_.size() >= static_cast<std::size_t>(kMaxDocumentDepth))
            throw Limit{{at_mark(origin_, n.Mark()), too_deep_message()}};
    }

    void report(const YAML::Mark& mark, const std::string& message) {
        if (reported_.emplace(mark.pos, mark.is_null() ? message : "").second)
            issues_.push_back({at_mark(origin_, mark), message});
    }

    Json scalar(const YAML::Node& n) {
        const std::string& s = n.Scalar();
        if (!valid_utf8(s)) {
            report(n.Mark(), "invalid UTF-8 in a value (a config is UTF-8 text)");
            return nullptr;
        }
        if (n.Tag() == "!") return s;  // quoted: always a string
        if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
        if (s == "true" || s == "True" || s == "TRUE") return true;
        if (s == "false" || s == "False" || s == "FALSE") return false;
        const NumberKind kind = number_kind(s);
        if (kind == NumberKind::integer) {
            errno = 0;
            const long long v = std::strtoll(s.c_str(), nullptr, 10);
            if (errno != ERANGE) return static_cast<int64_t>(v);
        }
        if (kind != NumberKind::none) {
            // Integers beyond int64 become doubles, as in JSON; beyond a double is an error.
            const double d = std::strtod(s.c_str(), nullptr);
            if (std::isinf(d)) {
                const std::string where = join_path(path_);
                report(n.Mark(), (where.empty() ? "" : where + ": ") + "number " + cut(s) +
                                     " is out of range (a double holds up to about 1.8e308)");
                return nullptr;
            }
            return d;
        }
        if (s == ".inf" || s == "+.inf") return HUGE_VAL;
        if (s == "-.inf") return -HUGE_VAL;
        if (s == ".nan") return NAN;
        return s;
    }
};

// YAML text to a document within the limits; problems become issues at "origin:line:col".
Json parse_yaml(const std::string& text, const std::string& origin, std::vector<Issue>& issues) {
    try {
        YAML::Node root = YAML::Load(text);
        YamlConverter converter(origin, issues);
        converter.check_size(root);
        return converter.convert(root);
    } catch (const YamlConverter::Limit& limit) {
        issues.push_back(limit.issue);
    } catch (const YAML::DeepRecursion& e) {
        // yaml-cpp's own guard (about 500 levels), reported as "bad file".
        issues.push_back({at_mark(origin, e.mark), too_deep_message()});
    } catch (const YAML::Exception& e) {
        issues.push_back({at_mark(origin, e.mark), "malformed YAML: " + e.msg});
    }
    return nullptr;
}

void emit_yaml(YAML::Emitter& e, const Json& j) {
    switch (j.type()) {
        case Json::value_t::object:
            e << YAML::BeginMap;
            for (auto it = j.begin(); it != j.end(); ++it) {
                e << YAML::Key << it.key() << YAML::Value;
                emit_yaml(e, it.value());
            }
            e << YAML::EndMap;
            break;
        case Json::value_t::array:
            e << (j.empty() ? YAML::Flow : YAML::Block) << YAML::BeginSeq;
            for (const auto& v : j) emit_yaml(e, v);
            e << YAML::EndSeq;
            break;
        case Json::value_t::string:
            e << YAML::DoubleQuoted << j.get<std::string>();
            break;
        case Json::value_t::boolean:
            e << (j.get<bool>() ? "true" : "false");
            break;
        case Json::value_t::null:
            e << YAML::Null;
            break;
        case Json::value_t::number_float: {
            // The JSON writer's shortest round-trip form keeps YAML and JSON outputs identical.
            std::string s = Json(j).dump();
            if (s.find_first_of(".eE") == std::string::npos) s += ".0";
            e << s;
            break;
        }
        default:
            e << j.dump();
            break;
    }
}

}  // namespace

Json parse_document(const std::string& text, Format format, const std::string& origin,
                    std::vector<Issue>& issues) {
    if (text.size() > kMaxDocumentBytes) {
        issues.push_back({origin, too_large_message(text.size())});
        return nullptr;
    }
    return format == Format::json ? parse_json(text, origin, issues)
                                  : parse_yaml(text, origin, issues);
}

std::string dump_document(const Json& doc, Format format) {
    if (format == Format::json) return doc.dump(2) + "\n";
    YAML::Emitter e;
    e.SetIndent(2);
    emit_yaml(e, doc);
    return std::string(e.c_str()) + "\n";
}

namespace {

// Whether the config field at dotted `key` is a list of strings (dataset.paths ...), from the
// schema: an override gives such a field one string as users type it, "dataset.paths=/a/file".
bool is_string_list_field(const std::string& key) {
    static const Json schema = json_schema();
    const Json* node = &schema;
    std::size_t start = 0;
    while (true) {
        const auto dot = key.find('.', start);
        const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
        if (!node->contains("properties") || !(*node)["properties"].contains(part)) return false;
        node = &(*node)["properties"][part];
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    const auto type = node->value("type", Json());
    const bool array =
        type == "array" || (type.is_array() && type.size() > 0 && type[0] == "array");
    return array && node->contains("items") && (*node)["items"].value("type", Json()) == "string";
}

}  // namespace

std::vector<Issue> apply_overrides(Json& doc, const std::vector<std::string>& overrides) {
    std::vector<Issue> issues;
    if (!doc.is_object()) doc = Json::object();
    for (std::string arg : overrides) {
        std::string original = arg;
        if (arg.rfind("--", 0) == 0) arg = arg.substr(2);
        auto eq = arg.find('=');
        std::string key = arg.substr(0, eq);
        Json value = true;  // "--trainer.no_checkpoints" alone means true
        if (eq != std::string::npos) {
            std::string text = arg.substr(eq + 1);
            std::vector<Issue> value_issues;
            value = parse_yaml(text, key, value_issues);
            if (!value_issues.empty()) {
                const std::string why = value_issues.front().message;
                issues.push_back(
                    {key, "cannot read override value '" + text + "': " +
                              (why.rfind("malformed YAML: ", 0) == 0 ? why.substr(16) : why)});
                continue;
            }
            if (text.empty()) value = "";
        }
        if (key.empty() || key.front() == '.' || key.back() == '.' ||
            key.find("..") != std::string::npos) {
            issues.push_back({key, "malformed override '" + original + "' (expected a.b.c=value)"});
            continue;
        }
        if (std::count(key.begin(), key.end(), '.') >= kMaxDocumentDepth) {
            issues.push_back({key.substr(0, 40) + "...", too_deep_message()});
            continue;
        }
        Json* node = &doc;
        std::string walked;
        std::size_t start = 0;
        bool ok = true;
        while (true) {
            auto dot = key.find('.', start);
            std::string part =
                key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
            bool last = dot == std::string::npos;
            if (node->is_array()) {
                char* end = nullptr;
                long idx = std::strtol(part.c_str(), &end, 10);
                if (*end != '\0' || idx < 0 || static_cast<std::size_t>(idx) >= node->size()) {
                    issues.push_back({walked, "no element " + part + " in this array (size " +
                                                  std::to_string(node->size()) + ")"});
                    ok = false;
                    break;
                }
                node = &(*node)[static_cast<std::size_t>(idx)];
                walked += "[" + part + "]";
            } else {
                if (node->is_null()) *node = Json::object();
                if (!node->is_object()) {
                    issues.push_back(
                        {walked, "cannot set " + key + ": " + walked + " is not an object"});
                    ok = false;
                    break;
                }
                node = &(*node)[part];
                walked += (walked.empty() ? "" : ".") + part;
            }
            if (last) break;
            start = dot + 1;
        }
        if (!ok) continue;
        if (value.is_string() && is_string_list_field(key)) value = Json::array({value});
        *node = value;
    }
    return issues;
}

}  // namespace lathe::config
