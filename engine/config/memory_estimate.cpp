#include "engine/config/memory_estimate.h"

#include "engine/config/layout.h"

#include <cstdio>

namespace lathe::config {

namespace {

// Weights, gradients and AdamW's exp_avg and exp_avg_sq, each float32 (the model's master weights
// stay float32 even when FSDP gathers them in bfloat16).
constexpr int64_t kBytesPerParameter = 4 * 4;

std::string human_count(double v) {
    char buf[32];
    if (v >= 1e9)
        std::snprintf(buf, sizeof buf, "%.2fB", v / 1e9);
    else if (v >= 1e6)
        std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

}  // namespace

std::string human_bytes(double bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        ++u;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
    return buf;
}

MemoryEstimate estimate_training_memory(const ExperimentConfig& cfg, int64_t world_size) {
    const auto& m = cfg.model;
    const int64_t d = m.d_model, v = m.vocab_size, hd = m.resolved_head_dim();
    const int64_t q = m.n_heads * hd, kv = m.kv_heads() * hd;
    // As engine/model/transformer.cpp builds it: attention (no biases, QK-norm over all heads),
    // two RMSNorms and the SwiGLU feed-forward per block; embeddings, final norm and LM head.
    const int64_t per_block =
        d * q + 2 * d * kv + q * d + (m.qk_norm ? q + kv : 0) + 2 * d + 3 * d * m.hidden_size();
    MemoryEstimate e;
    e.parameters = v * d + m.n_layers * per_block + d + d * v;
    e.world_size = std::max<int64_t>(1, world_size);
    // FSDP/HSDP divide the state over a sharding group, tensor parallelism over its degree (the
    // few norm weights it replicates are left out of this lower bound).
    const auto layout = parallel_layout(cfg, e.world_size);
    e.split = layout.shard * layout.tp;
    e.sharded = e.split > 1;
    e.how = layout.describe();
    const double total =
        static_cast<double>(e.parameters) * static_cast<double>(kBytesPerParameter);
    e.bytes_per_rank = static_cast<int64_t>(total / static_cast<double>(e.split));
    return e;
}

std::string MemoryEstimate::describe() const {
    std::string s = "at least " + human_bytes(static_cast<double>(bytes_per_rank)) +
                    " per rank for " + human_count(static_cast<double>(parameters)) +
                    " parameters x " + std::to_string(kBytesPerParameter) +
                    " bytes (weights, gradients, AdamW's two moments)";
    if (sharded) s += ", split " + std::to_string(split) + " ways (" + how + ")";
    return s + "; activations come on top";
}

std::string memory_refusal(const MemoryEstimate& estimate, int64_t available_bytes,
                           const std::string& device, int64_t ranks_sharing) {
    const double need =
        static_cast<double>(estimate.bytes_per_rank) * static_cast<double>(ranks_sharing);
    if (available_bytes <= 0 || need <= static_cast<double>(available_bytes)) return {};
    std::string who = ranks_sharing > 1 ? std::to_string(ranks_sharing) + " ranks need " : "needs ";
    return "the model does not fit: training it " + who + human_bytes(need) + " on " + device +
           " (" + estimate.describe() + "), but only " +
           human_bytes(static_cast<double>(available_bytes)) +
           " is free. Make the model smaller (model.d_model, model.n_layers, model.vocab_size), " +
           (estimate.sharded ? "use more ranks"
                             : "shard it with train_module.dp_config.name=fsdp") +
           ", or free memory.";
}

}  // namespace lathe::config
