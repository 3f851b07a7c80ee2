// Writing the files of a run folder safely: every error names the file, and a file that must never
// be seen half-written is written to a temporary name, fsynced and renamed.
#pragma once

#include <cstddef>
#include <string>

namespace lathe::run_folder {

/// A file opened for writing (created or truncated). Throws lathe::Error naming the file on every
/// failure, including a full disk.
class OutputFile {
public:
    explicit OutputFile(const std::string& path);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;
    void write_all(const void* data, std::size_t n);
    /// fsync, then close; after this the data is on disk.
    void sync_and_close();

private:
    std::string path_;
    int fd_ = -1;
};

/// What write_file_atomic() does when the disk is full.
enum class WhenFull {
    fail,                ///< throw; the file stays as it was
    overwrite_in_place,  ///< truncate and rewrite the file itself (its freed blocks make room):
                         ///< for a small status file that must say "failed" on a full disk,
                         ///< where a torn file is rarer and better than a stale one
};

/// Writes `text` to `path` atomically (temporary file, fsync, rename). Throws lathe::Error naming
/// the file; the temporary file never stays behind.
void write_file_atomic(const std::string& path, const std::string& text,
                       WhenFull when_full = WhenFull::fail);
/// The whole file. Throws lathe::Error naming the file.
std::string read_text_file(const std::string& path);

}  // namespace lathe::run_folder
