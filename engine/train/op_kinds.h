// Where a step's time goes, by kind, as issue 30's table splits it: matrix products, attention,
// copies and casts, softmax and loss, other elementwise work, and the framework's own overhead
// (autograd's bookkeeping, on the CPU). `lathe-engine bench --profile` prints it from the Kineto
// profiler's events: kernel time on a GPU, operators' self time on the CPU. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::train {

enum class OpKind { gemm, attention, copy, softmax_loss, elementwise, framework };
constexpr int kOpKinds = 6;

/// "GEMM", "attention", "copies and casts", "softmax/loss", "other elementwise", "framework".
const char* op_kind_name(OpKind kind);

/// The kind of an ATen operator ("aten::addmm") or of a CUDA kernel's name
/// ("sm90_xmma_gemm_bf16bf16_...", "void at::native::vectorized_elementwise_kernel<...>").
OpKind op_kind(std::string_view name);

/// One profiled operator or kernel: nested operators of one thread lie inside each other.
struct TimedOp {
    std::string name;
    uint64_t thread = 0;
    int64_t start_ns = 0, end_ns = 0;
};

/// Nanoseconds per kind (indexed by OpKind). `nested`: CPU operators, each counted by its self
/// time (its duration less that of the operators directly inside it on its thread); otherwise
/// each op (a GPU kernel or copy) counts its whole duration.
std::vector<int64_t> time_by_kind(std::vector<TimedOp> ops, bool nested);

}  // namespace lathe::train
