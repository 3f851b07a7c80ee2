// LocalStorage, and the remote storages of s3:// (remote::S3Client) and http(s):// (read only).
// Torch-free: the workbench lists remote checkpoints with it too.
#include "engine/remote/storage.h"

#include "engine/remote/s3.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

namespace lathe::remote {

namespace fs = std::filesystem;

// ---- local --------------------------------------------------------------------------------------

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
    for (const auto& [name, bytes] : do_files(path)) total += bytes;
    return total;
}
std::vector<std::pair<std::string, uint64_t>> LocalStorage::do_files(const std::string& dir) const {
    std::vector<std::pair<std::string, uint64_t>> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        out.emplace_back(fs::relative(it->path(), dir).generic_string(), it->file_size(ec));
    }
    std::sort(out.begin(), out.end());
    return out;
}
std::string LocalStorage::do_read(const std::string& path) const {
    return run_folder::read_text_file(path);
}
void LocalStorage::do_write(const std::string& path, const std::string& data) {
    run_folder::write_file_atomic(path, data);
}
void LocalStorage::do_put_file(const std::string& local, const std::string& path) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    fs::copy_file(local, path, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error("cannot copy " + local + " to " + path + ": " + ec.message());
}
void LocalStorage::do_get_file(const std::string& path, const std::string& local) const {
    std::error_code ec;
    fs::copy_file(path, local, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error("cannot copy " + path + " to " + local + ": " + ec.message());
}

namespace {

// ---- s3:// --------------------------------------------------------------------------------------

class S3Storage : public Storage {
public:
    S3Storage() : client_(remote::s3_settings_from_environment(), remote::transfer_options()) {}

protected:
    bool do_remote() const override { return true; }
    bool do_exists(const std::string& path) const override {
        const auto [bucket, key] = remote::split_s3_url(path);
        if (!key.empty() && client_.head(bucket, key)) return true;
        const auto l = client_.list(bucket, folder_prefix(key), "/");
        return !l.objects.empty() || !l.prefixes.empty();
    }
    void do_make_dirs(const std::string&) override {}  // object storage has no folders
    void do_remove_all(const std::string& path) override {
        const auto [bucket, key] = remote::split_s3_url(path);
        if (!key.empty() && client_.head(bucket, key)) client_.remove(bucket, key);
        auto objects = client_.list(bucket, folder_prefix(key)).objects;
        // .metadata.json first: a checkpoint stops counting before its files go.
        std::stable_partition(objects.begin(), objects.end(), [](const remote::ObjectInfo& o) {
            return base_name(o.key) == run_folder::kCheckpointMetadataFile;
        });
        for (const auto& o : objects) client_.remove(bucket, o.key);
    }
    void do_rename(const std::string& from, const std::string& to) override {
        const auto [bucket, from_key] = remote::split_s3_url(from);
        const auto [to_bucket, to_key] = remote::split_s3_url(to);
        if (bucket != to_bucket)
            throw Error("cannot rename " + from + " to " + to + ": another bucket");
        const auto objects = client_.list(bucket, folder_prefix(from_key)).objects;
        for (const auto& o : objects)
            client_.copy(bucket, o.key, to_key + "/" + o.key.substr(from_key.size() + 1));
        do_remove_all(from);
    }
    std::vector<std::string> do_list(const std::string& dir) const override {
        const auto [bucket, key] = remote::split_s3_url(dir);
        const std::string prefix = folder_prefix(key);
        const auto l = client_.list(bucket, prefix, "/");
        std::vector<std::string> out;
        for (const auto& o : l.objects) out.push_back(o.key.substr(prefix.size()));
        for (const auto& p : l.prefixes) {
            std::string name = p.substr(prefix.size());
            if (!name.empty() && name.back() == '/') name.pop_back();
            out.push_back(name);
        }
        std::sort(out.begin(), out.end());
        return out;
    }
    uint64_t do_size(const std::string& path) const override {
        uint64_t total = 0;
        for (const auto& [name, bytes] : do_files(path)) total += bytes;
        if (total == 0) {
            const auto [bucket, key] = remote::split_s3_url(path);
            if (auto s = client_.head(bucket, key)) return *s;
        }
        return total;
    }
    std::vector<std::pair<std::string, uint64_t>> do_files(const std::string& dir) const override {
        const auto [bucket, key] = remote::split_s3_url(dir);
        const std::string prefix = folder_prefix(key);
        std::vector<std::pair<std::string, uint64_t>> out;
        for (const auto& o : client_.list(bucket, prefix).objects)
            out.emplace_back(o.key.substr(prefix.size()), o.size);
        std::sort(out.begin(), out.end());
        return out;
    }
    std::string do_read(const std::string& path) const override {
        const auto [bucket, key] = remote::split_s3_url(path);
        return client_.get(bucket, key);
    }
    void do_write(const std::string& path, const std::string& data) override {
        const auto [bucket, key] = remote::split_s3_url(path);
        client_.put(bucket, key, data);  // one PUT: an object appears whole or not at all
    }
    void do_put_file(const std::string& local, const std::string& path) override {
        const auto [bucket, key] = remote::split_s3_url(path);
        client_.put_file(bucket, key, local);
    }
    void do_get_file(const std::string& path, const std::string& local) const override {
        const auto [bucket, key] = remote::split_s3_url(path);
        client_.get_to_file(bucket, key, local);
    }

private:
    static std::string folder_prefix(const std::string& key) {
        return key.empty() ? std::string() : key + "/";
    }
    remote::S3Client client_;
};

// ---- http(s):// ---------------------------------------------------------------------------------

class HttpStorage : public Storage {
protected:
    bool do_remote() const override { return true; }
    bool do_exists(const std::string& path) const override {
        return client_.head(path).has_value() ||
               client_.head(run_folder::join(path, run_folder::kCheckpointMetadataFile))
                   .has_value();
    }
    void do_make_dirs(const std::string& path) override { read_only(path); }
    void do_remove_all(const std::string& path) override { read_only(path); }
    void do_rename(const std::string& from, const std::string&) override { read_only(from); }
    std::vector<std::string> do_list(const std::string& dir) const override {
        throw Error(dir +
                    ": an HTTP folder cannot be listed: name one checkpoint (.../step{N}) "
                    "instead of a folder of them");
    }
    uint64_t do_size(const std::string& path) const override {
        uint64_t total = 0;
        for (const auto& [name, bytes] : do_files(path)) total += bytes;
        return total;
    }
    // A plain server lists nothing, so a folder's files are found by name: a checkpoint's (one
    // train state per rank of its .metadata.json) and a Hugging Face model folder's (the shards
    // its index names).
    std::vector<std::pair<std::string, uint64_t>> do_files(const std::string& dir) const override {
        std::vector<std::string> names = {run_folder::kCheckpointMetadataFile,
                                          run_folder::kModelTensorFile,
                                          run_folder::kConfigFile,
                                          run_folder::kTokenizerFile,
                                          run_folder::kSentencePieceFile,
                                          "tokenizer_config.json",
                                          "special_tokens_map.json",
                                          "generation_config.json",
                                          "model.safetensors",
                                          "model.safetensors.index.json"};
        try {
            const auto index = nlohmann::json::parse(
                client_.get(run_folder::join(dir, "model.safetensors.index.json")), nullptr, false);
            if (index.is_object() && index.contains("weight_map") &&
                index["weight_map"].is_object()) {
                std::set<std::string> shards;
                for (const auto& [tensor, file] : index["weight_map"].items())
                    if (file.is_string() && file.get<std::string>().find('/') == std::string::npos)
                        shards.insert(file.get<std::string>());
                names.insert(names.end(), shards.begin(), shards.end());
            }
        } catch (const remote::HttpError& e) {
            if (e.status() != 404) throw;
        }
        int world = 1;
        try {
            const auto meta = nlohmann::json::parse(
                client_.get(run_folder::join(dir, run_folder::kCheckpointMetadataFile)), nullptr,
                false);
            if (meta.is_object() && meta.contains("world_size") &&
                meta["world_size"].is_number_integer())
                world = std::clamp(meta["world_size"].get<int>(), 1, 4096);
        } catch (const remote::HttpError& e) {
            if (e.status() != 404) throw;
        }
        for (int k = 0; k < world; ++k) names.push_back(run_folder::train_state_file(k));
        std::vector<std::pair<std::string, uint64_t>> out;
        for (const auto& n : names) {
            if (auto s = client_.head(run_folder::join(dir, n))) out.emplace_back(n, *s);
        }
        std::sort(out.begin(), out.end());
        return out;
    }
    std::string do_read(const std::string& path) const override { return client_.get(path); }
    void do_write(const std::string& path, const std::string&) override { read_only(path); }
    void do_put_file(const std::string&, const std::string& path) override { read_only(path); }
    void do_get_file(const std::string& path, const std::string& local) const override {
        client_.get_to_file(path, local);
    }

private:
    [[noreturn]] static void read_only(const std::string& path) {
        throw Error(path +
                    ": HTTP folders are read only (load_path, inspect, import); save to a local "
                    "or s3:// folder");
    }
    remote::HttpClient client_{remote::transfer_options()};
};

bool starts_with(const std::string& s, const char* p) {
    return s.rfind(p, 0) == 0;
}

}  // namespace

bool is_remote_path(const std::string& path) {
    return starts_with(path, "s3://") || starts_with(path, "http://") ||
           starts_with(path, "https://");
}

std::unique_ptr<Storage> storage_for(const std::string& path) {
    if (starts_with(path, "s3://")) return std::make_unique<S3Storage>();
    if (starts_with(path, "http://") || starts_with(path, "https://"))
        return std::make_unique<HttpStorage>();
    const auto scheme = path.find("://");
    if (scheme != std::string::npos && path.find('/') > scheme)
        throw Error(path + ": unknown storage '" + path.substr(0, scheme) +
                    "://' (local paths, s3:// and http(s):// are supported)");
    return std::make_unique<LocalStorage>();
}

std::string base_name(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const auto slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string parent_path(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const auto slash = p.rfind('/');
    if (slash == std::string::npos) return {};
    return p.substr(0, slash);
}

void download_folder(const Storage& storage, const std::string& dir, const std::string& local,
                     const std::vector<std::string>& only) {
    std::error_code ec;
    fs::remove_all(local, ec);
    fs::create_directories(local, ec);
    if (ec) throw Error(local + ": cannot create folder: " + ec.message());
    std::set<std::string> wanted(only.begin(), only.end());
    for (const auto& [name, bytes] : storage.files(dir)) {
        if (!wanted.empty() && !wanted.count(name)) continue;
        const fs::path to = fs::path(local) / name;
        fs::create_directories(to.parent_path(), ec);
        storage.get_file(run_folder::join(dir, name), to.string());
    }
}

DownloadedFolder::DownloadedFolder(const Storage& storage, const std::string& dir,
                                   const std::string& local, const std::vector<std::string>& only)
    : dir_(dir), local_(local) {
    try {
        download_folder(storage, dir, local, only);
    } catch (const std::exception& e) {
        std::error_code ec;
        fs::remove_all(local_, ec);
        throw Error(remote_names(e.what()));
    }
}

DownloadedFolder::~DownloadedFolder() {
    std::error_code ec;
    fs::remove_all(local_, ec);
}

std::string DownloadedFolder::remote_names(std::string text) const {
    for (std::size_t pos = 0; (pos = text.find(local_, pos)) != std::string::npos;
         pos += dir_.size())
        text.replace(pos, local_.size(), dir_);
    return text;
}

void upload_folder(const std::string& local, Storage& storage, const std::string& dir) {
    LocalStorage here;
    std::vector<std::string> names;
    for (const auto& [name, bytes] : here.files(local)) names.push_back(name);
    std::stable_partition(names.begin(), names.end(), [](const std::string& n) {
        return n != run_folder::kCheckpointMetadataFile;
    });
    for (const auto& name : names)
        storage.put_file(run_folder::join(local, name), run_folder::join(dir, name));
}

}  // namespace lathe::remote
