// ComputeCopies (dp_config.param_dtype without FSDP): bf16 copies that keep the parameters'
// identity, fp32 masters, gradients accumulated over micro-batches in fp32, copies refreshed from
// the masters.
#include "engine/train/compute_copies.h"

#include <QtTest>

using lathe::train::ComputeCopies;

class TestComputeCopies : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    void copiesMastersAndAccumulation() {
        torch::manual_seed(1);
        torch::nn::Linear lin(torch::nn::LinearOptions(16, 8).bias(true));
        const auto w0 = lin->weight.detach().clone(), b0 = lin->bias.detach().clone();
        std::vector<std::pair<std::string, torch::Tensor>> named;
        for (auto& p : lin->named_parameters()) named.emplace_back(p.key(), p.value());
        ComputeCopies copies(named, torch::kBFloat16);

        // The module computes in bf16 with the same parameter objects; masters are exact fp32.
        QCOMPARE(lin->weight.scalar_type(), torch::kBFloat16);
        QVERIFY(lin->weight.requires_grad());
        QCOMPARE(lin->named_parameters()["weight"].scalar_type(), torch::kBFloat16);
        QCOMPARE(copies.masters().size(), std::size_t{2});
        QCOMPARE(QString::fromStdString(copies.masters()[0].first), QString("weight"));
        const auto& mw = copies.masters()[0].second;
        QCOMPARE(mw.scalar_type(), torch::kFloat32);
        QVERIFY(torch::equal(mw, w0));
        QVERIFY(torch::equal(copies.masters()[1].second, b0));
        QVERIFY(torch::equal(lin->weight.detach(), w0.to(torch::kBFloat16)));

        // Two micro-batches: the masters' gradient is the fp32 sum of the bf16 gradients, and the
        // copies hold none after each.
        auto x1 = torch::randn({4, 16}).to(torch::kBFloat16);
        auto x2 = torch::randn({4, 16}).to(torch::kBFloat16);
        lin(x1).to(torch::kFloat32).pow(2).sum().backward();
        const auto g1 = lin->weight.grad().clone();
        QCOMPARE(g1.scalar_type(), torch::kBFloat16);
        copies.accumulate_grads();
        QVERIFY(!lin->weight.grad().defined());
        QVERIFY(torch::equal(mw.grad(), g1.to(torch::kFloat32)));
        lin(x2).to(torch::kFloat32).pow(2).sum().backward();
        const auto g2 = lin->weight.grad().clone();
        copies.accumulate_grads();
        QVERIFY(torch::equal(mw.grad(), g1.to(torch::kFloat32) + g2.to(torch::kFloat32)));
        // In fp32, not bf16: the sum rounded to bf16 loses what the masters keep.
        QVERIFY(!torch::equal(mw.grad(), (g1 + g2).to(torch::kFloat32)));

        // An update to the masters reaches the copies on refresh, rounded to bf16.
        {
            torch::NoGradGuard no_grad;
            copies.masters()[0].second.add_(mw.grad(), -1e-3);
        }
        QVERIFY(torch::equal(lin->weight.detach(), w0.to(torch::kBFloat16)));
        copies.refresh();
        QVERIFY(torch::equal(lin->weight.detach(), mw.to(torch::kBFloat16)));
        QVERIFY(!torch::equal(lin->weight.detach(), w0.to(torch::kBFloat16)));
        QCOMPARE(copies.master_tensors().size(), std::size_t{2});
        QVERIFY(copies.master_tensors()[0].is_same(mw));
    }
};

QTEST_GUILESS_MAIN(TestComputeCopies)
#include "test_compute_copies.moc"
