// OLMo2-style decoder-only transformer: token embedding, blocks with reordered norm
// (h = x + norm(attn(x)), out = h + norm(mlp(h))), QK-norm, RoPE, SwiGLU, no biases, final RMSNorm
// and LM head. Follows OLMo-core's TransformerConfig.llama_like / ReorderedNormTransformerBlock.
#pragma once

#include "engine/config/config.h"
#include "engine/model/tensor_parallel.h"

#include <torch/torch.h>

#include <functional>

namespace lathe::model {

/// RMSNorm computed in fp32 and cast back: x * rsqrt(mean(x^2) + eps) * weight.
struct RMSNormImpl : torch::nn::Module {
    RMSNormImpl(int64_t size, double eps);
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

/// Rotary position embedding (NeoX style: rotate halves), tables in fp32.
class RotaryEmbedding {
public:
    RotaryEmbedding(int64_t head_dim, double theta);
    /// Rotates q and k of shape (B, T, H, D); positions 0..T-1.
    std::pair<torch::Tensor, torch::Tensor> apply(const torch::Tensor& q, const torch::Tensor& k);
    /// cos and sin tables of shape (T, D), fp32.
    std::pair<torch::Tensor, torch::Tensor> tables(int64_t seq_len, const torch::Device& device);
    /// model.fused.rope: apply() through fused_rope on CUDA (when its kernel is compiled in).
    bool fused = false;

private:
    int64_t head_dim_;
    double theta_;
    torch::Tensor cos_, sin_;  // cached for the longest sequence seen
};

struct AttentionImpl : torch::nn::Module {
    AttentionImpl(const config::ModelConfig& c, std::shared_ptr<RotaryEmbedding> rope);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_out{nullptr};
    RMSNorm q_norm{nullptr}, k_norm{nullptr};
    int64_t n_heads, n_kv_heads, head_dim;  ///< heads on this rank (a slice under TP)
    std::shared_ptr<RotaryEmbedding> rope;
    const dist::Group* tp = nullptr;  ///< tensor parallelism: sum w_out's partial results
};
TORCH_MODULE(Attention);

/// SwiGLU: w2(silu(w1(x)) * w3(x)).
struct FeedForwardImpl : torch::nn::Module {
    FeedForwardImpl(int64_t d_model, int64_t hidden);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
    const dist::Group* tp = nullptr;  ///< tensor parallelism: sum w2's partial results
};
TORCH_MODULE(FeedForward);

struct BlockImpl : torch::nn::Module {
    BlockImpl(const config::ModelConfig& c, std::shared_ptr<RotaryEmbedding> rope);
    torch::Tensor forward(const torch::Tensor& x);
    /// The parts activation checkpointing recomputes: the whole block, or one of its two residual
    /// steps, x + attention_norm(attention(x)) or h + feed_forward_norm(feed_forward(h)). With
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

struct TransformerImpl : torch::nn::Module {
    explicit TransformerImpl(const config::ModelConfig& c);

    /// Logits of shape (B, T, vocab).
    torch::Tensor forward(const torch::Tensor& input_ids);

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
    LossOutput forward_loss(const torch::Tensor& input_ids, const torch::Tensor& labels,
                            double div_factor, std::optional<double> z_loss_multiplier,
                            int64_t ignore_index = -100);

    /// Truncated-normal init (std init_std, cut at +-3 std) from init_seed, in OLMo-core's order:
    /// embeddings; per block w_q, w_k, w_v, w_out, w1, w3, w2; then the LM head. Norm weights = 1.
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
    // Counted once at construction: FSDP later moves the parameters out of the modules.
    int64_t num_params_ = 0, flops_fixed_ = 0, flops_per_seq_ = 0;
    torch::nn::Embedding embeddings{nullptr};
    torch::nn::ModuleList blocks;
    RMSNorm lm_head_norm{nullptr};
    torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(Transformer);

/// Fills `t` in place with a normal(0, std) truncated to [-3 std, 3 std], drawn from `gen`.
void trunc_normal_(torch::Tensor& t, double std, at::Generator& gen);

}  // namespace lathe::model
