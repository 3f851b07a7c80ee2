// JSON <-> ExperimentConfig through the field visitors, with every problem collected as an Issue.
#include "engine/config/io.h"
#include "engine/config/write_json.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace lathe::config {

ConfigError::ConfigError(std::vector<Issue> issues)
    : std::runtime_error([&] {
          std::string s;
          for (const auto& i : issues) s += (s.empty() ? "" : "\n") + i.to_string();
          return s;
      }()),
      issues_(std::move(issues)) {}

namespace {

std::string join_path(const std::string& base, const std::string& key) {
    return base.empty() ? key : base + "." + key;
}

std::string format_number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    // Prefer the shortest representation that round-trips.
    for (int prec = 1; prec <= 17; ++prec) {
        char b[64];
        std::snprintf(b, sizeof b, "%.*g", prec, v);
        if (std::strtod(b, nullptr) == v) return b;
    }
    return buf;
}

std::string type_name(const Json& j) {
    switch (j.type()) {
        case Json::value_t::null:
            return "null";
        case Json::value_t::boolean:
            return "a boolean";
        case Json::value_t::number_integer:
        case Json::value_t::number_unsigned:
            return "an integer";
        case Json::value_t::number_float:
            return "a number";
        case Json::value_t::string:
            return "a string";
        case Json::value_t::array:
            return "an array";
        case Json::value_t::object:
            return "an object";
        default:
            return "a value";
    }
}

std::string short_value(const Json& j) {
    // A document from elsewhere (the GUI's editor) may hold invalid UTF-8: shown, not thrown.
    std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (s.size() > 40) {
        std::size_t end = 37;  // at a character boundary
        while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
        s = s.substr(0, end) + "...";
    }
    return s;
}

// ---- from JSON -------------------------------------------------------------------------------

// Fields that once were in the schema and did nothing: still accepted (the config.json of an older
// run names them) and ignored, since ignoring them is all they ever did.
bool is_retired(const std::string& path) {
    // Lathe agrees on control requests at every step with a non-blocking collective, so there is
    // no check to space out (OLMo-core's trainer.cancel_check_interval).
    static const char* const retired[] = {"trainer.cancel_check_interval"};
    for (const char* r : retired) {
        if (path == r) return true;
    }
    return false;
}

struct FromJson {
    const Json& in;
    std::string path;
    std::vector<Issue>& issues;
    std::vector<std::string> seen;

    void issue(const std::string& p, std::string msg) { issues.push_back({p, std::move(msg)}); }

    void check_bounds(const std::string& p, double v, const Bounds& b) {
        if (b.min && (b.exclusive_min ? !(v > *b.min) : !(v >= *b.min))) {
            issue(p, std::string("must be ") + (b.exclusive_min ? "> " : ">= ") +
                         format_number(*b.min) + " (got " + format_number(v) + ")");
        } else if (b.max && !(v <= *b.max)) {
            issue(p, "must be <= " + format_number(*b.max) + " (got " + format_number(v) + ")");
        }
    }

    // Reads `j` into `x`; returns false (after recording an issue) when it cannot.
    template <class T>
    bool read(const Json& j, T& x, const std::string& p, const FieldMeta& meta) {
        if constexpr (std::is_same_v<T, bool>) {
            if (!j.is_boolean()) return wrong_type(p, "a boolean (true or false)", j);
            x = j.get<bool>();
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!j.is_string()) return wrong_type(p, "a string", j);
            x = j.get<std::string>();
        } else if constexpr (std::is_integral_v<T>) {
            int64_t v = 0;
            if (j.is_number_integer()) {
                v = j.get<int64_t>();
            } else if (j.is_number_unsigned()) {
                auto u = j.get<uint64_t>();
                if (u > static_cast<uint64_t>(INT64_MAX)) {
                    issue(p, "is too large (got " + short_value(j) + ")");
                    return false;
                }
                v = static_cast<int64_t>(u);
            } else if (j.is_number_float()) {
                double d = j.get<double>();
                if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e18) {
                    issue(p, "must be an integer (got " + short_value(j) + ")");
                    return false;
                }
                v = static_cast<int64_t>(d);
            } else {
                return wrong_type(p, "an integer", j);
            }
            double before = static_cast<double>(issues.size());
            check_bounds(p, static_cast<double>(v), meta.bounds);
            if (static_cast<double>(issues.size()) != before) return false;
            x = static_cast<T>(v);
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!j.is_number()) return wrong_type(p, "a number", j);
            double d = j.get<double>();
            if (!std::isfinite(d)) {
                issue(p, "must be finite (got " + short_value(j) + ")");
                return false;
            }
            auto before = issues.size();
            check_bounds(p, d, meta.bounds);
            if (issues.size() != before) return false;
            x = static_cast<T>(d);
        } else if constexpr (is_config_enum<T>::value) {
            if (!j.is_string()) return wrong_type(p, "a string", j);
            auto e = enum_from_string<T>(j.get<std::string>());
            if (!e) {
                std::string valid;
                for (const auto& n : enum_names(T{})) valid += (valid.empty() ? "" : ", ") + n;
                issue(p, "invalid value " + short_value(j) + " (valid: " + valid + ")");
                return false;
            }
            x = *e;
        } else if constexpr (is_optional<T>::value) {
            if (j.is_null()) {
                x.reset();
            } else {
                typename T::value_type v{};
                if (x) v = *x;
                if (!read(j, v, p, meta)) return false;
                x = std::move(v);
            }
        } else if constexpr (is_string_map<T>::value) {
            if (!j.is_object()) return wrong_type(p, "an object", j);
            T out;
            bool ok = true;
            for (auto it = j.begin(); it != j.end(); ++it) {
                typename T::mapped_type v{};
                ok = read(it.value(), v, p + "." + it.key(), meta) && ok;
                out.emplace(it.key(), std::move(v));
            }
            if (!ok) return false;
            x = std::move(out);
        } else if constexpr (is_vector<T>::value) {
            if (!j.is_array()) return wrong_type(p, "an array", j);
            T out;
            bool ok = true;
            for (std::size_t i = 0; i < j.size(); ++i) {
                typename T::value_type v{};
                ok = read(j[i], v, p + "[" + std::to_string(i) + "]", meta) && ok;
                out.push_back(std::move(v));
            }
            if (!ok) return false;
            x = std::move(out);
        } else if constexpr (std::is_same_v<T, Duration>) {
            if (j.is_string()) {
                auto d = parse_duration(j.get<std::string>());
                if (!d) {
                    issue(p, "invalid duration " + short_value(j) +
                                 " (expected e.g. \"100steps\", \"2epochs\", \"5e6tokens\" or "
                                 "{\"value\": 100, \"unit\": \"steps\"})");
                    return false;
                }
                x = *d;
                return true;
            }
            return read_struct(j, x, p);
        } else {
            static_assert(is_config_struct<T>::value, "unsupported config field type");
            return read_struct(j, x, p);
        }
        return true;
    }

    template <class T>
    bool read_struct(const Json& j, T& x, const std::string& p) {
        if (!j.is_object()) return wrong_type(p, "an object", j);
        auto before = issues.size();
        FromJson sub{j, p, issues, {}};
        x.visit(sub);
        sub.report_unknown();
        return issues.size() == before;
    }

    bool wrong_type(const std::string& p, const std::string& expected, const Json& j) {
        issue(p, "must be " + expected + " (got " + type_name(j) + " " + short_value(j) + ")");
        return false;
    }

    template <class T>
    void field(const char* name, T& x, const FieldMeta& meta) {
        seen.emplace_back(name);
        auto it = in.find(name);
        if (it == in.end()) return;
        read(*it, x, join_path(path, name), meta);
    }

    void report_unknown() {
        for (auto it = in.begin(); it != in.end(); ++it) {
            if (std::find(seen.begin(), seen.end(), it.key()) != seen.end()) continue;
            if (is_retired(join_path(path, it.key()))) continue;
            std::string msg = "unknown key";
            auto near = nearest_name(it.key(), seen);
            if (!near.empty()) msg += " (did you mean \"" + near + "\"?)";
            issue(join_path(path, it.key()), msg);
        }
    }
};

}  // namespace

Json to_json(const ExperimentConfig& config) {
    return detail::ToJson::value(config);
}

ExperimentConfig from_json(const Json& doc, std::vector<Issue>& issues) {
    ExperimentConfig config;
    if (!doc.is_object()) {
        issues.push_back({"", "the config must be an object (got " + type_name(doc) + ")"});
        return config;
    }
    FromJson v{doc, "", issues, {}};
    config.visit(v);
    v.report_unknown();
    return config;
}

}  // namespace lathe::config
