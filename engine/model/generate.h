// Text generation with a trained Transformer: a batch of prompts (left-padded), a KV cache per
// block, and temperature / top-k / top-p sampling from a seeded generator of its own.
#pragma once

#include "engine/model/transformer.h"

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace lathe::model {

struct GenerateOptions {
    int64_t max_new_tokens = 64;
    double temperature = 1.0;  ///< 0: greedy (argmax)
    int64_t top_k = 0;         ///< 0: off
    double top_p = 1.0;        ///< 1: off
    uint64_t seed = 0;
    bool kv_cache = true;  ///< false: recompute the whole sequence at every step (for checks)
    std::vector<int64_t> stop_ids;  ///< a row ends after one of these (it is kept)
    /// > 0: only ids below it are ever chosen (the tokenizer's vocabulary, where model.vocab_size
    /// is padded past it, as OLMo-core's generation masks the padded logits); 0: every id.
    int64_t sample_vocab = 0;
    /// Called after each new token of a row with the row's new ids so far; true ends the row.
    std::function<bool(std::size_t row, const std::vector<int64_t>& new_ids)> stop;
};

struct Generation {
    std::vector<int64_t> ids;      ///< the new tokens
    std::vector<double> logprobs;  ///< log-softmax of the raw logits at each chosen token
    std::string finish_reason;     ///< "length", "stop_id", "stop"
};

/// Generates from each prompt (non-empty ids below the vocabulary). Runs under NoGradGuard and in
/// eval mode, and leaves the model's mode and the global RNG as they were.
std::vector<Generation> generate(Transformer& model,
                                 const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateOptions& options);

}  // namespace lathe::model
