// Tokenizers, torch-free so the GUI can use them too. Today: Hugging Face `tokenizer.json` files
// whose model is byte-level BPE (GPT-2, Llama-3 and OLMo2's dolma2 tokenizers are of this kind).
//
// A tokenizer is identified by the hash of its file (`id()`), which runs record so that samples,
// export and generation decode with the tokenizer the data was made with.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::tokenizer {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    /// Token ids of `text` (UTF-8). With `add_special`, the post-processor's tokens (BOS ...) are
    /// added as the file says.
    virtual std::vector<int64_t> encode(std::string_view text, bool add_special = false) const = 0;
    /// The text of `ids`. Ids outside the vocabulary throw lathe::Error.
    virtual std::string decode(const std::vector<int64_t>& ids,
                               bool skip_special = false) const = 0;
    /// One more than the largest id.
    virtual int64_t vocab_size() const = 0;
    virtual std::optional<int64_t> eos_id() const = 0;
    virtual std::optional<int64_t> bos_id() const = 0;
    /// "fnv1a64:<16 hex digits>" of the file's bytes.
    const std::string& id() const { return id_; }
    const std::string& path() const { return path_; }

protected:
    std::string id_, path_;
};

/// Reads a tokenizer file: a Hugging Face tokenizer.json (byte-level BPE). Throws lathe::Error
/// "`path`: reason" for a file that is not one, or uses a part Lathe does not implement (named).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

/// The id of a tokenizer file without loading it.
std::string tokenizer_file_id(const std::string& path);

}  // namespace lathe::tokenizer
