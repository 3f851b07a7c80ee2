// The built-in callbacks in real training runs: metric files, stability monitor, MFU, profiler,
// console progress, sampler.
#include "tests/engine/train/runs_fixture.h"

#include <QDirIterator>
#include <QThread>
#include <QtTest>

#include <sys/mount.h>
#include <cmath>
#include <csignal>

using namespace lathe::testing;

class TestCallbacks : public QObject, private RunsDir {
    Q_OBJECT
private Q_SLOTS:
    void metricsFileHasEveryStepOnce() {
        auto r = run_engine(
            args("metrics", {"trainer.max_duration=50steps", "trainer.metrics_collect_interval=7",
                             "trainer.callbacks.checkpointer.save_interval=10"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        bool dup = false;
        auto m = read_metrics(folder("metrics") + "/metrics.jsonl", &dup);
        QVERIFY(!dup);
        for (int s = 1; s <= 50; ++s) {
            QVERIFY2(m.contains(s), qPrintable(QString("step %1 missing").arg(s)));
            for (const char* name : {"train/CE loss", "optim/total grad norm", "optim/LR (group 0)",
                                     "throughput/total tokens", "memory/RSS (GiB)"}) {
                QVERIFY2(m[s].contains(name),
                         qPrintable(QString("step %1 lacks %2").arg(s).arg(name)));
            }
        }
        QVERIFY(m[20].contains("checkpoint/save_duration_s"));
        QVERIFY(m[30].contains("throughput/device/TPS"));
        QVERIFY(QFile::exists(folder("metrics") + "/metrics.csv"));
        QDir d(folder("metrics"));
        QCOMPARE(d.entryList({"events.out.tfevents.*"}).size(), 1);
        // status.json: the final state, and what the runs panel shows.
        QFile sf(folder("metrics") + "/status.json");
        QVERIFY(sf.open(QIODevice::ReadOnly));
        auto st = QJsonDocument::fromJson(sf.readAll()).object();
        QCOMPARE(st.value("state").toString(), QString("finished"));
        QCOMPARE(st.value("step").toInt(), 50);
        QCOMPARE(st.value("model").toString(), QString("64d x 2 layers, vocab 256"));
        QCOMPARE(st.value("world_size").toInt(), 1);
        QVERIFY(std::isfinite(st.value("last_loss").toDouble()) &&
                st.value("last_loss").toDouble() > 0);
    }

    // metrics.jsonl on a full disk (a 16 KiB tmpfs behind a symlink; checkpoints elsewhere): the
    // run stops with an error and exit code 1 instead of training on with its curves lost, says
    // so in status.json and once in the log, and a resume after space is freed cuts the partial
    // last line off and continues exactly as a run that never failed.
    void diskFullWhileWritingMetrics() {
        const QString mnt = runs() + "/tiny-disk";
        QDir().mkpath(mnt);
        if (::mount("tmpfs", mnt.toUtf8().constData(), "tmpfs", 0, "size=16k") != 0)
            QSKIP("cannot mount a tmpfs here (needs root)");
        const QStringList settings = {"trainer.max_duration=40steps",
                                      "trainer.metrics_collect_interval=1",
                                      "trainer.callbacks.checkpointer.save_interval=5",
                                      "trainer.callbacks.checkpointer.save_async=false"};
        QDir().mkpath(folder("diskfull"));
        QVERIFY(QFile::link(mnt + "/metrics.jsonl", folder("diskfull") + "/metrics.jsonl"));
        auto r = run_engine(args("diskfull", settings), runs());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains("metrics.jsonl: No space left on device"), qPrintable(r.output));
        QVERIFY2(r.output.count("No space left on device") <= 4, qPrintable(r.output));
        const QJsonObject status = read_json(folder("diskfull") + "/status.json");
        QCOMPARE(status.value("state").toString(), QString("failed"));
        QVERIFY2(status.value("reason").toString().contains("No space left on device"),
                 qPrintable(status.value("reason").toString()));
        const qint64 stoppedAt = status.value("step").toInteger();
        QVERIFY2(stoppedAt > 5 && stoppedAt < 40, qPrintable(QString::number(stoppedAt)));
        QVERIFY(!read_text(mnt + "/metrics.jsonl").endsWith('\n'));  // cut mid-record

        // Space freed: the file comes back to the run folder, the run resumes.
        const QByteArray partial = read_text(mnt + "/metrics.jsonl").toUtf8();
        QVERIFY(QFile::remove(folder("diskfull") + "/metrics.jsonl"));
        ::umount(mnt.toUtf8().constData());
        QVERIFY(write_text(folder("diskfull") + "/metrics.jsonl", partial));
        r = run_engine(args("diskfull", settings), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint"));
        const QString text = read_text(folder("diskfull") + "/metrics.jsonl");
        for (const auto& line : text.split('\n', Qt::SkipEmptyParts))
            QVERIFY2(!QJsonDocument::fromJson(line.toUtf8()).isNull(), qPrintable(line));
        bool duplicate = false;  // steps after the checkpoint were trained again
        const auto resumed =
            losses(read_metrics(folder("diskfull") + "/metrics.jsonl", &duplicate));
        auto ref = run_engine(args("diskfull-ref", settings), runs());
        QVERIFY2(ref.exit_code == 0, qPrintable(ref.output));
        const auto straight = losses(read_metrics(folder("diskfull-ref") + "/metrics.jsonl"));
        QCOMPARE(resumed.size(), 40);
        QCOMPARE(resumed, straight);
    }

    // non_finite_grads, on the host-synced step and on the sync-free one (fused AdamW deciding
    // on the device, as on CUDA; LATHE_SYNC_FREE_STEP=1 takes it on the CPU): the same step is
    // skipped, the same losses follow, and stop names the step whose norm was non-finite.
    void stabilityMonitor_data() {
        QTest::addColumn<QString>("action");
        QTest::addColumn<int>("exit_code");
        QTest::addColumn<bool>("syncFree");
        QTest::newRow("skip") << "skip" << 0 << false;
        QTest::newRow("stop") << "stop" << 1 << false;
        QTest::newRow("skip, sync-free") << "skip" << 0 << true;
        QTest::newRow("stop, sync-free") << "stop" << 1 << true;
    }

    void stabilityMonitor() {
        QFETCH(QString, action);
        QFETCH(int, exit_code);
        QFETCH(bool, syncFree);
        QString run = "nan-" + action + (syncFree ? "-sync-free" : "");
        QMap<QString, QString> env{{"LATHE_INJECT_NAN_STEP", "5"}};
        if (syncFree) env.insert("LATHE_SYNC_FREE_STEP", "1");
        auto r = run_engine(
            args(run, {"trainer.max_duration=10steps", "trainer.metrics_collect_interval=1",
                       "trainer.callbacks.stability_monitor.non_finite_grads=" + action}),
            runs(), env);
        QCOMPARE(r.exit_code, exit_code);
        QVERIFY2(r.output.contains("non-finite gradient norm (nan) at step 5"),
                 qPrintable(r.output));
        auto m = read_metrics(folder(run) + "/metrics.jsonl");
        if (action == "skip") {
            QCOMPARE(m[5].value("optim/step skipped").toDouble(), 1.0);
            if (syncFree)  // recorded every step, from the device
                QCOMPARE(m[4].value("optim/step skipped").toDouble(), 0.0);
            else
                QVERIFY(!m[4].contains("optim/step skipped"));
            QVERIFY(std::isfinite(m[10].value("train/CE loss").toDouble()));
        }
        if (!syncFree) return;
        // The host-synced run of the same action is the reference: skipping on the device skips
        // the same update (fused AdamW's kernel against the reference update: 1e-5).
        const auto ref = losses(read_metrics(folder("nan-" + action) + "/metrics.jsonl"));
        const auto got = losses(m);
        QVERIFY(!ref.isEmpty());
        if (action == "stop") {
            // The host learns of step 5's norm at step 6, and stops there.
            QCOMPARE(got.lastKey(), ref.lastKey() + 1);
            QVERIFY2(r.output.contains("training failed at step 6"), qPrintable(r.output));
        } else {
            QCOMPARE(got.keys(), ref.keys());
        }
        for (auto it = ref.begin(); it != ref.end(); ++it)
            QVERIFY2(std::fabs(got[it.key()] - it.value()) <= 1e-5 * std::fabs(it.value()),
                     qPrintable(QString("step %1: %2 vs %3")
                                    .arg(it.key())
                                    .arg(got[it.key()], 0, 'g', 10)
                                    .arg(it.value(), 0, 'g', 10)));
    }

    // A non-finite train/CE loss stops the run with an error naming the step (the gradients are
    // finite here, so it is the loss check, not the stability monitor, that stops it).
    void nonFiniteLossStops() {
        auto r = run_engine(
            args("nanloss", {"trainer.max_duration=10steps", "trainer.metrics_collect_interval=1"}),
            runs(), {{"LATHE_INJECT_NAN_LOSS", "5"}});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains("non-finite loss (nan) at step 5"), qPrintable(r.output));
        QFile sf(folder("nanloss") + "/status.json");
        QVERIFY(sf.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(sf.readAll()).object().value("state").toString(),
                 QString("failed"));
        auto m = read_metrics(folder("nanloss") + "/metrics.jsonl");
        QVERIFY(m.contains(4) && std::isfinite(m[4].value("train/CE loss").toDouble()));
        QVERIFY(!m.contains(5) || !m[5].contains("train/CE loss"));  // never logged
    }

    // MFU is in percent (OLMo-core's unit), and a peak below what the run achieves is raised so
    // that MFU never reads above 100%.
    void mfuInPercent() {
        auto r = run_engine(
            args("mfu", {"trainer.max_duration=6steps", "trainer.metrics_collect_interval=1",
                         "trainer.callbacks.checkpointer.enabled=false"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto m = read_metrics(folder("mfu") + "/metrics.jsonl");
        for (int s = 2; s <= 6; ++s) {
            const double mfu = m[s].value("throughput/device/MFU").toDouble();
            const double flops = m[s].value("throughput/device/flopsPS").toDouble();
            QVERIFY(flops > 0);
            QVERIFY2(std::fabs(mfu - 100 * flops / 1e11) <= 1e-9 * mfu,
                     qPrintable(QString("step %1: MFU %2, flopsPS %3").arg(s).arg(mfu).arg(flops)));
        }
        r = run_engine(
            args("mfu-low", {"trainer.max_duration=6steps", "trainer.metrics_collect_interval=1",
                             "trainer.callbacks.checkpointer.enabled=false",
                             "trainer.callbacks.speed_monitor.device_peak_flops=1e6"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("using the achieved figure as the peak"), qPrintable(r.output));
        m = read_metrics(folder("mfu-low") + "/metrics.jsonl");
        for (int s = 2; s <= 6; ++s) {
            for (const char* k : {"throughput/device/MFU", "throughput/device/MFU (actual avg)"}) {
                const double mfu = m[s].value(k).toDouble();
                QVERIFY2(mfu > 0 && mfu <= 100.0 + 1e-9,
                         qPrintable(QString("step %1: %2 = %3").arg(s).arg(k).arg(mfu)));
            }
        }
    }

    void profilerWritesAChromeTrace() {
        auto r = run_engine(
            args("prof",
                 {"trainer.max_duration=8steps", "trainer.callbacks.profiler.enabled=true",
                  "trainer.callbacks.profiler.wait=1", "trainer.callbacks.profiler.warmup=2",
                  "trainer.callbacks.profiler.active=2"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        // skip_first 0 + wait 1 + warmup 2 -> steps 4 and 5 are recorded.
        QFile trace(folder("prof") + "/profiler/rank0-step4.chrome_trace.json");
        QVERIFY2(trace.open(QIODevice::ReadOnly), qPrintable(r.output));
        auto doc = QJsonDocument::fromJson(trace.readAll());
        QVERIFY(doc.isObject() || doc.isArray());
        QByteArray text = doc.toJson();
        QVERIFY(text.contains("aten::mm") || text.contains("aten::addmm") ||
                text.contains("aten::linear"));

        // With trainer.work_dir the trace is written there, then copied into the run folder.
        const QString work = runs() + "/prof-work-dir";
        r = run_engine(
            args("prof2",
                 {"trainer.max_duration=6steps", "trainer.callbacks.profiler.enabled=true",
                  "trainer.callbacks.profiler.wait=1", "trainer.callbacks.profiler.warmup=1",
                  "trainer.callbacks.profiler.active=1", "trainer.work_dir=" + work}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const QString rel = "/profiler/rank0-step3.chrome_trace.json";
        QVERIFY2(QFile::exists(work + rel), qPrintable(r.output));
        QVERIFY(QFile::exists(folder("prof2") + rel));
        QCOMPARE(read_text(folder("prof2") + rel), read_text(work + rel));
        QVERIFY(!QFile::exists(folder("prof2") + rel + ".tmp"));
    }

    // The console shows a progress line on the steps without a metrics line, every log_interval.
    void consoleProgressLines() {
        auto r = run_engine(
            args("progress", {"trainer.max_duration=12steps", "trainer.metrics_collect_interval=5",
                              "trainer.callbacks.console_logger.log_interval=3",
                              "trainer.callbacks.checkpointer.enabled=false"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QStringList progress, metrics;
        for (const auto& line : r.output.split('\n')) {
            const auto at = line.indexOf("[rank 0] step ");
            if (at < 0 || !line.contains("/12 (")) continue;
            const QString step = line.mid(at + 14).section('/', 0, 0);
            (line.contains("| loss ") ? metrics : progress).append(step);
        }
        // Metrics at 1, 5, 10 and the last step; progress at the other multiples of 3.
        QCOMPARE(metrics, QStringList({"1", "5", "10", "12"}));
        QCOMPARE(progress, QStringList({"3", "6", "9"}));
    }

    // The sampler generates every interval and at the end, on 1 rank and under 2-rank FSDP (its
    // parameters gathered), and the run's losses and final weights are bitwise those of the same
    // run without it.
    void samplerDoesNotChangeTraining_data() {
        QTest::addColumn<QString>("launcher");
        QTest::newRow("1 rank") << "";
        QTest::newRow("2 ranks fsdp") << "2";
    }

    void samplerDoesNotChangeTraining() {
        QFETCH(QString, launcher);
        auto cmd = [&](const QString& run, const QStringList& extra) {
            QStringList a = args(run, QStringList{"trainer.max_duration=14steps",
                                                  "trainer.metrics_collect_interval=1"} +
                                          extra);
            if (!launcher.isEmpty()) {
                a.removeFirst();
                a = QStringList{"launch", "--nproc", launcher, "train_module.dp_config.name=fsdp"} +
                    a;
            }
            return a;
        };
        const QString off = "sampler-off" + launcher, on = "sampler-on" + launcher;
        auto r = run_engine(cmd(off, {}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        r = run_engine(cmd(on, {"trainer.callbacks.sampler.enabled=true",
                                "trainer.callbacks.sampler.interval=5",
                                "trainer.callbacks.sampler.max_new_tokens=12",
                                "trainer.callbacks.sampler.prompts=[\"The \", \"A\"]",
                                "trainer.callbacks.sampler.prompt_ids=[[84, 104]]"}),
                       runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const auto a = losses(read_metrics(folder(off) + "/metrics.jsonl"));
        const auto b = losses(read_metrics(folder(on) + "/metrics.jsonl"));
        QCOMPARE(a.size(), 14);
        QCOMPARE(a, b);
        QCOMPARE(tensor_checksums(folder(off) + "/step14/model_and_optim/rank0.lathe"),
                 tensor_checksums(folder(on) + "/step14/model_and_optim/rank0.lathe"));
        // Steps 5, 10 and the last, 14: three prompts each.
        const QStringList lines =
            read_text(folder(on) + "/samples.jsonl").split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 9);
        QList<qint64> steps;
        for (const auto& l : lines) {
            const auto j = QJsonDocument::fromJson(l.toUtf8()).object();
            steps << j["step"].toInteger();
            QCOMPARE(j["ids"].toArray().size(), 12);
            QVERIFY(j.contains("text") && j.contains("settings"));
        }
        QCOMPARE(steps, (QList<qint64>{5, 5, 5, 10, 10, 10, 14, 14, 14}));
        const auto third = QJsonDocument::fromJson(lines[2].toUtf8()).object();
        QCOMPARE(third["prompt"].toString(), QString("Th"));  // ids shown as the bytes they are
        QCOMPARE(third["text"].toString().size() > 0, true);
        // Text prompts need byte tokens: a numpy run must give ids, and is told so before work.
        r = run_engine(cmd("sampler-bad" + launcher,
                           {"trainer.callbacks.sampler.enabled=true", "dataset.source=numpy",
                            "dataset.paths=[/nonexistent.npy]"}),
                       runs());
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.output.contains("trainer.callbacks.sampler.prompts: text prompts need a "
                                   "tokenizer"),
                 qPrintable(r.output));
    }
};

QTEST_GUILESS_MAIN(TestCallbacks)
#include "test_callbacks.moc"
