// The tokenizer kinds behind load_tokenizer(), for tokenizer.cpp (internal to lathe_tokenizer).
#pragma once

#include "engine/tokenizer/tokenizer.h"

#include <memory>
#include <string>

namespace lathe::tokenizer {

/// A Hugging Face tokenizer.json (byte-level BPE) from the file's `text`.
std::unique_ptr<Tokenizer> make_hf_bpe(const std::string& path, const std::string& text);
/// A SentencePiece model from the file's `bytes`.
std::unique_ptr<Tokenizer> make_sentencepiece(const std::string& path, const std::string& bytes);
/// "fnv1a64:<16 hex digits>" of a file's bytes.
std::string file_id_of(const std::string& bytes);

}  // namespace lathe::tokenizer
