#include "engine/train/op_kinds.h"

#include <algorithm>
#include <cctype>

namespace lathe::train {

const char* op_kind_name(OpKind kind) {
    switch (kind) {
        case OpKind::gemm:
            return "GEMM";
        case OpKind::attention:
            return "attention";
        case OpKind::copy:
            return "copies and casts";
        case OpKind::softmax_loss:
            return "softmax/loss";
        case OpKind::elementwise:
            return "other elementwise";
        case OpKind::framework:
            return "framework";
    }
    return "?";
}

namespace {

bool has(const std::string& s, const char* part) {
    return s.find(part) != std::string::npos;
}

}  // namespace

OpKind op_kind(std::string_view name) {
    std::string n(name);
    std::transform(n.begin(), n.end(), n.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (n.rfind("autograd::", 0) == 0 || has(n, "backward") || n.rfind("profilerstep", 0) == 0)
        return OpKind::framework;
    if (has(n, "attention") || has(n, "flash") || has(n, "fmha") || has(n, "sdpa"))
        return OpKind::attention;
    if (has(n, "softmax") || has(n, "cross_entropy") || has(n, "nll_loss") || has(n, "logsumexp"))
        return OpKind::softmax_loss;
    static const char* const kGemmOps[] = {"aten::mm",
                                           "aten::addmm",
                                           "aten::bmm",
                                           "aten::baddbmm",
                                           "aten::matmul",
                                           "aten::linear",
                                           "aten::_addmm_activation",
                                           "aten::addmv",
                                           "aten::mv",
                                           "aten::dot"};
    for (const char* op : kGemmOps)
        if (n == op) return OpKind::gemm;
    if (has(n, "gemm") || has(n, "cutlass") || has(n, "xmma") || has(n, "cublas"))
        return OpKind::gemm;
    static const char* const kCopyOps[] = {"aten::copy_",      "aten::_to_copy",   "aten::to",
                                           "aten::cat",        "aten::contiguous", "aten::clone",
                                           "aten::_copy_from", "aten::stack"};
    for (const char* op : kCopyOps)
        if (n == op) return OpKind::copy;
    if (has(n, "memcpy") || has(n, "copy_kernel") || has(n, "catarray") || has(n, "memset"))
        return OpKind::copy;
    return OpKind::elementwise;
}

std::vector<int64_t> time_by_kind(std::vector<TimedOp> ops, bool nested) {
    std::vector<int64_t> out(kOpKinds, 0);
    auto add = [&](const TimedOp& op, int64_t ns) {
        out[static_cast<std::size_t>(op_kind(op.name))] += std::max<int64_t>(0, ns);
    };
    if (!nested) {
        for (const auto& op : ops) add(op, op.end_ns - op.start_ns);
        return out;
    }
    // Per thread, by start (the outer of two that start together first): a stack of the open
    // operators; each one's children are subtracted from it.
    std::sort(ops.begin(), ops.end(), [](const TimedOp& a, const TimedOp& b) {
        if (a.thread != b.thread) return a.thread < b.thread;
        if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
        return a.end_ns > b.end_ns;
    });
    struct Open {
        const TimedOp* op;
        int64_t self;
    };
    std::vector<Open> stack;
    auto close_until = [&](uint64_t thread, int64_t t) {
        while (!stack.empty() &&
               (stack.back().op->thread != thread || stack.back().op->end_ns <= t)) {
            add(*stack.back().op, stack.back().self);
            stack.pop_back();
        }
    };
    for (const auto& op : ops) {
        close_until(op.thread, op.start_ns);
        if (!stack.empty()) stack.back().self -= op.end_ns - op.start_ns;
        stack.push_back({&op, op.end_ns - op.start_ns});
    }
    while (!stack.empty()) {
        add(*stack.back().op, stack.back().self);
        stack.pop_back();
    }
    return out;
}

}  // namespace lathe::train
