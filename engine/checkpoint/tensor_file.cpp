#include "engine/checkpoint/tensor_file.h"

#include "engine/run_folder/crc32c.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/tensor_file_header.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace lathe::checkpoint {

namespace {

std::string dtype_name(torch::ScalarType t) {
    switch (t) {
        case torch::kFloat32:
            return "float32";
        case torch::kFloat64:
            return "float64";
        case torch::kBFloat16:
            return "bfloat16";
        case torch::kFloat16:
            return "float16";
        case torch::kInt64:
            return "int64";
        case torch::kInt32:
            return "int32";
        case torch::kUInt8:
            return "uint8";
        default:
            throw Error(std::string("cannot store tensors of type ") + c10::toString(t));
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

void write_tensor_file(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
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
                           {"crc32c", run_folder::crc32c(c.data_ptr(), nbytes)}});
        offset += (nbytes + 63) / 64 * 64;
        cpu.push_back(std::move(c));
    }
    std::string header = nlohmann::json{{"tensors", entries}}.dump();
    // Pad the header so the data starts 64-byte aligned.
    while ((16 + header.size()) % 64 != 0) header += ' ';
    run_folder::OutputFile f(path);
    f.write_all(run_folder::kTensorFileMagic, 8);
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
    const auto header = run_folder::read_tensor_file_header(in, size, path);
    std::map<std::string, torch::Tensor> out;
    for (const auto& e : header.tensors) {
        torch::ScalarType dtype;
        try {
            dtype = dtype_from(e.dtype);
        } catch (const Error& err) {
            throw Error(path + ": tensor '" + e.name + "'", err);
        }
        auto t = torch::empty(e.shape, dtype);
        if (static_cast<uint64_t>(t.numel()) * t.element_size() != e.nbytes) {
            throw Error(path + ": tensor '" + e.name + "' size does not match its shape");
        }
        in.seekg(static_cast<std::streamoff>(header.data_start + e.offset));
        in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.nbytes));
        if (!in) throw Error(path + ": read failed for tensor '" + e.name + "'");
        if (!e.crc32c) throw Error(path + ": tensor '" + e.name + "' has no crc32c in the header");
        if (run_folder::crc32c(t.data_ptr(), e.nbytes) != *e.crc32c) {
            throw Error(path + ": corrupted: checksum mismatch in tensor '" + e.name + "'");
        }
        out.emplace(e.name, std::move(t));
    }
    return out;
}

}  // namespace lathe::checkpoint
