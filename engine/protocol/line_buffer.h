// Splits a byte stream into '\n'-terminated lines without ever holding more than one line's
// worth of bytes: a line longer than the limit is dropped (up to its '\n') and reported.
#pragma once

#include "engine/protocol/messages.h"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lathe::protocol {

class LineBuffer {
public:
    /// A complete line (without '\n' or a trailing '\r'), or the report of a dropped one.
    using Item = std::variant<std::string, DecodeError>;

    explicit LineBuffer(std::size_t max_line_bytes = kMaxLineBytes) : max_(max_line_bytes) {}

    /// Appends bytes; returns the lines they complete, in order. Empty lines are skipped.
    std::vector<Item> feed(std::string_view bytes);

    /// Bytes held of the incomplete last line.
    std::size_t pending() const { return discarding_ ? 0 : buffer_.size(); }
    /// Lines dropped for being too long so far.
    std::size_t dropped() const { return dropped_; }

private:
    std::size_t max_;
    std::string buffer_;
    bool discarding_ = false;    // inside an oversized line: skip to the next '\n'
    std::size_t discarded_ = 0;  // bytes of the oversized line so far
    std::size_t dropped_ = 0;
};

}  // namespace lathe::protocol
