// Reading a Lathe tensor file's header (docs/checkpoint-format.md) without LibTorch, so the engine
// and the GUI judge a file the same way:
//
//   bytes 0..7    magic "LATHETS1"
//   bytes 8..15   header length H (uint64, little-endian)
//   H bytes       JSON header: {"tensors": [{"name", "dtype", "shape", "offset", "nbytes",
//                 "crc32c"}]}
//   data          each tensor's raw little-endian bytes at 16 + H + offset (64-byte aligned)
//
// The engine writes and loads tensors in engine/checkpoint/tensor_file.h on top of this.
#pragma once

#include <atomic>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace lathe::run_folder {

inline constexpr char kTensorFileMagic[8] = {'L', 'A', 'T', 'H', 'E', 'T', 'S', '1'};

struct TensorEntry {
    std::string name;
    std::string dtype;  ///< "float32", "bfloat16", "int64" ...
    std::vector<int64_t> shape;
    uint64_t offset = 0;  ///< from the start of the data (16 + H)
    uint64_t nbytes = 0;
    std::optional<uint32_t> crc32c;
};

struct TensorFileHeader {
    std::vector<TensorEntry> tensors;
    uint64_t data_start = 0;  ///< 16 + H
    uint64_t file_size = 0;
};

/// Reads and checks the header of `in` (a binary stream at its start, `file_size` bytes long):
/// the magic, a header that is JSON with a tensor list of well-formed entries, and a file long
/// enough to hold every tensor. Throws lathe::Error "`path`: reason" (truncated, bad magic, ...).
TensorFileHeader read_tensor_file_header(std::istream& in, uint64_t file_size,
                                         const std::string& path);
/// The same, opening `path`.
TensorFileHeader read_tensor_file_header(const std::string& path);

/// Reads every tensor of `path` and compares its bytes with the header's CRC-32C. Throws
/// lathe::Error naming the file and the tensor on a mismatch, and "cancelled" when `cancel` turns
/// true.
void verify_tensor_file_data(const std::string& path, const std::atomic<bool>* cancel = nullptr);

}  // namespace lathe::run_folder
