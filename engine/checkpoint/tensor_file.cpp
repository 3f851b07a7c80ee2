#include "checkpoint/tensor_file.h"

#include "util/error.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lathe::checkpoint {

namespace {

const std::array<uint32_t, 256>& crc_table() {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    return table;
}

constexpr char kMagic[8] = {'L', 'A', 'T', 'H', 'E', 'T', 'S', '1'};

class Fd {
public:
    Fd(const std::string& path, int flags, mode_t mode = 0644) : path_(path) {
        fd_ = ::open(path.c_str(), flags | O_CLOEXEC, mode);
        if (fd_ < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    }
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    void write_all(const void* data, std::size_t n) {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            ssize_t w = ::write(fd_, p, n);
            if (w < 0) {
                if (errno == EINTR) continue;
                throw Error(path_ + ": write failed: " + std::strerror(errno));
            }
            p += w;
            n -= static_cast<std::size_t>(w);
        }
    }
    void sync_and_close() {
        if (::fsync(fd_) != 0) throw Error(path_ + ": fsync failed: " + std::strerror(errno));
        int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) throw Error(path_ + ": close failed: " + std::strerror(errno));
    }

private:
    std::string path_;
    int fd_ = -1;
};

std::string dtype_name(torch::ScalarType t) {
    switch (t) {
        case torch::kFloat32: return "float32";
        case torch::kFloat64: return "float64";
        case torch::kBFloat16: return "bfloat16";
        case torch::kFloat16: return "float16";
        case torch::kInt64: return "int64";
        case torch::kInt32: return "int32";
        case torch::kUInt8: return "uint8";
        default: throw Error(std::string("cannot store tensors of type ") + c10::toString(t));
    }
}

torch::ScalarType dtype_from(const std::string& s) {
    if (s == "float32") return torch::kFloat32;
    if (s == "float64") return torch::kFloat64;
    if (s == "bfloat16") return torch::kBFloat16;
    if (s == "float16") return torch::kFloat16;
    if (s == "int64") return torch::kInt64;
    if (s == "int32") return torch::kInt32;
    if (s == "uint8") return torch::kUInt8;
    throw Error("unknown dtype '" + s + "'");
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc) {
    const auto& t = crc_table();
    const auto* p = static_cast<const uint8_t*>(data);
    crc = ~crc;
    for (std::size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

void write_tensor_file(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
    std::vector<torch::Tensor> cpu;
    nlohmann::json entries = nlohmann::json::array();
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        auto c = t.detach().to(torch::kCPU).contiguous();
        uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
        entries.push_back({{"name", name},
                           {"dtype", dtype_name(c.scalar_type())},
                           {"shape", c.sizes().vec()},
                           {"offset", offset},
                           {"nbytes", nbytes},
                           {"crc32c", crc32c(c.data_ptr(), nbytes)}});
        offset += (nbytes + 63) / 64 * 64;
        cpu.push_back(std::move(c));
    }
    std::string header = nlohmann::json{{"tensors", entries}}.dump();
    // Pad the header so the data starts 64-byte aligned.
    while ((16 + header.size()) % 64 != 0) header += ' ';
    Fd f(path, O_WRONLY | O_CREAT | O_TRUNC);
    f.write_all(kMagic, 8);
    uint64_t hlen = header.size();
    f.write_all(&hlen, 8);
    f.write_all(header.data(), header.size());
    static const char zeros[64] = {};
    for (auto& c : cpu) {
        uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
        f.write_all(c.data_ptr(), nbytes);
        uint64_t pad = (nbytes + 63) / 64 * 64 - nbytes;
        if (pad) f.write_all(zeros, pad);
    }
    f.sync_and_close();
}

std::map<std::string, torch::Tensor> read_tensor_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const uint64_t size = static_cast<uint64_t>(in.tellg());
    in.seekg(0);
    char magic[8];
    uint64_t hlen = 0;
    if (size < 16 || !in.read(magic, 8) || !in.read(reinterpret_cast<char*>(&hlen), 8)) {
        throw Error(path + ": truncated (" + std::to_string(size) + " bytes, no header)");
    }
    if (std::memcmp(magic, kMagic, 8) != 0) throw Error(path + ": not a Lathe tensor file (bad magic)");
    if (hlen > size - 16) throw Error(path + ": truncated or corrupted header");
    std::string header(hlen, '\0');
    in.read(header.data(), static_cast<std::streamsize>(hlen));
    nlohmann::json h;
    try {
        h = nlohmann::json::parse(header);
    } catch (const std::exception& e) {
        throw Error(path + ": corrupted header: " + e.what());
    }
    const uint64_t data_start = 16 + hlen;
    std::map<std::string, torch::Tensor> out;
    try {
        for (const auto& e : h.at("tensors")) {
            std::string name = e.at("name");
            auto shape = e.at("shape").get<std::vector<int64_t>>();
            uint64_t offset = e.at("offset"), nbytes = e.at("nbytes");
            if (data_start + offset + nbytes > size) {
                throw Error(path + ": truncated: tensor '" + name + "' ends at byte " +
                            std::to_string(data_start + offset + nbytes) + " but the file has " + std::to_string(size));
            }
            auto t = torch::empty(shape, dtype_from(e.at("dtype")));
            if (static_cast<uint64_t>(t.numel()) * t.element_size() != nbytes) {
                throw Error(path + ": tensor '" + name + "' size does not match its shape");
            }
            in.seekg(static_cast<std::streamoff>(data_start + offset));
            in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(nbytes));
            if (!in) throw Error(path + ": read failed for tensor '" + name + "'");
            if (crc32c(t.data_ptr(), nbytes) != e.at("crc32c").get<uint32_t>()) {
                throw Error(path + ": corrupted: checksum mismatch in tensor '" + name + "'");
            }
            out.emplace(std::move(name), std::move(t));
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": malformed header: " + e.what());
    }
    return out;
}

void write_file_atomic(const std::string& path, const std::string& text) {
    std::string tmp = path + ".tmp";
    {
        Fd f(tmp, O_WRONLY | O_CREAT | O_TRUNC);
        f.write_all(text.data(), text.size());
        f.sync_and_close();
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
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

}  // namespace lathe::checkpoint
