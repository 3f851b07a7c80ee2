// SentencePiece models through Debian's libsentencepiece: encoding, decoding and training. The
// library does the work; this file adapts it to Tokenizer and to Lathe's errors.
#include "engine/tokenizer/kinds.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <thread>
#include <unordered_map>

namespace lathe::tokenizer {

namespace {

class SentencePieceTokenizer final : public Tokenizer {
public:
    SentencePieceTokenizer(const std::string& path, const std::string& bytes) {
        const auto status = sp_.LoadFromSerializedProto(bytes);
        if (!status.ok())
            throw Error(path +
                        ": neither a Hugging Face tokenizer.json nor a SentencePiece model "
                        "(SentencePiece: " +
                        status.ToString() + ")");
        path_ = path;
        id_ = file_id_of(bytes);
    }

    std::vector<int64_t> encode(std::string_view text, bool add_special) const override {
        std::vector<int> ids;
        const auto status = sp_.Encode(text, &ids);
        if (!status.ok()) throw Error(path_ + ": cannot encode: " + status.ToString());
        std::vector<int64_t> out;
        out.reserve(ids.size() + 1);
        if (add_special && sp_.bos_id() >= 0) out.push_back(sp_.bos_id());
        out.insert(out.end(), ids.begin(), ids.end());
        return out;
    }

    // SentencePiece never writes control tokens (BOS, EOS, PAD) as text, with or without
    // skip_special, as Python's sentencepiece does.
    std::string decode(const std::vector<int64_t>& ids, bool /*skip_special*/) const override {
        std::vector<int> in;
        in.reserve(ids.size());
        const int64_t n = vocab_size();
        for (const int64_t id : ids) {
            if (id < 0 || id >= n)
                throw Error(path_ + ": token id " + std::to_string(id) +
                            " is outside the vocabulary (" + std::to_string(n) + " tokens)");
            in.push_back(static_cast<int>(id));
        }
        std::string text;
        const auto status = sp_.Decode(in, &text);
        if (!status.ok()) throw Error(path_ + ": cannot decode: " + status.ToString());
        return text;
    }

    int64_t vocab_size() const override { return sp_.GetPieceSize(); }
    std::optional<int64_t> eos_id() const override {
        return sp_.eos_id() >= 0 ? std::optional<int64_t>(sp_.eos_id()) : std::nullopt;
    }
    std::optional<int64_t> bos_id() const override {
        return sp_.bos_id() >= 0 ? std::optional<int64_t>(sp_.bos_id()) : std::nullopt;
    }
    std::string kind() const override { return "SentencePiece (.model)"; }
    std::string file_name() const override { return "tokenizer.model"; }

private:
    sentencepiece::SentencePieceProcessor sp_;
};

class FunctionSentences final : public sentencepiece::SentenceIterator {
public:
    explicit FunctionSentences(const std::function<bool(std::string&)>& next) : next_(next) {
        Next();
    }
    bool done() const override { return done_; }
    void Next() override { done_ = !next_(value_); }
    const std::string& value() const override { return value_; }
    sentencepiece::util::Status status() const override { return {}; }

private:
    const std::function<bool(std::string&)>& next_;
    std::string value_;
    bool done_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> make_sentencepiece(const std::string& path, const std::string& bytes) {
    return std::make_unique<SentencePieceTokenizer>(path, bytes);
}

std::string train_sentencepiece(const std::function<bool(std::string&)>& next,
                                const SentencePieceTrainOptions& o) {
    if (o.model_type != "bpe" && o.model_type != "unigram")
        throw Error("tokenizer type '" + o.model_type + "': use bpe or unigram");
    if (o.vocab_size < 8)
        throw Error("vocabulary size " + std::to_string(o.vocab_size) + ": too small");
    const int threads = o.threads > 0
                            ? o.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // Lossless by default: no normalization, whitespace kept as it is, bytes for unknown
    // characters. BOS = 1, EOS = 2 and <unk> = 0, as Llama's tokenizers have them.
    const std::unordered_map<std::string, std::string> kwargs = {
        {"model_type", o.model_type},
        {"vocab_size", std::to_string(o.vocab_size)},
        {"character_coverage", std::to_string(o.character_coverage)},
        {"byte_fallback", o.byte_fallback ? "true" : "false"},
        {"normalization_rule_name", "identity"},
        {"remove_extra_whitespaces", "false"},
        {"split_digits", "true"},
        {"allow_whitespace_only_pieces", "true"},
        {"input_sentence_size", std::to_string(o.max_sentences)},
        {"shuffle_input_sentence", "true"},
        {"num_threads", std::to_string(threads)},
        {"model_prefix", ""},
    };
    sentencepiece::SetRandomGeneratorSeed(o.seed);
    FunctionSentences sentences(next);
    std::string model;
    const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &sentences, &model);
    if (!status.ok()) throw Error("SentencePiece training failed: " + status.ToString());
    if (model.empty()) throw Error("SentencePiece training failed: no model came out");
    return model;
}

}  // namespace lathe::tokenizer
