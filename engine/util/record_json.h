// Records described once, by a visit() member that names each field in order (as the config does
// in engine/config/reflect.h), written to and read from JSON by the same list:
//
//     struct Done {
//         std::string folder;
//         int64_t tokens = 0;
//         std::optional<int64_t> trained_tokens;
//         template <class V> void visit(V& v) { v("folder", folder); v("tokens", tokens);
//                                               v("trained_tokens", trained_tokens); }
//     };
//
// Field types: bool, integers, floating point, std::string, std::vector and std::optional of
// these, nested records, and nlohmann JSON values (kept as they are).
//
// Two readers: a lenient one for files a person or an older Lathe may have written (a field that
// is missing or of the wrong type keeps its default and is noted), and a strict one for what one
// Lathe process prints for another (every field must be there with its type; an optional may be
// absent or null), so that a renamed or retyped field fails loudly instead of reading as 0.
#pragma once

#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace lathe::record_json {

namespace detail {

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
inline constexpr bool is_json_v =
    std::is_same_v<T, nlohmann::json> || std::is_same_v<T, nlohmann::ordered_json>;

/// How absent optionals are written: as null (run-folder records, which older readers expect
/// with every key) or left out (messages, whose optional parts are often absent).
enum class Nullopt { null, omit };

template <Nullopt kNullopt>
struct Writer {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();

    template <class T>
    static nlohmann::ordered_json value(const T& x) {
        if constexpr (is_optional<T>::value) {
            return x ? value(*x) : nlohmann::ordered_json(nullptr);
        } else if constexpr (is_json_v<T>) {
            return nlohmann::ordered_json::parse(x.dump());
        } else if constexpr (is_vector<T>::value) {
            auto a = nlohmann::ordered_json::array();
            for (const auto& e : x) a.push_back(value(e));
            return a;
        } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
            Writer sub;
            const_cast<T&>(x).visit(sub);  // visit() only reads here
            return sub.out;
        } else if constexpr (std::is_floating_point_v<T>) {
            // JSON has no NaN or infinity: an unknown number is written as null.
            return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
        } else {
            return x;
        }
    }
    template <class T>
    void operator()(const char* name, const T& x) {
        if constexpr (is_optional<T>::value)
            if (kNullopt == Nullopt::omit && !x) return;
        out[name] = value(x);
    }
};

template <class J>
struct Reader {
    const J& in;
    bool strict;
    std::vector<std::string>* problems;

    template <class T>
    static bool read(const J& j, T& x, bool strict, std::string& why) {
        if constexpr (is_optional<T>::value) {
            if (j.is_null()) {
                x.reset();
                return true;
            }
            typename T::value_type v{};
            if (!read(j, v, strict, why)) return false;
            x = std::move(v);
            return true;
        } else if constexpr (is_json_v<T>) {
            x = T::parse(j.dump());
            return true;
        } else if constexpr (is_vector<T>::value) {
            if (!j.is_array()) return why = "not a list", false;
            T out;
            for (std::size_t i = 0; i < j.size(); ++i) {
                typename T::value_type v{};
                if (!read(j[i], v, strict, why)) {
                    why = "[" + std::to_string(i) + "]" + (why[0] == '.' ? why : ": " + why);
                    return false;
                }
                out.push_back(std::move(v));
            }
            x = std::move(out);
            return true;
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!j.is_string()) return why = "not a string", false;
            x = j.template get<std::string>();
            return true;
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!j.is_boolean()) return why = "not true or false", false;
            x = j.template get<bool>();
            return true;
        } else if constexpr (std::is_floating_point_v<T>) {
            if (j.is_null()) {  // NaN or infinity, as the writer writes it
                x = std::numeric_limits<T>::quiet_NaN();
                return true;
            }
            if (!j.is_number()) return why = "not a number", false;
            x = j.template get<T>();
            return true;
        } else if constexpr (std::is_integral_v<T>) {
            if (!j.is_number()) return why = "not a number", false;
            if (strict && !j.is_number_integer()) return why = "not a whole number", false;
            x = static_cast<T>(j.template get<double>());
            if (j.is_number_integer()) x = j.template get<T>();
            return true;
        } else {
            if (!j.is_object()) return why = "not an object", false;
            std::vector<std::string> sub_problems;
            Reader sub{j, strict, &sub_problems};
            x.visit(sub);
            if (!sub_problems.empty()) return why = "." + sub_problems.front(), false;
            return true;
        }
    }

    void note(const char* name, const std::string& why) const {
        if (problems)
            problems->push_back(why.rfind('.', 0) == 0 || why.rfind('[', 0) == 0
                                    ? name + why
                                    : std::string(name) + ": " + why);
    }

    template <class T>
    void operator()(const char* name, T& x) {
        const auto it = in.find(name);
        if (it == in.end()) {
            if (strict && !is_optional<T>::value) note(name, "missing");
            return;
        }
        if (it->is_null() && !is_optional<T>::value && !is_json_v<T> &&
            !std::is_floating_point_v<T>) {
            note(name, "null");
            return;
        }
        T v = x;
        std::string why;
        if (read(*it, v, strict, why)) {
            x = std::move(v);
        } else {
            note(name, why);
        }
    }
};

}  // namespace detail

/// Every field, in declaration order; an absent optional is written as null.
template <class R>
nlohmann::ordered_json to_json(const R& record) {
    return detail::Writer<detail::Nullopt::null>::value(record);
}

/// Every field, in declaration order; an absent optional is left out.
template <class R>
nlohmann::ordered_json to_message(const R& record) {
    return detail::Writer<detail::Nullopt::omit>::value(record);
}

/// Reads what is there: a field that is absent, null or of the wrong type keeps its default and,
/// when `problems` is given, is noted there as "name: reason". Never throws.
template <class R, class J>
R from_json_lenient(const J& j, std::vector<std::string>* problems = nullptr) {
    R r;
    if (!j.is_object()) {
        if (problems) problems->push_back("not a JSON object");
        return r;
    }
    detail::Reader<J> v{j, false, problems};
    r.visit(v);
    return r;
}

/// Reads a record that must be whole: every field present with its type (an optional may be
/// absent or null; extra fields are allowed, so a newer writer can add some). Throws lathe::Error
/// "`what`: name: reason; name: reason".
template <class R, class J>
R from_json_strict(const J& j, const std::string& what) {
    if (!j.is_object()) throw Error(what + ": not a JSON object");
    R r;
    std::vector<std::string> problems;
    detail::Reader<J> v{j, true, &problems};
    r.visit(v);
    if (!problems.empty()) {
        std::string all;
        for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
        throw Error(what + ": " + all);
    }
    return r;
}

/// from_json_strict of one line of text (raw JSON fields keep their keys' order); throws
/// lathe::Error when it is not JSON.
template <class R>
R parse_strict(const std::string& text, const std::string& what) {
    const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
    if (j.is_discarded()) throw Error(what + ": not JSON");
    return from_json_strict<R>(j, what);
}

}  // namespace lathe::record_json
