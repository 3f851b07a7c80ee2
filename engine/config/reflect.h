// Field reflection for Lathe's config structs.
//
// Every config struct lists its fields once, in a `visit(V&)` member template:
//     v.field("lr", lr, {"Peak learning rate.", Bounds::positive()});
// The visitors in json_io.cpp (to/from JSON with error collection) and schema.cpp (JSON Schema)
// walk that single list, so the CLI, the engine, the JSON Schema and the GUI's form editor can
// never disagree about a field's name, type, default, bounds or description.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lathe::config {

/// Numeric bounds of a field; inclusive unless `exclusive_min` is set.
struct Bounds {
    std::optional<double> min;
    std::optional<double> max;
    bool exclusive_min = false;

    static Bounds none() { return {}; }
    static Bounds at_least(double v) { return {v, std::nullopt, false}; }
    static Bounds positive() { return {0.0, std::nullopt, true}; }
    static Bounds between(double lo, double hi) { return {lo, hi, false}; }
};

/// What a visitor learns about one field besides its name and value.
struct FieldMeta {
    const char* doc = "";          ///< one line; the GUI tooltip and the schema description
    Bounds bounds = {};            ///< for numbers (and the elements of numeric lists)
    const char* format = nullptr;  ///< "path", "glob" or nullptr: a hint for editors
};

namespace detail {
std::vector<std::string> split_enum_names(const char* list);
}

// Declares `enum class Name { a, b, c }` plus `enum_names(Name)`, found by ADL, giving the
// spelling of each value (the JSON spelling too).
#define LATHE_ENUM(Name, ...)                                        \
    enum class Name { __VA_ARGS__ };                                 \
    inline const std::vector<std::string>& enum_names(Name) {        \
        static const std::vector<std::string> names =                \
            ::lathe::config::detail::split_enum_names(#__VA_ARGS__); \
        return names;                                                \
    }

template <class E, class = void>
struct is_config_enum : std::false_type {};
template <class E>
struct is_config_enum<E, std::void_t<decltype(enum_names(E{}))>> : std::true_type {};

template <class E>
const std::string& enum_to_string(E e) {
    return enum_names(e).at(static_cast<std::size_t>(e));
}

template <class E>
std::optional<E> enum_from_string(std::string_view s) {
    const auto& names = enum_names(E{});
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (names[i] == s) return static_cast<E>(i);
    }
    return std::nullopt;
}

template <class T, class = void>
struct is_config_struct : std::false_type {};
struct ProbeVisitor {
    template <class X>
    void field(const char*, X&, const FieldMeta&) {}
};
template <class T>
struct is_config_struct<
    T, std::void_t<decltype(std::declval<T&>().visit(std::declval<ProbeVisitor&>()))>>
    : std::true_type {};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class T>
struct is_string_map : std::false_type {};
template <class T>
struct is_string_map<std::map<std::string, T>> : std::true_type {};

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

/// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `name`, or "" when nothing is reasonably close.
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace lathe::config
