// error_of(f): the message of the exception `f` throws, or "" when it throws none. For tests that
// check what an error says.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace lathe::testing {

inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

}  // namespace lathe::testing
