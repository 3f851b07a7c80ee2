#include "engine/config/memory_estimate.h"

#include "engine/config/layout.h"

#include <cstdio>
#include <limits>

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

}  // namespace

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
    return s + "; activations come on top";
}

std::string memory_refusal(const MemoryEstimate& estimate, int64_t available_bytes,
                           const std::string& device, int64_t ranks_sharing) {
    const std::string change =
        "Make the model smaller (model.d_model, model.n_layers, model.vocab_size)";
    if (estimate.saturated)
        return "the model does not fit on any device: training it needs " + estimate.describe() +
               ". " + change + ".";
    const double need =
        static_cast<double>(estimate.bytes_per_rank) * static_cast<double>(ranks_sharing);
    if (available_bytes <= 0 || need <= static_cast<double>(available_bytes)) return {};
    std::string who = ranks_sharing > 1 ? std::to_string(ranks_sharing) + " ranks need " : "needs ";
    return "the model does not fit: training it " + who + human_bytes(need) + " on " + device +
           " (" + estimate.describe() + "), but only " +
           human_bytes(static_cast<double>(available_bytes)) + " is free. " + change + ", " +
           (estimate.sharded ? "use more ranks"
                             : "shard it with train_module.dp_config.name=fsdp") +
           ", or free memory.";
}

}  // namespace lathe::config
