#include "engine/data/builtin_corpus.h"

#include "engine/data/rng.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace lathe::data {

namespace {

constexpr int kWords = 600;
constexpr int kSuccessors = 6;

// Sample from a Zipf-like distribution over n items given precomputed cumulative weights.
int sample(SplitMix64& rng, const std::vector<double>& cum) {
    double r = rng.uniform() * cum.back();
    auto it = std::upper_bound(cum.begin(), cum.end(), r);
    return static_cast<int>(
        std::min<std::ptrdiff_t>(it - cum.begin(), static_cast<std::ptrdiff_t>(cum.size()) - 1));
}

std::vector<double> zipf_cum(int n, double s) {
    std::vector<double> cum(n);
    double acc = 0;
    for (int i = 0; i < n; ++i) {
        acc += 1.0 / std::pow(i + 1, s);
        cum[i] = acc;
    }
    return cum;
}

}  // namespace

std::vector<uint8_t> generate_builtin_corpus(int64_t num_tokens, uint64_t seed) {
    SplitMix64 rng(seed * 0x2545F4914F6CDD1Dull + 17);
    // Letters with rough English frequencies make pseudo-words look like words.
    const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
    auto letter_cum = zipf_cum(static_cast<int>(letters.size()), 1.0);
    std::vector<std::string> lexicon;
    lexicon.reserve(kWords);
    while (static_cast<int>(lexicon.size()) < kWords) {
        int len = 2 + static_cast<int>(rng.below(7));
        std::string w;
        for (int i = 0; i < len; ++i)
            w += letters[static_cast<std::size_t>(sample(rng, letter_cum))];
        lexicon.push_back(w);
    }
    // Each word's successors: a few favourites drawn from the Zipfian word distribution.
    auto word_cum = zipf_cum(kWords, 1.1);
    std::vector<std::array<int, kSuccessors>> successors(kWords);
    for (auto& s : successors) {
        for (auto& x : s) x = sample(rng, word_cum);
    }
    auto succ_cum = zipf_cum(kSuccessors, 1.5);

    std::vector<uint8_t> out;
    out.reserve(static_cast<std::size_t>(num_tokens));
    auto emit = [&](const std::string& s) {
        for (char c : s) {
            if (static_cast<int64_t>(out.size()) >= num_tokens) return;
            out.push_back(static_cast<uint8_t>(c));
        }
    };
    int word = sample(rng, word_cum);
    int sentences_in_paragraph = 0;
    while (static_cast<int64_t>(out.size()) < num_tokens) {
        int n_words = 4 + static_cast<int>(rng.below(10));
        for (int i = 0; i < n_words; ++i) {
            // Mostly follow the chain; sometimes jump, so every word stays reachable.
            word = rng.uniform() < 0.9 ? successors[static_cast<std::size_t>(word)]
                                                   [static_cast<std::size_t>(sample(rng, succ_cum))]
                                       : sample(rng, word_cum);
            std::string w = lexicon[static_cast<std::size_t>(word)];
            if (i == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
            emit(w);
            if (i + 1 < n_words) emit(rng.uniform() < 0.08 ? ", " : " ");
        }
        emit(rng.uniform() < 0.15 ? "? " : ". ");
        if (++sentences_in_paragraph >= 3 + static_cast<int>(rng.below(4))) {
            emit("\n");
            sentences_in_paragraph = 0;
        }
    }
    return out;
}

double corpus_unigram_entropy(const std::vector<uint8_t>& tokens) {
    std::array<double, 256> counts{};
    for (auto t : tokens) counts[t] += 1;
    double h = 0, n = static_cast<double>(tokens.size());
    for (double c : counts) {
        if (c > 0) h -= (c / n) * std::log(c / n);
    }
    return h;
}

}  // namespace lathe::data
