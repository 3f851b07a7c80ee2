// The fused kernels (engine/model/kernels): each op's CPU loop, the CUDA kernel's reference (the
// same arithmetic, from the op's *_math.h where it has one), against the reference ops the model
// runs without it (RotaryEmbedding, RMSNorm, silu * mul), forward and backward, in fp32, bf16 and
// fp16, with autocast and bf16 compute copies where the model meets them. The CUDA kernels
// themselves run against these on a GPU (tests/gpu/device_run.sh).
#include "engine/model/kernels/common.h"
#include "engine/model/kernels/qk_norm_rope.h"
#include "engine/model/kernels/residual_norm.h"
#include "engine/model/kernels/rope.h"
#include "engine/model/kernels/swiglu.h"
#include "engine/model/transformer.h"
#include "engine/util/autocast.h"
#include "engine/util/error.h"

#include <QtTest>

#include <cmath>
#include <limits>

using namespace lathe;

namespace {

// Empty when `got` is within `tol` of `want` relative to want's largest magnitude; else what is
// off and by how much.
QString relative_miss(const char* what, const torch::Tensor& got, const torch::Tensor& want,
                      double tol) {
    auto g = got.to(torch::kFloat64), w = want.to(torch::kFloat64);
    const double worst = ((g - w).abs().max() / (w.abs().max() + 1e-12)).item<double>();
    return worst <= tol ? QString()
                        : QString("%1 off by %2 of its largest value").arg(what).arg(worst);
}

}  // namespace

// Fails the test function unless relative_miss finds nothing.
#define QVERIFY_CLOSE(what, got, want, tol)                        \
    do {                                                           \
        const QString miss_ = relative_miss(what, got, want, tol); \
        QVERIFY2(miss_.isEmpty(), qPrintable(miss_));              \
    } while (false)

class TestKernels : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    // model.fused.rope: the CPU path of fused_rope (the CUDA kernel's reference: the same
    // rope_math.h) equals RotaryEmbedding's reference ops bitwise, forward and backward.
    void fusedRopeMatchesReferenceBitwise_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("fp32") << static_cast<int>(torch::kFloat32);
        QTest::newRow("bf16") << static_cast<int>(torch::kBFloat16);
        QTest::newRow("fp16") << static_cast<int>(torch::kHalf);
    }

    void fusedRopeMatchesReferenceBitwise() {
        QFETCH(int, dtype);
        const auto type = static_cast<torch::ScalarType>(dtype);
        torch::manual_seed(11);
        model::RotaryEmbedding rope(16, 10000.0);
        auto q0 = (torch::randn({2, 37, 3, 16}) * 4).to(type);
        auto k0 = (torch::randn({2, 37, 1, 16}) * 4).to(type);
        auto up_q = torch::randn({2, 37, 3, 16}).to(type),
             up_k = torch::randn({2, 37, 1, 16}).to(type);
        auto q1 = q0.clone().requires_grad_(true), k1 = k0.clone().requires_grad_(true);
        auto q2 = q0.clone().requires_grad_(true), k2 = k0.clone().requires_grad_(true);
        auto [rq, rk] = rope.apply(q1, k1);
        auto [cos, sin] = rope.tables(37, torch::kCPU);
        auto fq = model::kernels::fused_rope(q2, cos, sin),
             fk = model::kernels::fused_rope(k2, cos, sin);
        QCOMPARE(fq.scalar_type(), type);
        QVERIFY(torch::equal(fq, rq));
        QVERIFY(torch::equal(fk, rk));
        ((rq * up_q).sum() + (rk * up_k).sum()).backward();
        ((fq * up_q).sum() + (fk * up_k).sum()).backward();
        QVERIFY(torch::equal(q2.grad(), q1.grad()));
        QVERIFY(torch::equal(k2.grad(), k1.grad()));
        QVERIFY(!torch::equal(fq, q0));  // it rotated
        // Positions past the first: a longer table serves a shorter sequence.
        auto [cos64, sin64] = rope.tables(64, torch::kCPU);
        QVERIFY(torch::equal(model::kernels::fused_rope(q0, cos64, sin64), rq.detach()));
        // The switch sends only CUDA tensors to fused_rope: on the CPU apply() is the reference.
        rope.fused = true;
        QVERIFY(torch::equal(rope.apply(q0, k0).first, rq.detach()));
        QVERIFY(model::kernels::fused_kernels_available(torch::kCPU));
    }

    // model.fused.swiglu: the CPU path of fused_swiglu (the CUDA kernel's reference: the same
    // swiglu_math.h) against the reference ops silu(a) * b, forward and both gradients: within
    // 1e-6 relative in fp32 (exp may differ from ATen's in the last bit), and in bf16/fp16 within
    // one unit of the last place (each intermediate rounds where the reference's does), both
    // relative to each tensor's largest value.
    void fusedSwigluMatchesReference_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("fp32") << static_cast<int>(torch::kFloat32);
        QTest::newRow("bf16") << static_cast<int>(torch::kBFloat16);
        QTest::newRow("fp16") << static_cast<int>(torch::kHalf);
    }

    void fusedSwigluMatchesReference() {
        QFETCH(int, dtype);
        const auto type = static_cast<torch::ScalarType>(dtype);
        torch::manual_seed(13);
        // Large enough for several parallel chunks; values past where silu saturates too.
        auto a0 = (torch::randn({3, 41, 96}) * 4).to(type);
        auto b0 = (torch::randn({3, 41, 96}) * 2).to(type);
        auto up = torch::randn({3, 41, 96}).to(type);
        auto a1 = a0.clone().requires_grad_(true), b1 = b0.clone().requires_grad_(true);
        auto a2 = a0.clone().requires_grad_(true), b2 = b0.clone().requires_grad_(true);
        auto ref = torch::silu(a1) * b1;
        auto fused = model::kernels::fused_swiglu(a2, b2);
        QCOMPARE(fused.scalar_type(), type);
        (ref * up).sum().backward();
        (fused * up).sum().backward();
        const double ulp = type == torch::kFloat32 ? 1e-6 : type == torch::kBFloat16 ? 8e-3 : 1e-3;
        // Relative to the tensor's largest value: silu's derivative cancels to zero near
        // a = -1.28, where any difference in exp's last bit is large next to the value itself.
        auto close = [ulp](const torch::Tensor& got, const torch::Tensor& want) {
            auto g = got.to(torch::kFloat64), w = want.to(torch::kFloat64);
            const double worst = ((g - w).abs().max() / w.abs().max()).item<double>();
            return worst <= ulp ? QString() : QString("off by %1 of its largest value").arg(worst);
        };
        QString why;
        QVERIFY2((why = close(fused, ref)).isEmpty(), qPrintable("forward " + why));
        QVERIFY2((why = close(a2.grad(), a1.grad())).isEmpty(), qPrintable("d a " + why));
        QVERIFY2((why = close(b2.grad(), b1.grad())).isEmpty(), qPrintable("d b " + why));
        // Mostly bitwise: only exp's last bit may differ.
        const double same = fused.eq(ref.detach()).to(torch::kFloat64).mean().item<double>();
        QVERIFY2(same > 0.9, qPrintable(QString("only %1 of the outputs equal").arg(same)));
        // The switch sends only CUDA tensors to fused_swiglu: on the CPU the module is the
        // reference, and a shape or dtype mismatch is a clear error.
        model::FeedForward ff(96, 64);
        auto x = torch::randn({2, 5, 96});
        const auto plain = ff(x);
        ff->fused = true;
        QVERIFY(torch::equal(ff(x), plain));
        QVERIFY_THROWS_EXCEPTION(
            lathe::Error, model::kernels::fused_swiglu(a0, b0.narrow(2, 0, 10).contiguous()));
    }

    // model.fused.residual_norm: the CPU path of fused_residual_norm (the CUDA kernel's reference)
    // against a post-norm block's reference ops x + RMSNorm(y), forward and the gradients of x, y
    // and the weight, for the dtypes a run mixes: fp32; an fp32 residual stream with a bf16
    // branch and fp32 weight (autocast); all bf16 (compute copies). fp32: 1e-6 relative; bf16:
    // within a unit of the last place (the sums' order differs from ATen's).
    void fusedResidualNormMatchesReference_data() {
        QTest::addColumn<int>("xType");
        QTest::addColumn<int>("yType");
        QTest::addColumn<int>("wType");
        const int f = static_cast<int>(torch::kFloat32), b = static_cast<int>(torch::kBFloat16);
        QTest::newRow("fp32") << f << f << f;
        QTest::newRow("autocast: fp32 stream, bf16 branch") << f << b << f;
        QTest::newRow("compute copies: bf16") << b << b << b;
    }

    void fusedResidualNormMatchesReference() {
        QFETCH(int, xType);
        QFETCH(int, yType);
        QFETCH(int, wType);
        const auto xt = static_cast<torch::ScalarType>(xType),
                   yt = static_cast<torch::ScalarType>(yType),
                   wt = static_cast<torch::ScalarType>(wType);
        torch::manual_seed(17);
        const int64_t d = 96;
        model::RMSNorm ref(d, 1e-6);
        {
            torch::NoGradGuard g;
            ref->weight.uniform_(0.5, 1.5);
            ref->weight.set_data(ref->weight.to(wt));
        }
        auto w2 = ref->weight.detach().clone().requires_grad_(true);
        auto x0 = torch::randn({3, 7, d}).to(xt), y0 = (torch::randn({3, 7, d}) * 3).to(yt);
        auto x1 = x0.clone().requires_grad_(true), y1 = y0.clone().requires_grad_(true);
        auto x2 = x0.clone().requires_grad_(true), y2 = y0.clone().requires_grad_(true);
        auto out1 = x1 + ref(y1);
        auto out2 = model::kernels::fused_residual_norm(x2, y2, w2, 1e-6);
        QCOMPARE(out2.scalar_type(), out1.scalar_type());
        auto up = torch::randn(out1.sizes()).to(out1.scalar_type());
        (out1 * up).sum().backward();
        (out2 * up).sum().backward();
        QCOMPARE(y2.grad().scalar_type(), yt);
        QCOMPARE(w2.grad().scalar_type(), wt);
        QCOMPARE(x2.grad().scalar_type(), xt);
        const bool low = xt != torch::kFloat32 || yt != torch::kFloat32;
        QVERIFY_CLOSE("out", out2, out1, low ? 8e-3 : 1e-6);
        QVERIFY_CLOSE("dx", x2.grad(), x1.grad(), 0);
        QVERIFY_CLOSE("dy", y2.grad(), y1.grad(), low ? 1.6e-2 : 1e-6);
        QVERIFY_CLOSE("dweight", w2.grad(), ref->weight.grad(), low ? 8e-3 : 1e-6);
        // A mismatch is a clear error.
        QVERIFY_THROWS_EXCEPTION(
            lathe::Error, model::kernels::fused_residual_norm(x0, y0, w2.narrow(0, 0, 10), 1e-6));
    }

    // model.fused.qk_norm_rope: the CPU path of fused_qk_norm_rope (the CUDA kernel's reference:
    // the same row arithmetic and rope_math.h) against the reference ops, RMSNorm then
    // RotaryEmbedding::apply, forward and the gradients of the projection and the weight: OLMo2's
    // norm over all heads and Qwen3's per head, positions 0..T-1 and document positions, in the
    // dtypes a run mixes. fp32: 1e-6 relative; bf16: within a unit of the last place (the sums'
    // order differs from ATen's). Then the attention's fused_qkv against its qkv.
    void fusedQkNormRopeMatchesReference_data() {
        QTest::addColumn<int>("yType");
        QTest::addColumn<int>("wType");
        QTest::addColumn<bool>("perHead");
        QTest::addColumn<bool>("documents");
        const int f = static_cast<int>(torch::kFloat32), b = static_cast<int>(torch::kBFloat16);
        QTest::newRow("fp32, all heads") << f << f << false << false;
        QTest::newRow("fp32, per head") << f << f << true << false;
        QTest::newRow("fp32, all heads, document positions") << f << f << false << true;
        QTest::newRow("fp32, per head, document positions") << f << f << true << true;
        QTest::newRow("autocast: bf16 projection, fp32 weight") << b << f << false << false;
        QTest::newRow("compute copies: bf16, per head, documents") << b << b << true << true;
    }

    void fusedQkNormRopeMatchesReference() {
        QFETCH(int, yType);
        QFETCH(int, wType);
        QFETCH(bool, perHead);
        QFETCH(bool, documents);
        const auto yt = static_cast<torch::ScalarType>(yType),
                   wt = static_cast<torch::ScalarType>(wType);
        torch::manual_seed(19);
        const int64_t B = 2, T = 23, H = 3, D = 16;
        model::RMSNorm norm(perHead ? D : H * D, 1e-6);
        {
            torch::NoGradGuard g;
            norm->weight.uniform_(0.5, 1.5);
            norm->weight.set_data(norm->weight.to(wt));
        }
        model::RotaryEmbedding rope(D, 10000.0);
        auto [cos, sin] = rope.tables(T, torch::kCPU);
        torch::Tensor positions;
        if (documents) {  // three documents in row 0, one in row 1
            auto ids = torch::zeros({B, T}, torch::kInt64);
            ids[0].narrow(0, 5, 10).fill_(1);
            ids[0].narrow(0, 15, T - 15).fill_(2);
            positions = model::document_positions(ids);
            QCOMPARE(positions[0][5].item<int64_t>(), int64_t{0});
        }
        auto y0 = (torch::randn({B, T, H * D}) * 3).to(yt);
        if (perHead) y0 = y0.view({B, T, H, D});
        auto y1 = y0.clone().requires_grad_(true), y2 = y0.clone().requires_grad_(true);
        auto w2 = norm->weight.detach().clone().requires_grad_(true);
        auto normed = norm(y1).view({B, T, H, D});
        auto ref = rope.apply(normed, normed, positions).first;
        auto fused = model::kernels::fused_qk_norm_rope(y2, w2, 1e-6, cos, sin, positions, D);
        QCOMPARE(fused.sizes(), ref.sizes());
        QCOMPARE(fused.scalar_type(), yt);
        auto up = torch::randn(ref.sizes()).to(yt);
        (ref * up).sum().backward();
        (fused * up).sum().backward();
        QCOMPARE(y2.grad().scalar_type(), yt);
        QCOMPARE(w2.grad().scalar_type(), wt);
        const bool low = yt != torch::kFloat32;
        QVERIFY_CLOSE("out", fused, ref, low ? 8e-3 : 1e-6);
        QVERIFY_CLOSE("dy", y2.grad(), y1.grad(), low ? 1.6e-2 : 1e-6);
        QVERIFY_CLOSE("dweight", w2.grad(), norm->weight.grad(), low ? 8e-3 : 1e-6);
        QVERIFY(!torch::equal(fused.detach(), normed.detach()));  // it rotated
        // The attention's fused route: the same q, k and v as its reference route.
        config::ModelConfig c;
        c.d_model = 48;
        c.n_heads = H;
        c.n_kv_heads = 1;
        c.qk_norm = true;
        c.use_head_qk_norm = perHead;
        auto shared = std::make_shared<model::RotaryEmbedding>(D, 10000.0);
        model::Attention a(model::AttentionOptions::of(c, 0), shared);
        auto x = torch::randn({B, T, 48});
        torch::NoGradGuard no_grad;
        auto [q1, k1, v1] = a->qkv(x, [&](const torch::Tensor& q, const torch::Tensor& k) {
            return shared->apply(q, k, positions);
        });
        auto [q2, k2, v2] = a->fused_qkv(x, positions);
        QVERIFY_CLOSE("q", q2, q1, 1e-6);
        QVERIFY_CLOSE("k", k2, k1, 1e-6);
        QVERIFY(torch::equal(v2, v1));
        // The switch routes only CUDA tensors to the kernel; sizes that do not fit are errors.
        a->fused_qk_norm_rope = true;
        QVERIFY(!a->fuses_qk_norm_rope(x));
        QVERIFY_THROWS_EXCEPTION(lathe::Error, model::kernels::fused_qk_norm_rope(
                                                   y0, w2.narrow(0, 0, 8), 1e-6, cos, sin, {}, D));
        QVERIFY_THROWS_EXCEPTION(
            lathe::Error, model::kernels::fused_qk_norm_rope(y0, w2, 1e-6, cos.narrow(0, 0, 4),
                                                             sin.narrow(0, 0, 4), {}, D));
    }
};

QTEST_GUILESS_MAIN(TestKernels)
#include "test_kernels.moc"
