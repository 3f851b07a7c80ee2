// lathe-engine train, bench and inspect around a run: a failed start leaves the folder as it
// was (and removes a new one), the memory pre-flight, run notes, reserved cores, bench's figures, inspect.
#include "tests/engine/train/runs_fixture.h"

#include <QDirIterator>
#include <QThread>
#include <QtTest>

#include <sys/mount.h>
#include <cmath>
#include <csignal>

using namespace lathe::testing;

class TestRunCommands : public QObject, private RunsDir {
    Q_OBJECT
private Q_SLOTS:
    void failedStartLeavesTheRunFolderAsItWas() {
        // A run of 10 steps; then a start with a model its checkpoint cannot take fails while
        // loading. config.json and status.json stay as they were, so the run continues later.
        auto r = run_engine(args("unchanged", {"trainer.max_duration=10steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const QString config = folder("unchanged") + "/config.json",
                      status = folder("unchanged") + "/status.json";
        auto read = [](const QString& path) {
            QFile f(path);
            return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
        };
        const QByteArray config_before = read(config), status_before = read(status);
        QVERIFY(!config_before.isEmpty() && !status_before.isEmpty());
        r = run_engine({"train", config, "model.n_layers=3", "launch.num_threads=1"}, runs());
        QVERIFY2(r.exit_code != 0, qPrintable(r.output));
        QCOMPARE(read(config), config_before);
        QCOMPARE(read(status), status_before);
        QVERIFY(QFile::exists(folder("unchanged") + "/logs/rank0.log"));  // an existing run keeps
                                                                          // its folder
        r = run_engine({"train", config, "trainer.max_duration=20steps", "launch.num_threads=1"},
                       runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint"));
        QVERIFY(QFile::exists(folder("unchanged") + "/step20/.metadata.json"));
    }

    // A model that cannot fit: refused before anything is allocated, with both figures and the
    // fields to change, exit code 2 (a raw allocator error with 25 frames before).
    void modelTooBigForMemory() {
        auto r = run_engine(args("huge", {"model.d_model=1048576", "trainer.max_duration=1steps"}),
                            runs());
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.output.contains("the model does not fit") && r.output.contains("TiB") &&
                     r.output.contains("is free") && r.output.contains("model.d_model"),
                 qPrintable(r.output));
        QVERIFY2(!r.output.contains("alloc"), qPrintable(r.output));
        // The refused run's folder was new: it is gone, logs and all (issue 45 item 4), so no
        // empty run is listed and the name stays free.
        QVERIFY2(!QFileInfo::exists(folder("huge")), qPrintable(folder("huge")));
        // validate passes it (the config is well formed) and says what it will need.
        auto v = run_engine({"validate", "tiny", "model.d_model=1048576"}, runs());
        QCOMPARE(v.exit_code, 0);
        QVERIFY2(v.output.contains("memory: at least") && v.output.contains("TiB per rank"),
                 qPrintable(v.output));
        // The same model fits when it is small: the estimate is logged, and is exact in its count.
        r = run_engine(args("small", {"trainer.max_duration=1steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("memory: at least"), qPrintable(r.output));
        // A small model whose micro-batch's activations cannot fit (issue 34 item 12): refused
        // with the expected peak and the remedies; --force goes past the check (here to the
        // dataset, which has no batch that large).
        const QStringList huge = {"trainer.max_duration=1steps",
                                  "train_module.rank_microbatch_size=17179869184",
                                  "data_loader.global_batch_size=17179869184"};
        r = run_engine(args("activations", huge), runs());
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.output.contains("expected peak") && r.output.contains("activations") &&
                     r.output.contains("1. train_module.ac_config.mode=full"),
                 qPrintable(r.output));
        r = run_engine(args("activations", huge) << "--force", runs());
        QVERIFY2(r.output.contains("--force: starting although"), qPrintable(r.output));
        QVERIFY2(r.output.contains("fewer than one global batch"), qPrintable(r.output));
    }

    // `lathe-engine notes` sets a run's tags and notes; `runs` lists them (the GUI writes the
    // same notes.json).
    void notesOnRuns() {
        auto r = run_engine(args("noted", {"trainer.max_duration=1steps"}), runs());
        QCOMPARE(r.exit_code, 0);
        r = run_engine({"notes", folder("noted"), "--tags", "baseline, lr sweep", "--notes", "ok"},
                       runs());
        QVERIFY2(r.exit_code == 0 && r.output.contains("\"tags\":[\"baseline\",\"lr sweep\"]"),
                 qPrintable(r.output));
        r = run_engine({"runs", runs(), "--json"}, runs());
        QVERIFY2(r.output.contains("\"notes\":\"ok\""), qPrintable(r.output));
        r = run_engine({"runs", runs()}, runs());
        QVERIFY2(r.output.contains("[baseline, lr sweep]"), qPrintable(r.output));
        r = run_engine({"notes", folder("noted"), "--tags", "a\tb"}, runs());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains("control character"), qPrintable(r.output));
        r = run_engine({"notes", runs() + "/nothing"}, runs());
        QVERIFY2(r.exit_code == 1 && r.output.contains("not a run folder"), qPrintable(r.output));
    }

    // Threads per rank: the cores, less LATHE_RESERVE_CORES, over the local ranks; a bad value is named.
    void reservedCores() {
        const int cores = QThread::idealThreadCount();
        QStringList a = {"train", "tiny", "run_name=threads", "trainer.max_duration=1steps",
                         "trainer.callbacks.checkpointer.enabled=false"};
        auto r = run_engine(a, runs(), {{"LATHE_RESERVE_CORES", "1"}});
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(
            r.output.contains(QString("%1 CPU thread(s) per rank").arg(std::max(1, cores - 1))),
            qPrintable(r.output));
        auto all =
            run_engine(a, runs(), {{"LATHE_RESERVE_CORES", "1000"}});  // at least one thread stays
        QVERIFY2(all.output.contains("1 CPU thread(s) per rank"), qPrintable(all.output));
        auto bad = run_engine(a, runs(), {{"LATHE_RESERVE_CORES", "one"}});
        QVERIFY(bad.exit_code != 0);
        QVERIFY2(bad.output.contains("LATHE_RESERVE_CORES='one' is not an integer"),
                 qPrintable(bad.output));
        auto fixed = run_engine(a + QStringList{"launch.num_threads=2"}, runs(),
                                {{"LATHE_RESERVE_CORES", "1"}});
        QVERIFY2(fixed.output.contains("2 CPU thread(s) per rank"), qPrintable(fixed.output));
    }

    // bench --profile: where the timed steps' time went, by kind, from Kineto's events.
    void benchProfile() {
        auto r = run_engine(
            {"bench", "tiny", "--steps", "2", "--warmup", "1", "--profile", "launch.num_threads=1"},
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const auto prof = bench_result(r.output).value("profile").toObject();
        QCOMPARE(prof.value("time").toString(), QString("CPU operators' self time"));
        QVERIFY(prof.value("ms_per_step").toDouble() > 0);
        const auto kinds = prof.value("kinds").toObject();
        QCOMPARE(kinds.size(), 6);
        double shares = 0;
        for (const auto& k : kinds) shares += k.toObject().value("share").toDouble();
        QVERIFY(std::abs(shares - 1.0) < 1e-9);
        // A transformer's step multiplies matrices and runs attention.
        QVERIFY(kinds.value("GEMM").toObject().value("share").toDouble() > 0.01);
        QVERIFY(kinds.value("attention").toObject().value("ms_per_step").toDouble() > 0);
        // Without --profile, no profile.
        auto plain = run_engine(
            {"bench", "tiny", "--steps", "1", "--warmup", "1", "launch.num_threads=1"}, runs());
        QVERIFY2(plain.exit_code == 0, qPrintable(plain.output));
        QVERIFY(!bench_result(plain.output).contains("profile"));
    }

    void bench() {
        auto r = run_engine({"bench", "tiny", "--steps", "3", "--warmup", "1", "--callbacks",
                             "launch.num_threads=1", "trainer.metrics_collect_interval=1",
                             "trainer.callbacks.console_logger.enabled=false"},
                            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto o = bench_result(r.output);
        QCOMPARE(o.value("steps").toInt(), 3);
        QCOMPARE(o.value("world_size").toInt(), 1);
        QCOMPARE(o.value("threads").toInt(), 1);
        QVERIFY(o.value("tokens_per_s").toDouble() > 0);
        QVERIFY(o.value("mfu").toDouble() > 0 && o.value("mfu").toDouble() < 2);
        // Every step (warm-up included) went to the metric files, and what that cost was measured.
        auto files = o.value("metric_files").toObject();
        QCOMPARE(files.value("records").toInt(), 4);
        QVERIFY(files.value("cpu_ms_per_step").toDouble() > 0);
        QVERIFY(files.value("cpu_share").toDouble() > 0 && files.value("cpu_share").toDouble() < 1);

        auto c = run_engine({"bench", "tiny", "--steps", "4", "--warmup", "1", "--checkpoint-every",
                             "2", "launch.num_threads=1"},
                            runs());
        QVERIFY2(c.exit_code == 0, qPrintable(c.output));
        auto co = bench_result(c.output);
        QCOMPARE(co.value("checkpoints").toInt(), 2);
        QCOMPARE(co.value("checkpoint_mode").toString(), QString("async"));
        QVERIFY(co.value("checkpoint_blocking_s").toDouble() > 0);
        QVERIFY(!co.contains("metric_files"));  // no callbacks, no metric files
        QCOMPARE(co.value("dtype").toString(), QString("float32"));

        // MFU is measured against the peak of the dtype the products run in: autocast's.
        auto b = run_engine({"bench", "tiny", "--steps", "2", "--warmup", "1",
                             "launch.num_threads=1", "train_module.autocast_precision=bfloat16"},
                            runs());
        QVERIFY2(b.exit_code == 0, qPrintable(b.output));
        QCOMPARE(bench_result(b.output).value("dtype").toString(), QString("bfloat16"));
        // It names no run folder, since it writes none (issue 34: "in /nonexistent-bench").
        QVERIFY2(!b.output.contains("nonexistent") && b.output.contains("no run folder"),
                 qPrintable(b.output));

        // --memory: each rank's peak RSS, with the layout it was measured under.
        auto m = run_engine({"bench", "tiny", "--steps", "2", "--warmup", "1", "--memory",
                             "launch.num_threads=1", "train_module.ac_config.mode=full"},
                            runs());
        QVERIFY2(m.exit_code == 0, qPrintable(m.output));
        const auto mem = bench_result(m.output).value("memory").toObject();
        QCOMPARE(mem.value("ac_mode").toString(), QString("full"));
        QCOMPARE(mem.value("dp").toString(), QString("none"));
        QCOMPARE(mem.value("ranks").toArray().size(), 1);
        const double rss =
            mem.value("ranks").toArray()[0].toObject().value("peak_rss_gib").toDouble();
        QVERIFY2(rss > 0.05 && rss < 64, qPrintable(QString::number(rss)));
    }

    void inspect() {
        auto r = run_engine(args("insp", {"trainer.max_duration=5steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto i = run_engine({"inspect", folder("insp") + "/step5"}, runs());
        QCOMPARE(i.exit_code, 0);
        auto o = QJsonDocument::fromJson(i.output.toUtf8()).object();
        QCOMPARE(o.value("global_step").toInt(), 5);
        QCOMPARE(o.value("complete").toBool(), true);
        QCOMPARE(o.value("world_size").toInt(), 1);
        QVERIFY(o.value("total_bytes").toInteger() > 100000);
        QVERIFY(o.value("config").toObject().value("model").toString().contains("64d x 2 layers"));
    }
};

QTEST_GUILESS_MAIN(TestRunCommands)
#include "test_run_commands.moc"
