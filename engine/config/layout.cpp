#include "engine/config/layout.h"

namespace lathe::config {

namespace {

std::string num(int64_t v) {
    return std::to_string(v);
}

}  // namespace

std::vector<std::string> tensor_parallel_problems(const ExperimentConfig& cfg) {
    std::vector<std::string> out;
    const int64_t tp = cfg.train_module.tp_config.degree;
    if (tp <= 1) return out;
    const auto& m = cfg.model;
    const std::string field = "train_module.tp_config.degree";
    auto need = [&](int64_t value, const std::string& what) {
        if (value % tp != 0)
            out.push_back(field + ": " + num(tp) + " does not divide " + what + " (" + num(value) +
                          ")");
    };
    need(m.n_heads, "model.n_heads");
    if (m.kv_heads() != m.n_heads) need(m.kv_heads(), "model.n_kv_heads");
    need(m.hidden_size(), "the SwiGLU hidden size");
    need(m.vocab_size, "model.vocab_size (the embedding table is split over the vocabulary)");
    return out;
}

ParallelLayout parallel_layout(const ExperimentConfig& cfg, int64_t world_size, int64_t num_nodes) {
    ParallelLayout l;
    const auto& dpc = cfg.train_module.dp_config;
    l.world = std::max<int64_t>(1, world_size);
    l.tp = std::max<int64_t>(1, cfg.train_module.tp_config.degree);
    l.strategy = dpc.name;
    l.problems = tensor_parallel_problems(cfg);
    if (l.world % l.tp != 0) {
        l.problems.push_back("train_module.tp_config.degree: " + num(l.tp) +
                             " does not divide the world size (" + num(l.world) +
                             (l.world == 1 ? " rank" : " ranks") + "); use a multiple of " +
                             num(l.tp) + " ranks");
        l.tp = 1;
    }
    l.dp = l.world / l.tp;
    if (num_nodes > 1 && l.tp > 1 && l.world / num_nodes % l.tp != 0)
        l.problems.push_back("train_module.tp_config.degree: " + num(l.tp) +
                             " does not divide the ranks of a node (" + num(l.world / num_nodes) +
                             "); tensor parallelism stays within a node");
    switch (l.strategy) {
        case DataParallelType::ddp:
            l.shard = 1;
            break;
        case DataParallelType::fsdp:
            l.shard = l.dp;
            break;
        case DataParallelType::hsdp: {
            // OLMo-core's get_replicate_and_shard_degree: one replica per node by default.
            const std::string p = "train_module.dp_config.";
            int64_t replicas = 0, shard = 0;
            if (dpc.num_replicas && dpc.shard_degree) {
                replicas = *dpc.num_replicas;
                shard = *dpc.shard_degree;
            } else if (dpc.num_replicas) {
                replicas = *dpc.num_replicas;
                shard = l.dp / replicas;
            } else if (dpc.shard_degree) {
                shard = *dpc.shard_degree;
                replicas = l.dp / shard;
            } else {
                replicas = std::max<int64_t>(1, num_nodes);
                shard = l.dp / replicas;
            }
            if (dpc.num_replicas && l.dp % *dpc.num_replicas != 0)
                l.problems.push_back(p + "num_replicas: " + num(*dpc.num_replicas) +
                                     " does not divide the data-parallel ranks (" + num(l.dp) +
                                     ")");
            else if (dpc.shard_degree && l.dp % *dpc.shard_degree != 0)
                l.problems.push_back(p + "shard_degree: " + num(*dpc.shard_degree) +
                                     " does not divide the data-parallel ranks (" + num(l.dp) +
                                     ")");
            else if (replicas * shard != l.dp || shard < 1)
                l.problems.push_back(p + "num_replicas x shard_degree (" + num(replicas) + " x " +
                                     num(shard) + ") is not the data-parallel ranks (" + num(l.dp) +
                                     ")");
            if (l.problems.empty() || (replicas >= 1 && shard >= 1 && replicas * shard == l.dp)) {
                l.replicas = replicas;
                l.shard = shard;
            } else {
                l.replicas = 1;
                l.shard = l.dp;
            }
            break;
        }
    }
    return l;
}

std::string ParallelLayout::describe() const {
    if (world == 1) return "single rank";
    std::string s;
    if (strategy == DataParallelType::hsdp)
        s = "hsdp " + num(replicas) + " replicas x " + num(shard) + " shards";
    else if (dp > 1)
        s = enum_to_string(strategy) + " over " + num(dp);
    if (tp > 1) s += (s.empty() ? "" : " x ") + std::string("tp ") + num(tp);
    return s;
}

int64_t proposed_world_size(const ExperimentConfig& cfg) {
    const auto& dpc = cfg.train_module.dp_config;
    const int64_t tp = std::max<int64_t>(1, cfg.train_module.tp_config.degree);
    if (dpc.name == DataParallelType::hsdp) {
        const int64_t replicas = dpc.num_replicas.value_or(2);
        const int64_t shard = dpc.shard_degree.value_or(2);
        return tp * replicas * shard;
    }
    if (dpc.name == DataParallelType::fsdp) return 2 * tp;
    return tp;
}

}  // namespace lathe::config
