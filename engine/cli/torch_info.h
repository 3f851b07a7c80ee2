#pragma once
#include <string>

namespace lathe {
/// "2.9.1" — the LibTorch this binary was built against.
std::string torch_version();
/// Whether LibTorch's CUDA backend is compiled in (not whether a GPU is present).
bool cuda_compiled();
/// One line: version, git revision, LibTorch version, CUDA support.
std::string version_line(const std::string& program);
}  // namespace lathe
