// Where checkpoints live: a local folder, an S3-compatible bucket (s3://bucket/prefix), or, read
// only, an HTTP(S) server (http(s)://host/path). Paths are plain strings; storage_for() picks the
// storage a path names. Public non-virtual methods, protected virtual hooks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lathe::remote {

class Storage {
public:
    virtual ~Storage() = default;
    /// Remote storage has no renames or folders of its own: a checkpoint is complete once its
    /// .metadata.json exists, which is uploaded last.
    bool remote() const { return do_remote(); }
    /// A file, or a folder with something in it.
    bool exists(const std::string& path) const { return do_exists(path); }
    void make_dirs(const std::string& path) { do_make_dirs(path); }
    void remove_all(const std::string& path) { do_remove_all(path); }
    /// Atomic when both paths are on the same filesystem; remotely a copy, then a delete.
    void rename(const std::string& from, const std::string& to) { do_rename(from, to); }
    /// The names directly inside `dir`, sorted (folders without their trailing slash).
    std::vector<std::string> list(const std::string& dir) const { return do_list(dir); }
    /// Total bytes of the files under `path`.
    uint64_t size(const std::string& path) const { return do_size(path); }
    /// Every file under `dir` as (path relative to `dir` with '/', bytes), sorted.
    std::vector<std::pair<std::string, uint64_t>> files(const std::string& dir) const {
        return do_files(dir);
    }
    /// A whole file. Throws lathe::Error naming it.
    std::string read(const std::string& path) const { return do_read(path); }
    /// Writes a whole file; a reader never sees part of it.
    void write(const std::string& path, const std::string& data) { do_write(path, data); }
    /// Copies the local file `local` to `path` (remotely in parts, in parallel).
    void put_file(const std::string& local, const std::string& path) { do_put_file(local, path); }
    /// Copies `path` to the local file `local` (remotely in ranges, in parallel).
    void get_file(const std::string& path, const std::string& local) const {
        do_get_file(path, local);
    }

protected:
    virtual bool do_remote() const { return false; }
    virtual bool do_exists(const std::string& path) const = 0;
    virtual void do_make_dirs(const std::string& path) = 0;
    virtual void do_remove_all(const std::string& path) = 0;
    virtual void do_rename(const std::string& from, const std::string& to) = 0;
    virtual std::vector<std::string> do_list(const std::string& dir) const = 0;
    virtual uint64_t do_size(const std::string& path) const = 0;
    virtual std::vector<std::pair<std::string, uint64_t>> do_files(
        const std::string& dir) const = 0;
    virtual std::string do_read(const std::string& path) const = 0;
    virtual void do_write(const std::string& path, const std::string& data) = 0;
    virtual void do_put_file(const std::string& local, const std::string& path) = 0;
    virtual void do_get_file(const std::string& path, const std::string& local) const = 0;
};

class LocalStorage : public Storage {
protected:
    bool do_exists(const std::string& path) const override;
    void do_make_dirs(const std::string& path) override;
    void do_remove_all(const std::string& path) override;
    void do_rename(const std::string& from, const std::string& to) override;
    std::vector<std::string> do_list(const std::string& dir) const override;
    uint64_t do_size(const std::string& path) const override;
    std::vector<std::pair<std::string, uint64_t>> do_files(const std::string& dir) const override;
    std::string do_read(const std::string& path) const override;
    void do_write(const std::string& path, const std::string& data) override;
    void do_put_file(const std::string& local, const std::string& path) override;
    void do_get_file(const std::string& path, const std::string& local) const override;
};

/// s3://, http:// or https://.
bool is_remote_path(const std::string& path);
/// The storage `path` lives on: LocalStorage, or the remote storage of its scheme (with the
/// process's remote::TransferOptions). Throws lathe::Error for an unknown scheme.
std::unique_ptr<Storage> storage_for(const std::string& path);
/// The last component of `path` ("step10" of s3://b/run/step10/).
std::string base_name(const std::string& path);
/// `path` without its last component.
std::string parent_path(const std::string& path);
/// Copies the checkpoint (or any folder) `dir` of `storage` into the local folder `local`, which
/// is emptied first; only `only` when it is not empty (relative names; missing ones skipped).
void download_folder(const Storage& storage, const std::string& dir, const std::string& local,
                     const std::vector<std::string>& only = {});
/// A remote folder (or the listed files of it) downloaded into the local folder `local` for as
/// long as this lives; the local copy is removed on destruction.
class DownloadedFolder {
public:
    DownloadedFolder(const Storage& storage, const std::string& dir, const std::string& local,
                     const std::vector<std::string>& only = {});
    ~DownloadedFolder();
    DownloadedFolder(const DownloadedFolder&) = delete;
    DownloadedFolder& operator=(const DownloadedFolder&) = delete;
    const std::string& path() const { return local_; }
    /// `text` with the local copy's paths replaced by the remote ones, for messages.
    std::string remote_names(std::string text) const;

private:
    std::string dir_, local_;
};

/// Copies every file of the local folder `local` to `dir` of `storage`, .metadata.json last (a
/// checkpoint counts only once it is there).
void upload_folder(const std::string& local, Storage& storage, const std::string& dir);

}  // namespace lathe::remote
