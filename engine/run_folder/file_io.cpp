#include "engine/run_folder/file_io.h"

#include "engine/util/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lathe::run_folder {

OutputFile::OutputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write_all(const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd_, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw Error(path_ + ": write failed: " + std::strerror(errno));
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void OutputFile::sync_and_close() {
    if (::fsync(fd_) != 0) throw Error(path_ + ": fsync failed: " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(path_ + ": close failed: " + std::strerror(errno));
}

namespace {

// Creates or truncates `path`, writes `text` and fsyncs it. Returns 0, or errno with `what` naming
// the step that failed.
int write_whole(const std::string& path, const std::string& text, std::string* what) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *what = "cannot open";
        return errno;
    }
    const char* p = text.data();
    std::size_t n = text.size();
    int err = 0;
    while (n > 0 && err == 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            err = errno;
            *what = "write failed";
        } else {
            p += w;
            n -= static_cast<std::size_t>(w);
        }
    }
    if (err == 0 && ::fsync(fd) != 0) {
        err = errno;
        *what = "fsync failed";
    }
    if (::close(fd) != 0 && err == 0) {
        err = errno;
        *what = "close failed";
    }
    return err;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text, WhenFull when_full) {
    const std::string tmp = path + ".tmp";
    std::string what;
    int err = write_whole(tmp, text, &what);
    if (err != 0) {
        std::remove(tmp.c_str());
        if ((err == ENOSPC || err == EDQUOT) && when_full == WhenFull::overwrite_in_place) {
            std::string what_in_place;
            if (write_whole(path, text, &what_in_place) == 0) return;
        }
        throw Error(tmp + ": " + what + ": " + std::strerror(err));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        throw Error(path + ": rename failed: " + std::strerror(e));
    }
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace lathe::run_folder
