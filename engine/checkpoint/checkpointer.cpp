#include "engine/checkpoint/checkpointer.h"

#include "engine/checkpoint/tensor_file.h"
#include "engine/config/io.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/tensor_file_header.h"
#include "engine/util/error.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>

namespace lathe::checkpoint {

using remote::base_name;
using remote::DownloadedFolder;
using remote::is_remote_path;
using remote::LocalStorage;
using remote::Storage;
using remote::storage_for;
using stateful::Stateful;

namespace fs = std::filesystem;

Checkpointer::Checkpointer(dist::Environment& env, bool save_overwrite,
                           std::unique_ptr<Storage> storage)
    : env_(env),
      save_overwrite_(save_overwrite),
      storage_(storage ? std::move(storage) : std::make_unique<LocalStorage>()) {}

Checkpointer::~Checkpointer() {
    if (writer_.joinable()) writer_.join();
    // The staging folder of remote saves and loads, once its last rank's files are gone (issue
    // 34: an empty .checkpoint-staging was left behind). A folder still in use is not empty.
    std::error_code ec;
    fs::remove(staging_dir(), ec);
}

Storage& Checkpointer::storage_of(const std::string& path) {
    if (!is_remote_path(path)) return *storage_;
    const std::string scheme = path.substr(0, path.find("://"));
    if (!remote_ || remote_scheme_ != scheme) {
        remote_ = storage_for(path);
        remote_scheme_ = scheme;
    }
    return *remote_;
}

namespace {
std::string already_exists(const std::string& dir) {
    return dir + ": checkpoint already exists (set trainer.save_overwrite=true to replace it)";
}
}  // namespace

std::string Checkpointer::staging_dir() const {
    if (!staging_dir_.empty()) return staging_dir_;
    return (fs::temp_directory_path() / ("lathe-staging-" + std::to_string(::getpid()))).string();
}

void Checkpointer::save(const std::string& dir, Stateful& state, bool ephemeral, bool async,
                        const std::vector<std::pair<std::string, std::string>>& extra_files,
                        const std::function<void(double)>& on_done) {
    wait();  // one save at a time, in the same order on every rank
    // (Made here, on the training thread: the writer thread only uses it.)
    Storage& storage = storage_of(dir);
    // An async save to a bucket asks on the writer thread (write_remote): a HEAD request here
    // would hold up the training step (issue 34).
    if (!(async && storage.remote()) && !save_overwrite_ &&
        storage.exists(run_folder::join(dir, run_folder::kCheckpointMetadataFile)))
        throw Error(already_exists(dir));
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
    if (Storage& storage = storage_of(s.dir); storage.remote()) {
        write_remote(s, storage);
        return;
    }
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
            // .metadata.json goes in before the rename, so the rename is the one step that makes
            // the checkpoint: a process killed at any point leaves either step{N}-tmp (removed at
            // the next start) or a whole step{N}, never a step{N} without its metadata.
            nlohmann::json meta = {{"ephemeral", s.ephemeral},
                                   {"version", config::version()},
                                   {"world_size", env_.world_size()},
                                   {"format", "lathe-checkpoint-v1"}};
            write_file_atomic(tmp + "/" + run_folder::kCheckpointMetadataFile, meta.dump(2) + "\n");
            if (storage_->exists(s.dir)) {
                // save_overwrite: invalidate the old one first, then replace it.
                std::error_code ec;
                fs::remove(s.dir + "/" + run_folder::kCheckpointMetadataFile, ec);
                storage_->remove_all(s.dir);
            }
            storage_->rename(tmp, s.dir);
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

void Checkpointer::write_remote(const Staged& s, Storage& remote) {
    const auto& group = env_.checkpoint_group();
    // Every rank learns whether every rank succeeded, and the first failure's message.
    auto agree = [&](const std::string& error) {
        auto failed = torch::tensor(
            {error.empty() ? int64_t(env_.world_size()) : int64_t(env_.rank())}, torch::kInt64);
        group.all_reduce(failed, dist::ReduceOp::min);
        const int first = static_cast<int>(failed.item<int64_t>());
        if (first == env_.world_size()) return;
        const std::string message = group.broadcast_string(error, first);
        throw Error(first == env_.rank() ? message
                                         : "rank " + std::to_string(first) + ": " + message);
    };
    const std::string local =
        run_folder::join(staging_dir(), base_name(s.dir) + "-rank" + std::to_string(env_.rank()));
    std::error_code ec;
    try {
        std::string error;
        // save_overwrite: the old checkpoint stops counting (its metadata goes first) and goes.
        if (env_.rank() == 0) {
            try {
                if (!save_overwrite_ &&
                    remote.exists(run_folder::join(s.dir, run_folder::kCheckpointMetadataFile)))
                    throw Error(already_exists(s.dir));
                if (remote.exists(s.dir)) remote.remove_all(s.dir);
            } catch (const std::exception& e) {
                error = e.what();
            }
        }
        agree(error);
        // Each rank stages its own files locally and uploads them.
        try {
            fs::remove_all(local, ec);
            std::vector<std::pair<std::string, std::string>> files;  // relative, text
            files.emplace_back(run_folder::train_state_file(env_.rank()), s.trainer_state);
            if (env_.rank() == 0) {
                for (const auto& f : s.extra_files) files.push_back(f);
            }
            for (const auto& [name, text] : files) {
                fs::create_directories(fs::path(run_folder::join(local, name)).parent_path());
                write_file_atomic(run_folder::join(local, name), text);
            }
            if (env_.rank() == 0) {
                fs::create_directories(
                    fs::path(run_folder::join(local, run_folder::kModelTensorFile)).parent_path());
                write_tensor_file(run_folder::join(local, run_folder::kModelTensorFile), s.tensors);
                files.emplace_back(run_folder::kModelTensorFile, std::string());
            }
            for (const auto& [name, text] : files)
                remote.put_file(run_folder::join(local, name), run_folder::join(s.dir, name));
        } catch (const std::exception& e) {
            error = e.what();
        }
        fs::remove_all(local, ec);
        fs::remove(staging_dir(), ec);  // only when no other rank's files are in it
        agree(error);
        // Every rank's files are there: the checkpoint becomes complete.
        if (env_.rank() == 0) {
            try {
                nlohmann::json meta = {{"ephemeral", s.ephemeral},
                                       {"version", config::version()},
                                       {"world_size", env_.world_size()},
                                       {"format", "lathe-checkpoint-v1"}};
                remote.write(run_folder::join(s.dir, run_folder::kCheckpointMetadataFile),
                             meta.dump(2) + "\n");
            } catch (const std::exception& e) {
                error = e.what();
            }
        }
        agree(error);
    } catch (const std::exception& e) {
        fs::remove_all(local, ec);
        // What was uploaded has no .metadata.json, so it does not count; remove it if the server
        // lets us (else the next start does). Earlier checkpoints are never touched.
        if (env_.rank() == 0) {
            try {
                remote.remove_all(s.dir);
            } catch (const std::exception&) {
            }
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

namespace {

// Why `dir` (a step{N} folder of `storage`) is not a complete checkpoint; empty when it is one.
// `known` lists its files when they are known already (a remote listing), else each is probed.
std::string structural_problem(const Storage& storage, const std::string& dir,
                               const std::set<std::string>* known = nullptr) {
    auto has = [&](const std::string& f) {
        return known ? known->count(f) > 0 : storage.exists(run_folder::join(dir, f));
    };
    const std::string meta = run_folder::join(dir, run_folder::kCheckpointMetadataFile);
    if (!has(run_folder::kCheckpointMetadataFile))
        return storage.remote() ? "no .metadata.json: the upload did not finish"
                                : "no .metadata.json: the save did not finish";
    for (const std::string& f :
         {run_folder::train_state_file(0), std::string(run_folder::kModelTensorFile)}) {
        if (!has(f)) return f + " is missing";
    }
    // A remote read that fails (the server is down) is an error, not damage: it must never get a
    // good checkpoint set aside.
    const std::string text = storage.remote() ? storage.read(meta) : std::string();
    try {
        const auto j = nlohmann::json::parse(storage.remote() ? text : storage.read(meta));
        if (!j.is_object()) return ".metadata.json is not a JSON object";
    } catch (const std::exception& e) {
        return std::string("unreadable .metadata.json: ") + e.what();
    }
    return {};
}
std::string structural_problem(const std::string& dir) {
    return structural_problem(LocalStorage(), dir);
}

// The step of a step{N} folder; nullopt for other names (a checkpoint given by another path).
std::optional<int64_t> folder_step(const std::string& dir) {
    const auto name = run_folder::parse_checkpoint_name(base_name(dir));
    if (!name || name->kind != run_folder::CheckpointName::Kind::Saved) return std::nullopt;
    return name->step;
}

// Parses train/rank{K}.json and checks it is for the folder's step. Throws
// UnusableCheckpointError naming the file.
nlohmann::json read_train_state(const std::string& dir, const std::string& file) {
    const std::string path = run_folder::join(dir, file);
    nlohmann::json state;
    try {
        state = nlohmann::json::parse(read_text_file(path));
    } catch (const std::exception& e) {
        throw UnusableCheckpointError(path + ": corrupted trainer state: " + e.what());
    }
    if (!state.is_object())
        throw UnusableCheckpointError(path + ": corrupted trainer state: not a JSON object");
    // The trainer's state names its step (the checkpointer itself knows no trainer: a state
    // without one is not checked).
    if (!state.contains("global_step")) return state;
    if (!state["global_step"].is_number_integer())
        throw UnusableCheckpointError(path +
                                      ": corrupted trainer state: global_step is not an integer");
    const auto saved = state["global_step"].get<int64_t>();
    if (const auto step = folder_step(dir); step && *step != saved) {
        throw UnusableCheckpointError(path + ": the trainer state is for step " +
                                      std::to_string(saved) + ", but the folder is step" +
                                      std::to_string(*step));
    }
    return state;
}

}  // namespace

bool Checkpointer::dir_is_checkpoint(const std::string& dir) {
    const auto storage = storage_for(dir);
    for (const std::string& f :
         {std::string(run_folder::kCheckpointMetadataFile), run_folder::train_state_file(0),
          std::string(run_folder::kModelTensorFile)}) {
        if (!storage->exists(run_folder::join(dir, f))) return false;
    }
    return true;
}

std::vector<CheckpointInfo> Checkpointer::find_checkpoints(const std::string& dir) {
    using Kind = run_folder::CheckpointName::Kind;
    std::vector<CheckpointInfo> out;
    const auto storage = storage_for(dir);
    // Remotely one listing of everything below, instead of requests per file.
    std::map<std::string, std::set<std::string>> remote_files;
    if (storage->remote()) {
        for (const auto& [file, bytes] : storage->files(dir)) {
            const auto slash = file.find('/');
            if (slash != std::string::npos)
                remote_files[file.substr(0, slash)].insert(file.substr(slash + 1));
        }
    }
    std::vector<std::string> names;
    if (storage->remote()) {
        for (const auto& [name, files] : remote_files) names.push_back(name);
    } else {
        std::error_code ec;
        for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
             it.increment(ec)) {
            if (it->is_directory(ec)) names.push_back(it->path().filename().string());
        }
    }
    for (const auto& folder : names) {
        const auto name = run_folder::parse_checkpoint_name(folder);
        // Set-aside checkpoints (abandoned by a resume, or unusable) are no longer the run's.
        if (!name || name->kind == Kind::Abandoned || name->kind == Kind::Unusable) continue;
        CheckpointInfo c;
        c.step = name->step;
        c.path = run_folder::join(dir, folder);
        c.problem = name->kind == Kind::Temporary
                        ? "a save that is in progress or was interrupted"
                        : structural_problem(*storage, c.path,
                                             storage->remote() ? &remote_files[folder] : nullptr);
        c.complete = c.problem.empty();
        if (c.complete) {
            const auto meta = nlohmann::json::parse(
                storage->read(run_folder::join(c.path, run_folder::kCheckpointMetadataFile)),
                nullptr, false);
            c.ephemeral = meta.is_object() && meta.value("ephemeral", false);
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
    Storage& storage = storage_of(dir);
    for (const auto& c : find_checkpoints(dir)) {
        const auto name = run_folder::parse_checkpoint_name(base_name(c.path));
        // Remotely a step{N}/ without .metadata.json is an upload that did not finish (there is
        // no rename): the remote form of step{N}-tmp.
        const bool partial =
            name &&
            (name->kind == run_folder::CheckpointName::Kind::Temporary ||
             (storage.remote() && !c.complete && c.problem.rfind("no .metadata.json", 0) == 0));
        if (!partial) continue;
        storage.remove_all(c.path);
        removed.push_back(c.path);
    }
    return removed;
}

run_folder::UnusableCheckpoint Checkpointer::set_aside_unusable(const std::string& dir,
                                                                const std::string& reason) {
    run_folder::UnusableCheckpoint record;
    if (env_.rank() != 0) return record;
    Storage& storage = storage_of(dir);
    const std::string to = run_folder::unusable_path(
        dir, [&storage](const std::string& p) { return storage.exists(p); });
    storage.rename(dir, to);
    record.time = run_folder::iso_time_now();
    record.step = folder_step(dir).value_or(-1);
    record.checkpoint = dir;
    record.moved_to = base_name(to);
    record.reason = reason;
    if (storage.remote()) {
        storage.write(run_folder::join(to, run_folder::kUnusableReasonFile),
                      run_folder::to_json(record).dump(2) + "\n");
    } else {
        run_folder::write_record(run_folder::join(to, run_folder::kUnusableReasonFile), record);
    }
    return record;
}

void Checkpointer::remove(const std::string& dir) {
    if (env_.rank() != 0) return;
    Storage& storage = storage_of(dir);
    if (storage.remote()) {
        storage.remove_all(dir);  // .metadata.json first
        return;
    }
    std::error_code ec;
    fs::remove(run_folder::join(dir, run_folder::kCheckpointMetadataFile), ec);
    storage.remove_all(dir);
}

void Checkpointer::load(const std::string& dir, Stateful& state, bool load_trainer_state,
                        bool load_optim_state) {
    if (Storage& storage = storage_of(dir); storage.remote()) {
        // The files this rank reads, downloaded into the staging folder and read there; messages
        // name the remote files.
        const std::string local = run_folder::join(
            staging_dir(), "load-rank" + std::to_string(env_.rank()) + "-" + base_name(dir));
        const auto problem = structural_problem(storage, dir);
        if (!problem.empty())
            throw UnusableCheckpointError(dir + ": not a complete checkpoint (" + problem + ")");
        const DownloadedFolder copy(
            storage, dir, local,
            {run_folder::kCheckpointMetadataFile, run_folder::train_state_file(0),
             run_folder::train_state_file(env_.rank()), run_folder::kModelTensorFile});
        try {
            load(copy.path(), state, load_trainer_state, load_optim_state);
        } catch (const UnusableCheckpointError& e) {
            throw UnusableCheckpointError(copy.remote_names(e.what()));
        } catch (const std::exception& e) {
            throw Error(copy.remote_names(e.what()));
        }
        return;
    }
    if (const std::string problem = structural_problem(dir); !problem.empty())
        throw UnusableCheckpointError(dir + ": not a complete checkpoint (" + problem + ")");
    // A model-only checkpoint (lathe-engine import) has no trainer or optimizer state to load.
    const auto meta = nlohmann::json::parse(
        read_text_file(run_folder::join(dir, run_folder::kCheckpointMetadataFile)), nullptr, false);
    if (meta.is_object() && meta.value("model_only", false)) {
        load_trainer_state = false;
        load_optim_state = false;
    }
    // Every file is read and checked before `state` changes. Damage is UnusableCheckpointError;
    // a whole checkpoint that does not fit `state` (another model shape) is a plain Error.
    nlohmann::json trainer_state = read_train_state(dir, run_folder::train_state_file(0));
    if (env_.rank() != 0) {
        const std::string own = run_folder::train_state_file(env_.rank());
        std::error_code ec;
        if (fs::exists(run_folder::join(dir, own), ec)) trainer_state = read_train_state(dir, own);
    }
    std::map<std::string, torch::Tensor> tensors;
    try {
        tensors = read_tensor_file(run_folder::join(dir, run_folder::kModelTensorFile));
    } catch (const Error& e) {
        throw UnusableCheckpointError(e.what());
    }
    try {
        state.load_state_tensors(tensors, load_optim_state);
    } catch (const std::exception& e) {
        throw Error(run_folder::join(dir, run_folder::kModelTensorFile), e);
    }
    if (load_trainer_state) state.load_state_dict(trainer_state);
}

namespace {

// Reads every file of the checkpoint `dir` in full; one line per problem, naming file and tensor.
std::vector<std::string> verify_checkpoint(const std::string& dir) {
    std::vector<std::string> problems;
    if (const std::string p = structural_problem(dir); !p.empty()) problems.push_back(p);
    int world_size = 1;
    std::error_code ec;
    const std::string meta_path = run_folder::join(dir, run_folder::kCheckpointMetadataFile);
    if (fs::exists(meta_path, ec)) {
        const auto meta = nlohmann::json::parse(read_text_file(meta_path), nullptr, false);
        if (meta.is_object() && meta.contains("world_size") &&
            meta["world_size"].is_number_integer())
            world_size = std::max(1, meta["world_size"].get<int>());
    }
    for (int k = 0; k < world_size; ++k) {
        const std::string file = run_folder::train_state_file(k);
        if (!fs::exists(run_folder::join(dir, file), ec)) {
            if (k > 0)
                problems.push_back(file + " is missing (world size " + std::to_string(world_size) +
                                   ")");
            continue;
        }
        try {
            read_train_state(dir, file);
        } catch (const std::exception& e) {
            problems.emplace_back(e.what());
        }
    }
    const std::string tensors = run_folder::join(dir, run_folder::kModelTensorFile);
    if (fs::exists(tensors, ec)) {
        try {
            run_folder::verify_tensor_file_data(tensors);
        } catch (const std::exception& e) {
            problems.emplace_back(e.what());
        }
    }
    return problems;
}

}  // namespace

namespace {
protocol::CheckpointInspection inspect_local(const std::string& dir, bool verify);
}  // namespace

protocol::CheckpointInspection inspect_checkpoint(const std::string& dir, bool verify) {
    const auto storage = storage_for(dir);
    if (!storage->remote()) return inspect_local(dir, verify);
    // Remote: the small files (and with verify, all) are downloaded and inspected locally; the
    // files, sizes and completeness come from the remote listing.
    const auto files = storage->files(dir);
    std::set<std::string> names;
    std::vector<std::string> wanted;
    for (const auto& [name, bytes] : files) {
        names.insert(name);
        if (verify || name != run_folder::kModelTensorFile) wanted.push_back(name);
    }
    const std::string local =
        (fs::temp_directory_path() /
         ("lathe-inspect-" + std::to_string(::getpid()) + "-" + base_name(dir)))
            .string();
    protocol::CheckpointInspection out;
    {
        // Nothing wanted (no small file there) must not mean everything: the metadata file
        // stands in, and it is missing, so nothing is downloaded.
        if (wanted.empty()) wanted.emplace_back(run_folder::kCheckpointMetadataFile);
        const DownloadedFolder copy(*storage, dir, local, wanted);
        out = inspect_local(copy.path(), verify);
        if (out.problems)
            for (auto& p : *out.problems) p = copy.remote_names(p);
    }
    out.path = dir;
    out.remote = true;
    const std::string problem =
        files.empty() ? "nothing is stored there" : structural_problem(*storage, dir, &names);
    out.complete = problem.empty();
    if (!problem.empty()) out.problem = problem;
    std::vector<protocol::CheckpointFile> list;
    int64_t total = 0;
    for (const auto& [name, bytes] : files) {
        list.push_back({name, static_cast<int64_t>(bytes)});
        total += static_cast<int64_t>(bytes);
    }
    out.files = std::move(list);
    out.total_bytes = total;
    return out;
}

namespace {

// The run a checkpoint's config.json describes, in a line.
protocol::CheckpointConfigSummary config_summary(const std::string& file) {
    auto c = nlohmann::json::parse(read_text_file(file));
    const auto& m = c.at("model");
    protocol::CheckpointConfigSummary s;
    s.run_name = c.value("run_name", "");
    s.model = std::to_string(m.value("d_model", 0)) + "d x " +
              std::to_string(m.value("n_layers", 0)) + " layers, vocab " +
              std::to_string(m.value("vocab_size", 0));
    s.sequence_length = c.at("dataset").value("sequence_length", int64_t(0));
    s.global_batch_size = c.at("data_loader").value("global_batch_size", int64_t(0));
    return s;
}

protocol::CheckpointInspection inspect_local(const std::string& dir, bool verify) {
    protocol::CheckpointInspection out;
    out.path = dir;
    out.complete = Checkpointer::dir_is_checkpoint(dir);
    if (verify) {
        const auto problems = verify_checkpoint(dir);
        out.verified = problems.empty();
        if (!problems.empty()) out.problems = problems;
    } else {
        out.verified = false;
        out.verification =
            "not verified: `inspect --verify` reads every file and checks each "
            "tensor's CRC-32C";
    }
    std::error_code ec;
    if (fs::exists(run_folder::join(dir, run_folder::kUnusableReasonFile), ec)) {
        if (auto r = run_folder::read_record<run_folder::UnusableCheckpoint>(
                run_folder::join(dir, run_folder::kUnusableReasonFile)))
            out.set_aside_as_unusable = r->reason;
    }
    if (fs::exists(run_folder::join(dir, run_folder::kCheckpointMetadataFile), ec)) {
        try {
            out.metadata = nlohmann::ordered_json::parse(
                read_text_file(run_folder::join(dir, run_folder::kCheckpointMetadataFile)));
        } catch (const std::exception& e) {
            out.metadata_error = e.what();
        }
    }
    if (fs::exists(run_folder::join(dir, run_folder::train_state_file(0)), ec)) {
        try {
            auto s = nlohmann::json::parse(
                read_text_file(run_folder::join(dir, run_folder::train_state_file(0))));
            auto take = [&s](const char* key, std::optional<int64_t>& to) {
                if (s.contains(key) && s[key].is_number_integer()) to = s[key].get<int64_t>();
            };
            take("global_step", out.global_step);
            take("global_train_tokens_seen", out.global_train_tokens_seen);
            take("epoch", out.epoch);
            take("world_size", out.world_size);
        } catch (const std::exception& e) {
            out.trainer_state_error = e.what();
        }
    }
    if (fs::exists(dir + "/config.json", ec)) {
        try {
            out.config = config_summary(dir + "/config.json");
        } catch (const std::exception& e) {
            out.config_error = e.what();
        }
    }
    std::vector<protocol::CheckpointFile> files;
    int64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        const auto sz = static_cast<int64_t>(it->file_size(ec));
        total += sz;
        files.push_back({fs::relative(it->path(), dir).string(), sz});
    }
    out.files = std::move(files);
    out.total_bytes = total;
    return out;
}

}  // namespace

}  // namespace lathe::checkpoint
