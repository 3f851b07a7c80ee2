#include "engine/model/transformer.h"

#include "engine/config/memory_estimate.h"

#include "engine/model/activation_checkpoint.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/kernels/common.h"
#include "engine/model/kernels/qk_norm_rope.h"
#include "engine/model/kernels/qk_norm_rope_launch.h"
#include "engine/model/kernels/residual_norm.h"
#include "engine/model/kernels/residual_norm_launch.h"
#include "engine/model/kernels/rope.h"
#include "engine/model/kernels/swiglu.h"
#include "engine/model/varlen_attention.h"
#include "engine/util/error.h"
#include "engine/util/glob.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace lathe::model {

namespace F = torch::nn::functional;
using kernels::fused_residual_norm;
using kernels::fused_rope;
using kernels::fused_swiglu;
using kernels::runs_fused;

RMSNormImpl::RMSNormImpl(int64_t size, double eps_, bool fused_) : eps(eps_), fused(fused_) {
    weight = register_parameter("weight", torch::ones({size}));
}

torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    // Autocast would run it in fp32 (upcasting x); the kernel does its arithmetic in fp32 anyway.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto w = weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
    return std::get<0>(at::_fused_rms_norm(x, {x.size(-1)}, w, eps));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
    // Tensor parallelism reduces the mean of squares over the group: no fused kernel does that.
    // ATen's kernel, so it needs only CUDA, not Lathe's kernels compiled in.
    if (fused && !tp && x.is_cuda()) return fused_rms_norm(x, weight, eps);
    auto xf = x.to(torch::kFloat32);
    auto mean_sq =
        tp ? sum_over_tp(xf.pow(2).sum(-1, /*keepdim=*/true), *tp) / static_cast<double>(full_size)
           : xf.pow(2).mean(-1, /*keepdim=*/true);
    auto normed = xf * torch::rsqrt(mean_sq + eps);
    return (normed * weight.to(torch::kFloat32)).to(x.scalar_type());
}

namespace {

// The inverse frequencies of OLMo-core's RoPEScalingConfig subclasses (rope.py), which equal
// transformers' rope_init_fn for "linear", "llama3" and "yarn" (modeling_rope_utils.py).
std::vector<double> scaled_inv_freq(int64_t dim, double theta, const config::RoPEScalingConfig& s,
                                    double& attention_factor) {
    using Name = config::RoPEScalingName;
    std::vector<double> f(static_cast<std::size_t>(dim / 2));
    for (std::size_t i = 0; i < f.size(); ++i)
        f[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
    attention_factor = s.attention_rescale_factor.value_or(1.0);
    const double pi = 3.14159265358979323846;
    switch (s.name) {
        case Name::none:
            attention_factor = 1.0;
            break;
        case Name::pi:
            for (auto& x : f) x /= s.factor;
            break;
        case Name::stepwise: {
            const double low_ff = 1.0 / (1.0 - s.low_freq_proportion);
            const double high_ff = 1.0 / s.high_freq_proportion;
            const double old = static_cast<double>(s.old_context_len);
            const double low_band = old / low_ff, high_band = old / high_ff;
            for (auto& x : f) {
                const double wavelen = 2 * pi / x;
                if (wavelen > low_band) {
                    x /= s.factor;
                } else if (wavelen >= high_band && high_ff != low_ff) {
                    const double w = (old / wavelen - low_ff) / (high_ff - low_ff);
                    x = (1 - w) * x / s.factor + w * x;
                }
            }
            break;
        }
        case Name::yarn: {
            auto dim_from_rot = [&](double rotations) {
                return static_cast<double>(dim) *
                       std::log(static_cast<double>(s.old_context_len) / (rotations * 2.0 * pi)) /
                       (2.0 * std::log(theta));
            };
            const double low = std::max(std::floor(dim_from_rot(s.beta_fast)), 0.0);
            const double high =
                std::min(std::ceil(dim_from_rot(s.beta_slow)), static_cast<double>(dim - 1));
            const double span = std::max(high - low, 1e-3);
            for (std::size_t i = 0; i < f.size(); ++i) {
                const double ramp = std::clamp((static_cast<double>(i) - low) / span, 0.0, 1.0);
                f[i] = f[i] / s.factor * ramp + f[i] * (1.0 - ramp);
            }
            if (!s.attention_rescale_factor)
                attention_factor = s.factor > 1 ? 0.1 * std::log(s.factor) + 1.0 : 1.0;
            break;
        }
    }
    return f;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double theta,
                                 const config::RoPEScalingConfig& scaling, bool fused_)
    : fused(fused_), head_dim_(head_dim) {
    // In the body: attention_factor_'s own initialiser would run after inv_freq_'s.
    inv_freq_ = scaled_inv_freq(head_dim, theta, scaling, attention_factor_);
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::tables(int64_t seq_len,
                                                                const torch::Device& device) {
    if (!cos_.defined() || cos_.size(0) < seq_len || cos_.device() != device) {
        torch::NoGradGuard no_grad;
        auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
        // Double precision for the angles, then fp32 tables: positions up to 1e5+ stay accurate.
        auto inv_freq = torch::tensor(inv_freq_, torch::kFloat64);
        auto pos = torch::arange(seq_len, torch::kFloat64);
        auto freqs = torch::outer(pos, inv_freq);
        auto emb = torch::cat({freqs, freqs}, -1);
        // Tables a CUDA graph captured stay alive: its replays read them where they were.
        if (cos_.defined()) retired_.insert(retired_.end(), {cos_, sin_});
        cos_ = (emb.cos() * attention_factor_).to(opts);
        sin_ = (emb.sin() * attention_factor_).to(opts);
    }
    return {cos_.narrow(0, 0, seq_len), sin_.narrow(0, 0, seq_len)};
}

namespace {
torch::Tensor rotate_half(const torch::Tensor& x) {
    auto halves = x.chunk(2, -1);
    return torch::cat({-halves[1], halves[0]}, -1);
}
}  // namespace

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::apply(const torch::Tensor& q,
                                                               const torch::Tensor& k,
                                                               const torch::Tensor& positions) {
    const int64_t B = q.size(0), T = q.size(1);
    auto [cos, sin] = tables(T, q.device());
    if (positions.defined()) {  // per-row positions: gathered tables, the reference ops
        cos = cos.index_select(0, positions.reshape({-1})).view({B, T, 1, head_dim_});
        sin = sin.index_select(0, positions.reshape({-1})).view({B, T, 1, head_dim_});
    } else if (runs_fused(fused, q)) {
        return {fused_rope(q, cos, sin), fused_rope(k, cos, sin)};
    } else {
        cos = cos.view({1, T, 1, head_dim_});
        sin = sin.view({1, T, 1, head_dim_});
    }
    auto qf = q.to(torch::kFloat32), kf = k.to(torch::kFloat32);
    auto q_out = qf * cos + rotate_half(qf) * sin;
    auto k_out = kf * cos + rotate_half(kf) * sin;
    return {q_out.to(q.scalar_type()), k_out.to(k.scalar_type())};
}

AttentionOptions AttentionOptions::of(const config::ModelConfig& c, int64_t layer) {
    AttentionOptions o;
    o.d_model = c.d_model;
    o.n_heads = c.n_heads;
    o.n_kv_heads = c.kv_heads();
    o.head_dim = c.resolved_head_dim();
    o.qkv_bias = c.qkv_bias;
    o.qk_norm = c.qk_norm;
    o.head_qk_norm = c.use_head_qk_norm;
    o.norm_eps = c.layer_norm_eps;
    o.window = c.sliding_window.window(layer, c.n_layers);
    o.fused_rms_norm = c.fused.rms_norm;
    o.fused_qk_norm_rope = c.fused.qk_norm_rope;
    o.fused_varlen = c.fused.varlen_attention;
    return o;
}

AttentionImpl::AttentionImpl(const AttentionOptions& o, std::shared_ptr<RotaryEmbedding> rope_)
    : head_qk_norm(o.head_qk_norm),
      fused_qk_norm_rope(o.fused_qk_norm_rope),
      fused_varlen(o.fused_varlen),
      window(o.window),
      n_heads(o.n_heads),
      n_kv_heads(o.n_kv_heads),
      head_dim(o.head_dim),
      rope(std::move(rope_)) {
    auto lin = [](int64_t in, int64_t out, bool bias) {
        return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
    };
    w_q = register_module("w_q", lin(o.d_model, n_heads * head_dim, o.qkv_bias));
    w_k = register_module("w_k", lin(o.d_model, n_kv_heads * head_dim, o.qkv_bias));
    w_v = register_module("w_v", lin(o.d_model, n_kv_heads * head_dim, o.qkv_bias));
    w_out = register_module("w_out", lin(n_heads * head_dim, o.d_model, false));
    if (o.qk_norm) {
        q_norm = register_module("q_norm", RMSNorm(head_qk_norm ? head_dim : n_heads * head_dim,
                                                   o.norm_eps, o.fused_rms_norm));
        k_norm = register_module("k_norm", RMSNorm(head_qk_norm ? head_dim : n_kv_heads * head_dim,
                                                   o.norm_eps, o.fused_rms_norm));
    }
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> AttentionImpl::qkv(const torch::Tensor& x,
                                                                           const Rotate& rotate) {
    const int64_t B = x.size(0), T = x.size(1);
    auto q = w_q(x), k = w_k(x), v = w_v(x);
    if (q_norm && !head_qk_norm) {
        q = q_norm(q);
        k = k_norm(k);
    }
    q = q.view({B, T, n_heads, head_dim});
    k = k.view({B, T, n_kv_heads, head_dim});
    v = v.view({B, T, n_kv_heads, head_dim});
    if (q_norm && head_qk_norm) {
        q = q_norm(q);
        k = k_norm(k);
    }
    std::tie(q, k) = rotate(q, k);
    // SDPA wants (B, H, T, D).
    return {q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)};
}

bool AttentionImpl::fuses_qk_norm_rope(const torch::Tensor& x) const {
    // The kernel normalises a whole projection or one head a row.
    return runs_fused(fused_qk_norm_rope && q_norm && !tp, x,
                      head_qk_norm ? head_dim : n_heads * head_dim, kernels::qk_norm_rope::kMaxRow);
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> AttentionImpl::fused_qkv(
    const torch::Tensor& x, const torch::Tensor& positions) {
    const int64_t B = x.size(0), T = x.size(1);
    auto [cos, sin] = rope->tables(T, x.device());
    auto q = w_q(x), k = w_k(x), v = w_v(x);
    if (head_qk_norm) {
        q = q.view({B, T, n_heads, head_dim});
        k = k.view({B, T, n_kv_heads, head_dim});
    }
    q = model::kernels::fused_qk_norm_rope(q, q_norm->weight, q_norm->eps, cos, sin, positions,
                                           head_dim);
    k = model::kernels::fused_qk_norm_rope(k, k_norm->weight, k_norm->eps, cos, sin, positions,
                                           head_dim);
    v = v.view({B, T, n_kv_heads, head_dim});
    return {q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)};
}

torch::Tensor AttentionImpl::output(const torch::Tensor& att) {
    const int64_t B = att.size(0), T = att.size(2);
    auto out = w_out(att.transpose(1, 2).reshape({B, T, n_heads * head_dim}));
    return tp ? reduce_from_tp(out, *tp) : out;
}

torch::Tensor document_causal_mask(const torch::Tensor& doc_ids) {
    const int64_t T = doc_ids.size(1);
    auto causal =
        torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(doc_ids.device()))
            .tril();
    return (doc_ids.unsqueeze(2) == doc_ids.unsqueeze(1)).logical_and_(causal).unsqueeze(1);
}

torch::Tensor document_positions(const torch::Tensor& doc_ids) {
    const int64_t T = doc_ids.size(1);
    auto index = torch::arange(T, doc_ids.options()).expand_as(doc_ids);
    auto first = torch::ones_like(doc_ids, torch::kBool);  // a document's first token
    first.narrow(1, 1, T - 1).copy_(doc_ids.narrow(1, 1, T - 1) != doc_ids.narrow(1, 0, T - 1));
    auto start = std::get<0>(torch::where(first, index, torch::zeros_like(index)).cummax(1));
    return index - start;
}

Documents document_spans(const torch::Tensor& host_doc_ids, const torch::Device& device) {
    if (host_doc_ids.dim() != 2 || !host_doc_ids.is_cpu())
        throw Error("document_spans: the document ids must be (B, T) on the host, not " +
                    c10::str(host_doc_ids.sizes(), " on ", host_doc_ids.device()));
    const auto ids = host_doc_ids.to(torch::kInt64).contiguous();
    const int64_t B = ids.size(0), T = ids.size(1);
    if (B * T > std::numeric_limits<int32_t>::max())
        throw Error("document_spans: " + std::to_string(B * T) + " tokens overflow int32 offsets");
    const int64_t* p = ids.data_ptr<int64_t>();
    std::vector<int32_t> cu{0};
    int64_t longest = 0;
    for (int64_t b = 0; b < B; ++b) {
        int64_t start = 0;
        for (int64_t t = 1; t <= T; ++t) {
            if (t < T && p[b * T + t] == p[b * T + t - 1]) continue;
            cu.push_back(static_cast<int32_t>(b * T + t));
            longest = std::max(longest, t - start);
            start = t;
        }
    }
    Documents out;
    out.cu_seqlens = torch::tensor(cu, torch::kInt32).to(device, /*non_blocking=*/true);
    out.max_len = longest;
    return out;
}

const torch::Tensor& DocumentContext::causal_mask() {
    if (!mask_.defined()) mask_ = document_causal_mask(doc_ids);
    return mask_;
}

const torch::Tensor& DocumentContext::positions() {
    if (!positions_.defined()) positions_ = document_positions(doc_ids);
    return positions_;
}

torch::Tensor windowed_attention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t window, bool gqa,
                                 const torch::Tensor& doc_ids) {
    const int64_t T = q.size(2);
    const int64_t block = std::max<int64_t>(window, 32);
    const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    std::vector<torch::Tensor> parts;
    for (int64_t s = 0; s < T; s += block) {
        const int64_t e = std::min(T, s + block);
        const int64_t k0 = std::max<int64_t>(0, s - window + 1);
        auto qi = torch::arange(s, e, opts).view({-1, 1});
        auto kj = torch::arange(k0, e, opts).view({1, -1});
        auto mask = (kj <= qi) & (kj > qi - window);
        if (doc_ids.defined())  // (B, 1, queries, keys): the window, within the document
            mask = (doc_ids.narrow(1, s, e - s).unsqueeze(2) ==
                    doc_ids.narrow(1, k0, e - k0).unsqueeze(1))
                       .logical_and_(mask)
                       .unsqueeze(1);
        parts.push_back(at::scaled_dot_product_attention(
            q.narrow(2, s, e - s), k.narrow(2, k0, e - k0), v.narrow(2, k0, e - k0), mask, 0.0,
            /*is_causal=*/false, std::nullopt, gqa));
    }
    return parts.size() == 1 ? parts[0] : torch::cat(parts, 2);
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& input) {
    const auto x = tp ? copy_to_tp(input, *tp) : input;
    const bool masked = documents && documents->doc_ids.defined();
    const auto positions = masked ? documents->positions() : torch::Tensor();
    auto [q, k, v] = fuses_qk_norm_rope(x)
                         ? fused_qkv(x, positions)
                         : qkv(x, [&](const torch::Tensor& q_, const torch::Tensor& k_) {
                               return rope->apply(q_, k_, positions);
                           });
    const int64_t T = q.size(2);
    const bool gqa = n_kv_heads != n_heads;
    if (window > 0 && window < T)
        return output(windowed_attention(q, k, v, window, gqa,
                                         masked ? documents->doc_ids : torch::Tensor()));
    if (masked && fused_varlen && documents->cu_seqlens.defined() && varlen_attention_fits(q)) {
        // Document masking on CUDA: flash attention over each document's span, no (T, T) mask.
        const int64_t B = q.size(0);
        auto flat = [B, T](const torch::Tensor& t) {  // (B, H, T, D) -> (B * T, H, D)
            return t.transpose(1, 2).reshape({B * T, t.size(1), t.size(3)});
        };
        auto att =
            varlen_attention(flat(q), flat(k), flat(v), documents->cu_seqlens, documents->max_len);
        return output(att.view({B, T, n_heads, head_dim}).transpose(1, 2));
    }
    if (masked)  // document masking: SDPA with the (B, 1, T, T) mask
        return output(at::scaled_dot_product_attention(q, k, v, documents->causal_mask(), 0.0,
                                                       /*is_causal=*/false, std::nullopt, gqa));
    return output(at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                   /*is_causal=*/true, /*scale=*/std::nullopt,
                                                   /*enable_gqa=*/gqa));
}

FeedForwardImpl::FeedForwardImpl(int64_t d_model, int64_t hidden, bool fused_) : fused(fused_) {
    auto lin = [](int64_t in, int64_t out) {
        return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
    };
    w1 = register_module("w1", lin(d_model, hidden));
    w2 = register_module("w2", lin(hidden, d_model));
    w3 = register_module("w3", lin(d_model, hidden));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& input) {
    const auto x = tp ? copy_to_tp(input, *tp) : input;
    auto out =
        runs_fused(fused, x) ? w2(fused_swiglu(w1(x), w3(x))) : w2(torch::silu(w1(x)) * w3(x));
    return tp ? reduce_from_tp(out, *tp) : out;
}

BlockOptions BlockOptions::of(const config::ModelConfig& c, int64_t layer) {
    BlockOptions o;
    o.attention = AttentionOptions::of(c, layer);
    o.d_model = c.d_model;
    o.hidden = c.hidden_size();
    o.norm_eps = c.layer_norm_eps;
    o.pre_norm = c.block_name == config::BlockName::default_;
    o.fused_rms_norm = c.fused.rms_norm;
    o.fused_swiglu = c.fused.swiglu;
    o.fused_residual_norm = c.fused.residual_norm;
    return o;
}

BlockImpl::BlockImpl(const BlockOptions& o, std::shared_ptr<RotaryEmbedding> rope)
    : pre_norm(o.pre_norm), fused_residual_norm(o.fused_residual_norm) {
    attention = register_module("attention", Attention(o.attention, std::move(rope)));
    attention_norm =
        register_module("attention_norm", RMSNorm(o.d_model, o.norm_eps, o.fused_rms_norm));
    feed_forward =
        register_module("feed_forward", FeedForward(o.d_model, o.hidden, o.fused_swiglu));
    feed_forward_norm =
        register_module("feed_forward_norm", RMSNorm(o.d_model, o.norm_eps, o.fused_rms_norm));
}

namespace {

// A post-norm block's residual step x + norm(y): one kernel each way where it applies.
torch::Tensor add_normed(bool fused, const torch::Tensor& x, const torch::Tensor& y,
                         RMSNorm& norm) {
    if (runs_fused(fused && !norm->tp, y, y.size(-1), kernels::residual_norm::kMaxRow))
        return fused_residual_norm(x, y, norm->weight, norm->eps);
    return x + norm(y);
}

}  // namespace

torch::Tensor BlockImpl::attention_residual(
    const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& attend) {
    return pre_norm ? x + attend(attention_norm(x))
                    : add_normed(fused_residual_norm, x, attend(x), attention_norm);
}

torch::Tensor BlockImpl::feed_forward_residual(const torch::Tensor& h) {
    return pre_norm ? h + feed_forward(feed_forward_norm(h))
                    : add_normed(fused_residual_norm, h, feed_forward(h), feed_forward_norm);
}

torch::Tensor BlockImpl::run_part(Part part, const torch::Tensor& x) {
    switch (part) {
        case kAttention:
            return attention_residual(x, [this](const torch::Tensor& a) { return attention(a); });
        case kFeedForward:
            return feed_forward_residual(x);
        case kWhole:
            break;
    }
    return forward(x);
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
    auto h = checkpoint_attention ? checkpointed(*this, kAttention, x) : run_part(kAttention, x);
    return checkpoint_feed_forward ? checkpointed(*this, kFeedForward, h)
                                   : run_part(kFeedForward, h);
}

void TransformerImpl::set_activation_checkpointing(
    const config::ActivationCheckpointingConfig& ac) {
    checkpoint_blocks.assign(static_cast<std::size_t>(cfg.n_layers), false);
    for (int64_t i = 0; i < cfg.n_layers; ++i) {
        auto b = blocks[static_cast<std::size_t>(i)]->as<Block>();
        const auto parts = config::checkpointed_parts(ac, i);
        checkpoint_blocks[static_cast<std::size_t>(i)] = parts.whole;
        b->checkpoint_attention = parts.attention;
        b->checkpoint_feed_forward = parts.feed_forward;
    }
}

TransformerImpl::TransformerImpl(const config::ModelConfig& c) : cfg(c) {
    rope = std::make_shared<RotaryEmbedding>(c.resolved_head_dim(), c.rope_theta, c.rope_scaling,
                                             c.fused.rope);
    const auto& sw = c.sliding_window;
    auto window_rope = !sw.own_rope()
                           ? rope
                           : std::make_shared<RotaryEmbedding>(
                                 c.resolved_head_dim(), sw.rope_theta.value_or(c.rope_theta),
                                 sw.rope_scaling.value_or(c.rope_scaling), c.fused.rope);
    embeddings = register_module("embeddings", torch::nn::Embedding(c.vocab_size, c.d_model));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.n_layers; ++i) {
        Block b(BlockOptions::of(c, i), sw.window(i, c.n_layers) > 0 ? window_rope : rope);
        b->attention->documents = documents;
        blocks->push_back(b);
    }
    lm_head_norm =
        register_module("lm_head_norm", RMSNorm(c.d_model, c.layer_norm_eps, c.fused.rms_norm));
    if (!c.tie_word_embeddings)
        lm_head = register_module(
            "lm_head",
            torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
    init_weights();
    if (c.dtype == config::DType::bfloat16) to(torch::kBFloat16);
    for (const auto& p : parameters()) num_params_ += p.numel();
    for (const auto& m : *blocks) {
        auto b = m->as<Block>();
        int64_t attn_params = 0, ffn_params = 0;
        for (const auto& p : b->attention->parameters()) attn_params += p.numel();
        for (const auto& p : b->feed_forward->parameters()) ffn_params += p.numel();
        flops_fixed_ += 6 * attn_params + 6 * ffn_params;
        flops_per_seq_ += 12 * b->attention->n_heads * b->attention->head_dim;
    }
    int64_t head_params = lm_head_weight().numel();
    for (const auto& p : lm_head_norm->parameters()) head_params += p.numel();
    flops_fixed_ += 6 * head_params;
}

torch::Tensor TransformerImpl::run_unit(int64_t unit, const torch::Tensor& x) {
    if (unit == 0) {
        if (tp.active())
            return vocab_parallel_embedding(x, embeddings->weight,
                                            tp.rank * embeddings->weight.size(0), *tp.group);
        return embeddings(x);
    }
    if (unit <= cfg.n_layers) {
        auto& b = *blocks[static_cast<std::size_t>(unit - 1)]->as<Block>();
        const auto i = static_cast<std::size_t>(unit - 1);
        if (i < checkpoint_blocks.size() && checkpoint_blocks[i])
            return checkpointed(b, BlockImpl::kWhole, x);
        return b.forward(x);
    }
    auto h = lm_head_norm(x);
    if (tp.active() && loss_parallel) h = copy_to_tp(h, *tp.group);
    return project_to_vocab(h);
}

void TransformerImpl::apply_tp(const dist::Group& group, bool loss_parallel_) {
    torch::NoGradGuard no_grad;
    const int64_t degree = group.size(), rank = group.rank();
    tp.group = &group;
    tp.degree = degree;
    tp.rank = rank;
    loss_parallel = loss_parallel_;
    if (degree <= 1) return;
    for (auto& p : named_parameters()) {
        const auto dim = tp_shard_dim(p.key(), loss_parallel, cfg.use_head_qk_norm);
        if (!dim) continue;
        auto& t = p.value();
        const int64_t part = t.size(*dim) / degree;
        t.set_data(t.narrow(*dim, rank * part, part).clone());
    }
    for (const auto& m : *blocks) {
        auto b = m->as<Block>();
        auto& a = b->attention;
        a->n_heads /= degree;
        a->n_kv_heads /= degree;
        a->tp = &group;
        if (a->q_norm && !a->head_qk_norm) {
            a->q_norm->tp = a->k_norm->tp = &group;
            a->q_norm->full_size = a->q_norm->weight.size(0) * degree;
            a->k_norm->full_size = a->k_norm->weight.size(0) * degree;
        }
        b->feed_forward->tp = &group;
    }
}

std::vector<std::pair<std::string, torch::Tensor*>> TransformerImpl::unit_parameters(int64_t unit) {
    std::vector<std::pair<std::string, torch::Tensor*>> out;
    if (unit == 0) {
        out.emplace_back("embeddings.weight", &embeddings->weight);
    } else if (unit <= cfg.n_layers) {
        auto b = blocks[static_cast<std::size_t>(unit - 1)]->as<Block>();
        const std::string p = "blocks." + std::to_string(unit - 1) + ".";
        auto& a = b->attention;
        out.emplace_back(p + "attention.w_q.weight", &a->w_q->weight);
        out.emplace_back(p + "attention.w_k.weight", &a->w_k->weight);
        out.emplace_back(p + "attention.w_v.weight", &a->w_v->weight);
        if (a->w_q->bias.defined()) {
            out.emplace_back(p + "attention.w_q.bias", &a->w_q->bias);
            out.emplace_back(p + "attention.w_k.bias", &a->w_k->bias);
            out.emplace_back(p + "attention.w_v.bias", &a->w_v->bias);
        }
        out.emplace_back(p + "attention.w_out.weight", &a->w_out->weight);
        if (a->q_norm) {
            out.emplace_back(p + "attention.q_norm.weight", &a->q_norm->weight);
            out.emplace_back(p + "attention.k_norm.weight", &a->k_norm->weight);
        }
        out.emplace_back(p + "attention_norm.weight", &b->attention_norm->weight);
        out.emplace_back(p + "feed_forward.w1.weight", &b->feed_forward->w1->weight);
        out.emplace_back(p + "feed_forward.w2.weight", &b->feed_forward->w2->weight);
        out.emplace_back(p + "feed_forward.w3.weight", &b->feed_forward->w3->weight);
        out.emplace_back(p + "feed_forward_norm.weight", &b->feed_forward_norm->weight);
    } else {
        out.emplace_back("lm_head_norm.weight", &lm_head_norm->weight);
        if (lm_head) out.emplace_back("lm_head.weight", &lm_head->weight);
    }
    return out;
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& input_ids, const Documents& docs) {
    // Every forward sets the document context: masked now, or plain causal (generation, eval).
    documents->doc_ids = docs.ids;
    documents->cu_seqlens = docs.ids.defined() ? docs.cu_seqlens : torch::Tensor();
    documents->max_len = docs.max_len;
    documents->mask_ = documents->positions_ = torch::Tensor();
    torch::Tensor h = input_ids;
    for (int64_t u = 0; u < num_units(); ++u) h = unit_runner ? unit_runner(u, h) : run_unit(u, h);
    return h;
}

LossOutput TransformerImpl::forward_loss(const torch::Tensor& input_ids,
                                         const torch::Tensor& labels, double div_factor,
                                         std::optional<double> z_loss_multiplier,
                                         int64_t ignore_index, const Documents& docs,
                                         const torch::Tensor& div_tensor) {
    auto divide = [&](const torch::Tensor& sum) {
        return div_tensor.defined() ? sum / div_tensor : sum / div_factor;
    };
    // The LM head's output in its own dtype: the fused loss widens bf16 logits a block at a time
    // (no fp32 copy of them is held for backward); the vocabulary-parallel loss takes fp32.
    auto logits = forward(input_ids, docs);
    auto flat_labels = labels.reshape({-1});
    if (tp.active() && loss_parallel) {
        auto flat = logits.to(torch::kFloat32).view({-1, logits.size(-1)});
        // This rank holds a slice of the vocabulary's logits: the parallel cross-entropy.
        auto [ce_sum, z_sum] =
            vocab_parallel_cross_entropy(flat, flat_labels, tp.rank * flat.size(1), ignore_index,
                                         z_loss_multiplier.has_value(), *tp.group);
        LossOutput out;
        out.loss = divide(ce_sum);
        out.ce_loss = out.loss.detach();
        if (z_loss_multiplier) {
            auto z = divide(*z_loss_multiplier * z_sum);
            out.loss = out.loss + z;
            out.z_loss = z.detach();
        }
        return out;
    }
    auto sums = fused_cross_entropy(logits.view({-1, logits.size(-1)}), flat_labels, ignore_index,
                                    z_loss_multiplier.has_value());
    LossOutput out;
    out.loss = divide(sums.ce);
    out.ce_loss = out.loss.detach();
    if (z_loss_multiplier) {
        auto z = divide(*z_loss_multiplier * sums.z);
        out.loss = out.loss + z;
        out.z_loss = z.detach();
    }
    return out;
}

void trunc_normal_(torch::Tensor& t, double std, at::Generator& gen) {
    // Inverse-CDF sampling, as torch.nn.init.trunc_normal_ does: uniform in [cdf(a), cdf(b)] mapped
    // back through erfinv, so every draw lies in [-3 std, 3 std].
    torch::NoGradGuard no_grad;
    const double a = -3.0, b = 3.0;
    auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
    double l = cdf(a), u = cdf(b);
    auto tmp = torch::empty(t.sizes(), torch::kFloat32);
    tmp.uniform_(2 * l - 1, 2 * u - 1, gen);
    tmp.erfinv_();
    tmp.mul_(std * std::sqrt(2.0));
    tmp.clamp_(a * std, b * std);
    t.copy_(tmp);
}

void TransformerImpl::init_weights() {
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(cfg.init_seed));
    const double std = cfg.init_std;
    trunc_normal_(embeddings->weight, std, gen);
    for (const auto& m : *blocks) {
        auto b = m->as<Block>();
        auto& att = b->attention;
        trunc_normal_(att->w_q->weight, std, gen);
        trunc_normal_(att->w_k->weight, std, gen);
        trunc_normal_(att->w_v->weight, std, gen);
        trunc_normal_(att->w_out->weight, std, gen);
        auto& ff = b->feed_forward;
        trunc_normal_(ff->w1->weight, std, gen);
        trunc_normal_(ff->w3->weight, std, gen);
        trunc_normal_(ff->w2->weight, std, gen);
    }
    if (lm_head) trunc_normal_(lm_head->weight, std, gen);
    for (auto& p : named_parameters()) {
        if (p.key().find("norm") != std::string::npos) p.value().fill_(1.0);
        if (p.key().size() > 5 && p.key().compare(p.key().size() - 5, 5, ".bias") == 0)
            p.value().zero_();
    }
}

int64_t TransformerImpl::num_params() const {
    return num_params_;
}

int64_t TransformerImpl::num_non_embedding_params() const {
    return num_params_ - cfg.vocab_size * cfg.d_model;
}

int64_t TransformerImpl::num_flops_per_token(int64_t seq_len) const {
    return flops_fixed_ + flops_per_seq_ * seq_len;
}

}  // namespace lathe::model
