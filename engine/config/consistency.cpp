// Checks that involve more than one field. Each issue names the field a user should change.
#include "engine/config/io.h"
#include "engine/config/layout.h"
#include "engine/config/rules.h"
#include "engine/util/glob.h"

#include <cmath>
#include <filesystem>

#include <fstream>
#include <functional>
#include <sstream>

namespace lathe::config {

namespace {

using Add = std::function<void(std::string, std::string)>;

bool uses_warmup(SchedulerName n) {
    switch (n) {
        case SchedulerName::constant:
        case SchedulerName::exponential:
        case SchedulerName::composable:
        case SchedulerName::sequential:
            return false;
        default:
            return true;
    }
}

bool uses_decay(SchedulerName n) {
    return n == SchedulerName::wsd || n == SchedulerName::power_lr ||
           n == SchedulerName::cos_with_warmup_and_linear_decay || n == SchedulerName::wsds;
}

std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

// One of two alternatives, exactly: "set warmup or warmup_fraction".
void exactly_one(bool a, bool b, const std::string& at, const char* na, const char* nb,
                 const std::string& what, const Add& add) {
    if (a && b) {
        add(at + nb, std::string("set ") + na + " or " + nb + ", not both (set " + na +
                         " to null to use " + nb + ")");
    } else if (!a && !b) {
        add(at + na, what + " needs " + na + " or " + nb);
    }
}

void check_override_decay(const std::optional<OverrideDecay>& od, const std::string& at,
                          const Add& add) {
    if (!od) return;
    exactly_one(od->end_lr.has_value(), od->end_lr_fraction.has_value(), at + "override_decay.",
                "end_lr", "end_lr_fraction", "override_decay", add);
}

// `at` ends with '.'; `lrs` are the peak LRs of the parameter groups.
void check_schedule(const ScheduleParams& p, const std::string& at, const std::vector<double>& lrs,
                    const Add& add) {
    const std::string name = enum_to_string(p.name);
    if (uses_warmup(p.name)) {
        exactly_one(p.warmup.has_value(), p.warmup_fraction.has_value(), at, "warmup",
                    "warmup_fraction", name, add);
        for (double lr : lrs) {
            if (!(p.warmup_min_lr < lr)) {
                add(at + "warmup_min_lr",
                    "must be below the peak LR " + num(lr) + " (got " + num(p.warmup_min_lr) + ")");
                break;
            }
        }
    }
    if (uses_decay(p.name)) {
        exactly_one(p.decay.has_value(), p.decay_fraction.has_value(), at, "decay",
                    "decay_fraction", name, add);
        for (double lr : lrs) {
            if (!(p.decay_min_lr < lr)) {
                add(at + "decay_min_lr",
                    "must be below the peak LR " + num(lr) + " (got " + num(p.decay_min_lr) + ")");
                break;
            }
        }
    }
    switch (p.name) {
        case SchedulerName::power_lr:
            if (!(p.b < 0))
                add(at + "b", "must be negative for a decaying power law (got " + num(p.b) + ")");
            if (p.warmup && *p.warmup == 0)
                add(at + "warmup",
                    "power_lr needs a warmup of at least 1 (the power law starts "
                    "from it)");
            break;
        case SchedulerName::wsds: {
            if (p.period_lengths.empty()) {
                add(at + "period_lengths", "wsds needs at least one period");
                break;
            }
            if (!p.period_lr_multipliers.empty() &&
                p.period_lr_multipliers.size() != p.period_lengths.size()) {
                add(at + "period_lr_multipliers",
                    "must have one entry per period (" + std::to_string(p.period_lengths.size()) +
                        "), got " + std::to_string(p.period_lr_multipliers.size()));
            }
            auto decay_of = [&](int64_t len) {
                return p.decay ? *p.decay
                               : static_cast<int64_t>(std::nearbyint(
                                     p.decay_fraction.value_or(0.0) * static_cast<double>(len)));
            };
            const int64_t l0 = p.period_lengths[0];
            const int64_t w = p.warmup
                                  ? *p.warmup
                                  : static_cast<int64_t>(std::nearbyint(
                                        p.warmup_fraction.value_or(0.0) * static_cast<double>(l0)));
            if (w + decay_of(l0) > l0) {
                add(at + "period_lengths[0]",
                    "the first period (" + std::to_string(l0) + ") is shorter than warmup (" +
                        std::to_string(w) + ") + decay (" + std::to_string(decay_of(l0)) + ")");
            }
            for (std::size_t i = 1; i < p.period_lengths.size(); ++i) {
                if (decay_of(p.period_lengths[i]) > p.period_lengths[i]) {
                    add(at + "period_lengths[" + std::to_string(i) + "]",
                        "is shorter than its decay (" +
                            std::to_string(decay_of(p.period_lengths[i])) + ")");
                }
            }
            break;
        }
        case SchedulerName::composable:
            if (p.stages.empty()) add(at + "stages", "composable needs at least one stage");
            for (std::size_t i = 0; i < p.stages.size(); ++i) {
                const auto& st = p.stages[i];
                const std::string sat = at + "stages[" + std::to_string(i) + "].";
                if (st.start_lr && st.start_lr_fraction) {
                    add(sat + "start_lr_fraction", "set start_lr or start_lr_fraction, not both");
                }
                exactly_one(st.end_lr.has_value(), st.end_lr_fraction.has_value(), sat, "end_lr",
                            "end_lr_fraction", "a stage", add);
            }
            check_override_decay(p.override_decay, at, add);
            break;
        default:
            break;
    }
}

// The model's shapes and the features that constrain each other or the layout.
void check_model(const ExperimentConfig& c, const Add& add) {
    const auto& m = c.model;
    const auto& tm = c.train_module;
    if (!m.head_dim && m.d_model % m.n_heads != 0) {
        // On d_model (issue 34): a d_model the heads cannot split is usually the one just typed.
        add("model.d_model", "must be a multiple of model.n_heads (" + std::to_string(m.n_heads) +
                                 ") unless model.head_dim is set (got " +
                                 std::to_string(m.d_model) + ")");
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
    if (m.use_head_qk_norm && !m.qk_norm)
        add("model.use_head_qk_norm",
            "needs model.qk_norm (there is no QK-norm to apply per head)");
    for (std::size_t i = 0; i < m.sliding_window.pattern.size(); ++i) {
        const auto w = m.sliding_window.pattern[i];
        if (w != -1 && w < 1)
            add("model.sliding_window.pattern[" + std::to_string(i) + "]",
                "a window must be at least 1 token, or -1 for full attention (got " +
                    std::to_string(w) + ")");
    }
    if (m.tie_word_embeddings && tm.dp_config.name != DataParallelType::ddp)
        add("model.tie_word_embeddings",
            "tied embeddings train with DDP (train_module.dp_config.name ddp), not " +
                enum_to_string(tm.dp_config.name) +
                ": the embedding table and the LM head would be sharded apart");
    if (m.tie_word_embeddings && tm.tp_config.degree > 1)
        add("model.tie_word_embeddings",
            "tied embeddings cannot be split by tensor parallelism "
            "(train_module.tp_config.degree 1)");
}

// The tokens: source, vocabulary, label masks and the sampler's prompts.
void check_data(const ExperimentConfig& c, const Add& add) {
    const auto& m = c.model;
    if ((c.dataset.source == DataSource::builtin || c.dataset.source == DataSource::text) &&
        m.vocab_size < 256) {
        add("model.vocab_size", "must be >= 256 for the " + enum_to_string(c.dataset.source) +
                                    " source, whose tokens are bytes (got " +
                                    std::to_string(m.vocab_size) + ")");
    }
    if (!c.dataset.label_mask_paths.empty()) {
        if (c.dataset.source != DataSource::numpy)
            add("dataset.label_mask_paths",
                "only for the numpy source (source is " + enum_to_string(c.dataset.source) + ")");
        else if (c.dataset.label_mask_paths.size() != c.dataset.paths.size())
            add("dataset.label_mask_paths",
                std::to_string(c.dataset.label_mask_paths.size()) + " mask file(s) for " +
                    std::to_string(c.dataset.paths.size()) +
                    " token file(s) in dataset.paths: give one per token file, in the same order");
    }
    // A mixture: numpy sources instead of dataset.paths, ratios summing to 1 (numpy's allclose,
    // as OLMo-core checks), a token count, and no held-out tail (it would be one source).
    if (const auto& mix = c.dataset.mixture; mix.enabled()) {
        if (c.dataset.source != DataSource::numpy)
            add("dataset.mixture",
                "only for the numpy source (source is " + enum_to_string(c.dataset.source) + ")");
        if (!c.dataset.paths.empty())
            add("dataset.paths", "give the files in dataset.mixture.sources, or here, not both");
        if (!c.dataset.label_mask_paths.empty())
            add("dataset.label_mask_paths",
                "not with dataset.mixture (OLMo-core refuses it too); a source's prepare-data "
                "folders bring their own masks");
        if (auto problem = mixture_tokens_problem(mix))
            add("dataset.mixture.requested_tokens", *problem);
        if (c.dataset.validation_fraction > 0)
            add("dataset.validation_fraction",
                "must be 0 with dataset.mixture: the held-out tail would be the last source only");
        for (std::size_t s = 0; s < mix.sources.size(); ++s) {
            const auto& src = mix.sources[s];
            const std::string at = "dataset.mixture.sources[" + std::to_string(s) + "]";
            if (src.source_name.empty()) add(at + ".source_name", "empty");
            for (std::size_t t = 0; t < s; ++t)
                if (!src.source_name.empty() && mix.sources[t].source_name == src.source_name)
                    add(at + ".source_name",
                        src.source_name + " is also sources[" + std::to_string(t) + "]'s name");
            if (src.paths.empty()) add(at + ".paths", "empty");
        }
        if (auto problem = mixture_ratio_problem(mix)) add("dataset.mixture.sources", *problem);
    }
    // The repetition filter: a period range that holds no period would filter nothing.
    if (const auto& f = c.dataset.instance_filter_config;
        f && f->repetition_min_period > f->repetition_max_period)
        add("dataset.instance_filter_config.repetition_min_period",
            std::to_string(f->repetition_min_period) + " is above repetition_max_period (" +
                std::to_string(f->repetition_max_period) + "): no period is searched");
    // Document masking: the token that ends a document must be known and in the vocabulary.
    if (c.dataset.eos_token_id && *c.dataset.eos_token_id >= m.vocab_size)
        add("dataset.eos_token_id", std::to_string(*c.dataset.eos_token_id) +
                                        " is outside the vocabulary (model.vocab_size = " +
                                        std::to_string(m.vocab_size) + ")");
    if (c.dataset.generate_doc_lengths && !c.dataset.eos_token_id &&
        c.dataset.source != DataSource::numpy)
        add("dataset.eos_token_id",
            "dataset.generate_doc_lengths needs the token that ends a document, and the " +
                enum_to_string(c.dataset.source) +
                " source's tokens are bytes with no EOS of their own: set it (10 ends documents "
                "at newlines)");
    if (c.dataset.source == DataSource::numpy && c.dataset.token_dtype == TokenDType::uint16 &&
        m.vocab_size > 65536) {
        add("dataset.token_dtype",
            "uint16 tokens cannot address a vocabulary of " + std::to_string(m.vocab_size));
    }

    // The sampler's prompts: text needs byte tokens; ids must be in the vocabulary.
    if (const auto& smp = c.trainer.callbacks.sampler; smp.enabled) {
        const std::string at = "trainer.callbacks.sampler.";
        if (smp.prompts.empty() && smp.prompt_ids.empty())
            add(at + "prompts", "the sampler needs at least one prompt (prompts or prompt_ids)");
        if (!smp.prompts.empty() && !c.dataset.has_text())
            add(at + "prompts",
                "text prompts need a tokenizer, and this run's tokens (dataset.source numpy) have "
                "none: set dataset.tokenizer, or give prompt_ids");
        for (std::size_t i = 0; i < smp.prompts.size(); ++i)
            if (smp.prompts[i].empty()) add(at + "prompts[" + std::to_string(i) + "]", "is empty");
        for (std::size_t i = 0; i < smp.prompt_ids.size(); ++i) {
            const std::string pi = at + "prompt_ids[" + std::to_string(i) + "]";
            if (smp.prompt_ids[i].empty()) add(pi, "is empty");
            for (auto id : smp.prompt_ids[i])
                if (id < 0 || id >= m.vocab_size) {
                    add(pi, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                std::to_string(m.vocab_size - 1) + ")");
                    break;
                }
        }
    }
}

// The optimizer's groups, the schedule that scales their LRs, and the evaluator's data.
void check_optim(const ExperimentConfig& c, const Add& add) {
    const auto& tm = c.train_module;
    // The optimizer's groups and the schedule that scales their LRs.
    std::vector<double> lrs{tm.optim.lr};
    for (std::size_t i = 0; i < tm.optim.group_overrides.size(); ++i) {
        const auto& g = tm.optim.group_overrides[i];
        if (g.params.empty()) {
            add("train_module.optim.group_overrides[" + std::to_string(i) + "].params",
                "needs at least one parameter-name glob");
        }
        if (g.lr) lrs.push_back(*g.lr);
    }
    const auto& sch = tm.scheduler;
    if (sch.name == SchedulerName::sequential) {
        const std::string at = "train_module.scheduler.";
        if (sch.schedulers.empty()) {
            add(at + "schedulers", "sequential needs at least one schedule");
        } else if (sch.schedulers_max.size() + 1 != sch.schedulers.size() &&
                   sch.schedulers_max.size() != sch.schedulers.size()) {
            add(at + "schedulers_max", "needs one length for every schedule but the last (" +
                                           std::to_string(sch.schedulers.size() - 1) + "), got " +
                                           std::to_string(sch.schedulers_max.size()));
        }
        for (std::size_t i = 0; i < sch.schedulers.size(); ++i) {
            const std::string sat = at + "schedulers[" + std::to_string(i) + "].";
            if (sch.schedulers[i].name == SchedulerName::sequential) {
                add(sat + "name", "a sequential schedule cannot hold another sequential one");
                continue;
            }
            check_schedule(sch.schedulers[i], sat, lrs, add);
        }
        check_override_decay(sch.override_decay, at, add);
    } else {
        check_schedule(sch, "train_module.scheduler.", lrs, add);
    }

    const auto& eval = c.trainer.callbacks.lm_evaluator;
    if (eval.enabled && !c.trainer.no_evals && c.dataset.validation_fraction <= 0) {
        add("trainer.callbacks.lm_evaluator.enabled",
            "the evaluator needs held-out data: set dataset.validation_fraction (for example "
            "0.02), or disable the evaluator");
    }
}

// Activation checkpointing: each mode's fields, and only those.
void check_activation_checkpointing(const ExperimentConfig& c, const Add& add) {
    const auto& ac = c.train_module.ac_config;
    const std::string p = "train_module.ac_config.";
    const int64_t n = c.model.n_layers;
    const bool blocks_mode = ac.mode == ActivationCheckpointingMode::selected_blocks;
    const bool modules_mode = ac.mode == ActivationCheckpointingMode::selected_modules;
    if (!blocks_mode && (ac.block_interval || !ac.blocks.empty()))
        add(p + (ac.block_interval ? "block_interval" : "blocks"),
            "only for mode selected_blocks (mode is " + enum_to_string(ac.mode) + ")");
    if (!modules_mode && !ac.modules.empty())
        add(p + "modules",
            "only for mode selected_modules (mode is " + enum_to_string(ac.mode) + ")");
    if (blocks_mode && !ac.block_interval == ac.blocks.empty())
        add(p + "blocks", "selected_blocks takes block_interval or blocks (one of them)");
    for (std::size_t i = 0; i < ac.blocks.size(); ++i)
        if (ac.blocks[i] < 0 || ac.blocks[i] >= n)
            add(p + "blocks[" + std::to_string(i) + "]",
                "block " + std::to_string(ac.blocks[i]) +
                    " does not exist (model.n_layers = " + std::to_string(n) + ")");
    if (modules_mode && ac.modules.empty())
        add(p + "modules", "selected_modules needs patterns, e.g. [\"blocks.*.feed_forward\"]");
    for (std::size_t i = 0; i < ac.modules.size(); ++i) {
        bool matched = false;
        for (int64_t b = 0; b < n && !matched; ++b)
            for (const char* module : {"attention", "feed_forward"})
                matched = matched ||
                          glob_matches(ac.modules[i], "blocks." + std::to_string(b) + "." + module);
        if (!matched)
            add(p + "modules[" + std::to_string(i) + "]",
                "'" + ac.modules[i] +
                    "' matches no module (they are blocks.{i}.attention and "
                    "blocks.{i}.feed_forward)");
    }
}

// The files the data and tokenizer come from.
void check_files(const ExperimentConfig& c, const Add& add) {
    if (c.dataset.tokenizer) {
        std::error_code ec;
        if (c.dataset.source != DataSource::numpy)
            add("dataset.tokenizer", "the " + enum_to_string(c.dataset.source) +
                                         " source's tokens are bytes; a tokenizer belongs to "
                                         "numpy token files");
        else if (!std::filesystem::is_regular_file(*c.dataset.tokenizer, ec))
            add("dataset.tokenizer", "no such file: " + *c.dataset.tokenizer);
    }
    if (c.dataset.source != DataSource::builtin) {
        if (c.dataset.paths.empty() && !c.dataset.mixture.enabled()) {
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
}

}  // namespace

std::vector<Issue> check_consistency(const ExperimentConfig& c) {
    std::vector<Issue> out;
    const Add add = [&](std::string path, std::string msg) {
        out.push_back({std::move(path), std::move(msg)});
    };
    const auto& tm = c.train_module;
    const int64_t seq = c.dataset.sequence_length;
    check_model(c, add);
    check_data(c, add);
    check_optim(c, add);

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
    // The ranks of a tensor-parallel group share their batches: the batch is split over
    // nproc / degree data-parallel ranks (a degree that does not divide nproc is the layout's
    // problem, reported by launch).
    const int64_t tp_degree = std::max<int64_t>(1, tm.tp_config.degree);
    const bool tp_divides = c.launch.nproc % tp_degree == 0;
    const int64_t dp = tp_divides ? c.launch.nproc / tp_degree : c.launch.nproc;
    if (gbs % seq != 0) {
        add("data_loader.global_batch_size", "must be a multiple of dataset.sequence_length (" +
                                                 std::to_string(seq) + "), got " +
                                                 std::to_string(gbs));
    } else if (tp_divides && gbs % (tm.rank_microbatch_size * dp) != 0) {
        add("data_loader.global_batch_size",
            "must be divisible by train_module.rank_microbatch_size x " +
                std::string(tp_degree > 1 ? "the data-parallel ranks (launch.nproc / "
                                            "train_module.tp_config.degree)"
                                          : "launch.nproc") +
                " (" + std::to_string(tm.rank_microbatch_size) + " x " + std::to_string(dp) +
                " = " + std::to_string(tm.rank_microbatch_size * dp) + "), got " +
                std::to_string(gbs));
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

    // Tensor parallelism's divisibility (the world size is checked where it is known: launch,
    // and the ranks themselves), and HSDP's fields only under hsdp.
    for (const auto& problem : tensor_parallel_problems(c)) {
        const auto colon = problem.find(": ");
        add(problem.substr(0, colon), problem.substr(colon + 2));
    }
    if (tm.dp_config.name != DataParallelType::hsdp &&
        (tm.dp_config.num_replicas || tm.dp_config.shard_degree))
        add(std::string("train_module.dp_config.") +
                (tm.dp_config.num_replicas ? "num_replicas" : "shard_degree"),
            "only for name hsdp (name is " + enum_to_string(tm.dp_config.name) + ")");

    check_activation_checkpointing(c, add);
    check_files(c, add);
    return out;
}

}  // namespace lathe::config
