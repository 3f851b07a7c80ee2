// The whole description of a Lathe run: ExperimentConfig and its parts.
//
// Names, defaults and meanings follow OLMo-core's configs where it has them. Each struct lists its
// fields once in visit(); see reflect.h. JSON keys are the C++ field names.
#pragma once

#include "engine/config/reflect.h"

#include <map>
#include <string>
#include <vector>

namespace lathe::config {

LATHE_ENUM(DurationUnit, steps, epochs, tokens)
LATHE_ENUM(LoadStrategy, if_available, always, never)
LATHE_ENUM(ReduceType, mean, sum, max, l2_norm)
LATHE_ENUM(MetricMergeStrategy, warn, latest, oldest, mean, sum, max, min)
LATHE_ENUM(DataSource, builtin, text, numpy)
LATHE_ENUM(TokenDType, uint16, uint32)
LATHE_ENUM(DType, float32, bfloat16)
LATHE_ENUM(SchedulerName, cos_with_warmup, linear_with_warmup, constant, constant_with_warmup, wsd,
           inv_sqrt_with_warmup, cos_with_warmup_and_linear_decay, half_cos_with_warmup, power_lr,
           wsds, exponential, composable, sequential)
LATHE_ENUM(ScheduleShape, linear, cosine)
LATHE_ENUM(OptimizerName, adamw, skip_step_adamw, lion, skip_step_lion)
LATHE_ENUM(SchedulerUnits, steps, tokens)
LATHE_ENUM(DataParallelType, ddp, fsdp, hsdp)
LATHE_ENUM(ActivationCheckpointingMode, none, full, selected_blocks, selected_modules)
LATHE_ENUM(CheckpointRemovalStrategy, ephemeral_only, all_non_permanent, never)
LATHE_ENUM(DeviceKind, auto_, cpu, cuda)
LATHE_ENUM(StabilityAction, warn, skip, stop)
LATHE_ENUM(LogFilterType, rank0_only, local_rank0_only, all_ranks)
LATHE_ENUM(BlockName, default_, reordered_norm)
LATHE_ENUM(RoPEScalingName, none, pi, stepwise, yarn)

/// A length of training: a number of steps, tokens or epochs. JSON: {"value": 100, "unit": "steps"}
/// or the shorthand "100steps", "2epochs", "5e6tokens".
struct Duration {
    int64_t value = 1;
    DurationUnit unit = DurationUnit::epochs;

    static Duration steps(int64_t v) { return {v, DurationUnit::steps}; }
    static Duration epochs(int64_t v) { return {v, DurationUnit::epochs}; }
    static Duration tokens(int64_t v) { return {v, DurationUnit::tokens}; }

    /// OLMo-core's Duration.due: steps and tokens are due once reached, epochs once passed.
    bool due(int64_t step, int64_t tokens_seen, int64_t epoch) const {
        switch (unit) {
            case DurationUnit::steps:
                return step >= value;
            case DurationUnit::tokens:
                return tokens_seen >= value;
            case DurationUnit::epochs:
                return epoch > value;
        }
        return false;
    }
    std::string to_string() const;  ///< shorthand form, e.g. "100steps"
    bool operator==(const Duration& o) const { return value == o.value && unit == o.unit; }

    template <class V>
    void visit(V& v) {
        v.field("value", value, {"How many units.", Bounds::at_least(1)});
        v.field("unit", unit, {"steps, epochs or tokens."});
    }
};

/// Parses "100steps", "2 epochs", "5e6tokens"; nullopt when malformed.
std::optional<Duration> parse_duration(std::string_view text);

/// Steps [start, stop) whose batch is consumed but not trained on (steps count from 1).
struct StepSkipRange {
    int64_t start = 1;
    int64_t stop = 2;
    template <class V>
    void visit(V& v) {
        v.field("start", start, {"First skipped step (steps count from 1).", Bounds::at_least(1)});
        v.field("stop", stop, {"First step trained again (exclusive end).", Bounds::at_least(1)});
    }
};

/// Fused operations of the model on a GPU (issue 30's fusions), each beside its reference path:
/// off runs the reference ops everywhere; on uses the fused kernel where ATen (or Lathe) has one
/// for the device, and the reference ops elsewhere.
struct FusedOpsConfig {
    // Off until tests/gpu/device_run.sh has passed with them on a GPU (docs/performance.md):
    // so far they have been compiled and checked against their CPU references only.
    bool rms_norm = true;
    bool rope = true;
    bool qk_norm_rope = false;
    bool swiglu = false;
    bool residual_norm = false;
    bool varlen_attention = false;

    template <class V>
    void visit(V& v) {
        v.field("rms_norm", rms_norm,
                {"RMSNorm forward and backward as one kernel each (ATen's _fused_rms_norm) on "
                 "CUDA; the CPU has no such kernel and runs the reference ops.",
                 {}});
        v.field("rope", rope,
                {"Rotary embedding of q and k as one kernel each way (Lathe's CUDA kernel, the "
                 "reference's fp32 arithmetic, bitwise equal) on CUDA.",
                 {}});
        v.field("qk_norm_rope", qk_norm_rope,
                {"With QK-norm (model.qk_norm), each of q and k normalised and rotated as one "
                 "kernel each way (Lathe's CUDA kernel: the norm's reduction, its weight and the "
                 "rotation in one pass, document positions included) on CUDA; off: the fused "
                 "rms_norm and rope separately. Off by default until tests/gpu/device_run.sh has "
                 "passed with it on a GPU.",
                 {}});
        v.field("swiglu", swiglu,
                {"The feed-forward's silu(w1 x) * w3 x as one kernel each way (Lathe's CUDA "
                 "kernel), keeping one hidden-size tensor fewer for backward, on CUDA. Off by "
                 "default until tests/gpu/device_run.sh has passed with it on a GPU.",
                 {}});
        v.field("residual_norm", residual_norm,
                {"A post-norm block's (OLMo2's) residual add and RMSNorm, x + norm(branch), as "
                 "one kernel each way (Lathe's CUDA kernel) on CUDA; pre-norm blocks use the "
                 "fused rms_norm alone. Off by default until tests/gpu/device_run.sh has passed "
                 "with it on a GPU.",
                 {}});
        v.field("varlen_attention", varlen_attention,
                {"Document masking (dataset.generate_doc_lengths) on CUDA through flash attention "
                 "over each document's span (ATen's varlen flash kernels, bf16 or fp16 heads of "
                 "up to 256 features, no sliding window) instead of SDPA with a (B, 1, T, T) "
                 "mask; off, or where it does not fit: the mask. Off by default until "
                 "tests/gpu/device_run.sh has passed with it on a GPU.",
                 {}});
    }
};

/// RoPE scaling for contexts past the trained length, as OLMo-core's RoPEScalingConfig subclasses
/// (and transformers' rope_scaling): pi = PIRoPEScalingConfig ("linear"), stepwise =
/// StepwiseRoPEScalingConfig ("llama3"), yarn = YaRNRoPEScalingConfig ("yarn"). OLMo-core's ABF is
/// model.rope_theta itself.
struct RoPEScalingConfig {
    RoPEScalingName name = RoPEScalingName::none;
    double factor = 8.0;
    double low_freq_proportion = 0.0;
    double high_freq_proportion = 0.25;
    int64_t old_context_len = 8192;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
    std::optional<double> attention_rescale_factor;

    template <class V>
    void visit(V& v) {
        v.field("name", name,
                {"none; pi (positions / factor, transformers' \"linear\"); stepwise (Llama 3's "
                 "banded frequencies, \"llama3\"); yarn.",
                 {}});
        v.field("factor", factor,
                {"Context expansion factor (pi, stepwise, yarn).", Bounds::at_least(1)});
        v.field("low_freq_proportion", low_freq_proportion,
                {"stepwise: 1 - 1/low_freq_factor; wavelengths past old_context_len / "
                 "low_freq_factor are divided by factor.",
                 Bounds::between(0, 0.999999)});
        v.field("high_freq_proportion", high_freq_proportion,
                {"stepwise: 1/high_freq_factor; wavelengths under old_context_len / "
                 "high_freq_factor are kept.",
                 Bounds::between(1e-6, 1)});
        v.field("old_context_len", old_context_len,
                {"Context length the model was trained at (transformers' "
                 "original_max_position_embeddings).",
                 Bounds::at_least(1)});
        v.field("beta_fast", beta_fast,
                {"yarn: rotations where extrapolation ends.", Bounds::positive()});
        v.field("beta_slow", beta_slow,
                {"yarn: rotations where interpolation begins.", Bounds::positive()});
        v.field("attention_rescale_factor", attention_rescale_factor,
                {"Multiplies cos and sin; null means 1, and 0.1*ln(factor)+1 for yarn.",
                 Bounds::positive()});
    }
};

/// Sliding-window attention per layer, as OLMo-core's SlidingWindowAttentionConfig: layer i (after
/// the forced full layers) uses pattern[i % size] as its window, -1 meaning full attention. A
/// window of W lets each token see itself and the W - 1 tokens before it.
struct SlidingWindowConfig {
    std::vector<int64_t> pattern;
    bool force_full_attention_on_first_layer = true;
    bool force_full_attention_on_last_layer = true;
    /// RoPE of the windowed layers where it differs from the model's (full-attention layers'),
    /// as transformers 5's rope_parameters per layer type: null means model.rope_theta and
    /// model.rope_scaling.
    std::optional<double> rope_theta;
    std::optional<RoPEScalingConfig> rope_scaling;

    bool enabled() const { return !pattern.empty(); }
    /// Whether the windowed layers rotate differently from the full-attention ones.
    bool own_rope() const { return enabled() && (rope_theta || rope_scaling); }
    /// The window of layer `i` of `n_layers`; -1 for full attention.
    int64_t window(int64_t i, int64_t n_layers) const;

    template <class V>
    void visit(V& v) {
        v.field("pattern", pattern,
                {"Window sizes repeated over the layers (-1: full attention); empty: off. OLMo3 "
                 "uses [4096, 4096, 4096, -1].",
                 {}});
        v.field("force_full_attention_on_first_layer", force_full_attention_on_first_layer,
                {"Layer 0 attends fully; the pattern starts at layer 1.", {}});
        v.field("force_full_attention_on_last_layer", force_full_attention_on_last_layer,
                {"The last layer attends fully.", {}});
        v.field("rope_theta", rope_theta,
                {"RoPE theta of the windowed layers; null means model.rope_theta (OLMo 3 "
                 "checkpoints from transformers 5 may give each layer type its own).",
                 Bounds::positive()});
        v.field("rope_scaling", rope_scaling,
                {"RoPE scaling of the windowed layers; null means model.rope_scaling (OLMo 3's "
                 "long-context checkpoints put YaRN on the full-attention layers only: name none "
                 "here).",
                 {}});
    }
};

/// Decoder-only transformer, as OLMo-core's TransformerConfig.llama_like builds it: OLMo2/OLMo3
/// (reordered_norm, QK-norm) and Llama/Qwen (default pre-norm block) are configurations of it.
struct ModelConfig {
    int64_t d_model = 64;
    int64_t n_layers = 2;
    int64_t n_heads = 4;
    std::optional<int64_t> n_kv_heads;
    std::optional<int64_t> head_dim;
    int64_t vocab_size = 256;
    std::optional<double> hidden_size_multiplier;
    int64_t hidden_size_multiple_of = 256;
    double rope_theta = 500000.0;
    RoPEScalingConfig rope_scaling;
    double layer_norm_eps = 1e-6;
    BlockName block_name = BlockName::reordered_norm;
    bool qk_norm = true;
    bool use_head_qk_norm = false;
    bool qkv_bias = false;
    bool tie_word_embeddings = false;
    SlidingWindowConfig sliding_window;
    double init_std = 0.02;
    int64_t init_seed = 0;
    DType dtype = DType::float32;
    FusedOpsConfig fused;

    /// SwiGLU hidden size by OLMo-core's rule: int(8·d/3), times the multiplier, rounded up.
    int64_t hidden_size() const;
    int64_t resolved_head_dim() const { return head_dim.value_or(d_model / n_heads); }
    int64_t kv_heads() const { return n_kv_heads.value_or(n_heads); }

    template <class V>
    void visit(V& v) {
        v.field("d_model", d_model, {"Width of the residual stream.", Bounds::at_least(1)});
        v.field("n_layers", n_layers, {"Number of transformer blocks.", Bounds::at_least(1)});
        v.field("n_heads", n_heads, {"Attention heads per block.", Bounds::at_least(1)});
        v.field("n_kv_heads", n_kv_heads,
                {"Key/value heads (grouped-query attention); null means n_heads.",
                 Bounds::at_least(1)});
        v.field(
            "head_dim", head_dim,
            {"Size of each attention head; null means d_model / n_heads.", Bounds::at_least(2)});
        v.field("vocab_size", vocab_size,
                {"Size of the token vocabulary (embedding rows).", Bounds::at_least(2)});
        v.field(
            "hidden_size_multiplier", hidden_size_multiplier,
            {"Scales the SwiGLU hidden size int(8*d_model/3); null means 1.", Bounds::positive()});
        v.field(
            "hidden_size_multiple_of", hidden_size_multiple_of,
            {"The SwiGLU hidden size is rounded up to a multiple of this.", Bounds::at_least(1)});
        v.field("rope_theta", rope_theta,
                {"Base of the rotary position embedding frequencies.", Bounds::positive()});
        v.field("rope_scaling", rope_scaling,
                {"RoPE scaling for longer contexts (Llama 3's stepwise, YaRN, PI).", {}});
        v.field("layer_norm_eps", layer_norm_eps,
                {"Epsilon of every RMSNorm.", Bounds::positive()});
        v.field("block_name", block_name,
                {"reordered_norm (OLMo2/3): h = x + norm(attn(x)); default (Llama, Qwen): "
                 "pre-norm, h = x + attn(norm(x)).",
                 {}});
        v.field("qk_norm", qk_norm,
                {"RMSNorm on the projected queries and keys (OLMo2/3, Qwen3).", {}});
        v.field("use_head_qk_norm", use_head_qk_norm,
                {"QK-norm per head over head_dim (Qwen3) instead of over the whole projection "
                 "(OLMo2/3).",
                 {}});
        v.field("qkv_bias", qkv_bias,
                {"Biases on the query, key and value projections (Qwen2).", {}});
        v.field("tie_word_embeddings", tie_word_embeddings,
                {"The LM head reuses the embedding table (Llama 3.2 1B/3B, Qwen3 0.6B-4B).", {}});
        v.field("sliding_window", sliding_window,
                {"Sliding-window attention per layer (OLMo3).", {}});
        v.field("init_std", init_std,
                {"Std of the truncated-normal weight init (cut at 3 std).", Bounds::positive()});
        v.field("init_seed", init_seed,
                {"Seed of the weight initialisation.", Bounds::at_least(0)});
        v.field("dtype", dtype, {"Data type of the parameters.", {}});
        v.field("fused", fused, {"Fused kernels on a GPU (the reference ops when off).", {}});
    }
};

/// One source of a mixture (OLMo-core's SourceMixtureConfig).
struct MixtureSourceConfig {
    std::string source_name;
    double target_ratio = 0.0;
    std::vector<std::string> paths;
    double max_repetition_ratio = 1.0;
    double max_source_fraction = 1.0;

    template <class V>
    void visit(V& v) {
        v.field("source_name", source_name,
                {"The source's name, in its metric data/source/<name> tokens.", {}});
        v.field("target_ratio", target_ratio,
                {"Its share of dataset.mixture.requested_tokens; the ratios sum to 1.",
                 Bounds::between(0.0, 1.0)});
        v.field("paths", paths,
                {"Raw token files (dataset.token_dtype), folders of them, or prepare-data folders "
                 "(their shards and dtype), read from the start of each file.",
                 {},
                 "path"});
        v.field("max_repetition_ratio", max_repetition_ratio,
                {"How many times over its tokens may be used: 1 never repeats, 2 allows each "
                 "token twice.",
                 Bounds::at_least(1.0)});
        v.field("max_source_fraction", max_source_fraction,
                {"The share of its tokens that may be used (before repetition).",
                 Bounds::between(0.0, 1.0)});
    }
};

/// Training on several sources in set proportions (OLMo-core's SourceMixtureDatasetConfig): each
/// source contributes target_ratio x requested_tokens tokens, taken from the start of its files
/// (repeating them when it needs more than it has, up to max_repetition_ratio), rounded to whole
/// global batches; the data loader's shuffle mixes them.
struct SourceMixtureConfig {
    std::vector<MixtureSourceConfig> sources;
    std::optional<int64_t> requested_tokens;

    bool enabled() const { return !sources.empty(); }

    template <class V>
    void visit(V& v) {
        v.field("sources", sources,
                {"The sources and their ratios; empty: no mixture (dataset.paths).", {}});
        v.field("requested_tokens", requested_tokens,
                {"Tokens the mixture holds, rounded up to whole global batches (OLMo-core's "
                 "requested_tokens); the ratios divide them.",
                 Bounds::at_least(1)});
    }
};

/// OLMo-core's InstanceFilterConfig: an instance in which some run of 1 to max_period tokens
/// repeats max_count times or more in a row (degenerate text) is kept out of the loss.
struct InstanceFilterConfig {
    int64_t repetition_max_period = 13;
    int64_t repetition_min_period = 1;
    int64_t repetition_max_count = 32;

    template <class V>
    void visit(V& v) {
        v.field("repetition_max_period", repetition_max_period,
                {"The longest repeating unit looked for, in tokens (at most a third of the "
                 "sequence is searched).",
                 Bounds::at_least(1)});
        v.field("repetition_min_period", repetition_min_period,
                {"The shortest repeating unit looked for, in tokens.", Bounds::at_least(1)});
        v.field("repetition_max_count", repetition_max_count,
                {"An instance holding a unit repeated this many times in a row is masked.",
                 Bounds::at_least(1)});
    }
};

/// Where the training tokens come from.
struct DatasetConfig {
    DataSource source = DataSource::builtin;
    std::vector<std::string> paths;
    std::vector<std::string> label_mask_paths;
    TokenDType token_dtype = TokenDType::uint16;
    int64_t sequence_length = 64;
    int64_t builtin_tokens = 2000000;
    int64_t builtin_seed = 1234;
    double validation_fraction = 0.0;
    bool generate_doc_lengths = false;
    std::optional<int64_t> eos_token_id;
    SourceMixtureConfig mixture;
    std::optional<InstanceFilterConfig> instance_filter_config;

    std::optional<std::string> tokenizer;

    /// The built-in corpus and text files are read as bytes, so token id = byte: text can be
    /// encoded and decoded without a tokenizer file.
    bool tokens_are_bytes() const { return source != DataSource::numpy; }
    /// Whether the run's ids have a text form: bytes, or a tokenizer file.
    bool has_text() const { return tokens_are_bytes() || tokenizer.has_value(); }

    template <class V>
    void visit(V& v) {
        v.field("source", source,
                {"builtin: the generated corpus; text: UTF-8 files or folders as bytes; numpy: raw "
                 "token files.",
                 {}});
        v.field("paths", paths,
                {"Files or folders for the text and numpy sources. A numpy folder made by "
                 "`lathe-engine prepare-data` gives its manifest.json's shards and dtype.",
                 {},
                 "path"});
        v.field("label_mask_paths", label_mask_paths,
                {"numpy source: boolean label masks beside the token files (OLMo-core's "
                 "label_mask_paths), one per entry of paths, in order, each a file with one byte "
                 "per token; a 0 byte keeps that token out of the loss (its label becomes "
                 "train_module.label_ignore_index). Empty: every token is trained on.",
                 {},
                 "path"});
        v.field("token_dtype", token_dtype,
                {"Element type of numpy token files (little-endian); a prepare-data folder's "
                 "manifest.json gives its own.",
                 {}});
        v.field("sequence_length", sequence_length,
                {"Tokens per training instance.", Bounds::at_least(2)});
        v.field("builtin_tokens", builtin_tokens,
                {"Size of the built-in corpus in tokens.", Bounds::at_least(1024)});
        v.field("builtin_seed", builtin_seed,
                {"Seed that generates the built-in corpus.", Bounds::at_least(0)});
        v.field(
            "tokenizer", tokenizer,
            {"The tokenizer file the numpy token files were made with (a Hugging Face "
             "tokenizer.json, byte-level BPE, or a SentencePiece .model): the sampler's and "
             "generate's text, and export's tokenizer files; copied into every checkpoint; must "
             "be the one a prepare-data manifest names. Null: none (the built-in and text "
             "sources are bytes).",
             {},
             "path"});
        v.field("validation_fraction", validation_fraction,
                {"Share of instances held out for evaluation (lm_evaluator); 0 trains on all.",
                 Bounds::between(0.0, 0.5)});
        v.field("generate_doc_lengths", generate_doc_lengths,
                {"Document masking (OLMo-core's generate_doc_lengths): attention does not cross "
                 "the documents packed into an instance, each ending at its EOS token "
                 "(dataset.eos_token_id).",
                 {}});
        v.field("eos_token_id", eos_token_id,
                {"The token that ends a document, for generate_doc_lengths. Null: the eos_id of "
                 "the prepare-data folders in dataset.paths, else dataset.tokenizer's EOS.",
                 Bounds::at_least(0)});
        v.field("mixture", mixture,
                {"numpy source: a mixture of sources in set proportions, instead of "
                 "dataset.paths.",
                 {}});
        v.field("instance_filter_config", instance_filter_config,
                {"The repetition filter (OLMo-core's instance_filter_config): instances with a "
                 "long run of one repeated n-gram train on nothing, and the share masked is "
                 "logged as train/masked instances (%). Null: every instance is trained on.",
                 {}});
    }
};

/// How instances are batched and ordered (OLMo-core's NumpyDataLoaderConfig): the global batch in
/// tokens, the per-epoch shuffle and its seed, and how far ahead batches are prepared.
struct DataLoaderConfig {
    int64_t global_batch_size = 2048;
    int64_t seed = 0;
    bool shuffle = true;
    int64_t prefetch_batches = 2;
    bool ignore_fingerprint_mismatch = false;

    template <class V>
    void visit(V& v) {
        v.field("global_batch_size", global_batch_size,
                {"Tokens per optimizer step over all ranks.", Bounds::at_least(1)});
        v.field("seed", seed, {"Seed of the per-epoch shuffle.", Bounds::at_least(0)});
        v.field("shuffle", shuffle, {"Shuffle the instances at every epoch.", {}});
        v.field(
            "prefetch_batches", prefetch_batches,
            {"Batches prepared ahead on a background thread (0 = none).", Bounds::between(0, 64)});
        v.field("ignore_fingerprint_mismatch", ignore_fingerprint_mismatch,
                {"Resume even when the dataset differs from the checkpoint's.", {}});
    }
};

/// One parameter group of OLMo-core's OptimGroupOverride: the parameters whose names match any of
/// the globs get their own optimizer options (unset ones keep the optimizer's).
struct OptimGroupOverride {
    std::vector<std::string> params;
    std::optional<double> lr;
    std::optional<double> beta1;
    std::optional<double> beta2;
    std::optional<double> eps;
    std::optional<double> weight_decay;

    template <class V>
    void visit(V& v) {
        v.field(
            "params", params,
            {"Parameter-name globs (fnmatch), e.g. \"embeddings.*\" or \"*norm*\".", {}, "glob"});
        v.field("lr", lr, {"Peak LR of this group; null keeps optim.lr.", Bounds::positive()});
        v.field("beta1", beta1, {"null keeps optim.beta1.", Bounds::between(0.0, 1.0)});
        v.field("beta2", beta2, {"null keeps optim.beta2.", Bounds::between(0.0, 1.0)});
        v.field("eps", eps, {"null keeps optim.eps.", Bounds::positive()});
        v.field("weight_decay", weight_decay,
                {"null keeps optim.weight_decay; 0 disables decay for the group.",
                 Bounds::at_least(0.0)});
    }
};

/// The optimizer (OLMo-core's AdamWConfig, SkipStepAdamWConfig, LionConfig, SkipStepLionConfig):
/// the options shared by all four, with OLMo-core's defaults per optimizer where they differ.
struct OptimConfig {
    OptimizerName name = OptimizerName::adamw;
    double lr = 1e-3;
    double beta1 = 0.9;
    std::optional<double> beta2;
    double eps = 1e-8;
    std::optional<double> weight_decay;
    int64_t rolling_interval_length = 128;
    int64_t sigma_factor = 6;
    std::vector<OptimGroupOverride> group_overrides;
    bool decay_embeddings = true;
    bool decay_norms = true;
    bool fused = true;

    /// beta2 and weight_decay with OLMo-core's per-optimizer defaults filled in.
    double resolved_beta2() const {
        const bool lion = name == OptimizerName::lion || name == OptimizerName::skip_step_lion;
        return beta2.value_or(lion ? 0.99 : 0.999);
    }
    double resolved_weight_decay() const {
        const bool lion = name == OptimizerName::lion || name == OptimizerName::skip_step_lion;
        return weight_decay.value_or(lion ? 0.0 : 0.01);
    }
    bool skips_steps() const {
        return name == OptimizerName::skip_step_adamw || name == OptimizerName::skip_step_lion;
    }

    template <class V>
    void visit(V& v) {
        v.field("name", name,
                {"adamw (torch.optim.AdamW), skip_step_adamw, lion or skip_step_lion (OLMo-core's "
                 "optimizers; the skip_step ones skip an update whose loss or grad norm is a "
                 "spike).",
                 {}});
        v.field("lr", lr, {"Peak learning rate.", Bounds::positive()});
        v.field("beta1", beta1, {"First-moment decay.", Bounds::between(0.0, 1.0)});
        v.field("beta2", beta2,
                {"Second-moment decay (Lion: momentum decay); null means 0.999 for AdamW, 0.99 "
                 "for Lion.",
                 Bounds::between(0.0, 1.0)});
        v.field("eps", eps, {"AdamW epsilon (Lion has none).", Bounds::positive()});
        v.field("weight_decay", weight_decay,
                {"Decoupled weight decay; null means 0.01 for AdamW, 0 for Lion.",
                 Bounds::at_least(0.0)});
        v.field("rolling_interval_length", rolling_interval_length,
                {"skip_step optimizers: steps of loss and grad-norm history they compare with.",
                 Bounds::at_least(2)});
        v.field("sigma_factor", sigma_factor,
                {"skip_step optimizers: skip when above the mean by this many std.",
                 Bounds::at_least(1)});
        v.field("group_overrides", group_overrides,
                {"Parameter groups with their own options (groups 0, 1, ...); the parameters no "
                 "glob matches form the last group. A glob must match, and a parameter may match "
                 "one group only.",
                 {}});
        v.field("decay_embeddings", decay_embeddings,
                {"Apply weight decay to the embeddings (false: a group override \"embeddings.*\" "
                 "with weight_decay 0).",
                 {}});
        v.field("decay_norms", decay_norms,
                {"Apply weight decay to the norm weights (false: a group override \"*norm*\" "
                 "with weight_decay 0).",
                 {}});
        v.field("fused", fused,
                {"adamw on CUDA: every parameter of a group in one multi-tensor kernel (torch's "
                 "fused AdamW, OLMo-core's AdamWConfig.fused); false, or on the CPU: one tensor "
                 "at a time (the reference).",
                 {}});
    }
};

/// One stage of the composable scheduler: from its start LR to its end LR over `duration`.
struct ScheduleStage {
    int64_t duration = 1;
    ScheduleShape shape = ScheduleShape::linear;
    std::optional<double> start_lr;
    std::optional<double> start_lr_fraction;
    std::optional<double> end_lr;
    std::optional<double> end_lr_fraction;

    template <class V>
    void visit(V& v) {
        v.field("duration", duration, {"Length of the stage.", Bounds::at_least(1)});
        v.field("shape", shape, {"linear or cosine interpolation.", {}});
        v.field("start_lr", start_lr,
                {"LR at the start; null (with no fraction) continues from the previous stage.",
                 Bounds::at_least(0.0)});
        v.field("start_lr_fraction", start_lr_fraction,
                {"LR at the start as a fraction of the peak.", Bounds::at_least(0.0)});
        v.field("end_lr", end_lr, {"LR at the end (or end_lr_fraction).", Bounds::at_least(0.0)});
        v.field("end_lr_fraction", end_lr_fraction,
                {"LR at the end as a fraction of the peak.", Bounds::at_least(0.0)});
    }
};

/// A late decay that replaces the composable or sequential schedule from `start` on.
struct OverrideDecay {
    int64_t start = 0;
    int64_t duration = 1;
    ScheduleShape shape = ScheduleShape::linear;
    std::optional<double> end_lr;
    std::optional<double> end_lr_fraction = 0.0;

    template <class V>
    void visit(V& v) {
        v.field("start", start, {"Where the override begins.", Bounds::at_least(0)});
        v.field("duration", duration, {"Length of the decay.", Bounds::at_least(1)});
        v.field("shape", shape, {"linear or cosine.", {}});
        v.field("end_lr", end_lr, {"LR at the end (or end_lr_fraction).", Bounds::at_least(0.0)});
        v.field("end_lr_fraction", end_lr_fraction,
                {"LR at the end as a fraction of the peak.", Bounds::at_least(0.0)});
    }
};

/// One schedule's parameters (OLMo-core's Scheduler classes, by `name`). Each schedule reads the
/// fields it names; the others are ignored. Also the element type of `sequential`'s list.
struct ScheduleParams {
    SchedulerName name = SchedulerName::cos_with_warmup;
    std::optional<int64_t> warmup = 100;
    std::optional<double> warmup_fraction;
    double warmup_min_lr = 0.0;
    double alpha_f = 0.1;
    std::optional<int64_t> t_max;
    std::optional<int64_t> decay;
    std::optional<double> decay_fraction = 0.1;
    double decay_min_lr = 0.0;
    double b = -0.51;
    double lr_min = 1e-9;
    std::vector<int64_t> period_lengths;
    std::vector<double> period_lr_multipliers;
    std::vector<ScheduleStage> stages;
    std::optional<OverrideDecay> override_decay;

    template <class V>
    void visit(V& v) {
        visit_fields(v, [](V&) {});
    }
    /// Visits name, then `after_name(v)`, then the parameters.
    template <class V, class F>
    void visit_fields(V& v, F&& after_name) {
        v.field("name", name, {"Learning-rate schedule (OLMo-core's scheduler names).", {}});
        after_name(v);
        v.field("warmup", warmup,
                {"Length of the linear warmup; set it or warmup_fraction, not both.",
                 Bounds::at_least(0)});
        v.field("warmup_fraction", warmup_fraction,
                {"Warmup as a fraction of the run (of the first period for wsds).",
                 Bounds::between(0.0, 1.0)});
        v.field("warmup_min_lr", warmup_min_lr,
                {"LR at the start of the warmup.", Bounds::at_least(0.0)});
        v.field("alpha_f", alpha_f,
                {"Final LR as a fraction of the peak (cosine, linear, inv_sqrt).",
                 Bounds::between(0.0, 1.0)});
        v.field("t_max", t_max,
                {"End of the cosine or linear decay; null means the end of training.",
                 Bounds::at_least(1)});
        v.field("decay", decay,
                {"Length of the final linear decay (wsd, wsds, power_lr, "
                 "cos_with_warmup_and_linear_decay); set it or decay_fraction, not both.",
                 Bounds::at_least(0)});
        v.field("decay_fraction", decay_fraction,
                {"The final decay as a fraction of the run (of each period for wsds).",
                 Bounds::between(0.0, 1.0)});
        v.field("decay_min_lr", decay_min_lr,
                {"LR at the end of the final decay.", Bounds::at_least(0.0)});
        v.field("b", b, {"power_lr: exponent of the power law (negative).", {}});
        v.field(
            "lr_min", lr_min,
            {"exponential: LR at the start, growing to the peak at the end.", Bounds::positive()});
        v.field(
            "period_lengths", period_lengths,
            {"wsds: length of each period (warmup included in the first).", Bounds::at_least(1)});
        v.field(
            "period_lr_multipliers", period_lr_multipliers,
            {"wsds: peak LR multiplier per period; empty means 1 for all.", Bounds::positive()});
        v.field("stages", stages, {"composable: the stages, in order.", {}});
        v.field(
            "override_decay", override_decay,
            {"composable, sequential: a decay that takes over from `start`; null disables.", {}});
    }
};

/// The learning-rate schedule over the run, evaluated at (current, t_max) in steps or tokens.
struct SchedulerConfig : ScheduleParams {
    SchedulerUnits units = SchedulerUnits::steps;
    std::vector<ScheduleParams> schedulers;
    std::vector<int64_t> schedulers_max;

    template <class V>
    void visit(V& v) {
        visit_fields(v, [this](V& vv) {
            vv.field("units", units,
                     {"Whether warmup, decay and t_max count steps or tokens.", {}});
        });
        v.field("schedulers", schedulers,
                {"sequential: the schedules run one after another (none of them sequential).", {}});
        v.field("schedulers_max", schedulers_max,
                {"sequential: how long each schedule but the last runs.", Bounds::at_least(1)});
    }
};

/// How the model is replicated or sharded over the data-parallel ranks: DDP, FSDP, or HSDP (FSDP
/// within groups of `shard_degree` ranks, replicated across `num_replicas` groups).
struct DataParallelConfig {
    DataParallelType name = DataParallelType::ddp;
    std::optional<DType> param_dtype;
    DType reduce_dtype = DType::float32;
    double bucket_cap_mb = 25.0;
    std::optional<int64_t> num_replicas;
    std::optional<int64_t> shard_degree;

    template <class V>
    void visit(V& v) {
        v.field("name", name,
                {"ddp replicates the model; fsdp shards parameters, gradients and optimizer state; "
                 "hsdp shards within groups of shard_degree ranks and replicates across groups.",
                 {}});
        v.field("param_dtype", param_dtype,
                {"dtype the model computes in while fp32 master weights are trained: FSDP/HSDP's "
                 "gathered parameters, or on one rank copies made once per optimizer step "
                 "(gradients added to the masters' in fp32); null keeps model.dtype.",
                 {}});
        v.field("reduce_dtype", reduce_dtype, {"dtype of gradient reductions.", {}});
        v.field("bucket_cap_mb", bucket_cap_mb,
                {"DDP: gradient bucket size in MiB.", Bounds::positive()});
        v.field("num_replicas", num_replicas,
                {"HSDP: number of replica groups; null derives it (one per node, or from "
                 "shard_degree).",
                 Bounds::at_least(1)});
        v.field("shard_degree", shard_degree,
                {"HSDP: ranks each replica is sharded over; null derives it (the ranks of a node, "
                 "or from num_replicas).",
                 Bounds::at_least(1)});
    }
};

/// Tensor parallelism within a node (OLMo-core's TransformerTensorParallelConfig), Megatron-style:
/// attention heads and the SwiGLU hidden size split over `degree` ranks, the embedding table and
/// (with loss_parallel) the LM head split over the vocabulary.
struct TensorParallelConfig {
    int64_t degree = 1;
    bool loss_parallel = true;

    template <class V>
    void visit(V& v) {
        v.field("degree", degree,
                {"Ranks each layer is split over; 1 disables. Must divide model.n_heads, the "
                 "key/value heads, the SwiGLU hidden size and model.vocab_size, and the world "
                 "size (data parallelism runs over world / degree).",
                 Bounds::at_least(1)});
        v.field("loss_parallel", loss_parallel,
                {"Split the LM head over the vocabulary and compute the cross-entropy in parallel; "
                 "false keeps a whole LM head on every rank.",
                 {}});
    }
};

/// Activation checkpointing (OLMo-core's TransformerActivationCheckpointingConfig): blocks or
/// modules whose activations are not kept for backward but recomputed there, trading compute for
/// memory. Under FSDP every block is recomputed already (its parameters are gathered again).
struct ActivationCheckpointingConfig {
    ActivationCheckpointingMode mode = ActivationCheckpointingMode::none;
    std::optional<int64_t> block_interval;
    std::vector<int64_t> blocks;
    std::vector<std::string> modules;

    template <class V>
    void visit(V& v) {
        v.field("mode", mode,
                {"none; full: every block; selected_blocks: every block_interval-th block (0, N, "
                 "2N ...) or the listed blocks; selected_modules: the modules matching `modules`.",
                 {}});
        v.field("block_interval", block_interval,
                {"selected_blocks: checkpoint block i when i % block_interval == 0.",
                 Bounds::at_least(1)});
        v.field("blocks", blocks, {"selected_blocks: the block indices to checkpoint.", {}});
        v.field("modules", modules,
                {"selected_modules: glob patterns over blocks.{i}.attention and "
                 "blocks.{i}.feed_forward (e.g. blocks.*.feed_forward).",
                 {}});
    }
};

/// OLMo-core's TransformerTrainModuleConfig: micro-batching, the optimizer and schedule, gradient
/// clipping, z-loss, autocast and data parallelism.
struct TrainModuleConfig {
    int64_t rank_microbatch_size = 1024;
    int64_t max_sequence_length = 64;
    OptimConfig optim;
    SchedulerConfig scheduler;
    std::optional<double> max_grad_norm = 1.0;
    std::optional<double> z_loss_multiplier;
    int64_t label_ignore_index = -100;
    std::optional<DType> autocast_precision;
    bool cuda_graphs = false;
    DataParallelConfig dp_config;
    TensorParallelConfig tp_config;
    ActivationCheckpointingConfig ac_config;
    std::optional<std::map<std::string, std::string>> load_key_mapping;

    template <class V>
    void visit(V& v) {
        v.field("rank_microbatch_size", rank_microbatch_size,
                {"Tokens per forward/backward pass on one rank; a multiple of the sequence length.",
                 Bounds::at_least(1)});
        v.field("max_sequence_length", max_sequence_length,
                {"Longest sequence the model will see.", Bounds::at_least(2)});
        v.field("optim", optim, {"The optimizer and its parameter groups."});
        v.field("scheduler", scheduler, {"Learning-rate scheduler."});
        v.field("max_grad_norm", max_grad_norm,
                {"Clip the total gradient norm to this; null disables.", Bounds::positive()});
        v.field("z_loss_multiplier", z_loss_multiplier,
                {"Weight of the z-loss (logsumexp^2); null disables.", Bounds::positive()});
        v.field("label_ignore_index", label_ignore_index,
                {"Label value excluded from the loss.", {}});
        v.field("autocast_precision", autocast_precision,
                {"Run the forward pass under autocast to this dtype; null disables.", {}});
        v.field("cuda_graphs", cuda_graphs,
                {"Capture each micro-batch's forward and backward as a CUDA graph once and replay "
                 "it (one rank on CUDA, micro-batches of one shape, no document masking; the rest "
                 "runs eagerly). Off by default until measured on a GPU.",
                 {}});
        v.field("dp_config", dp_config, {"Data parallelism across ranks."});
        v.field("tp_config", tp_config, {"Tensor parallelism: layers split across ranks."});
        v.field("ac_config", ac_config,
                {"Activation checkpointing: recompute blocks or modules in backward."});
        v.field("load_key_mapping", load_key_mapping,
                {"Loading renamed parameters: maps a parameter's name in this model (e.g. "
                 "blocks.0.attention.w_q.weight) to its name in the checkpoint or Hugging Face "
                 "folder being loaded; null for none.",
                 {}});
    }
};

// ---- callbacks -------------------------------------------------------------------------------

/// console_logger: the progress line on stdout and which metrics it shows.
struct ConsoleLoggerConfig {
    bool enabled = true;
    int64_t log_interval = 1;
    std::optional<int64_t> metrics_log_interval;
    std::vector<std::string> metrics = {"train/CE loss",         "train/Z loss",
                                        "optim/total grad norm", "optim/LR (group 0)",
                                        "throughput/device/TPS", "throughput/device/MFU",
                                        "eval/lm/*/CE loss",     "spike/SpikeScore"};
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Print progress and metrics to the console.", {}});
        v.field("log_interval", log_interval,
                {"Steps between progress lines (step, percent, ETA), printed on steps without a "
                 "metrics line.",
                 Bounds::at_least(1)});
        v.field("metrics_log_interval", metrics_log_interval,
                {"Steps between metric lines; null means trainer.metrics_collect_interval.",
                 Bounds::at_least(1)});
        v.field("metrics", metrics, {"Glob patterns of the metrics to print.", {}, "glob"});
    }
};

/// checkpointer: when checkpoints are saved (permanent, ephemeral, fixed steps), asynchronously or
/// not, and how many are kept.
struct CheckpointerConfig {
    bool enabled = true;
    std::optional<int64_t> save_interval = 250;
    std::optional<int64_t> ephemeral_save_interval;
    std::optional<bool> pre_train_checkpoint;
    std::optional<bool> save_async;
    CheckpointRemovalStrategy remove = CheckpointRemovalStrategy::ephemeral_only;
    std::optional<int64_t> max_checkpoints = 3;
    std::vector<int64_t> fixed_steps;
    int64_t max_failed_saves = 0;

    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Save checkpoints.", {}});
        v.field("save_interval", save_interval,
                {"Steps between permanent checkpoints; null disables.", Bounds::at_least(1)});
        v.field("ephemeral_save_interval", ephemeral_save_interval,
                {"Steps between ephemeral checkpoints (only the newest kept); null disables.",
                 Bounds::at_least(1)});
        v.field("pre_train_checkpoint", pre_train_checkpoint,
                {"Save step0 before training; null means unless a checkpoint was loaded.", {}});
        v.field("save_async", save_async,
                {"Write checkpoints on a background thread; null means yes.", {}});
        v.field("remove", remove, {"Which older checkpoints to delete.", {}});
        v.field("max_checkpoints", max_checkpoints,
                {"Periodic checkpoints kept, the newest (save_interval, fixed_steps, step 0); "
                 "one saved on demand or at the end of a run is never removed; null keeps all.",
                 Bounds::at_least(1)});
        v.field("fixed_steps", fixed_steps,
                {"Extra steps that always get a permanent checkpoint.", Bounds::at_least(1)});
        v.field("max_failed_saves", max_failed_saves,
                {"Failed saves in a row that training outlives with an error logged (a bucket "
                 "that is down); the next failure stops it. 0 stops at the first.",
                 Bounds::at_least(0)});
    }
};

/// speed_monitor: throughput and MFU; the device peak can be given instead of measured.
struct SpeedMonitorConfig {
    bool enabled = true;
    std::optional<double> device_peak_flops;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Record throughput/* metrics (tokens/s, FLOP/s, MFU).", {}});
        v.field("device_peak_flops", device_peak_flops,
                {"Peak FLOP/s of one device for MFU; null measures a matrix product at start.",
                 Bounds::positive()});
    }
};

/// memory_monitor: resident memory on the CPU, the CUDA allocator's figures on a GPU.
struct MemoryMonitorConfig {
    bool enabled = true;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled,
                {"Record process memory (CPU RSS, or gpu_memory/* on CUDA).", {}});
    }
};

/// config_saver: the resolved config written into every checkpoint.
struct ConfigSaverConfig {
    bool enabled = true;
    std::string fname = "config.json";
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Write the resolved config into every checkpoint.", {}});
        v.field("fname", fname, {"File name of the config inside a checkpoint.", {}});
    }
};

/// metric_saver: the run folder's metric files (metrics.jsonl, metrics.csv, TensorBoard events).
struct MetricSaverConfig {
    bool enabled = true;
    bool jsonl = true;
    bool csv = true;
    bool tensorboard = true;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Write metric files into the run folder.", {}});
        v.field("jsonl", jsonl, {"Write metrics.jsonl (one object per step).", {}});
        v.field("csv", csv, {"Write metrics.csv.", {}});
        v.field("tensorboard", tensorboard, {"Write a TensorBoard event file.", {}});
    }
};

/// lm_evaluator: the loss on held-out data, how often and on how many batches.
struct LMEvaluatorConfig {
    bool enabled = false;
    std::string name = "validation";
    int64_t eval_interval = 100;
    bool eval_on_startup = false;
    bool eval_on_finish = true;
    std::optional<int64_t> eval_batches = 8;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Evaluate held-out loss and perplexity.", {}});
        v.field("name", name, {"Label in the metric names eval/lm/<name>/...", {}});
        v.field("eval_interval", eval_interval,
                {"Steps between evaluations.", Bounds::at_least(1)});
        v.field("eval_on_startup", eval_on_startup, {"Evaluate before the first step.", {}});
        v.field("eval_on_finish", eval_on_finish, {"Evaluate after the last step.", {}});
        v.field("eval_batches", eval_batches,
                {"Batches per evaluation; null means the whole split.", Bounds::at_least(1)});
    }
};

/// profiler: which window of steps is traced (skip, wait, warmup, active).
struct ProfilerConfig {
    bool enabled = false;
    int64_t skip_first = 0;
    int64_t wait = 1;
    int64_t warmup = 5;
    int64_t active = 3;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled,
                {"Write a Chrome trace of a window of steps to the run folder.", {}});
        v.field("skip_first", skip_first,
                {"Steps ignored before the schedule starts.", Bounds::at_least(0)});
        v.field("wait", wait, {"Steps waited before warming up.", Bounds::at_least(0)});
        v.field("warmup", warmup, {"Steps traced but discarded.", Bounds::at_least(0)});
        v.field("active", active, {"Steps recorded in the trace.", Bounds::at_least(1)});
    }
};

/// stability_monitor: spike detection on loss and gradient norm, and the action on a non-finite
/// gradient.
struct StabilityMonitorConfig {
    bool enabled = true;
    int64_t window_size = 128;
    double threshold_std = 6.0;
    StabilityAction non_finite_grads = StabilityAction::skip;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Watch for loss spikes and non-finite gradients.", {}});
        v.field("window_size", window_size,
                {"Steps in the rolling window for spike detection.", Bounds::at_least(2)});
        v.field("threshold_std", threshold_std,
                {"A spike is above mean + this many std.", Bounds::positive()});
        v.field("non_finite_grads", non_finite_grads,
                {"On a NaN/Inf gradient: warn, skip the optimizer step, or stop the run.", {}});
    }
};

/// The built-in callbacks, by name. Each can be switched off with enabled=false.
/// sampler: text from the model while it trains (Lathe's own; OLMo-core has none). Rank 0
/// generates from each prompt every `interval` steps and at the end, with its own seeded generator
/// and no gradients, so training is unchanged; samples.jsonl in the run folder keeps them.
struct SamplerConfig {
    bool enabled = false;
    int64_t interval = 100;
    std::vector<std::string> prompts = {"Once upon a time"};
    std::vector<std::vector<int64_t>> prompt_ids;
    int64_t max_new_tokens = 64;
    double temperature = 0.8;
    int64_t top_k = 0;
    double top_p = 1.0;
    int64_t seed = 0;
    template <class V>
    void visit(V& v) {
        v.field("enabled", enabled, {"Generate text from the model while it trains.", {}});
        v.field("interval", interval, {"Steps between samples.", Bounds::at_least(1)});
        v.field(
            "prompts", prompts,
            {"Text prompts (runs whose tokens are bytes: the built-in corpus, text files).", {}});
        v.field("prompt_ids", prompt_ids, {"Prompts as token ids, for any tokenizer.", {}});
        v.field("max_new_tokens", max_new_tokens,
                {"Tokens generated per prompt.", Bounds::between(1, 4096)});
        v.field("temperature", temperature,
                {"Sampling temperature; 0 is greedy.", Bounds::at_least(0)});
        v.field("top_k", top_k,
                {"Sample among the k likeliest tokens; 0 is off.", Bounds::at_least(0)});
        v.field("top_p", top_p,
                {"Sample from the smallest set of tokens holding this probability; 1 is off.",
                 Bounds::between(1e-6, 1.0)});
        v.field("seed", seed,
                {"Seed of the sampler's own generator (the same at every interval).",
                 Bounds::at_least(0)});
    }
};

struct CallbacksConfig {
    ConsoleLoggerConfig console_logger;
    CheckpointerConfig checkpointer;
    SpeedMonitorConfig speed_monitor;
    MemoryMonitorConfig memory_monitor;
    ConfigSaverConfig config_saver;
    MetricSaverConfig metric_saver;
    LMEvaluatorConfig lm_evaluator;
    ProfilerConfig profiler;
    StabilityMonitorConfig stability_monitor;
    SamplerConfig sampler;

    template <class V>
    void visit(V& v) {
        v.field("console_logger", console_logger, {"Progress and metrics on the console."});
        v.field("checkpointer", checkpointer, {"Periodic, final and on-demand checkpoints."});
        v.field("speed_monitor", speed_monitor, {"Throughput and MFU."});
        v.field("memory_monitor", memory_monitor, {"Memory use."});
        v.field("config_saver", config_saver, {"Config saved into checkpoints."});
        v.field("metric_saver", metric_saver, {"metrics.jsonl, metrics.csv, TensorBoard."});
        v.field("lm_evaluator", lm_evaluator, {"Held-out loss and perplexity."});
        v.field("profiler", profiler, {"Chrome trace of a window of steps."});
        v.field("stability_monitor", stability_monitor, {"Loss spikes and non-finite gradients."});
        v.field("sampler", sampler, {"Text generated from the model while it trains."});
    }
};

/// How checkpoints move to and from a remote folder (s3://, http(s)://). Credentials are never
/// here: they come from the AWS environment variables and files (docs/checkpoint-format.md).
struct RemoteConfig {
    int64_t max_retries = 5;
    double retry_delay_s = 0.5;
    double stall_timeout_s = 60;
    int64_t part_size_mb = 64;
    int64_t parallel_transfers = 4;

    template <class V>
    void visit(V& v) {
        v.field("max_retries", max_retries,
                {"Retries of a request that failed with a 5xx answer, a timeout or a reset.",
                 Bounds::between(0, 100)});
        v.field("retry_delay_s", retry_delay_s,
                {"Seconds before the first retry; doubled for each next one (at most 30 s).",
                 Bounds::at_least(0)});
        v.field("stall_timeout_s", stall_timeout_s,
                {"A transfer that moves no byte for this many seconds is cut and retried.",
                 Bounds::positive()});
        v.field("part_size_mb", part_size_mb,
                {"Files larger than this are uploaded in parts of this size (MiB) and downloaded "
                 "in ranges of it.",
                 Bounds::between(5, 5120)});
        v.field("parallel_transfers", parallel_transfers,
                {"Parts or ranges of one file moved at the same time.", Bounds::between(1, 64)});
    }
};

/// OLMo-core's TrainerConfig.
struct TrainerConfig {
    std::string save_folder;
    std::optional<std::string> work_dir;
    std::optional<std::string> load_path;
    LoadStrategy load_strategy = LoadStrategy::if_available;
    std::optional<bool> load_optim_state;
    std::optional<bool> load_trainer_state;
    bool save_overwrite = false;
    Duration max_duration = Duration::epochs(1);
    std::optional<Duration> hard_stop;
    int64_t metrics_collect_interval = 5;
    CallbacksConfig callbacks;
    std::optional<bool> async_bookkeeping;
    int64_t bookkeeping_soft_timeout = 30;
    bool no_checkpoints = false;
    bool no_evals = false;
    std::vector<StepSkipRange> steps_to_skip;
    RemoteConfig remote;

    template <class V>
    void visit(V& v) {
        v.field("save_folder", save_folder,
                {"Run folder: checkpoints, metrics and logs. Empty means <runs dir>/<run_name>. "
                 "An s3:// folder takes the checkpoints only; metrics and logs stay in "
                 "<runs dir>/<run_name>.",
                 {},
                 "path"});
        v.field("work_dir", work_dir,
                {"Local folder for working files (the profiler's traces, before they are copied "
                 "into save_folder); null means save_folder.",
                 {},
                 "path"});
        v.field("load_path", load_path,
                {"Checkpoint (or folder of checkpoints) to start from when save_folder has none.",
                 {},
                 "path"});
        v.field("load_strategy", load_strategy,
                {"if_available: resume when a checkpoint exists; always: fail without one; never: "
                 "start fresh.",
                 {}});
        v.field("load_optim_state", load_optim_state,
                {"Load the optimizer state; null means when present.", {}});
        v.field("load_trainer_state", load_trainer_state,
                {"Load step, data position and RNG; null means when present.", {}});
        v.field("save_overwrite", save_overwrite,
                {"Overwrite existing checkpoints of the same step.", {}});
        v.field("max_duration", max_duration,
                {"Length of training; also the end of the LR schedule.", {}});
        v.field("hard_stop", hard_stop,
                {"Stop early without changing the LR schedule; null disables.", {}});
        v.field("metrics_collect_interval", metrics_collect_interval,
                {"Steps between metric flushes (reduction and logging).", Bounds::at_least(1)});
        v.field("callbacks", callbacks, {"Built-in callbacks."});
        v.field("async_bookkeeping", async_bookkeeping,
                {"Reduce metrics on a background thread; null means yes with a CPU backend.", {}});
        v.field("bookkeeping_soft_timeout", bookkeeping_soft_timeout,
                {"Seconds after which a slow bookkeeping operation is warned about.",
                 Bounds::at_least(1)});
        v.field("no_checkpoints", no_checkpoints, {"Neither load nor save checkpoints.", {}});
        v.field("no_evals", no_evals, {"Disable evaluator callbacks.", {}});
        v.field("steps_to_skip", steps_to_skip,
                {"Step ranges whose batches are consumed but not trained on.", {}});
        v.field("remote", remote, {"Transfers to and from remote checkpoint folders."});
    }
};

/// How the job runs on this machine: ranks, backend, device, threads and which ranks log. Not part
/// of the run itself (a resume may change it).
struct LaunchConfig {
    int64_t nproc = 1;
    std::string backend = "cpu:gloo,cuda:nccl";
    DeviceKind device = DeviceKind::auto_;
    std::optional<int64_t> num_threads;
    LogFilterType log_filter_type = LogFilterType::rank0_only;
    double timeout_minutes = 30.0;
    std::optional<bool> shared_filesystem;

    template <class V>
    void visit(V& v) {
        v.field("nproc", nproc,
                {"Ranks on this node (one per GPU, or CPU processes).", Bounds::between(1, 1024)});
        v.field("backend", backend, {"c10d backends per device type.", {}});
        v.field("device", device, {"auto picks CUDA when available, else CPU.", {}});
        v.field("num_threads", num_threads,
                {"CPU threads per rank; null means the cores (less $LATHE_RESERVE_CORES, which the "
                 "workbench "
                 "sets to 1) divided by the local ranks.",
                 Bounds::at_least(1)});
        v.field("log_filter_type", log_filter_type, {"Which ranks log below warning level.", {}});
        v.field("timeout_minutes", timeout_minutes,
                {"How long a rank waits for the others in a collective or at the rendezvous before "
                 "failing (prepare_training_environment's timeout).",
                 Bounds::positive()});
        v.field("shared_filesystem", shared_filesystem,
                {"Whether every node sees the same filesystem (OLMo-core's shared_filesystem; "
                 "null: $OLMO_SHARED_FS, else yes for a local save_folder, which needs one and is "
                 "checked at start, and no for an s3:// one). Each filesystem's first rank "
                 "($FS_LOCAL_RANK 0) writes the files its ranks share.",
                 {}});
    }
};

/// The whole config of a run, as `lathe-engine train` takes it and config.json records it.
struct ExperimentConfig {
    std::string run_name = "tiny";
    int64_t seed = 0;
    ModelConfig model;
    DatasetConfig dataset;
    DataLoaderConfig data_loader;
    TrainModuleConfig train_module;
    TrainerConfig trainer;
    LaunchConfig launch;

    template <class V>
    void visit(V& v) {
        v.field("run_name", run_name, {"Name of the run; also names its folder.", {}});
        v.field("seed", seed, {"Seed of the torch RNG on every rank.", Bounds::at_least(0)});
        v.field("model", model, {"The transformer."});
        v.field("dataset", dataset, {"Training data."});
        v.field("data_loader", data_loader, {"Batching, shuffling and prefetching."});
        v.field("train_module", train_module,
                {"Optimisation: micro-batches, optimizer, schedule, parallelism."});
        v.field("trainer", trainer, {"The training loop, checkpoints and callbacks."});
        v.field("launch", launch, {"Processes and devices."});
    }
};

}  // namespace lathe::config
