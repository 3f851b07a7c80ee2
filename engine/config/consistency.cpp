// Checks that involve more than one field. Each issue names the field a user should change.
#include "engine/config/io.h"

#include <filesystem>
#include <fstream>

namespace lathe::config {

std::vector<Issue> check_consistency(const ExperimentConfig& c) {
    std::vector<Issue> out;
    auto add = [&](std::string path, std::string msg) {
        out.push_back({std::move(path), std::move(msg)});
    };
    const auto& m = c.model;
    const auto& tm = c.train_module;
    const int64_t seq = c.dataset.sequence_length;

    if (!m.head_dim && m.d_model % m.n_heads != 0) {
        add("model.n_heads", "d_model (" + std::to_string(m.d_model) +
                                 ") must be divisible by n_heads (" + std::to_string(m.n_heads) +
                                 ")");
    } else if (m.resolved_head_dim() % 2 != 0) {
        add(m.head_dim ? "model.head_dim" : "model.n_heads",
            "head size " + std::to_string(m.resolved_head_dim()) +
                " must be even for rotary embeddings");
    }
    if (m.n_kv_heads && m.n_heads % *m.n_kv_heads != 0) {
        add("model.n_kv_heads", "n_heads (" + std::to_string(m.n_heads) +
                                    ") must be divisible by n_kv_heads (" +
                                    std::to_string(*m.n_kv_heads) + ")");
    }
    if ((c.dataset.source == DataSource::builtin || c.dataset.source == DataSource::text) &&
        m.vocab_size < 256) {
        add("model.vocab_size", "must be >= 256 for the " + enum_to_string(c.dataset.source) +
                                    " source, whose tokens are bytes (got " +
                                    std::to_string(m.vocab_size) + ")");
    }
    if (c.dataset.source == DataSource::numpy && c.dataset.token_dtype == TokenDType::uint16 &&
        m.vocab_size > 65536) {
        add("dataset.token_dtype",
            "uint16 tokens cannot address a vocabulary of " + std::to_string(m.vocab_size));
    }

    const auto& eval = c.trainer.callbacks.lm_evaluator;
    if (eval.enabled && !c.trainer.no_evals && c.dataset.validation_fraction <= 0) {
        add("trainer.callbacks.lm_evaluator.enabled",
            "the evaluator needs held-out data: set dataset.validation_fraction (for example "
            "0.02), or disable the evaluator");
    }

    if (seq > tm.max_sequence_length) {
        add("dataset.sequence_length", "must be <= train_module.max_sequence_length (" +
                                           std::to_string(tm.max_sequence_length) + "), got " +
                                           std::to_string(seq));
    }
    if (tm.rank_microbatch_size % seq != 0) {
        add("train_module.rank_microbatch_size", "must be a multiple of dataset.sequence_length (" +
                                                     std::to_string(seq) + "), got " +
                                                     std::to_string(tm.rank_microbatch_size));
    }
    const int64_t gbs = c.data_loader.global_batch_size;
    const int64_t dp = c.launch.nproc;
    if (gbs % seq != 0) {
        add("data_loader.global_batch_size", "must be a multiple of dataset.sequence_length (" +
                                                 std::to_string(seq) + "), got " +
                                                 std::to_string(gbs));
    } else if (gbs % (tm.rank_microbatch_size * dp) != 0) {
        add("data_loader.global_batch_size",
            "must be divisible by train_module.rank_microbatch_size x launch.nproc (" +
                std::to_string(tm.rank_microbatch_size) + " x " + std::to_string(dp) + " = " +
                std::to_string(tm.rank_microbatch_size * dp) + "), got " + std::to_string(gbs));
    }

    const auto& ck = c.trainer.callbacks.checkpointer;
    if (ck.ephemeral_save_interval && ck.save_interval &&
        *ck.ephemeral_save_interval >= *ck.save_interval) {
        add("trainer.callbacks.checkpointer.ephemeral_save_interval",
            "must be smaller than save_interval (" + std::to_string(*ck.save_interval) + ")");
    }
    for (std::size_t i = 0; i < c.trainer.steps_to_skip.size(); ++i) {
        const auto& r = c.trainer.steps_to_skip[i];
        if (r.stop <= r.start) {
            add("trainer.steps_to_skip[" + std::to_string(i) + "].stop",
                "must be greater than start (" + std::to_string(r.start) + ")");
        }
    }
    if (c.launch.backend.find("gloo") == std::string::npos &&
        c.launch.backend.find("nccl") == std::string::npos) {
        add("launch.backend", "must name gloo and/or nccl, e.g. \"cpu:gloo,cuda:nccl\" (got \"" +
                                  c.launch.backend + "\")");
    }
    if (c.run_name.empty() || c.run_name.find('/') != std::string::npos) {
        add("run_name", "must be a non-empty name without '/' (got \"" + c.run_name + "\")");
    }

    if (c.dataset.source != DataSource::builtin) {
        if (c.dataset.paths.empty()) {
            add("dataset.paths", "the " + enum_to_string(c.dataset.source) +
                                     " source needs at least one file or folder");
        }
        namespace fs = std::filesystem;
        for (std::size_t i = 0; i < c.dataset.paths.size(); ++i) {
            const auto& p = c.dataset.paths[i];
            std::error_code ec;
            std::string where = "dataset.paths[" + std::to_string(i) + "]";
            if (!fs::exists(p, ec)) {
                add(where, "no such file or folder: " + p);
            } else if (fs::is_regular_file(p, ec)) {
                std::ifstream f(p, std::ios::binary);
                if (!f) add(where, "cannot read " + p);
            }
        }
    }
    return out;
}

}  // namespace lathe::config
