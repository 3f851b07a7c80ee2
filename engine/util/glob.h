// One glob matcher for the engine: parameter groups, activation-checkpointing modules and the
// console's metric patterns all mean the same thing by a pattern.
#pragma once

#include <fnmatch.h>

#include <string>

namespace lathe {

/// Whether `text` matches the shell glob `pattern` (POSIX fnmatch without flags: `*` and `?` also
/// match '/' and '.', `[...]` is a class).
inline bool glob_matches(const std::string& pattern, const std::string& text) {
    return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace lathe
