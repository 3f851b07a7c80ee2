// Sizes people write: "5GB", "500MB", "64KiB", "1000000" (bytes). Header-only, for the torch-free
// libraries and every command.
#pragma once

#include "engine/util/error.h"

#include <cctype>
#include <cstdint>
#include <map>
#include <string>

namespace lathe {

/// Bytes in `text`. Throws lathe::Error for a size that is not one, an unknown unit or zero.
inline uint64_t parse_size(const std::string& text) {
    std::size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == 0) throw Error("'" + text + "' is not a size (for example 5GB, 500MB, 1000000)");
    const uint64_t n = std::stoull(text.substr(0, i));
    std::string unit = text.substr(i);
    for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    static const std::map<std::string, uint64_t> units = {{"", 1},
                                                          {"B", 1},
                                                          {"KB", 1000ULL},
                                                          {"MB", 1000000ULL},
                                                          {"GB", 1000000000ULL},
                                                          {"KIB", 1ULL << 10},
                                                          {"MIB", 1ULL << 20},
                                                          {"GIB", 1ULL << 30}};
    auto it = units.find(unit);
    if (it == units.end()) throw Error("'" + text + "': unknown unit '" + unit + "'");
    if (n == 0) throw Error("'" + text + "': the size must be positive");
    return n * it->second;
}

}  // namespace lathe
