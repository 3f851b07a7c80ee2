#include "engine/config/memory_estimate.h"

#include "engine/config/layout.h"
#include "engine/util/glob.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <vector>

namespace lathe::config {

namespace {

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// Sizes multiply fast: model.d_model=200000000 alone makes the state pass int64, and a wrapped
// (negative) figure would pass the does-not-fit guard. Each step saturates at kMaxCount instead,
// and says so.
struct Count {
    int64_t value = 0;
    bool saturated = false;

    friend Count operator*(Count a, Count b) {
        Count r{0, a.saturated || b.saturated};
        if (__builtin_mul_overflow(a.value, b.value, &r.value)) r = {kMaxCount, true};
        return r;
    }
    friend Count operator+(Count a, Count b) {
        Count r{0, a.saturated || b.saturated};
        if (__builtin_add_overflow(a.value, b.value, &r.value)) r = {kMaxCount, true};
        return r;
    }
};

// Weights, gradients and AdamW's exp_avg and exp_avg_sq, each float32 (the model's master weights
// stay float32 even when FSDP gathers them in bfloat16).
constexpr int64_t kBytesPerParameter = 4 * 4;

bool bf16_compute_params(const TrainModuleConfig& tm) {
    return tm.dp_config.param_dtype && *tm.dp_config.param_dtype == DType::bfloat16;
}

// Bytes per token kept by one block for its backward pass, as engine/model/transformer.cpp runs
// it: the linear layers' inputs (cast copies under autocast), the QK-norm's and the two RMSNorms'
// float32 input and normalized output, SDPA's q, k, v, output and log-sum-exp, the output
// projection's input, and SwiGLU's w1 and w3 outputs, their SiLU and product. Heads and the
// hidden size are divided over tensor parallelism.
struct BlockBytes {
    double attention = 0, feed_forward = 0, input = 0;
};

BlockBytes block_bytes(const ExperimentConfig& cfg) {
    const auto& m = cfg.model;
    const auto& tm = cfg.train_module;
    const double tp = static_cast<double>(std::max<int64_t>(1, tm.tp_config.degree));
    // bf16 compute copies (or FSDP's bf16 gathered parameters) put the residual stream in bf16.
    const bool bf16_params = m.dtype == DType::bfloat16 || bf16_compute_params(tm);
    const double residual = bf16_params ? 2 : 4;
    const bool autocast = tm.autocast_precision && *tm.autocast_precision != DType::float32;
    const double s = autocast ? 2 : residual;  // what linear layers compute in
    const double f = 4;                        // norms compute in float32
    const double d = static_cast<double>(m.d_model);
    const double hd = static_cast<double>(m.resolved_head_dim());
    const double q = static_cast<double>(m.n_heads) * hd / tp;
    const double kv = static_cast<double>(m.kv_heads()) * hd / tp;
    const double h = static_cast<double>(m.hidden_size()) / tp;
    BlockBytes b;
    b.input = d * residual;
    const double attn_in = autocast ? 3 * d * s : d * residual;
    const double qk_norm = !m.qk_norm ? 0.0 : (q + kv) * 2 * f;
    const double sdpa = (q + 2 * kv) * s + q * s + static_cast<double>(m.n_heads) / tp * 4;
    b.attention = attn_in + qk_norm + sdpa + q * s + d * 2 * f;
    const double ff_in = autocast ? 2 * d * s : d * residual;
    b.feed_forward = ff_in + 4 * h * s + d * 2 * f;
    return b;
}

int64_t clamp_bytes(double bytes) {
    return bytes >= 9223372036854775808.0 ? kMaxCount : static_cast<int64_t>(bytes);
}

}  // namespace

CheckpointedParts checkpointed_parts(const ActivationCheckpointingConfig& ac, int64_t layer) {
    using Mode = ActivationCheckpointingMode;
    const std::string name = "blocks." + std::to_string(layer);
    auto matches = [&](const std::string& module) {
        for (const auto& pattern : ac.modules)
            if (glob_matches(pattern, name + "." + module)) return true;
        return false;
    };
    CheckpointedParts p;
    p.whole = ac.mode == Mode::full;
    if (ac.mode == Mode::selected_blocks)
        p.whole = ac.block_interval
                      ? layer % *ac.block_interval == 0
                      : std::find(ac.blocks.begin(), ac.blocks.end(), layer) != ac.blocks.end();
    p.attention = ac.mode == Mode::selected_modules && matches("attention");
    p.feed_forward = ac.mode == Mode::selected_modules && matches("feed_forward");
    return p;
}

int64_t host_available_memory() {
    int64_t available = 0;
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit) {
        if (key == "MemAvailable:") available = kib * 1024;
    }
    int64_t limit = 0, used = 0;
    std::ifstream max_file("/sys/fs/cgroup/memory.max"),
        current_file("/sys/fs/cgroup/memory.current");
    if ((max_file >> limit) && (current_file >> used) && limit > used &&
        (available == 0 || limit - used < available))
        available = limit - used;
    return available;
}

std::string human_count(double v) {
    char buf[32];
    if (v >= 1e12)
        std::snprintf(buf, sizeof buf, "%.2fT", v / 1e12);
    else if (v >= 1e9)
        std::snprintf(buf, sizeof buf, "%.2fB", v / 1e9);
    else if (v >= 1e6)
        std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
    else
        std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

std::string human_bytes(double bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) {
        bytes /= 1024;
        ++u;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
    return buf;
}

MemoryEstimate estimate_training_memory(const ExperimentConfig& cfg, int64_t world_size) {
    const auto& m = cfg.model;
    const Count d{m.d_model}, v{m.vocab_size}, hd{m.resolved_head_dim()};
    const Count q = Count{m.n_heads} * hd, kv = Count{m.kv_heads()} * hd;
    const int64_t h = m.hidden_size();  // saturates at kMaxCount
    const Count hidden{h, h == kMaxCount};
    // As engine/model/transformer.cpp builds it: attention (optional q/k/v biases, QK-norm over
    // all heads or per head), two RMSNorms and the SwiGLU feed-forward per block; embeddings,
    // final norm and LM head (none of its own when tied to the embeddings).
    const Count qk_norm = !m.qk_norm ? Count{} : m.use_head_qk_norm ? Count{2} * hd : q + kv;
    const Count per_block = d * q + Count{2} * d * kv + q * d + qk_norm +
                            (m.qkv_bias ? q + Count{2} * kv : Count{}) + Count{2} * d +
                            Count{3} * d * hidden;
    const Count parameters =
        v * d + Count{m.n_layers} * per_block + d + (m.tie_word_embeddings ? Count{} : d * v);
    MemoryEstimate e;
    e.parameters = parameters.value;
    e.saturated = parameters.saturated;
    e.world_size = std::max<int64_t>(1, world_size);
    // FSDP/HSDP divide the state over a sharding group, tensor parallelism over its degree (the
    // few norm weights it replicates are left out of this lower bound).
    const auto layout = parallel_layout(cfg, e.world_size);
    e.split = layout.shard * layout.tp;
    e.sharded = e.split > 1;
    e.how = layout.describe();
    const double per_rank = static_cast<double>(e.parameters) *
                            static_cast<double>(kBytesPerParameter) / static_cast<double>(e.split);
    // 2^63 is the first double past int64 (casting it or more is undefined).
    if (e.saturated || per_rank >= 9223372036854775808.0) {
        e.bytes_per_rank = kMaxCount;
        e.saturated = true;
    } else {
        e.bytes_per_rank = static_cast<int64_t>(per_rank);
    }

    // One micro-batch's forward pass, at its end (the peak: everything kept for backward, and the
    // logits). Activation checkpointing keeps a checkpointed block's (or module's) input only, and
    // recomputes one block at a time in backward.
    const auto& tm = cfg.train_module;
    const auto& ac = tm.ac_config;
    e.microbatch_tokens = tm.rank_microbatch_size;
    e.ac_mode = enum_to_string(ac.mode);
    const double tokens = static_cast<double>(tm.rank_microbatch_size);
    const BlockBytes b = block_bytes(cfg);
    double per_token = 0, recompute = 0;
    for (int64_t i = 0; i < m.n_layers; ++i) {
        const auto [whole, attention, feed_forward] = checkpointed_parts(ac, i);
        if (whole) {
            per_token += b.input;
            recompute = std::max(recompute, b.attention + b.feed_forward);
        } else {
            per_token += attention ? b.input : b.attention;
            per_token += feed_forward ? b.input : b.feed_forward;
            if (attention) recompute = std::max(recompute, b.attention);
            if (feed_forward) recompute = std::max(recompute, b.feed_forward);
        }
    }
    per_token += static_cast<double>(m.d_model) * 4;  // and the final norm's input
    // In backward, checkpointing recomputes a block's (or module's) activations, one at a time;
    // the logits are gone by then, so the step's peak is the larger of the two moments. (Live
    // memory, as a caching allocator holds it: glibc's heap can keep up to half as much again
    // of freed blocks in a CPU process's RSS; test_memory_estimate.)
    const double backward_per_token = recompute;
    if (cfg.dataset.generate_doc_lengths)  // the (B, 1, T, T) document mask, shared by the blocks
        per_token += static_cast<double>(cfg.dataset.sequence_length);
    const bool autocast = tm.autocast_precision && *tm.autocast_precision != DType::float32;
    const bool low_logits = autocast || m.dtype == DType::bfloat16 || bf16_compute_params(tm);
    const double vocab = static_cast<double>(m.vocab_size) /
                         static_cast<double>(std::max<int64_t>(1, tm.tp_config.degree));
    // The loss keeps the LM head's output in its own dtype for backward, which writes the
    // gradient into it (bf16 logits are widened a block of rows at a time, never whole); the
    // vocabulary-parallel loss takes an fp32 copy.
    const bool parallel_loss = tm.tp_config.degree > 1 && tm.tp_config.loss_parallel;
    const double logits_per_token = vocab * (low_logits ? 2 + (parallel_loss ? 4 : 0) : 4);
    e.activation_bytes = clamp_bytes(per_token * tokens);
    e.backward_bytes = clamp_bytes(backward_per_token * tokens);
    e.logits_bytes = clamp_bytes(logits_per_token * tokens);
    // autocast's bf16 copies of the weights, kept for backward; or the compute copies (without
    // FSDP, whose gathered copies live one unit at a time).
    const bool copies = bf16_compute_params(tm) && layout.shard <= 1;
    e.weight_copy_bytes =
        autocast || copies
            ? clamp_bytes(static_cast<double>(e.parameters) * 2 / static_cast<double>(e.split))
            : 0;
    e.peak_bytes = clamp_bytes(
        static_cast<double>(e.bytes_per_rank) + static_cast<double>(e.activation_bytes) +
        std::max(static_cast<double>(e.logits_bytes), static_cast<double>(e.backward_bytes)) +
        static_cast<double>(e.weight_copy_bytes));
    if (e.saturated) e.peak_bytes = kMaxCount;
    return e;
}

std::string MemoryEstimate::describe() const {
    std::string s = (saturated ? "more than " : "at least ") +
                    human_bytes(static_cast<double>(bytes_per_rank)) + " per rank for " +
                    (saturated && parameters == kMaxCount ? "more than " : "") +
                    human_count(static_cast<double>(parameters)) + " parameters x " +
                    std::to_string(kBytesPerParameter) +
                    " bytes (weights, gradients, AdamW's two moments)";
    if (sharded) s += ", split " + std::to_string(split) + " ways (" + how + ")";
    if (saturated) return s;
    return s + "; " + describe_peak();
}

std::string MemoryEstimate::describe_peak() const {
    if (saturated) return "expected peak more than " + human_bytes(static_cast<double>(peak_bytes));
    std::string s = "expected peak " + human_bytes(static_cast<double>(peak_bytes)) +
                    " per rank: " + human_bytes(static_cast<double>(bytes_per_rank)) +
                    " weights, gradients and AdamW state";
    if (weight_copy_bytes > 0)
        s += " + " + human_bytes(static_cast<double>(weight_copy_bytes)) + " bf16 weight copies";
    s += " + " + human_bytes(static_cast<double>(activation_bytes)) + " activations (" +
         human_count(static_cast<double>(microbatch_tokens)) + "-token micro-batch, AC " + ac_mode +
         ") + ";
    if (logits_bytes >= backward_bytes)
        s += human_bytes(static_cast<double>(logits_bytes)) + " logits and loss";
    else
        s += human_bytes(static_cast<double>(backward_bytes)) + " recomputed in backward";
    return s;
}

std::string memory_refusal(const MemoryEstimate& estimate, int64_t available_bytes,
                           const std::string& device, int64_t ranks_sharing,
                           const ExperimentConfig* cfg) {
    const std::string change =
        "Make the model smaller (model.d_model, model.n_layers, model.vocab_size)";
    if (estimate.saturated)
        return "the model does not fit on any device: training it needs " + estimate.describe() +
               ". " + change + ".";
    const double sharing = static_cast<double>(ranks_sharing);
    const double need = static_cast<double>(estimate.peak_bytes) * sharing;
    if (available_bytes <= 0 || need <= static_cast<double>(available_bytes)) return {};
    std::string who = ranks_sharing > 1 ? std::to_string(ranks_sharing) + " ranks need " : "needs ";
    std::string out = "the model does not fit: training it " + who + human_bytes(need) + " on " +
                      device + " (" + estimate.describe_peak() + "), but only " +
                      human_bytes(static_cast<double>(available_bytes)) + " is free.";
    // The remedies in order, each with the peak it gives (so the user sees which one is enough).
    std::vector<std::string> remedies;
    if (cfg) {
        auto peak_with = [&](const std::function<void(ExperimentConfig&)>& edit) {
            ExperimentConfig c = *cfg;
            edit(c);
            return human_bytes(
                static_cast<double>(estimate_training_memory(c, estimate.world_size).peak_bytes) *
                sharing);
        };
        using Mode = ActivationCheckpointingMode;
        if (cfg->train_module.ac_config.mode != Mode::full)
            remedies.push_back(
                "train_module.ac_config.mode=full (" +
                peak_with([](ExperimentConfig& c) { c.train_module.ac_config.mode = Mode::full; }) +
                ")");
        // The largest halving of the micro-batch (whole sequences) whose peak fits, else the
        // smallest one, with the peak it gives.
        const int64_t mb = cfg->train_module.rank_microbatch_size;
        const int64_t seq = std::max<int64_t>(1, cfg->dataset.sequence_length);
        int64_t smaller = mb;
        std::string smaller_peak;
        for (int64_t t = mb / 2; t >= seq && t % seq == 0; t /= 2) {
            ExperimentConfig c = *cfg;
            c.train_module.rank_microbatch_size = t;
            const double peak =
                static_cast<double>(estimate_training_memory(c, estimate.world_size).peak_bytes) *
                sharing;
            smaller = t;
            smaller_peak = human_bytes(peak);
            if (peak <= static_cast<double>(available_bytes)) break;
        }
        if (smaller < mb)
            remedies.emplace_back("a smaller train_module.rank_microbatch_size, e.g. " +
                                  std::to_string(smaller) + " (" + smaller_peak +
                                  "; the batch stays the same, in more micro-batches)");
        if (!estimate.sharded)
            remedies.emplace_back(
                "more ranks with train_module.dp_config.name=fsdp (the weights, gradients and "
                "AdamW state divide over them)");
    }
    remedies.push_back(std::string(estimate.sharded ? "more ranks, or " : "") + change);
    out += " Remedies, in order: ";
    for (std::size_t i = 0; i < remedies.size(); ++i)
        out += (i ? "; " : "") + std::to_string(i + 1) + ". " + remedies[i];
    return out + ". Or free memory; --force starts anyway.";
}

}  // namespace lathe::config
