#include "engine/checkpoint/resume.h"

#include "engine/checkpoint/checkpointer.h"
#include "engine/config/diff.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/util/error.h"
#include "engine/util/log.h"

#include <filesystem>

namespace lathe::checkpoint {

using remote::base_name;
using remote::parent_path;
using remote::storage_for;

namespace fs = std::filesystem;

int64_t prepare_resume(const std::string& folder, const std::string& checkpoint_folder,
                       const std::string& resume_dir, const config::Json& config) {
    if (!Checkpointer::dir_is_checkpoint(resume_dir))
        throw Error("--resume-from " + resume_dir + ": not a complete checkpoint");
    const auto storage = storage_for(resume_dir);
    const auto saved_state = nlohmann::json::parse(
        storage->read(run_folder::join(resume_dir, run_folder::train_state_file(0))));
    run_folder::ResumeEvent event;
    event.time = run_folder::iso_time_now();
    event.from_step = saved_state.at("global_step").get<int64_t>();
    event.checkpoint = resume_dir;

    std::vector<config::ConfigDifference> changes;
    std::error_code ec;
    const std::string saved_config = run_folder::join(resume_dir, run_folder::kConfigFile);
    if (storage->exists(saved_config)) {
        changes = config::diff_documents(config::Json::parse(storage->read(saved_config)), config);
    }
    if (const std::string refusal = config::resume_refusal(resume_dir, changes); !refusal.empty())
        throw Error(refusal);

    const bool own =
        storage->remote()
            ? parent_path(resume_dir) == parent_path(checkpoint_folder + "/x")
            : fs::equivalent(fs::path(resume_dir).parent_path(), checkpoint_folder, ec);
    if (own) {
        for (const auto& c : Checkpointer::find_checkpoints(checkpoint_folder)) {
            if (c.step <= event.from_step) continue;
            const std::string to = run_folder::abandoned_path(
                c.path, [&storage](const std::string& p) { return storage->exists(p); });
            try {
                storage->rename(c.path, to);
            } catch (const std::exception& e) {
                throw Error("cannot set aside " + c.path, e);
            }
            event.abandoned.push_back(base_name(to));
        }
    }
    for (const auto& c : changes) {
        if (c.kind == config::ResumeChangeKind::Ignored) continue;
        event.config_changes.push_back({c.path, c.before, c.after});
        log::warn("config changed on resume: {}: {} -> {}", c.path, c.before, c.after);
    }
    run_folder::append_history(run_folder::join(folder, run_folder::kHistoryFile),
                               run_folder::to_json(event));
    std::string set_aside;
    for (const auto& a : event.abandoned) set_aside += (set_aside.empty() ? "" : ", ") + a;
    log::info("resuming from {} (step {}){}", resume_dir, event.from_step,
              set_aside.empty() ? "" : "; newer checkpoints set aside: " + set_aside);
    return event.from_step;
}

}  // namespace lathe::checkpoint
