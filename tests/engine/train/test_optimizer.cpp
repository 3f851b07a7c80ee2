// The optimizers and schedulers of engine/train in-process: optim.fused's AdamW step against the
// reference step, the learning rates a CUDA graph's replay reads, and every scheduler's values.
#include "engine/config/config.h"
#include "engine/config/io.h"
#include "engine/train/optimizer.h"
#include "engine/train/scheduler.h"
#include "engine/util/error.h"

#include <QtTest>

#include <cmath>
#include <limits>

using namespace lathe;

class TestOptimizer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    // optim.fused's step (ATen's _fused_adamw_, run here by its CPU kernel) against the reference
    // AdamW, five steps with weight decay and bias correction, to 1e-6.
    void fusedAdamwMatchesReference() {
        torch::manual_seed(3);
        config::OptimConfig oc;
        oc.name = config::OptimizerName::adamw;
        oc.fused = false;
        train::ParamGroup g;
        g.lr = 1e-2;
        g.beta1 = 0.85;
        g.beta2 = 0.99;
        g.eps = 1e-7;
        g.weight_decay = 0.1;
        auto a = torch::randn({7, 9}), b = torch::randn({13});
        g.params = {a.clone(), b.clone()};
        train::Optimizer reference(oc, {g});
        std::vector<torch::Tensor> params = {a.clone(), b.clone()};
        std::vector<torch::Tensor> avgs, avg_sqs, steps;
        for (const auto& p : params) {
            avgs.push_back(torch::zeros_like(p));
            avg_sqs.push_back(torch::zeros_like(p));
            steps.push_back(torch::zeros({}, torch::kFloat32));
        }
        for (int step = 0; step < 5; ++step) {
            std::vector<torch::Tensor> grads;
            for (std::size_t i = 0; i < params.size(); ++i) {
                auto grad = torch::randn_like(params[i]);
                reference.groups()[0].params[i].mutable_grad() = grad.clone();
                grads.push_back(grad);
            }
            reference.step();
            train::fused_adamw_step(params, grads, avgs, avg_sqs, steps, g);
        }
        for (std::size_t i = 0; i < params.size(); ++i) {
            const auto& r = reference.groups()[0].params[i];
            QVERIFY(!torch::equal(r, i == 0 ? a : b));  // it moved
            QVERIFY2(torch::allclose(params[i], r, 1e-6, 1e-7),
                     qPrintable(QString::number((params[i] - r).abs().max().item<double>())));
            QVERIFY(torch::allclose(avg_sqs[i], reference.state(r).at("exp_avg_sq"), 1e-6, 1e-9));
        }
        QCOMPARE(steps[0].item<double>(), 5.0);
    }

    // Held learning rates (what a CUDA graph of the optimizer step replays): the fused step reads
    // each group's rate from its staged tensor, the same update as from ParamGroup::lr, and a rate
    // set but not staged is not used: step() itself never writes the tensor it reads. Rates that
    // fp32 holds exactly, so that both paths are bitwise equal.
    void heldLearningRatesAreStaged() {
        torch::manual_seed(5);
        config::OptimConfig oc;
        oc.name = config::OptimizerName::adamw;
        oc.fused = true;
        train::ParamGroup g;
        g.weight_decay = 0.1;
        auto a = torch::randn({5, 6});
        g.params = {a.clone()};
        train::Optimizer plain(oc, {g});
        g.params = {a.clone()};
        train::Optimizer held(oc, {g});
        held.hold_learning_rates(true);
        const auto go = torch::zeros({1});  // found_inf: the fused kernel on the CPU, no skip
        const std::vector<double> rates = {1.0 / 64, 1.0 / 128, 3.0 / 256, 1.0 / 512};
        for (std::size_t step = 0; step < rates.size(); ++step) {
            auto grad = torch::randn_like(a);
            plain.groups()[0].params[0].mutable_grad() = grad.clone();
            held.groups()[0].params[0].mutable_grad() = grad.clone();
            // The last step sets a rate on the held optimizer without staging it: the staged one
            // (the step before's) is what it must use.
            const double staged = step + 1 < rates.size() ? rates[step] : rates[step - 1];
            plain.groups()[0].lr = staged;
            held.groups()[0].lr = rates[step];
            if (step + 1 < rates.size()) held.stage_learning_rates();
            plain.step(go);
            held.step(go);
            QVERIFY2(torch::equal(held.groups()[0].params[0], plain.groups()[0].params[0]),
                     qPrintable(QString("step %1").arg(step)));
        }
        QVERIFY(!torch::equal(plain.groups()[0].params[0], a));
    }

    void schedulers() {
        config::SchedulerConfig s;
        s.warmup = 10;
        s.alpha_f = 0.1;
        QCOMPARE(train::scheduler_lr(s, 1.0, 1, 100), 0.1);
        QCOMPARE(train::scheduler_lr(s, 1.0, 10, 100), 1.0);
        QVERIFY(std::fabs(train::scheduler_lr(s, 1.0, 55, 100) - (0.1 + 0.9 * 0.5)) <
                1e-12);  // half-way
        QCOMPARE(train::scheduler_lr(s, 1.0, 100, 100), 0.1);
        QCOMPARE(train::scheduler_lr(s, 1.0, 150, 100), 0.1);
        s.name = config::SchedulerName::linear_with_warmup;
        QVERIFY(std::fabs(train::scheduler_lr(s, 1.0, 55, 100) - 0.55) < 1e-12);
        s.name = config::SchedulerName::constant;
        QCOMPARE(train::scheduler_lr(s, 2.0, 3, 100), 2.0);
        s.name = config::SchedulerName::constant_with_warmup;
        QCOMPARE(train::scheduler_lr(s, 2.0, 5, 100), 1.0);

        auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-12; };
        config::SchedulerConfig w;  // warmup-stable-decay: the last 20% decays linearly to 0
        w.name = config::SchedulerName::wsd;
        w.warmup = 10;
        w.decay_fraction = 0.2;
        QVERIFY(near(train::scheduler_lr(w, 1.0, 5, 100), 0.5));
        QVERIFY(near(train::scheduler_lr(w, 1.0, 50, 100), 1.0));
        QVERIFY(near(train::scheduler_lr(w, 1.0, 90, 100), 0.5));
        QVERIFY(near(train::scheduler_lr(w, 1.0, 100, 100), 0.0));
        w.warmup.reset();
        w.warmup_fraction = 0.25;  // 25 steps of 100
        QVERIFY(near(train::scheduler_lr(w, 1.0, 5, 100), 0.2));

        config::SchedulerConfig q;  // inverse square root after the warmup
        q.name = config::SchedulerName::inv_sqrt_with_warmup;
        q.warmup = 25;
        q.alpha_f = 0.0;
        QVERIFY(near(train::scheduler_lr(q, 1.0, 100, 1000), 0.5));

        config::SchedulerConfig e;  // exponential growth from lr_min to the peak
        e.name = config::SchedulerName::exponential;
        e.lr_min = 1e-4;
        QVERIFY(std::fabs(train::scheduler_lr(e, 1.0, 50, 100) - 1e-2) < 1e-15);

        config::SchedulerConfig c;  // composable: linear up over 10, cosine down over 10, then 0
        c.name = config::SchedulerName::composable;
        config::ScheduleStage up, down;
        up.duration = down.duration = 10;
        up.start_lr = 0.0;
        up.end_lr_fraction = 1.0;
        down.shape = config::ScheduleShape::cosine;
        down.end_lr = 0.0;
        c.stages = {up, down};
        QVERIFY(near(train::scheduler_lr(c, 1.0, 5, 100), 0.5));
        QVERIFY(near(train::scheduler_lr(c, 1.0, 15, 100), 0.5));
        QVERIFY(near(train::scheduler_lr(c, 1.0, 30, 100), 0.0));

        config::SchedulerConfig seq;  // constant with warmup for 50, then linear to 0
        seq.name = config::SchedulerName::sequential;
        config::ScheduleParams first, second;
        first.name = config::SchedulerName::constant_with_warmup;
        first.warmup = 10;
        second.name = config::SchedulerName::linear_with_warmup;
        second.warmup = 0;
        second.alpha_f = 0.0;
        seq.schedulers = {first, second};
        seq.schedulers_max = {50};
        QVERIFY(near(train::scheduler_lr(seq, 1.0, 5, 150), 0.5));
        QVERIFY(near(train::scheduler_lr(seq, 1.0, 50, 150), 1.0));
        QVERIFY(near(train::scheduler_lr(seq, 1.0, 100, 150), 0.5));
        QVERIFY(config::check_consistency(config::ExperimentConfig{}).empty());
    }
};

QTEST_GUILESS_MAIN(TestOptimizer)
#include "test_optimizer.moc"
