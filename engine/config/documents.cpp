// JSON/YAML documents: parsing with positions, writing, and command-line overrides.
#include "engine/config/io.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <regex>

namespace lathe::config {

Format format_for_path(const std::string& path) {
    auto dot = path.rfind('.');
    std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return (ext == "yaml" || ext == "yml") ? Format::yaml : Format::json;
}

namespace {

std::pair<std::size_t, std::size_t> line_col(const std::string& text, std::size_t byte) {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    return {line, col};
}

Json scalar_to_json(const YAML::Node& n) {
    const std::string& s = n.Scalar();
    if (n.Tag() == "!") return s;  // quoted: always a string
    static const std::regex int_re(R"(^[-+]?[0-9]+$)");
    static const std::regex float_re(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (std::regex_match(s, int_re)) {
        try {
            return static_cast<int64_t>(std::stoll(s));
        } catch (...) {
            return std::stod(s);
        }
    }
    if (std::regex_match(s, float_re)) return std::stod(s);
    if (s == ".inf" || s == "+.inf") return HUGE_VAL;
    if (s == "-.inf") return -HUGE_VAL;
    if (s == ".nan") return NAN;
    return s;
}

Json yaml_to_json(const YAML::Node& n) {
    switch (n.Type()) {
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
            return nullptr;
        case YAML::NodeType::Scalar:
            return scalar_to_json(n);
        case YAML::NodeType::Sequence: {
            Json a = Json::array();
            for (const auto& e : n) a.push_back(yaml_to_json(e));
            return a;
        }
        case YAML::NodeType::Map: {
            Json o = Json::object();
            for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
            return o;
        }
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
    if (format == Format::json) {
        try {
            return Json::parse(text);
        } catch (const Json::parse_error& e) {
            auto [line, col] = line_col(text, e.byte == 0 ? 0 : e.byte - 1);
            std::string what = e.what();
            // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1,
            // column 2: ";
            auto colon = what.find(": ");
            if (colon != std::string::npos) what = what.substr(colon + 2);
            issues.push_back({origin + ":" + std::to_string(line) + ":" + std::to_string(col),
                              "malformed JSON: " + what});
            return nullptr;
        }
    }
    try {
        YAML::Node root = YAML::Load(text);
        return yaml_to_json(root);
    } catch (const YAML::Exception& e) {
        issues.push_back({origin + ":" + std::to_string(e.mark.line + 1) + ":" +
                              std::to_string(e.mark.column + 1),
                          "malformed YAML: " + e.msg});
        return nullptr;
    }
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
            try {
                YAML::Node n = YAML::Load(text);
                value = yaml_to_json(n);
                if (text.empty()) value = "";
            } catch (const YAML::Exception& e) {
                issues.push_back({key, "cannot read override value '" + text + "': " + e.msg});
                continue;
            }
        }
        if (key.empty() || key.front() == '.' || key.back() == '.' ||
            key.find("..") != std::string::npos) {
            issues.push_back({key, "malformed override '" + original + "' (expected a.b.c=value)"});
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
