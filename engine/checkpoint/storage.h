// Where checkpoints live. Only local folders today; the interface is what a remote store (S3, GCS)
// would implement. Public non-virtual methods, protected virtual hooks.
#pragma once

#include <string>
#include <vector>

namespace lathe::checkpoint {

class Storage {
public:
    virtual ~Storage() = default;
    bool exists(const std::string& path) const { return do_exists(path); }
    void make_dirs(const std::string& path) { do_make_dirs(path); }
    void remove_all(const std::string& path) { do_remove_all(path); }
    /// Atomic when both paths are on the same filesystem.
    void rename(const std::string& from, const std::string& to) { do_rename(from, to); }
    std::vector<std::string> list(const std::string& dir) const { return do_list(dir); }
    /// Total bytes of the files under `path`.
    uint64_t size(const std::string& path) const { return do_size(path); }

protected:
    virtual bool do_exists(const std::string& path) const = 0;
    virtual void do_make_dirs(const std::string& path) = 0;
    virtual void do_remove_all(const std::string& path) = 0;
    virtual void do_rename(const std::string& from, const std::string& to) = 0;
    virtual std::vector<std::string> do_list(const std::string& dir) const = 0;
    virtual uint64_t do_size(const std::string& path) const = 0;
};

class LocalStorage : public Storage {
protected:
    bool do_exists(const std::string& path) const override;
    void do_make_dirs(const std::string& path) override;
    void do_remove_all(const std::string& path) override;
    void do_rename(const std::string& from, const std::string& to) override;
    std::vector<std::string> do_list(const std::string& dir) const override;
    uint64_t do_size(const std::string& path) const override;
};

}  // namespace lathe::checkpoint
