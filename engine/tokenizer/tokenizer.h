// Tokenizers, torch-free so the GUI can use them too:
//   - Hugging Face `tokenizer.json` files whose model is byte-level BPE (GPT-2, Llama-3 and OLMo2's
//     dolma2 tokenizers are of this kind), hf_bpe.cpp;
//   - SentencePiece `.model` files (Llama-2, T5 and Gemma style), through Debian's libsentencepiece,
//     which also trains new ones (sentencepiece.cpp).
//
// A tokenizer is identified by the hash of its file (`id()`), which runs record so that samples,
// export and generation decode with the tokenizer the data was made with.
#pragma once

#include <cstdint>
#include <functional>
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
    /// "byte-level BPE (tokenizer.json)" or "SentencePiece (.model)".
    virtual std::string kind() const = 0;
    /// The file's name inside a checkpoint or model folder: "tokenizer.json" or "tokenizer.model"
    /// (run_folder::kTokenizerFile, kSentencePieceFile).
    virtual std::string file_name() const = 0;
    /// "fnv1a64:<16 hex digits>" of the file's bytes.
    const std::string& id() const { return id_; }
    const std::string& path() const { return path_; }

protected:
    std::string id_, path_;
};

/// Reads a tokenizer file: a Hugging Face tokenizer.json (byte-level BPE) or a SentencePiece
/// model, told apart by content. Throws lathe::Error "`path`: reason" for a file that is neither,
/// or that uses a part Lathe does not implement (named).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

/// The id of a tokenizer file without loading it.
std::string tokenizer_file_id(const std::string& path);

/// The name a tokenizer file with these bytes takes in a checkpoint or model folder, by kind:
/// "tokenizer.json" (a JSON object) or "tokenizer.model" (anything else: SentencePiece).
std::string canonical_file_name(std::string_view bytes);

/// The tokenizer file in a checkpoint or model folder (tokenizer.json, else tokenizer.model), or
/// "" when it has none.
std::string find_tokenizer_file(const std::string& folder);

/// The vocabulary size OLMo-core would give the model for this tokenizer: rounded up to a
/// multiple of 128.
inline int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple = 128) {
    return (vocab_size + multiple - 1) / multiple * multiple;
}

/// Training a SentencePiece model (`lathe-engine tokenizer train`).
struct SentencePieceTrainOptions {
    int64_t vocab_size = 8000;
    std::string model_type = "bpe";  ///< "bpe" or "unigram"
    double character_coverage = 0.9995;
    /// Unknown characters fall back to their UTF-8 bytes (as Llama's tokenizers do), so every
    /// text decodes back to itself; with the identity normalization this is lossless.
    bool byte_fallback = true;
    /// The most sentences kept for training (sampled evenly over the input when there are more).
    int64_t max_sentences = 2000000;
    int threads = 0;  ///< 0: every core
    uint32_t seed = 0;
};

/// Trains a SentencePiece model on the sentences `next` yields (it returns false at the end) and
/// returns the model file's bytes. Throws lathe::Error with SentencePiece's reason on failure (too
/// little text for the vocabulary, ...).
std::string train_sentencepiece(const std::function<bool(std::string&)>& next,
                                const SentencePieceTrainOptions& options);

}  // namespace lathe::tokenizer
