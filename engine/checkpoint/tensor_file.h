// Lathe's tensor file: a small self-describing container for named CPU tensors, written and loaded
// with LibTorch here. Its layout and the torch-free header reader (shared with the GUI) are in
// engine/run_folder/tensor_file_header.h. Every tensor carries a CRC-32C, so truncation and
// corruption are detected and reported with the file and tensor name. See
// docs/checkpoint-format.md.
#pragma once

#include "engine/run_folder/file_io.h"

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lathe::checkpoint {

/// Writes the tensors (contiguous CPU copies are made as needed) to `path` and fsyncs it.
/// Throws lathe::Error naming the file on any I/O failure (e.g. disk full).
void write_tensor_file(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

/// Reads and verifies a tensor file. Throws lathe::Error naming the file (and tensor) when it is
/// missing, truncated, corrupted or malformed.
std::map<std::string, torch::Tensor> read_tensor_file(const std::string& path);

// The run folder's file helpers, under the names the checkpoint code has always used.
using run_folder::read_text_file;
using run_folder::write_file_atomic;

}  // namespace lathe::checkpoint
