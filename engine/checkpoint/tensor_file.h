// Lathe's tensor file: a small self-describing container for named CPU tensors.
//
//   bytes 0..7    magic "LATHETS1"
//   bytes 8..15   header length H (uint64, little-endian)
//   H bytes       JSON header: {"tensors": [{"name", "dtype", "shape", "offset", "nbytes", "crc32c"}]}
//   data          each tensor's raw little-endian bytes at header-relative offset (64-byte aligned)
// Every tensor carries a CRC-32C, so truncation and corruption are detected and reported with the
// file and tensor name. See docs/checkpoint-format.md.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lathe::checkpoint {

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc = 0);

/// Writes the tensors (contiguous CPU copies are made as needed) to `path` and fsyncs it.
/// Throws lathe::Error naming the file on any I/O failure (e.g. disk full).
void write_tensor_file(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

/// Reads and verifies a tensor file. Throws lathe::Error naming the file (and tensor) when it is
/// missing, truncated, corrupted or malformed.
std::map<std::string, torch::Tensor> read_tensor_file(const std::string& path);

/// Writes `text` to `path` atomically (temporary file, fsync, rename). Throws lathe::Error.
void write_file_atomic(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);

}  // namespace lathe::checkpoint
