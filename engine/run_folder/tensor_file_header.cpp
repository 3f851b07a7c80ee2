#include "engine/run_folder/tensor_file_header.h"

#include "engine/run_folder/crc32c.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace lathe::run_folder {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t(1) << 30;

std::ifstream open(const std::string& path, uint64_t& size) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    size = static_cast<uint64_t>(in.tellg());
    in.seekg(0);
    return in;
}

}  // namespace

TensorFileHeader read_tensor_file_header(std::istream& in, uint64_t file_size,
                                         const std::string& path) {
    TensorFileHeader out;
    out.file_size = file_size;
    char magic[8];
    unsigned char len[8];
    if (file_size < 16 || !in.read(magic, 8) || !in.read(reinterpret_cast<char*>(len), 8))
        throw Error(path + ": truncated: " + std::to_string(file_size) +
                    " bytes, shorter than its 16-byte preamble");
    if (std::memcmp(magic, kTensorFileMagic, 8) != 0)
        throw Error(path + ": not a Lathe tensor file (bad magic)");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | len[i];
    if (hlen > kMaxHeaderBytes || hlen > file_size - 16)
        throw Error(path + ": truncated: " + std::to_string(file_size) +
                    " bytes, the header alone needs " + std::to_string(16 + hlen));
    std::string text(hlen, '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(hlen)))
        throw Error(path + ": cannot read its header");
    out.data_start = 16 + hlen;
    try {
        const auto h = nlohmann::json::parse(text);
        for (const auto& e : h.at("tensors")) {
            TensorEntry t;
            t.name = e.at("name").get<std::string>();
            t.dtype = e.at("dtype").get<std::string>();
            t.shape = e.at("shape").get<std::vector<int64_t>>();
            t.offset = e.at("offset").get<uint64_t>();
            t.nbytes = e.at("nbytes").get<uint64_t>();
            if (e.contains("crc32c")) t.crc32c = e.at("crc32c").get<uint32_t>();
            if (t.offset > file_size || t.nbytes > file_size ||
                out.data_start + t.offset + t.nbytes > file_size)
                throw Error(path + ": truncated: " + std::to_string(file_size) +
                            " bytes, tensor '" + t.name + "' ends at byte " +
                            std::to_string(out.data_start + t.offset + t.nbytes));
            out.tensors.push_back(std::move(t));
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": unreadable header: " + e.what());
    }
    return out;
}

TensorFileHeader read_tensor_file_header(const std::string& path) {
    uint64_t size = 0;
    auto in = open(path, size);
    return read_tensor_file_header(in, size, path);
}

void verify_tensor_file_data(const std::string& path, const std::atomic<bool>* cancel) {
    uint64_t size = 0;
    auto in = open(path, size);
    const TensorFileHeader h = read_tensor_file_header(in, size, path);
    std::vector<char> buffer;
    for (const auto& t : h.tensors) {
        if (cancel && cancel->load()) throw Error("cancelled");
        in.seekg(static_cast<std::streamoff>(h.data_start + t.offset));
        uint32_t crc = 0;
        for (uint64_t left = t.nbytes; left > 0;) {
            const uint64_t n = std::min<uint64_t>(left, 8u << 20);
            buffer.resize(n);
            if (!in.read(buffer.data(), static_cast<std::streamsize>(n)))
                throw Error(path + ": cannot read tensor '" + t.name + "'");
            crc = crc32c(buffer.data(), n, crc);
            left -= n;
        }
        if (t.crc32c && *t.crc32c != crc)
            throw Error(path + ": tensor '" + t.name + "' is corrupt (CRC-32C mismatch)");
    }
}

}  // namespace lathe::run_folder
