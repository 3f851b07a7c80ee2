// lathe::Error: an exception that says what failed and where (a file, a step, a config path).
#pragma once

#include <stdexcept>
#include <string>

namespace lathe {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
    /// Adds context in front: Error("reading x: " + inner).
    Error(const std::string& context, const std::exception& inner)
        : std::runtime_error(context + ": " + inner.what()) {}
};

}  // namespace lathe
