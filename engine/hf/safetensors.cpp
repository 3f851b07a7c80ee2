#include "engine/hf/safetensors.h"

#include "engine/run_folder/file_io.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

namespace lathe::hf {

namespace {

// safetensors' own limit on the header (100 MB): a larger length is a lie or another format.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

uint64_t safetensors_dtype_size(const std::string& dtype) {
    static const std::map<std::string, uint64_t> sizes = {
        {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
        {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
        {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    auto it = sizes.find(dtype);
    if (it == sizes.end()) throw Error("unknown safetensors dtype '" + dtype + "'");
    return it->second;
}

int64_t SafetensorsEntry::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

const SafetensorsEntry* SafetensorsHeader::find(const std::string& name) const {
    for (const auto& e : tensors)
        if (e.name == name) return &e;
    return nullptr;
}

namespace {

SafetensorsHeader parse_header(std::istream& in, uint64_t file_size, const std::string& path) {
    auto fail = [&](const std::string& why) {
        return Error(path + ": not a valid safetensors file: " + why);
    };
    if (file_size < 8) throw fail("shorter than the 8-byte header length (truncated?)");
    unsigned char len_bytes[8];
    in.read(reinterpret_cast<char*>(len_bytes), 8);
    if (!in) throw fail("cannot read the header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    if (n > kMaxHeaderBytes)
        throw fail("the header length " + std::to_string(n) + " is larger than safetensors allows");
    if (n > file_size - 8)
        throw fail("the header says it is " + std::to_string(n) + " bytes but the file has only " +
                   std::to_string(file_size - 8) + " after the length (truncated?)");
    std::string text(n, '\0');
    in.read(text.data(), static_cast<std::streamsize>(n));
    if (!in) throw fail("cannot read the header");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
        throw fail(std::string("the header is not JSON: ") + e.what());
    }
    if (!j.is_object()) throw fail("the header is not a JSON object");
    SafetensorsHeader h;
    h.path = path;
    h.data_start = 8 + n;
    h.file_size = file_size;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        const auto& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) throw fail("__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    throw fail("__metadata__." + m.key() + " is not a string");
                h.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        auto bad = [&](const std::string& why) { return fail("tensor '" + name + "': " + why); };
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
            !v.contains("data_offsets"))
            throw bad("needs dtype, shape and data_offsets");
        SafetensorsEntry e;
        e.name = name;
        if (!v["dtype"].is_string()) throw bad("dtype is not a string");
        e.dtype = v["dtype"].get<std::string>();
        uint64_t item = 0;
        try {
            item = safetensors_dtype_size(e.dtype);
        } catch (const Error& err) {
            throw bad(err.what());
        }
        if (!v["shape"].is_array()) throw bad("shape is not a list");
        uint64_t numel = 1;
        for (const auto& d : v["shape"]) {
            if (!d.is_number_unsigned()) throw bad("shape holds something other than sizes");
            const uint64_t dim = d.get<uint64_t>();
            if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / dim)
                throw bad("shape is too large");
            numel *= dim;
            e.shape.push_back(static_cast<int64_t>(dim));
        }
        const auto& off = v["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
            !off[1].is_number_unsigned())
            throw bad("data_offsets is not [begin, end]");
        e.begin = off[0].get<uint64_t>();
        e.end = off[1].get<uint64_t>();
        if (e.end < e.begin) throw bad("data_offsets end before they begin");
        if (e.end - e.begin != numel * item)
            throw bad("data_offsets hold " + std::to_string(e.end - e.begin) +
                      " bytes but dtype and shape need " + std::to_string(numel * item));
        h.tensors.push_back(std::move(e));
    }
    std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t pos = 0;
    for (const auto& e : h.tensors) {
        if (e.begin != pos)
            throw fail("tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) +
                       " of the data, but the previous tensor ends at " + std::to_string(pos) +
                       (e.begin < pos ? " (they overlap)" : " (a hole)"));
        pos = e.end;
    }
    const uint64_t data = file_size - h.data_start;
    if (pos > data)
        throw fail("the tensors need " + std::to_string(pos) + " bytes of data but the file has " +
                   std::to_string(data) + " (truncated?)");
    if (pos < data)
        throw fail(std::to_string(data - pos) + " bytes after the last tensor that no tensor uses");
    return h;
}

}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) throw Error(path + ": cannot open: " + std::strerror(errno));
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(path + ": " + ec.message());
    header_ = parse_header(in_, size, path);
}

void SafetensorsReader::read(const SafetensorsEntry& e, void* out) {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(header_.data_start + e.begin));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(e.nbytes()));
    if (!in_) throw Error(header_.path + ": cannot read tensor '" + e.name + "'");
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
    return SafetensorsReader(path).header();
}

struct SafetensorsWriter::File {
    explicit File(const std::string& p) : out(p) {}
    run_folder::OutputFile out;
};

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<SafetensorsEntry> layout,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), layout_(std::move(layout)) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (!metadata.empty()) j["__metadata__"] = metadata;
    uint64_t pos = 0;
    for (auto& e : layout_) {
        if (e.name.empty() || e.name == "__metadata__" || j.contains(e.name))
            throw Error(path_ + ": bad or repeated tensor name '" + e.name + "'");
        e.begin = pos;
        e.end = pos + static_cast<uint64_t>(e.numel()) * safetensors_dtype_size(e.dtype);
        pos = e.end;
        j[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
    }
    std::string header = j.dump();
    while (header.size() % 8 != 0) header += ' ';  // the data starts 8-byte aligned
    file_ = std::make_unique<File>(tmp_);
    unsigned char len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    file_->out.write_all(len, 8);
    file_->out.write_all(header.data(), header.size());
}

SafetensorsWriter::~SafetensorsWriter() {
    if (file_) {
        file_.reset();
        std::remove(tmp_.c_str());
    }
}

void SafetensorsWriter::write(const std::string& name, const void* data, uint64_t nbytes) {
    if (next_ >= layout_.size() || layout_[next_].name != name)
        throw Error(path_ + ": tensor '" + name + "' written out of order");
    if (layout_[next_].nbytes() != nbytes)
        throw Error(path_ + ": tensor '" + name + "' has " + std::to_string(nbytes) +
                    " bytes, the layout says " + std::to_string(layout_[next_].nbytes()));
    file_->out.write_all(data, nbytes);
    ++next_;
}

void SafetensorsWriter::finish() {
    if (next_ != layout_.size())
        throw Error(path_ + ": " + std::to_string(layout_.size() - next_) +
                    " tensors were never written");
    file_->out.sync_and_close();
    file_.reset();
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) throw Error("cannot rename " + tmp_ + " to " + path_ + ": " + ec.message());
}

}  // namespace lathe::hf
