// Training runs of the real lathe-engine: golden losses, learning, durations, optimizers and
// schedules, bf16 autocast and compute copies, activation checkpointing, load key mapping.
#include "tests/engine/train/runs_fixture.h"

#include <QDirIterator>
#include <QThread>
#include <QtTest>

#include <sys/mount.h>
#include <cmath>
#include <csignal>

using namespace lathe::testing;

class TestTraining : public QObject, private RunsDir {
    Q_OBJECT
    int ac_runs_ = 0;

private Q_SLOTS:
    void goldenLosses() {
        auto r = run_engine(
            args("golden", {"trainer.max_duration=20steps", "trainer.metrics_collect_interval=1"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto l = losses(read_metrics(folder("golden") + "/metrics.jsonl"));
        QCOMPARE(l.size(), 20);
        if (qEnvironmentVariableIsSet("LATHE_BLESS")) {
            QJsonArray a;
            for (double v : l) a.append(v);
            QFile f(golden_path());
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QJsonDocument(QJsonObject{{"preset", "tiny"},
                                              {"overrides", QJsonArray::fromStringList(kFast)},
                                              {"first_20_losses", a}})
                        .toJson());
            QSKIP("golden losses re-blessed");
        }
        QFile f(golden_path());
        QVERIFY2(f.open(QIODevice::ReadOnly),
                 "missing tests/assets/losses/tiny.json (run with LATHE_BLESS=1)");
        auto golden =
            QJsonDocument::fromJson(f.readAll()).object().value("first_20_losses").toArray();
        QCOMPARE(golden.size(), 20);
        int i = 0;
        for (double v : l) {
            double g = golden[i++].toDouble();
            QVERIFY2(
                std::fabs(v - g) <= 1e-5 * std::fabs(g),
                qPrintable(
                    QString("step %1: loss %2, golden %3 (re-bless with LATHE_BLESS=1 if intended)")
                        .arg(i)
                        .arg(v, 0, 'g', 10)
                        .arg(g, 0, 'g', 10)));
        }
    }

    void tinyLearns() {
        auto r = run_engine(args("learn", {"trainer.max_duration=200steps",
                                           "trainer.callbacks.checkpointer.enabled=false"}),
                            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto l = losses(read_metrics(folder("learn") + "/metrics.jsonl"));
        QVERIFY(l.contains(1) && l.contains(200));
        // The byte unigram entropy of the built-in corpus is about 3 nats; the model must go far below.
        QVERIFY2(l[200] < 0.4 * l[1] && l[200] < 1.5,
                 qPrintable(QString("first %1, last %2").arg(l[1]).arg(l[200])));
        QVERIFY(r.output.contains("Finished 'learn' at step 200/200"));
    }

    void durations_data() {
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<int>("last_step");
        QTest::newRow("steps") << QStringList{"trainer.max_duration=7steps"} << 7;
        // 5000 tokens at 2048 per step: the first step whose cumulative tokens >= 5000 is step 3.
        QTest::newRow("tokens") << QStringList{"trainer.max_duration=5000tokens"} << 3;
        // 20480 tokens -> 320 instances, none held out -> 10 batches of 32 per epoch.
        QTest::newRow("epochs") << QStringList{"trainer.max_duration=2epochs",
                                               "dataset.builtin_tokens=20480"}
                                << 20;
        QTest::newRow("hard stop")
            << QStringList{"trainer.max_duration=50steps", "trainer.hard_stop=4steps"} << 4;
    }

    void durations() {
        QFETCH(QStringList, extra);
        QFETCH(int, last_step);
        static int n = 0;
        QString run = QString("dur%1").arg(n++);
        auto r = run_engine(
            args(run, extra + QStringList{"trainer.metrics_collect_interval=1",
                                          "trainer.callbacks.checkpointer.enabled=false"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto l = losses(read_metrics(folder(run) + "/metrics.jsonl"));
        QCOMPARE(l.lastKey(), qint64(last_step));
        QCOMPARE(l.size(), last_step);
    }

    // OLMo-core's group_overrides: the user's groups in order, then decay_embeddings=false's
    // implicit group, then the rest; each keeps its own peak LR through the schedule.
    void optimizerGroups() {
        auto r = run_engine(
            args("groups",
                 {"trainer.max_duration=6steps", "trainer.metrics_collect_interval=1",
                  "trainer.callbacks.checkpointer.enabled=false", "train_module.scheduler.warmup=2",
                  "train_module.optim.lr=0.001",
                  R"(train_module.optim.group_overrides=[{"params": ["*norm*"], "lr": 0.004}])",
                  "train_module.optim.decay_embeddings=false"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto m = read_metrics(folder("groups") + "/metrics.jsonl");
        QCOMPARE(m.size(), 6);
        for (int s = 1; s <= 6; ++s) {
            const double g0 = m[s].value("optim/LR (group 0)").toDouble(),
                         g1 = m[s].value("optim/LR (group 1)").toDouble(),
                         g2 = m[s].value("optim/LR (group 2)").toDouble();
            QVERIFY2(g2 > 0 && std::fabs(g0 - 4 * g2) < 1e-12 * g0 && g1 == g2,
                     qPrintable(QString("step %1: %2 %3 %4").arg(s).arg(g0).arg(g1).arg(g2)));
            QVERIFY(!m[s].contains("optim/LR (group 3)"));
        }

        // A glob that matches nothing, or a parameter two groups claim, stops before training.
        r = run_engine(
            args("nogroup", {"trainer.max_duration=2steps",
                             R"(train_module.optim.group_overrides=[{"params": ["nope.*"]}])"}),
            runs());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains("train_module.optim.group_overrides[0].params[0]: \"nope.*\" "
                                   "matches no parameter (names look like embeddings.weight"),
                 qPrintable(r.output));
        r = run_engine(
            args(
                "twogroups",
                {"trainer.max_duration=2steps",
                 R"(train_module.optim.group_overrides=[{"params": ["blocks.0.*"]}, {"params": ["*norm*"]}])"}),
            runs());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains("train_module.optim.group_overrides[1].params[0]: \"*norm*\" "
                                   "matches parameter blocks.0."),
                 qPrintable(r.output));
    }

    // Every optimizer and schedule trains tiny: the loss falls and no step is NaN.
    void optimizersAndSchedulesLearn_data() {
        QTest::addColumn<QStringList>("extra");
        QTest::newRow("lion") << QStringList{"train_module.optim.name=lion",
                                             "train_module.optim.lr=3e-4"};
        QTest::newRow("skip_step_adamw wsd")
            << QStringList{"train_module.optim.name=skip_step_adamw",
                           "train_module.scheduler.name=wsd", "train_module.scheduler.warmup=5"};
        QTest::newRow("skip_step_lion inv_sqrt") << QStringList{
            "train_module.optim.name=skip_step_lion", "train_module.optim.lr=3e-4",
            "train_module.scheduler.name=inv_sqrt_with_warmup", "train_module.scheduler.warmup=5"};
    }

    void optimizersAndSchedulesLearn() {
        QFETCH(QStringList, extra);
        const QString run = "learn-" + QString(QTest::currentDataTag()).replace(' ', '-');
        auto r = run_engine(args(run, QStringList{"trainer.max_duration=40steps",
                                                  "trainer.metrics_collect_interval=1",
                                                  "trainer.callbacks.checkpointer.enabled=false"} +
                                          extra),
                            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto l = losses(read_metrics(folder(run) + "/metrics.jsonl"));
        QCOMPARE(l.size(), 40);
        QVERIFY2(l[40] < 0.9 * l[1], qPrintable(QString("first %1, last %2").arg(l[1]).arg(l[40])));
    }

    void bf16Autocast() {
        auto r = run_engine(
            args("bf16", {"trainer.max_duration=30steps", "trainer.metrics_collect_interval=1",
                          "train_module.autocast_precision=bfloat16",
                          "trainer.callbacks.checkpointer.enabled=false"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto l = losses(read_metrics(folder("bf16") + "/metrics.jsonl"));
        QCOMPARE(l.size(), 30);
        auto fp32 = losses(read_metrics(folder("golden") + "/metrics.jsonl"));
        QVERIFY(fp32.contains(2));
        // bf16 matrix products change the numbers a little, and the model still learns.
        QVERIFY(l[2] != fp32[2]);
        QVERIFY(std::fabs(l[2] - fp32[2]) < 0.05 * fp32[2]);
        QVERIFY(l[30] < 0.6 * l[1]);
        // On a CPU without bf16 instructions bf16 products are far slower than fp32 ones: said
        // at start, with figures. (With AVX512-BF16 or AMX they need not be, and the engine
        // measures rather than guesses.)
        const QString cpu = read_text("/proc/cpuinfo");
        if (!cpu.contains("avx512_bf16") && !cpu.contains("amx_bf16"))
            QVERIFY2(r.output.contains("bf16 on this CPU: its matrix products run at"),
                     qPrintable(r.output));
    }

    // dp_config.param_dtype=bfloat16 on one rank: the model computes in bf16 copies of fp32
    // master weights. It learns like fp32, differently from autocast (every product, not only the
    // autocast list, runs in bf16); the checkpoint holds the masters in fp32; DDP refuses it.
    void bf16ComputeCopies() {
        auto r = run_engine(
            args("copies", {"trainer.max_duration=30steps", "trainer.metrics_collect_interval=1",
                            "train_module.dp_config.param_dtype=bfloat16",
                            "trainer.callbacks.checkpointer.save_interval=30"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("params in BFloat16 (fp32 master weights)"),
                 qPrintable(r.output));
        auto l = losses(read_metrics(folder("copies") + "/metrics.jsonl"));
        QCOMPARE(l.size(), 30);
        auto fp32 = losses(read_metrics(folder("golden") + "/metrics.jsonl"));
        auto autocast = losses(read_metrics(folder("bf16") + "/metrics.jsonl"));
        QVERIFY(fp32.contains(2) && autocast.contains(2));
        QVERIFY(l[2] != fp32[2] && l[2] != autocast[2]);
        QVERIFY2(std::fabs(l[2] - fp32[2]) < 0.05 * fp32[2],
                 qPrintable(QString("fp32 %1, copies %2").arg(fp32[2]).arg(l[2])));
        QVERIFY(l[30] < 0.6 * l[1]);
        // The checkpoint's model tensors are the fp32 masters.
        const auto dtypes = tensor_dtypes(folder("copies") + "/step30/model_and_optim/rank0.lathe");
        QVERIFY(dtypes.contains("model.embeddings.weight"));
        for (auto it = dtypes.begin(); it != dtypes.end(); ++it)
            if (it.key().startsWith("model.") || it.key().contains("exp_avg"))
                QVERIFY2(it.value() == "float32", qPrintable(it.key() + ": " + it.value()));
        // DDP reduces the model's own gradients: two ranks with compute copies are refused.
        auto ddp = run_engine(QStringList{"launch", "--nproc", "2"} +
                                  args("copiesddp", {"trainer.max_duration=2steps",
                                                     "train_module.dp_config.param_dtype=bfloat16"})
                                      .mid(1),
                              runs());
        QVERIFY(ddp.exit_code != 0);
        QVERIFY2(ddp.output.contains("train_module.dp_config.param_dtype: DDP over 2 ranks"),
                 qPrintable(ddp.output));
    }

    // train_module.cuda_graphs where there is no CUDA: said once, and the run is the eager one,
    // bitwise. (On a GPU tests/gpu/device_run.sh checks graphs against eager.)
    void cudaGraphsWithoutCuda() {
        auto r = run_engine(
            args("graphs", {"trainer.max_duration=20steps", "trainer.metrics_collect_interval=1",
                            "train_module.cuda_graphs=true"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("train_module.cuda_graphs: CUDA graphs need one rank on a CUDA "
                                   "device (this run: 1 rank(s) on cpu)"),
                 qPrintable(r.output));
        const auto l = losses(read_metrics(folder("graphs") + "/metrics.jsonl"));
        const auto eager = losses(read_metrics(folder("golden") + "/metrics.jsonl"));
        QCOMPARE(l.size(), 20);
        QCOMPARE(l, eager);
    }

    // train_module.ac_config: the same run with blocks or branches recomputed in backward has
    // bitwise the losses and final weights of the run without (fp32 on CPU; OLMo2 has no dropout
    // and the recomputation repeats the same operations), at 1 rank and under 2-rank DDP; under
    // bf16 autocast, losses within 1e-4. (Every mode's gradients, bitwise: test_model.)
    void activationCheckpointingIsExact_data() {
        QTest::addColumn<QString>("variant");  // "", "ddp" or "bf16"
        QTest::addColumn<QStringList>("ac");
        QTest::newRow("full") << "" << QStringList{"train_module.ac_config.mode=full"};
        QTest::newRow("block 1") << ""
                                 << QStringList{"train_module.ac_config.mode=selected_blocks",
                                                "train_module.ac_config.blocks=[1]"};
        QTest::newRow("feed-forwards")
            << ""
            << QStringList{"train_module.ac_config.mode=selected_modules",
                           "train_module.ac_config.modules=[\"blocks.*.feed_forward\"]"};
        QTest::newRow("full, bf16 autocast")
            << "bf16" << QStringList{"train_module.ac_config.mode=full"};
        QTest::newRow("full, 2 ranks ddp")
            << "ddp" << QStringList{"train_module.ac_config.mode=full"};
    }

    void activationCheckpointingIsExact() {
        QFETCH(QString, variant);
        QFETCH(QStringList, ac);
        auto cmd = [&](const QString& run, const QStringList& extra) {
            QStringList a = args(run, QStringList{"trainer.max_duration=6steps",
                                                  "trainer.metrics_collect_interval=1"} +
                                          extra);
            if (variant == "bf16") a << "train_module.autocast_precision=bfloat16";
            if (variant == "ddp") {
                a.removeFirst();
                a = QStringList{"launch", "--nproc", "2",
                                "train_module.dp_config.name=" + variant} +
                    a;
            }
            return a;
        };
        const QString base = "ac-none-" + (variant.isEmpty() ? QString("1") : variant);
        if (!QFileInfo::exists(folder(base) + "/step6/.metadata.json")) {
            const auto r = run_engine(cmd(base, {}), runs());
            QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        }
        const QString name = "ac-" + QString::number(ac_runs_++);
        const auto r = run_engine(cmd(name, ac), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const auto a = losses(read_metrics(folder(base) + "/metrics.jsonl"));
        QCOMPARE(a.size(), 6);
        const auto b = losses(read_metrics(folder(name) + "/metrics.jsonl"));
        if (variant == "bf16") {
            // bf16 autocast: gradients within a bf16 rounding step (test_model), so losses
            // within 1e-4 relative rather than bitwise.
            QCOMPARE(b.keys(), a.keys());
            for (auto it = a.begin(); it != a.end(); ++it)
                QVERIFY2(std::abs(b[it.key()] - it.value()) <= 1e-4 * std::abs(it.value()),
                         qPrintable(QString("step %1: %2 vs %3")
                                        .arg(it.key())
                                        .arg(b[it.key()])
                                        .arg(it.value())));
            return;
        }
        QCOMPARE(b, a);
        QCOMPARE(tensor_checksums(folder(name) + "/step6/model_and_optim/rank0.lathe"),
                 tensor_checksums(folder(base) + "/step6/model_and_optim/rank0.lathe"));
    }

    // train_module.load_key_mapping reads a parameter (and its optimizer state) under another
    // name: swapping two same-shaped parameters on load swaps them in the loaded model.
    void loadKeyMapping() {
        auto r = run_engine(args("km-src", {"trainer.max_duration=3steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const QString w1 = "blocks.0.feed_forward.w1.weight",
                      w3 = "blocks.0.feed_forward.w3.weight";
        r = run_engine(
            args("km-dst", {"trainer.max_duration=1steps", "train_module.optim.lr=1e-30",
                            "trainer.load_path=" + folder("km-src") + "/step3",
                            "trainer.load_trainer_state=false",
                            QString("train_module.load_key_mapping={\"%1\": \"%2\", \"%2\": "
                                    "\"%1\"}")
                                .arg(w1, w3)}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const auto src = tensor_checksums(folder("km-src") + "/step3/model_and_optim/rank0.lathe");
        // An LR of 1e-30 moves no fp32 weight: step 1 holds the weights as loaded.
        const auto dst = tensor_checksums(folder("km-dst") + "/step1/model_and_optim/rank0.lathe");
        QCOMPARE(dst.value("model." + w1), src.value("model." + w3));
        QCOMPARE(dst.value("model." + w3), src.value("model." + w1));
        QCOMPARE(dst.value("model.embeddings.weight"), src.value("model.embeddings.weight"));
        // A name the checkpoint does not have is named.
        r = run_engine(args("km-bad", {"trainer.load_path=" + folder("km-src") + "/step3",
                                       "train_module.load_key_mapping={\"" + w1 +
                                           "\": \"blocks.0.nothing.weight\"}"}),
                       runs());
        QVERIFY(r.exit_code != 0);
        QVERIFY2(r.output.contains("the checkpoint has no parameter 'blocks.0.nothing.weight'"),
                 qPrintable(r.output));
    }
};

QTEST_GUILESS_MAIN(TestTraining)
#include "test_training.moc"
