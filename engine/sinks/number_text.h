// Shortest round-trip decimal text for the text sinks (internal to lathe_sinks).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

namespace lathe::sinks::detail {

/// Shortest text that reads back to the same double (std::to_chars), e.g. 0.1, 3, 1e-05.
/// Callers handle non-finite values themselves.
inline void append_double(std::string& out, double v) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

inline void append_int(std::string& out, std::int64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

}  // namespace lathe::sinks::detail
