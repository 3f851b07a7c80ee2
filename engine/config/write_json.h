// Internal: writes any config field value as JSON (shared by to_json and the schema's defaults).
#pragma once

#include "engine/config/io.h"

namespace lathe::config::detail {

struct ToJson {
    Json out = Json::object();

    template <class T>
    static Json value(const T& x) {
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
            return x;
        } else if constexpr (std::is_integral_v<T>) {
            return static_cast<int64_t>(x);
        } else if constexpr (std::is_floating_point_v<T>) {
            return static_cast<double>(x);
        } else if constexpr (is_config_enum<T>::value) {
            return enum_to_string(x);
        } else if constexpr (is_optional<T>::value) {
            return x ? value(*x) : Json(nullptr);
        } else if constexpr (is_string_map<T>::value) {
            Json o = Json::object();
            for (const auto& [k, e] : x) o[k] = value(e);
            return o;
        } else if constexpr (is_vector<T>::value) {
            Json a = Json::array();
            for (const auto& e : x) a.push_back(value(e));
            return a;
        } else {
            static_assert(is_config_struct<T>::value, "unsupported config field type");
            ToJson sub;
            const_cast<T&>(x).visit(sub);  // visit() only reads here
            return sub.out;
        }
    }

    template <class T>
    void field(const char* name, T& x, const FieldMeta&) {
        out[name] = value(x);
    }
};

}  // namespace lathe::config::detail
