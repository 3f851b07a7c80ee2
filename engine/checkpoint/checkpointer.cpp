#include "engine/checkpoint/checkpointer.h"

#include "engine/checkpoint/tensor_file.h"
#include "engine/config/io.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/layout.h"
#include "engine/util/error.h"

#include <chrono>
#include <filesystem>

namespace lathe::checkpoint {

namespace fs = std::filesystem;

bool LocalStorage::do_exists(const std::string& path) const {
    std::error_code ec;
    return fs::exists(path, ec);
}
void LocalStorage::do_make_dirs(const std::string& path) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw Error(path + ": cannot create folder: " + ec.message());
}
void LocalStorage::do_remove_all(const std::string& path) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) throw Error(path + ": cannot remove: " + ec.message());
}
void LocalStorage::do_rename(const std::string& from, const std::string& to) {
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec) throw Error("cannot rename " + from + " to " + to + ": " + ec.message());
}
std::vector<std::string> LocalStorage::do_list(const std::string& dir) const {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        out.push_back(it->path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}
uint64_t LocalStorage::do_size(const std::string& path) const {
    uint64_t total = 0;
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    return total;
}

Checkpointer::Checkpointer(dist::Environment& env, bool save_overwrite,
                           std::unique_ptr<Storage> storage)
    : env_(env),
      save_overwrite_(save_overwrite),
      storage_(storage ? std::move(storage) : std::make_unique<LocalStorage>()) {}

Checkpointer::~Checkpointer() {
    if (writer_.joinable()) writer_.join();
}

void Checkpointer::save(const std::string& dir, Stateful& state, bool ephemeral, bool async,
                        const std::vector<std::pair<std::string, std::string>>& extra_files,
                        const std::function<void(double)>& on_done) {
    wait();  // one save at a time, in the same order on every rank
    if (storage_->exists(run_folder::join(dir, run_folder::kCheckpointMetadataFile)) &&
        !save_overwrite_) {
        throw Error(dir +
                    ": checkpoint already exists (set trainer.save_overwrite=true to replace it)");
    }
    Staged s;
    s.dir = dir;
    s.ephemeral = ephemeral;
    s.trainer_state = state.state_dict().dump();
    s.extra_files = extra_files;
    // Every rank takes part (FSDP gathers its shards here); rank 0 keeps a copy off the training
    // path, since the training thread may change the originals right away.
    auto tensors = state.state_tensors();
    if (env_.rank() == 0) {
        bool any_cuda = false;
        for (auto& [name, t] : tensors) {
            if (t.is_cuda()) {
                // Pinned host memory, so the device-to-host copies run at full speed.
                auto host =
                    torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
                host.copy_(t.detach(), /*non_blocking=*/true);
                s.tensors.emplace_back(name, host);
                any_cuda = true;
            } else {
                s.tensors.emplace_back(name, t.detach().to(torch::kCPU, false, true));
            }
        }
        if (any_cuda) torch::cuda::synchronize();
    }
    auto t0 = std::chrono::steady_clock::now();
    if (!async) {
        write(s);
        if (on_done)
            on_done(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        return;
    }
    writer_done_ = false;
    writer_error_ = nullptr;
    writer_ = std::thread([this, s = std::move(s), on_done, t0] {
        try {
            write(s);
            if (on_done)
                on_done(
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        } catch (...) {
            writer_error_ = std::current_exception();
        }
        writer_done_ = true;
    });
}

void Checkpointer::write(const Staged& s) {
    const std::string tmp = run_folder::temporary_folder(s.dir);
    const auto& group = env_.checkpoint_group();
    try {
        if (env_.rank() == 0) {
            if (storage_->exists(tmp)) storage_->remove_all(tmp);
            storage_->make_dirs(tmp + "/train");
            storage_->make_dirs(tmp + "/model_and_optim");
        }
        group.barrier();
        write_file_atomic(tmp + "/" + run_folder::train_state_file(env_.rank()), s.trainer_state);
        if (env_.rank() == 0) {
            write_tensor_file(tmp + "/" + run_folder::kModelTensorFile, s.tensors);
            for (const auto& [name, text] : s.extra_files)
                write_file_atomic(tmp + "/" + name, text);
        }
        group.barrier();
        if (env_.rank() == 0) {
            if (storage_->exists(s.dir)) {
                // save_overwrite: invalidate the old one first, then replace it.
                std::error_code ec;
                fs::remove(s.dir + "/" + run_folder::kCheckpointMetadataFile, ec);
                storage_->remove_all(s.dir);
            }
            storage_->rename(tmp, s.dir);
            nlohmann::json meta = {{"ephemeral", s.ephemeral},
                                   {"version", config::version()},
                                   {"world_size", env_.world_size()},
                                   {"format", "lathe-checkpoint-v1"}};
            write_file_atomic(s.dir + "/" + run_folder::kCheckpointMetadataFile,
                              meta.dump(2) + "\n");
        }
        group.barrier();
    } catch (const std::exception& e) {
        // Leave no partial checkpoint behind; earlier checkpoints are never touched.
        if (env_.rank() == 0) {
            std::error_code ec;
            fs::remove_all(tmp, ec);
        }
        throw Error("saving checkpoint " + s.dir + " failed", e);
    }
}

void Checkpointer::wait() {
    if (writer_.joinable()) writer_.join();
    if (writer_error_) {
        auto e = writer_error_;
        writer_error_ = nullptr;
        std::rethrow_exception(e);
    }
}

bool Checkpointer::poll() {
    if (!writer_.joinable()) return true;
    if (!writer_done_) return false;
    wait();
    return true;
}

bool Checkpointer::dir_is_checkpoint(const std::string& dir) {
    std::error_code ec;
    return fs::exists(dir + "/" + run_folder::kCheckpointMetadataFile, ec) &&
           fs::exists(dir + "/" + run_folder::train_state_file(0), ec) &&
           fs::exists(dir + "/" + run_folder::kModelTensorFile, ec);
}

std::vector<CheckpointInfo> Checkpointer::find_checkpoints(const std::string& dir) {
    std::vector<CheckpointInfo> out;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        const auto name = run_folder::parse_checkpoint_name(it->path().filename().string());
        // Abandoned checkpoints (set aside by a resume) are no longer the run's.
        if (!it->is_directory(ec) || !name ||
            name->kind == run_folder::CheckpointName::Kind::Abandoned)
            continue;
        CheckpointInfo c;
        c.step = name->step;
        c.path = it->path().string();
        c.complete =
            name->kind == run_folder::CheckpointName::Kind::Saved && dir_is_checkpoint(c.path);
        if (c.complete) {
            try {
                auto meta = nlohmann::json::parse(
                    read_text_file(c.path + "/" + run_folder::kCheckpointMetadataFile));
                c.ephemeral = meta.value("ephemeral", false);
            } catch (const std::exception&) {
                c.complete = false;
            }
        }
        out.push_back(c);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    return out;
}

std::vector<CheckpointInfo> Checkpointer::complete_checkpoints(const std::string& dir) {
    auto all = find_checkpoints(dir);
    std::vector<CheckpointInfo> out;
    for (auto& c : all) {
        if (c.complete) out.push_back(c);
    }
    return out;
}

std::vector<std::string> Checkpointer::clean_partial(const std::string& dir) {
    std::vector<std::string> removed;
    if (env_.rank() != 0) return removed;
    for (const auto& c : find_checkpoints(dir)) {
        if (c.complete) continue;
        storage_->remove_all(c.path);
        removed.push_back(c.path);
    }
    return removed;
}

void Checkpointer::remove(const std::string& dir) {
    if (env_.rank() != 0) return;
    std::error_code ec;
    fs::remove(run_folder::join(dir, run_folder::kCheckpointMetadataFile), ec);
    storage_->remove_all(dir);
}

void Checkpointer::load(const std::string& dir, Stateful& state, bool load_trainer_state,
                        bool load_optim_state) {
    if (!dir_is_checkpoint(dir))
        throw Error(dir + ": not a complete checkpoint (no .metadata.json)");
    nlohmann::json trainer_state;
    if (load_trainer_state) {
        std::string own = run_folder::join(dir, run_folder::train_state_file(env_.rank()));
        std::string path =
            fs::exists(own) ? own : run_folder::join(dir, run_folder::train_state_file(0));
        try {
            trainer_state = nlohmann::json::parse(read_text_file(path));
        } catch (const nlohmann::json::exception& e) {
            throw Error(path + ": corrupted trainer state: " + e.what());
        }
    }
    auto tensors = read_tensor_file(run_folder::join(dir, run_folder::kModelTensorFile));
    try {
        state.load_state_tensors(tensors, load_optim_state);
    } catch (const std::exception& e) {
        throw Error(run_folder::join(dir, run_folder::kModelTensorFile), e);
    }
    if (!trainer_state.is_null()) state.load_state_dict(trainer_state);
}

nlohmann::json inspect_checkpoint(const std::string& dir) {
    nlohmann::json out;
    out["path"] = dir;
    out["complete"] = Checkpointer::dir_is_checkpoint(dir);
    std::error_code ec;
    if (fs::exists(run_folder::join(dir, run_folder::kCheckpointMetadataFile), ec)) {
        try {
            out["metadata"] = nlohmann::json::parse(
                read_text_file(run_folder::join(dir, run_folder::kCheckpointMetadataFile)));
        } catch (const std::exception& e) {
            out["metadata_error"] = e.what();
        }
    }
    if (fs::exists(run_folder::join(dir, run_folder::train_state_file(0)), ec)) {
        try {
            auto s = nlohmann::json::parse(
                read_text_file(run_folder::join(dir, run_folder::train_state_file(0))));
            for (const char* k :
                 {"global_step", "global_train_tokens_seen", "epoch", "world_size"}) {
                if (s.contains(k)) out[k] = s[k];
            }
        } catch (const std::exception& e) {
            out["trainer_state_error"] = e.what();
        }
    }
    if (fs::exists(dir + "/config.json", ec)) {
        try {
            auto c = nlohmann::json::parse(read_text_file(dir + "/config.json"));
            const auto& m = c.at("model");
            out["config"] = {
                {"run_name", c.value("run_name", "")},
                {"model", std::to_string(m.value("d_model", 0)) + "d x " +
                              std::to_string(m.value("n_layers", 0)) + " layers, vocab " +
                              std::to_string(m.value("vocab_size", 0))},
                {"sequence_length", c.at("dataset").value("sequence_length", 0)},
                {"global_batch_size", c.at("data_loader").value("global_batch_size", 0)}};
        } catch (const std::exception& e) {
            out["config_error"] = e.what();
        }
    }
    nlohmann::json files = nlohmann::json::array();
    uint64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        uint64_t sz = it->file_size(ec);
        total += sz;
        files.push_back({{"file", fs::relative(it->path(), dir).string()}, {"bytes", sz}});
    }
    out["files"] = files;
    out["total_bytes"] = total;
    return out;
}

}  // namespace lathe::checkpoint
