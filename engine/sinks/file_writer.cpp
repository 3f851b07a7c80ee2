#include "engine/sinks/file_writer.h"

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
            std::fseek(file_, 0, SEEK_END);  // required between a read and a write
        }
    }
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
