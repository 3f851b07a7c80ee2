#include "engine/checkpoint/restore.h"

#include "engine/checkpoint/hf_convert.h"
#include "engine/remote/storage.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/util/error.h"
#include "engine/util/log.h"

#include <chrono>
#include <filesystem>
#include <fstream>

namespace lathe::checkpoint {

RestoreSettings RestoreSettings::of(const config::TrainerConfig& t, std::string save_folder,
                                    std::string checkpoint_folder) {
    RestoreSettings s;
    s.save_folder = std::move(save_folder);
    s.checkpoint_folder = std::move(checkpoint_folder);
    s.strategy = t.load_strategy;
    s.load_path = t.load_path;
    s.load_trainer_state = t.load_trainer_state;
    s.load_optim_state = t.load_optim_state;
    s.no_checkpoints = t.no_checkpoints;
    return s;
}

AfterFailure after_failed_load(LoadFailure failure, bool own_folder, config::LoadStrategy strategy,
                               bool has_next) {
    if (failure == LoadFailure::does_not_fit) return AfterFailure::stop;
    // Damaged checkpoints of the run's own folder are set aside and the next older one is tried,
    // whatever the load strategy: the run then trains past that step again on its own.
    if (own_folder) return AfterFailure::set_aside_and_fall_back;
    return strategy == config::LoadStrategy::if_available && has_next ? AfterFailure::fall_back
                                                                      : AfterFailure::stop;
}

std::vector<std::string> restore_candidates(const std::string& dir) {
    if (Checkpointer::dir_is_checkpoint(dir)) return {dir};
    std::vector<std::string> out;
    const auto found = Checkpointer::complete_checkpoints(dir);
    for (auto it = found.rbegin(); it != found.rend(); ++it) out.push_back(it->path);
    std::error_code ec;
    if (found.empty() && !remote::is_remote_path(dir) &&
        std::filesystem::exists(dir + "/model_and_optim", ec))
        throw Error(dir + ": not a complete checkpoint (no .metadata.json)");
    return out;
}

bool is_own_checkpoint_folder(const std::string& dir, const std::string& checkpoint_folder) {
    if (remote::is_remote_path(dir)) {
        // The same folder whatever trailing slashes either was written with.
        auto bare = [](std::string p) {
            while (p.size() > 1 && p.back() == '/') p.pop_back();
            return p;
        };
        return bare(dir) == bare(checkpoint_folder);
    }
    std::error_code ec;
    return std::filesystem::equivalent(dir, checkpoint_folder, ec);
}

std::string earlier_progress(const std::string& folder) {
    const auto status = run_folder::read_record<run_folder::RunStatus>(
        run_folder::join(folder, run_folder::kStatusFile));
    if (status && status->step > 0)
        return "its status.json says it reached step " + std::to_string(status->step);
    std::ifstream history(run_folder::join(folder, run_folder::kHistoryFile));
    std::string line;
    while (std::getline(history, line)) {
        const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("checkpoint"))
            return "its history.jsonl names checkpoint " + j["checkpoint"].dump();
    }
    return {};
}

std::string set_aside_unusable(Checkpointer& checkpointer, const std::string& folder,
                               const std::string& dir, const std::string& reason) {
    const auto record = checkpointer.set_aside_unusable(dir, reason);
    if (record.moved_to.empty()) return {};
    try {
        run_folder::append_history(run_folder::join(folder, run_folder::kHistoryFile),
                                   run_folder::to_json(record));
    } catch (const std::exception& e) {
        log::warn("{}", e.what());  // the reason is inside the folder as well
    }
    log::warn("checkpoint {} is unusable and was set aside as {}: {}", dir, record.moved_to,
              reason);
    return record.moved_to;
}

Restorer::Restorer(Checkpointer& checkpointer, const dist::Environment& env,
                   RestoreSettings settings)
    : checkpointer_(checkpointer), env_(env), settings_(std::move(settings)) {}

void Restorer::tidy_own_folder() {
    for (const auto& p : checkpointer_.clean_partial(settings_.checkpoint_folder))
        log::warn("removed partial checkpoint {}", p);
    // A step{N} folder that is not a whole checkpoint (files lost or damaged since, a garbage
    // .metadata.json) may still hold good tensors: set aside, never deleted.
    if (env_.rank() == 0) {
        for (const auto& c : Checkpointer::find_checkpoints(settings_.checkpoint_folder)) {
            const auto name = run_folder::parse_checkpoint_name(remote::base_name(c.path));
            if (!c.complete && name && name->kind == run_folder::CheckpointName::Kind::Saved)
                set_aside_unusable(checkpointer_, settings_.save_folder, c.path, c.problem);
        }
    }
    env_.cpu_group().barrier();
}

bool Restorer::restore(RestoreTarget& target, bool already_loaded) {
    const auto& s = settings_;
    if (s.no_checkpoints || s.strategy == config::LoadStrategy::never) return already_loaded;
    bool loaded = already_loaded;
    if (!loaded) {
        tidy_own_folder();
        loaded = load_from(target, s.checkpoint_folder, true, true);
        // Nothing loaded from a folder that has trained before: stop rather than start over
        // (rank 0 reads the run folder; every rank takes its word).
        if (!loaded) {
            const std::string before = env_.cpu_group().broadcast_string(
                env_.rank() == 0 ? earlier_progress(s.save_folder) : std::string(), 0);
            if (!before.empty())
                throw Error("no checkpoint of run folder " + s.save_folder +
                            " can be loaded from " + s.checkpoint_folder +
                            ", but the run has trained before (" + before +
                            "): training from scratch would start it over. Restore its "
                            "checkpoints, resume from one elsewhere (--resume-from), or set "
                            "trainer.load_strategy=never to start afresh");
        }
    }
    if (s.load_path) {
        if (!loaded)
            loaded = load_from(target, *s.load_path, s.load_trainer_state, s.load_optim_state);
        else
            log::warn("ignoring load_path {}: a checkpoint was found in {}", *s.load_path,
                      s.checkpoint_folder);
    }
    if (!loaded) {
        if (s.strategy == config::LoadStrategy::always)
            throw Error("load_strategy is always but no checkpoint was found in " +
                        s.checkpoint_folder +
                        (s.load_path ? " or " + *s.load_path : std::string()));
        log::info("no checkpoint found: training from scratch");
    }
    return loaded;
}

bool Restorer::load_from(RestoreTarget& target, const std::string& dir,
                         std::optional<bool> trainer_state, std::optional<bool> optim_state) {
    using Clock = std::chrono::steady_clock;
    if (is_hf_model_folder_at(dir)) {
        // Every rank reads the files (they are the same everywhere).
        const auto t0 = Clock::now();
        target.load_hf_model(dir);
        env_.cpu_group().barrier();
        target.restored(dir, std::chrono::duration<double>(Clock::now() - t0).count());
        return true;
    }
    const auto candidates = restore_candidates(dir);
    const bool own = !Checkpointer::dir_is_checkpoint(dir) &&
                     is_own_checkpoint_folder(dir, settings_.checkpoint_folder);
    const auto& group = env_.cpu_group();
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        const auto& path = candidates[i];
        const auto t0 = Clock::now();
        // 0 loaded, 1 damaged (UnusableCheckpointError), 2 does not fit (another error).
        int64_t outcome = 0;
        std::string failure;
        try {
            target.load_checkpoint(path, trainer_state.value_or(true), optim_state.value_or(true));
        } catch (const UnusableCheckpointError& e) {
            outcome = 1;
            failure = e.what();
        } catch (const std::exception& e) {
            outcome = 2;
            failure = e.what();
        }
        // Every rank takes the same decision: the worst outcome, with the reason of the first
        // rank that had it.
        auto worst = torch::tensor({outcome}, torch::kInt64);
        group.all_reduce(worst, dist::ReduceOp::max);
        const int64_t agreed = worst.item<int64_t>();
        if (agreed == 0) {
            target.restored(path, std::chrono::duration<double>(Clock::now() - t0).count());
            return true;
        }
        auto first = torch::tensor(
            {outcome == agreed ? int64_t(env_.rank()) : int64_t(env_.world_size())}, torch::kInt64);
        group.all_reduce(first, dist::ReduceOp::min);
        const std::string reason =
            group.broadcast_string(failure, static_cast<int>(first.item<int64_t>()));
        const bool has_next = i + 1 < candidates.size();
        switch (after_failed_load(agreed == 1 ? LoadFailure::damaged : LoadFailure::does_not_fit,
                                  own, settings_.strategy, has_next)) {
            case AfterFailure::stop:
                throw Error("cannot load checkpoint " + path + ": " + reason);
            case AfterFailure::set_aside_and_fall_back:
                if (env_.rank() == 0)
                    set_aside_unusable(checkpointer_, settings_.save_folder, path, reason);
                group.barrier();
                if (has_next) log::warn("falling back to {}", candidates[i + 1]);
                break;
            case AfterFailure::fall_back:
                log::warn("cannot load checkpoint {}: {}; falling back to {}", path, reason,
                          candidates[i + 1]);
                break;
        }
    }
    return false;
}

}  // namespace lathe::checkpoint
