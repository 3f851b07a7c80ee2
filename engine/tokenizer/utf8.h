// UTF-8 helpers for the tokenizers: validation with the offset of the first bad byte, and lossy
// decoding that replaces each maximal invalid subsequence with U+FFFD (as Rust's
// String::from_utf8_lossy and the Unicode standard's recommended practice do).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::tokenizer {

/// The byte offset of the first invalid UTF-8 sequence in `s`, or nullopt when it is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view s);
/// `s` with every maximal invalid subsequence replaced by U+FFFD.
std::string lossy_utf8(std::string_view s);
/// Appends the UTF-8 form of code point `cp`.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace lathe::tokenizer
