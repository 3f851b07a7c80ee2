// The built-in corpus: deterministic, generated text, nothing downloaded.
//
// A random lexicon of pseudo-words with Zipfian frequencies, a first-order Markov chain between
// words (each word prefers a handful of successors), sentences with capitals and punctuation, and
// paragraphs. Tokens are bytes. A byte-level model can learn spelling within words and the word
// transitions, so its loss falls far below the byte unigram entropy (reported by
// `corpus_unigram_entropy`).
#pragma once

#include <cstdint>
#include <vector>

namespace lathe::data {

/// Exactly `num_tokens` bytes of corpus text generated from `seed`.
std::vector<uint8_t> generate_builtin_corpus(int64_t num_tokens, uint64_t seed);

/// Entropy in nats of the byte unigram distribution of `tokens`.
double corpus_unigram_entropy(const std::vector<uint8_t>& tokens);

}  // namespace lathe::data
