// Decoder-only transformer as OLMo-core's TransformerConfig.llama_like builds it: token embedding,
// blocks, final RMSNorm and LM head (or the embedding table, tied). A block is reordered-norm
// (OLMo2/3: h = x + norm(attn(x)), out = h + norm(mlp(h))) or pre-norm (Llama, Qwen: h = x +
// attn(norm(x))); attention has optional q/k/v biases, QK-norm over the projection or per head,
// grouped-query heads, RoPE with optional scaling, and an optional sliding window; SwiGLU.
#pragma once

#include "engine/config/config.h"
#include "engine/model/tensor_parallel.h"

#include <torch/torch.h>

#include <functional>
#include <utility>

namespace lathe::model {

/// RMSNorm computed in fp32 and cast back: x * rsqrt(mean(x^2) + eps) * weight.
struct RMSNormImpl : torch::nn::Module {
    RMSNormImpl(int64_t size, double eps, bool fused = false);
    torch::Tensor forward(const torch::Tensor& x);
    torch::Tensor weight;
    double eps;
    /// model.fused.rms_norm: one kernel each way where the device has one (fused_rms_norm).
    bool fused = false;
    /// Tensor parallelism: x and weight are this rank's slice of `full_size` features; the mean
    /// of squares is taken over all of them (summed over the group).
    const dist::Group* tp = nullptr;
    int64_t full_size = 0;
};
TORCH_MODULE(RMSNorm);

/// RMSNorm through ATen's _fused_rms_norm (one kernel forward, one backward on CUDA; on the CPU ATen
/// decomposes it into the reference ops). The arithmetic is fp32 inside and the result has x's
/// dtype, as the reference's; under autocast the weight is cast to x's dtype, because the kernel
/// takes one dtype, which rounds it to bf16 as OLMo-core's bf16 parameters are.
torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

/// Rotary position embedding (NeoX style: rotate halves), tables in fp32, with OLMo-core's (and
/// transformers') RoPE scaling: the inverse frequencies and the factor cos and sin are scaled by.
class RotaryEmbedding {
public:
    RotaryEmbedding(int64_t head_dim, double theta, const config::RoPEScalingConfig& scaling = {},
                    bool fused = false);
    /// The head_dim / 2 inverse frequencies (scaled), in double precision.
    const std::vector<double>& inv_freq() const { return inv_freq_; }
    double attention_factor() const { return attention_factor_; }
    /// Rotates q and k of shape (B, T, H, D); positions 0..T-1, or `positions` (B, T) (each
    /// token's place in its document, under document masking).
    std::pair<torch::Tensor, torch::Tensor> apply(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& positions = {});
    /// cos and sin tables of shape (T, D), fp32.
    std::pair<torch::Tensor, torch::Tensor> tables(int64_t seq_len, const torch::Device& device);
    /// model.fused.rope: apply() through fused_rope on CUDA (when its kernel is compiled in).
    bool fused = false;

private:
    int64_t head_dim_;
    std::vector<double> inv_freq_;
    double attention_factor_ = 1.0;
    torch::Tensor cos_, sin_;             // cached for the longest sequence seen
    std::vector<torch::Tensor> retired_;  // earlier tables, kept for CUDA graphs that read them
};

/// Document masking for the forward pass under way (dataset.generate_doc_lengths): each token's
/// document, (B, T) int64 on the model's device, with which attention keeps to the documents packed
/// into a row and RoPE counts positions from each document's start, as OLMo-core's intra-document
/// masking does (flash varlen attention, RoPE by cu_doc_lens). The model sets it at every forward;
/// its layers share it, and activation checkpointing's recomputation in backward reads the same.
/// Undefined: plain causal attention.
struct DocumentContext {
    torch::Tensor doc_ids;
    /// The documents' spans over the flattened (B * T) tokens, when the caller made them
    /// (document_spans): cumulative lengths (documents + 1, int32, on the device) and the longest,
    /// for flash attention over variable-length documents on CUDA (varlen_attention.h).
    torch::Tensor cu_seqlens;
    int64_t max_len = 0;
    /// The (B, 1, T, T) mask of causal attention within documents, made on first use and shared by
    /// every full-attention layer (so that autograd keeps one copy).
    const torch::Tensor& causal_mask();
    /// (B, T): each token's position in its document.
    const torch::Tensor& positions();

private:
    torch::Tensor mask_, positions_;
    friend struct TransformerImpl;
};

/// What an attention module is built from (as LibTorch's options structs): the parts of the model
/// config it uses, for one layer.
struct AttentionOptions {
    int64_t d_model = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    bool qkv_bias = false;
    bool qk_norm = false;       ///< QK-norm ...
    bool head_qk_norm = false;  ///< ... per head (over head_dim), else over the projection
    double norm_eps = 1e-6;
    int64_t window = -1;              ///< sliding window of this layer; -1 full attention
    bool fused_rms_norm = false;      ///< model.fused.rms_norm, for the QK-norms
    bool fused_qk_norm_rope = false;  ///< model.fused.qk_norm_rope
    bool fused_varlen = false;        ///< model.fused.varlen_attention
    /// Block `layer`'s attention of model `c` (its window from c.sliding_window).
    static AttentionOptions of(const config::ModelConfig& c, int64_t layer);
};

struct AttentionImpl : torch::nn::Module {
    AttentionImpl(const AttentionOptions& o, std::shared_ptr<RotaryEmbedding> rope);
    torch::Tensor forward(const torch::Tensor& x);
    using Rotate = std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor& q,
                                                                         const torch::Tensor& k)>;
    /// Queries, keys and values of x (B, T, d_model): projected, QK-normed, rotated by `rotate`
    /// (q and k as (B, T, H, D)), returned as (B, H, T, D) for SDPA.
    std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> qkv(const torch::Tensor& x,
                                                                const Rotate& rotate);
    /// qkv() with each of q and k normalised and rotated by one fused_qk_norm_rope (at positions
    /// 0..T-1, or `positions` (B, T)); for when fuses_qk_norm_rope(x).
    std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> fused_qkv(
        const torch::Tensor& x, const torch::Tensor& positions);
    /// Whether forward() takes fused_qkv for x: model.fused.qk_norm_rope with QK-norm, no tensor
    /// parallelism, x on a device the fused kernels run on (CUDA; the CPU keeps the reference).
    bool fuses_qk_norm_rope(const torch::Tensor& x) const;
    /// The output projection of SDPA's result (B, H, T, D).
    torch::Tensor output(const torch::Tensor& att);
    torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_out{nullptr};
    RMSNorm q_norm{nullptr}, k_norm{nullptr};
    bool head_qk_norm = false;        ///< QK-norm per head (over head_dim)
    bool fused_qk_norm_rope = false;  ///< model.fused.qk_norm_rope
    bool fused_varlen = false;        ///< model.fused.varlen_attention
    int64_t window = -1;              ///< sliding window (tokens seen, itself included); -1 full
    int64_t n_heads, n_kv_heads, head_dim;  ///< heads on this rank (a slice under TP)
    std::shared_ptr<RotaryEmbedding> rope;
    const dist::Group* tp = nullptr;  ///< tensor parallelism: sum w_out's partial results
    /// The model's document masking (null outside a Transformer: plain causal attention).
    std::shared_ptr<DocumentContext> documents;
};
TORCH_MODULE(Attention);

/// Causal attention with a sliding window over q, k, v (B, H, T, D), a block of queries at a time:
/// the queries [s, s + block) see only the keys [s - window + 1, s + block), so the scores take
/// T * (block + window) work and memory instead of T^2 (block = max(window, 32)). The softmax of
/// each query runs over the same keys as with a whole (T, T) mask. With `doc_ids` (B, T), a query
/// sees only the keys of its own document as well (document masking).
torch::Tensor windowed_attention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t window, bool gqa,
                                 const torch::Tensor& doc_ids = {});

/// Causal attention within documents: query i sees key j <= i when doc_ids[i] == doc_ids[j]; the
/// (B, T, T) mask as SDPA takes it, (B, 1, T, T).
torch::Tensor document_causal_mask(const torch::Tensor& doc_ids);
/// Each token's position in its document (doc_ids (B, T) non-decreasing along T): 0 at every
/// document's first token.
torch::Tensor document_positions(const torch::Tensor& doc_ids);

/// SwiGLU: w2(silu(w1(x)) * w3(x)).
struct FeedForwardImpl : torch::nn::Module {
    FeedForwardImpl(int64_t d_model, int64_t hidden, bool fused = false);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
    const dist::Group* tp = nullptr;  ///< tensor parallelism: sum w2's partial results
    /// model.fused.swiglu: silu(w1 x) * w3 x through fused_swiglu on CUDA (the reference ops on
    /// the CPU, and when false).
    bool fused = false;
};
TORCH_MODULE(FeedForward);

/// What a block is built from: its attention's options and the rest of the model config it uses.
struct BlockOptions {
    AttentionOptions attention;
    int64_t d_model = 0, hidden = 0;
    double norm_eps = 1e-6;
    bool pre_norm = false;  ///< block_name default (Llama, Qwen); else reordered norm (OLMo2/3)
    bool fused_rms_norm = false;       ///< model.fused.rms_norm
    bool fused_swiglu = false;         ///< model.fused.swiglu
    bool fused_residual_norm = false;  ///< model.fused.residual_norm
    /// Block `layer` of model `c`.
    static BlockOptions of(const config::ModelConfig& c, int64_t layer);
};

struct BlockImpl : torch::nn::Module {
    BlockImpl(const BlockOptions& o, std::shared_ptr<RotaryEmbedding> rope);
    torch::Tensor forward(const torch::Tensor& x);
    /// The two residual steps with the block's norm placement; `attend` maps the attention
    /// branch's input to its output (the plain attention, or generation's cached one).
    torch::Tensor attention_residual(
        const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& attend);
    torch::Tensor feed_forward_residual(const torch::Tensor& h);
    bool pre_norm = false;  ///< block_name default: the norms take the branch inputs
    /// model.fused.residual_norm: a post-norm block's x + norm(branch) through
    /// fused_residual_norm on CUDA (the reference ops on the CPU, under tensor parallelism, and
    /// when false).
    bool fused_residual_norm = false;
    /// The parts activation checkpointing recomputes: the whole block, or one of its two residual
    /// steps, x + attention_norm(attention(x)) or h + feed_forward_norm(feed_forward(h)) (pre-norm:
    /// x + attention(attention_norm(x)), h + feed_forward(feed_forward_norm(h))). With
    /// the residual add inside, the part's input has the same consumers as without
    /// checkpointing, so its gradient is summed in the same order: bitwise the same.
    enum Part : int64_t { kWhole = 0, kAttention = 1, kFeedForward = 2 };
    torch::Tensor run_part(Part part, const torch::Tensor& x);
    /// Activation checkpointing of the branches (train_module.ac_config, selected_modules).
    bool checkpoint_attention = false, checkpoint_feed_forward = false;
    Attention attention{nullptr};
    RMSNorm attention_norm{nullptr};
    FeedForward feed_forward{nullptr};
    RMSNorm feed_forward_norm{nullptr};
};
TORCH_MODULE(Block);

/// Losses of one forward pass; `ce_loss` and `z_loss` are sums over non-ignored tokens divided by
/// the caller's div factor.
struct LossOutput {
    torch::Tensor loss;     ///< ce + z, what backward() is called on
    torch::Tensor ce_loss;  ///< detached
    torch::Tensor z_loss;   ///< detached; undefined when z-loss is off
};

/// A forward's document masking: each token's document (B, T) on the model's device, and
/// optionally their spans (document_spans), which let CUDA attention skip the (T, T) mask.
/// Converts from the ids alone; an undefined `ids` means plain causal attention.
struct Documents {
    Documents(torch::Tensor ids_ = {}) : ids(std::move(ids_)) {}  // NOLINT(*-explicit-*)
    torch::Tensor ids;
    torch::Tensor cu_seqlens;
    int64_t max_len = 0;
};

/// The spans of the documents of host_doc_ids (B, T) (data::document_ids, on the host: made
/// without waiting for the device): cumulative lengths over the flattened tokens, copied to
/// `device` without blocking, and the longest document.
Documents document_spans(const torch::Tensor& host_doc_ids, const torch::Device& device);

struct TransformerImpl : torch::nn::Module {
    explicit TransformerImpl(const config::ModelConfig& c);

    /// Logits of shape (B, T, vocab). With `doc_ids` (B, T) (data::document_ids), attention does
    /// not cross documents (dataset.generate_doc_lengths).
    torch::Tensor forward(const torch::Tensor& input_ids, const Documents& documents = {});

    /// The model as a sequence of units: 0 = embeddings, 1..n_layers = blocks, n_layers + 1 =
    /// final norm and LM head. run_unit() applies one; FSDP wraps each unit through `unit_runner`.
    int64_t num_units() const { return cfg.n_layers + 2; }
    torch::Tensor run_unit(int64_t unit, const torch::Tensor& x);
    /// The parameter members of a unit, with their names (FSDP rebinds them to gathered views).
    std::vector<std::pair<std::string, torch::Tensor*>> unit_parameters(int64_t unit);
    std::function<torch::Tensor(int64_t unit, const torch::Tensor& x)> unit_runner;

    /// Activation checkpointing as train_module.ac_config says (activation_checkpoint.h): which
    /// blocks, or which of their branches, recompute in backward instead of keeping activations.
    void set_activation_checkpointing(const config::ActivationCheckpointingConfig& ac);
    /// Blocks checkpointed whole (index = block).
    std::vector<bool> checkpoint_blocks;

    /// Forward plus cross-entropy (sum over tokens whose label != ignore_index, divided by
    /// div_factor) and optional z-loss (multiplier * logsumexp(logits)^2, same reduction).
    /// `div_tensor`, when defined, is the divisor instead: a one-element fp32 tensor on the device
    /// (a CUDA graph's input, which a host number baked into the graph could not be).
    LossOutput forward_loss(const torch::Tensor& input_ids, const torch::Tensor& labels,
                            double div_factor, std::optional<double> z_loss_multiplier,
                            int64_t ignore_index = -100, const Documents& documents = {},
                            const torch::Tensor& div_tensor = {});

    /// Truncated-normal init (std init_std, cut at +-3 std) from init_seed, in OLMo-core's order:
    /// embeddings; per block w_q, w_k, w_v, w_out, w1, w3, w2; then the LM head unless tied. Norm
    /// weights 1, biases 0.
    void init_weights();

    /// Tensor parallelism (tensor_parallel.h): keeps this rank's slice of every split parameter
    /// (the model is built and initialised whole first, so every layout starts from the same
    /// weights). Call before the model is wrapped for data parallelism.
    void apply_tp(const dist::Group& group, bool loss_parallel);
    /// The tensor-parallel slice this model holds (inactive without TP).
    TensorParallelSlice tp;
    bool loss_parallel = false;

    int64_t num_params() const;
    int64_t num_non_embedding_params() const;  ///< all but the embedding table, as OLMo-core counts
    /// OLMo-core's formula: per block 6*attn params + 12*n_heads*head_dim*seq_len, + 6*FFN params,
    /// + 6*LM head params; embeddings excluded.
    int64_t num_flops_per_token(int64_t seq_len) const;

    config::ModelConfig cfg;
    std::shared_ptr<RotaryEmbedding> rope;
    std::shared_ptr<DocumentContext> documents = std::make_shared<DocumentContext>();
    // Counted once at construction: FSDP later moves the parameters out of the modules.
    int64_t num_params_ = 0, flops_fixed_ = 0, flops_per_seq_ = 0;
    torch::nn::Embedding embeddings{nullptr};
    torch::nn::ModuleList blocks;
    RMSNorm lm_head_norm{nullptr};
    torch::nn::Linear lm_head{nullptr};  ///< null when model.tie_word_embeddings
    /// The LM head's weight: lm_head's own, or the embedding table when tied.
    const torch::Tensor& lm_head_weight() const {
        return lm_head ? lm_head->weight : embeddings->weight;
    }
    /// Logits of the final hidden state h (after lm_head_norm).
    torch::Tensor project_to_vocab(const torch::Tensor& h) {
        return lm_head ? lm_head(h) : torch::nn::functional::linear(h, embeddings->weight);
    }
};
TORCH_MODULE(Transformer);

/// Fills `t` in place with a normal(0, std) truncated to [-3 std, 3 std], drawn from `gen`.
void trunc_normal_(torch::Tensor& t, double std, at::Generator& gen);

}  // namespace lathe::model
