// bench --profile's accounting (engine/train/op_kinds.h): operator and kernel names by kind, and
// self time of nested CPU operators.
#include "engine/train/op_kinds.h"

#include <QtTest>

using lathe::train::op_kind;
using lathe::train::OpKind;
using lathe::train::time_by_kind;
using lathe::train::TimedOp;

class TestOpKinds : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void names() {
        QCOMPARE(op_kind("aten::addmm"), OpKind::gemm);
        QCOMPARE(op_kind("aten::mm"), OpKind::gemm);
        QCOMPARE(op_kind("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
                 OpKind::gemm);
        QCOMPARE(op_kind("aten::scaled_dot_product_attention"), OpKind::attention);
        QCOMPARE(op_kind("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<...>>"),
                 OpKind::attention);
        QCOMPARE(op_kind("aten::_to_copy"), OpKind::copy);
        QCOMPARE(op_kind("aten::cat"), OpKind::copy);
        QCOMPARE(op_kind("Memcpy HtoD (Pageable -> Device)"), OpKind::copy);
        QCOMPARE(op_kind("void at::native::(anonymous namespace)::CatArrayBatchedCopy<...>"),
                 OpKind::copy);
        QCOMPARE(op_kind("aten::_log_softmax"), OpKind::softmax_loss);
        QCOMPARE(op_kind("aten::logsumexp"), OpKind::softmax_loss);
        QCOMPARE(op_kind("aten::mul"), OpKind::elementwise);
        QCOMPARE(op_kind("void at::native::vectorized_elementwise_kernel<4, ...>"),
                 OpKind::elementwise);
        QCOMPARE(op_kind("autograd::engine::evaluate_function: MmBackward0"), OpKind::framework);
        QCOMPARE(op_kind("MmBackward0"), OpKind::framework);
        // The mm inside a backward node is a GEMM, not framework time.
        QCOMPARE(op_kind("aten::mm"), OpKind::gemm);
    }

    // linear [0, 100) holds addmm [10, 70), which holds copy_ [20, 30); a mul on another thread
    // overlaps in time and is not inside linear.
    void selfTimes() {
        std::vector<TimedOp> ops = {{"aten::linear", 1, 0, 100},
                                    {"aten::addmm", 1, 10, 70},
                                    {"aten::copy_", 1, 20, 30},
                                    {"aten::mul", 2, 15, 40},
                                    {"aten::mul", 1, 80, 90}};
        const auto ns = time_by_kind(ops, /*nested=*/true);
        QCOMPARE(ns[static_cast<int>(OpKind::gemm)],
                 int64_t(30 + 50));  // linear 100-60-10, addmm 60-10
        QCOMPARE(ns[static_cast<int>(OpKind::copy)], int64_t(10));
        QCOMPARE(ns[static_cast<int>(OpKind::elementwise)], int64_t(25 + 10));
        int64_t total = 0;
        for (auto v : ns) total += v;
        QCOMPARE(total, int64_t(100 + 25));  // each thread's busy time, counted once
        // Kernels do not nest: each counts whole.
        const auto flat = time_by_kind(ops, /*nested=*/false);
        QCOMPARE(flat[static_cast<int>(OpKind::gemm)], int64_t(160));
    }
};

QTEST_GUILESS_MAIN(TestOpKinds)
#include "test_op_kinds.moc"
