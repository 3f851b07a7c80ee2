// The safetensors format (https://huggingface.co/docs/safetensors), read and written without
// LibTorch so the GUI can use it too:
//
//   bytes 0..7    header length N (uint64, little-endian)
//   N bytes       JSON header: {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [..],
//                 "data_offsets": [begin, end]}, ...}, padded with spaces (Lathe pads to 8 bytes)
//   data          every tensor's little-endian bytes at 8 + N + begin; the tensors cover the data
//                 without holes or overlaps
//
// The reader checks everything a lying or truncated file could get wrong before any tensor is
// read. The writer streams: it writes the header from the layout, then one tensor at a time.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lathe::hf {

struct SafetensorsEntry {
    std::string name;
    std::string dtype;  ///< safetensors' names: "F32", "BF16", "F16", "F64", "I64", "I32", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0;  ///< from the start of the data (8 + N)
    uint64_t end = 0;
    uint64_t nbytes() const { return end - begin; }
    int64_t numel() const;
};

/// Bytes per element of a safetensors dtype; throws lathe::Error for an unknown one.
uint64_t safetensors_dtype_size(const std::string& dtype);

struct SafetensorsHeader {
    std::string path;
    std::vector<SafetensorsEntry> tensors;  ///< in data order
    std::map<std::string, std::string> metadata;
    uint64_t data_start = 0;  ///< 8 + N
    uint64_t file_size = 0;
    /// nullptr when there is no such tensor.
    const SafetensorsEntry* find(const std::string& name) const;
};

/// Reads and checks the header of `path`: a sane length, JSON, every entry well-formed (known
/// dtype, non-negative shape, offsets matching dtype x shape), the tensors covering the data with
/// no hole or overlap, and a file as long as the header says. Throws lathe::Error "`path`: reason".
SafetensorsHeader read_safetensors_header(const std::string& path);

/// Reads one tensor's bytes from a file whose header was read by read_safetensors_header.
class SafetensorsReader {
public:
    explicit SafetensorsReader(const std::string& path);
    const SafetensorsHeader& header() const { return header_; }
    /// Reads `e`'s bytes into `out` (e.nbytes() bytes). Throws lathe::Error naming file and tensor.
    void read(const SafetensorsEntry& e, void* out);

private:
    SafetensorsHeader header_;
    std::ifstream in_;
};

/// Writes a safetensors file tensor by tensor: the layout (names, dtypes, shapes, in order) is
/// fixed up front, then write() is called once per tensor in that order. The file appears under
/// `path` only after finish() (written as path + ".tmp", fsynced, renamed).
class SafetensorsWriter {
public:
    /// `layout`'s begin/end are computed here.
    SafetensorsWriter(std::string path, std::vector<SafetensorsEntry> layout,
                      const std::map<std::string, std::string>& metadata = {});
    ~SafetensorsWriter();
    SafetensorsWriter(const SafetensorsWriter&) = delete;
    SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
    /// The next tensor's bytes; `name` and `nbytes` must match the layout.
    void write(const std::string& name, const void* data, uint64_t nbytes);
    void finish();
    const std::vector<SafetensorsEntry>& layout() const { return layout_; }

private:
    std::string path_, tmp_;
    std::vector<SafetensorsEntry> layout_;
    std::size_t next_ = 0;
    struct File;
    std::unique_ptr<File> file_;
};

}  // namespace lathe::hf
