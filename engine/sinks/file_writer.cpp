#include "engine/sinks/file_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace lathe::sinks {

void throw_errno(int err) {
    throw std::runtime_error(std::error_code(err, std::generic_category()).message());
}

FileWriter::~FileWriter() {
    if (file_) std::fclose(file_);
}

void FileWriter::open(const std::string& path, bool append) {
    if (file_) throw std::logic_error("open: already open");
    initial_size_ = 0;
    trimmed_bytes_ = 0;
    initial_last_byte_ = '\n';
    // "a+" lets us look at the last byte; writes still always go to the end.
    file_ = std::fopen(path.c_str(), append ? "a+b" : "wb");
    if (!file_) throw_errno(errno);
    if (append && std::fseek(file_, 0, SEEK_END) == 0) {
        long size = std::ftell(file_);
        if (size > 0) {
            initial_size_ = size;
            if (std::fseek(file_, -1, SEEK_END) == 0) {
                int c = std::fgetc(file_);
                if (c != EOF) initial_last_byte_ = static_cast<char>(c);
            }
            if (initial_last_byte_ != '\n') trim_partial_line();
            std::fseek(file_, 0, SEEK_END);  // required between a read and a write
        }
    }
}

void FileWriter::trim_partial_line() {
    // The last '\n', read backwards in blocks; the file is cut just after it (or to nothing).
    char block[65536];
    long end = initial_size_, keep = 0;
    while (end > 0 && keep == 0) {
        const long start = std::max(0L, end - static_cast<long>(sizeof block));
        if (std::fseek(file_, start, SEEK_SET) != 0) throw_errno(errno);
        const std::size_t n = std::fread(block, 1, static_cast<std::size_t>(end - start), file_);
        if (n != static_cast<std::size_t>(end - start)) throw_errno(errno ? errno : EIO);
        for (long i = static_cast<long>(n) - 1; i >= 0; --i) {
            if (block[i] == '\n') {
                keep = start + i + 1;
                break;
            }
        }
        end = start;
    }
    if (::ftruncate(::fileno(file_), keep) != 0) throw_errno(errno);
    trimmed_bytes_ = initial_size_ - keep;
    initial_size_ = keep;
    initial_last_byte_ = '\n';
}

void FileWriter::write(std::string_view bytes) {
    if (!file_) throw std::logic_error("write: not open");
    if (bytes.empty()) return;
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
        throw_errno(errno);
    }
}

void FileWriter::flush() {
    if (!file_) return;
    if (std::fflush(file_) != 0) throw_errno(errno);
}

void FileWriter::close() {
    if (!file_) return;
    std::FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0) throw_errno(errno);
}

}  // namespace lathe::sinks
