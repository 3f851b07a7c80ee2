// FNV-1a (64-bit) of a byte string, as 16 hex digits: a cheap identity for files and data (not a
// cryptographic hash). Header-only, for the torch-free libraries too.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace lathe {

inline std::string fnv1a_hex(std::string_view text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

}  // namespace lathe
