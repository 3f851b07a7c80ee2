#include "engine/cli/torch_info.h"

#include "engine/config/io.h"

#include <torch/version.h>

namespace lathe {

std::string torch_version() {
    return TORCH_VERSION;
}

bool cuda_compiled() {
#ifdef LATHE_WITH_CUDA
    return true;
#else
    return false;
#endif
}

std::string version_line(const std::string& program) {
    return program + " " + config::version() + " (git " + config::git_revision() + ", LibTorch " +
           torch_version() + ", CUDA " + (cuda_compiled() ? "compiled in" : "not compiled in") +
           ")";
}

}  // namespace lathe
