#include "engine/model/generate.h"

#include "engine/util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace lathe::model {

namespace {

// One block's keys and values so far: (B, kv_heads, S, head_dim).
struct LayerCache {
    torch::Tensor k, v;
};

torch::Tensor rotate_half(const torch::Tensor& x) {
    auto halves = x.chunk(2, -1);
    return torch::cat({-halves[1], halves[0]}, -1);
}

// x: (B, T, H, D); cos, sin: (B, T, 1, D) fp32.
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    auto xf = x.to(torch::kFloat32);
    return (xf * cos + rotate_half(xf) * sin).to(x.scalar_type());
}

// The new positions `ids` (B, T) through every block, with `cache` holding the earlier ones.
// `positions` (B, T): RoPE positions; `mask` (B, 1, T, S): which keys each query may see;
// `slots_q` (1, T) and `slots_k` (1, 1, S): the slots of the queries and keys, for sliding
// windows. Returns the logits of the last position: (B, vocab).
// `max_positions`: the RoPE tables cover this many positions, so they are computed once.
torch::Tensor forward_step(TransformerImpl& m, const torch::Tensor& ids,
                           const torch::Tensor& positions, const torch::Tensor& mask,
                           const torch::Tensor& slots_q, const torch::Tensor& slots_k,
                           std::vector<LayerCache>& cache, int64_t max_positions) {
    const int64_t B = ids.size(0), T = ids.size(1);
    const int64_t head_dim = m.cfg.resolved_head_dim();
    // cos and sin at `positions` for each RoPE the layers use (windowed layers may have their own).
    std::map<RotaryEmbedding*, std::pair<torch::Tensor, torch::Tensor>> angles;
    auto angles_of = [&](RotaryEmbedding& r) -> const std::pair<torch::Tensor, torch::Tensor>& {
        auto& a = angles[&r];
        if (!a.first.defined()) {
            auto [cos_table, sin_table] = r.tables(max_positions, ids.device());
            a.first = cos_table.index_select(0, positions.reshape({-1})).view({B, T, 1, head_dim});
            a.second = sin_table.index_select(0, positions.reshape({-1})).view({B, T, 1, head_dim});
        }
        return a;
    };
    // Each window's mask, made once per step for all the layers that share it.
    std::map<int64_t, torch::Tensor> window_masks;
    auto layer_mask = [&](int64_t window) {
        if (window <= 0) return mask;  // slots and positions differ by the row's padding only
        auto& wm = window_masks[window];
        if (!wm.defined()) wm = mask & (slots_k > slots_q.view({1, T, 1}) - window).unsqueeze(1);
        return wm;
    };
    auto x = m.embeddings(ids);
    for (std::size_t l = 0; l < m.blocks->size(); ++l) {
        auto b = m.blocks[l]->as<BlockImpl>();
        auto& a = *b->attention;
        auto& c = cache[l];
        const auto& angle = angles_of(*a.rope);  // (cos, sin)
        auto rotate = [&angle](const torch::Tensor& q, const torch::Tensor& k) {
            return std::make_pair(rope(q, angle.first, angle.second),
                                  rope(k, angle.first, angle.second));
        };
        auto attend = [&](const torch::Tensor& in) {
            auto [q, k, v] = a.qkv(in, rotate);
            // Keys and values stay at kv_heads: SDPA shares each among its query heads.
            c.k = c.k.defined() ? torch::cat({c.k, k}, 2) : k;
            c.v = c.v.defined() ? torch::cat({c.v, v}, 2) : v;
            auto att = at::scaled_dot_product_attention(q, c.k, c.v, layer_mask(a.window), 0.0,
                                                        /*is_causal=*/false, std::nullopt,
                                                        a.n_kv_heads != a.n_heads);
            return a.output(att);
        };
        x = b->feed_forward_residual(b->attention_residual(x, attend));
    }
    auto last = x.select(1, T - 1);
    return m.project_to_vocab(m.lm_head_norm(last)).to(torch::kFloat32);
}

int64_t sample(const torch::Tensor& logits, const GenerateOptions& o, at::Generator& gen) {
    if (o.temperature <= 0) return logits.argmax().item<int64_t>();
    auto l = logits / o.temperature;
    if (o.top_k > 0 && o.top_k < l.size(0)) {
        auto kth = std::get<0>(l.topk(o.top_k)).min();
        l = l.masked_fill(l < kth, -std::numeric_limits<float>::infinity());
    }
    if (o.top_p < 1.0) {
        auto [sorted, order] = l.sort(/*dim=*/-1, /*descending=*/true);
        auto cum = sorted.softmax(-1).cumsum(-1);
        // Keep the smallest prefix whose mass reaches top_p (always the first token).
        auto drop = (cum - sorted.softmax(-1)) >= o.top_p;
        auto drop_orig = torch::zeros_like(drop).scatter(0, order, drop);
        l = l.masked_fill(drop_orig, -std::numeric_limits<float>::infinity());
    }
    auto probs = l.softmax(-1);
    return torch::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
}

}  // namespace

std::vector<Generation> generate(Transformer& model,
                                 const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateOptions& o) {
    auto& m = *model;
    if (prompts.empty()) throw Error("generate: no prompts");
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        if (prompts[i].empty()) throw Error("prompt " + std::to_string(i + 1) + " is empty");
        for (auto id : prompts[i])
            if (id < 0 || id >= m.cfg.vocab_size)
                throw Error("prompt " + std::to_string(i + 1) + ": token id " + std::to_string(id) +
                            " is outside the vocabulary (0.." +
                            std::to_string(m.cfg.vocab_size - 1) + ")");
    }
    if (o.max_new_tokens < 0) throw Error("max_new_tokens must be at least 0");
    if (!std::isfinite(o.temperature) || o.temperature < 0)
        throw Error("temperature must be a finite number >= 0 (0: greedy), not " +
                    std::to_string(o.temperature));
    if (o.top_k < 0) throw Error("top_k must be at least 0 (0: off)");
    if (o.sample_vocab < 0 || o.sample_vocab > m.cfg.vocab_size)
        throw Error("the tokenizer's vocabulary (" + std::to_string(o.sample_vocab) +
                    " ids) does not fit the model's (" + std::to_string(m.cfg.vocab_size) + ")");
    if (!(o.top_p > 0 && o.top_p <= 1)) throw Error("top_p must be in (0, 1]");
    torch::NoGradGuard no_grad;
    const bool was_training = m.is_training();
    m.eval();
    const auto device = m.embeddings->weight.device();
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);

    const int64_t B = static_cast<int64_t>(prompts.size());
    std::size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.size());
    const int64_t P = static_cast<int64_t>(longest);
    // Left padding: row b's prompt occupies slots pad[b] .. P-1; its position p sits at slot
    // pad[b] + p. `valid` marks the slots that hold real tokens.
    std::vector<int64_t> pad(B);
    std::vector<std::vector<int64_t>> tokens(B);
    for (int64_t b = 0; b < B; ++b) {
        pad[b] = P - static_cast<int64_t>(prompts[b].size());
        tokens[b].assign(pad[b], 0);
        tokens[b].insert(tokens[b].end(), prompts[b].begin(), prompts[b].end());
    }
    auto opts_i = torch::TensorOptions().dtype(torch::kInt64);
    auto pad_t = torch::tensor(pad, opts_i).view({B, 1});

    std::vector<Generation> out(B);
    std::vector<bool> done(B, false);
    std::vector<LayerCache> cache(m.blocks->size());
    int64_t cached = 0;  // slots already in the cache
    for (int64_t step = 0; step < o.max_new_tokens; ++step) {
        const int64_t S = static_cast<int64_t>(tokens[0].size());
        if (!o.kv_cache) {
            cache.assign(m.blocks->size(), {});
            cached = 0;
        }
        const int64_t T = S - cached;
        std::vector<int64_t> flat;
        flat.reserve(B * T);
        for (int64_t b = 0; b < B; ++b)
            flat.insert(flat.end(), tokens[b].begin() + cached, tokens[b].end());
        auto ids = torch::tensor(flat, opts_i).view({B, T}).to(device);
        auto slots_q = torch::arange(cached, S, opts_i).view({1, T});
        auto positions = (slots_q - pad_t).clamp_min(0).to(device);
        auto slots_k = torch::arange(0, S, opts_i).view({1, 1, S});
        // A query sees the real keys at or before its slot; a padding query sees itself, so no
        // row of the softmax is empty.
        auto mask = (slots_k <= slots_q.view({1, T, 1})) & (slots_k >= pad_t.view({B, 1, 1}));
        mask = mask | (slots_k == slots_q.view({1, T, 1}));
        auto logits =
            forward_step(m, ids, positions, mask.unsqueeze(1).to(device), slots_q.to(device),
                         slots_k.to(device), cache, P + o.max_new_tokens);
        cached = S;
        logits = logits.cpu();
        // A padded vocabulary's extra rows are never chosen: no tokenizer could decode them.
        if (o.sample_vocab > 0 && o.sample_vocab < logits.size(-1))
            logits = logits.narrow(-1, 0, o.sample_vocab);
        auto logprobs = logits.log_softmax(-1);
        bool all_done = true;
        for (int64_t b = 0; b < B; ++b) {
            int64_t next = 0;
            if (!done[b]) {
                next = sample(logits[b], o, gen);
                auto& g = out[b];
                g.ids.push_back(next);
                g.logprobs.push_back(logprobs[b][next].item<double>());
                if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) {
                    g.finish_reason = "stop_id";
                    done[b] = true;
                } else if (o.stop && o.stop(static_cast<std::size_t>(b), g.ids)) {
                    g.finish_reason = "stop";
                    done[b] = true;
                }
            }
            tokens[b].push_back(next);
            all_done = all_done && done[b];
        }
        if (all_done) break;
    }
    for (auto& g : out)
        if (g.finish_reason.empty()) g.finish_reason = "length";
    if (was_training) m.train();
    return out;
}

}  // namespace lathe::model
