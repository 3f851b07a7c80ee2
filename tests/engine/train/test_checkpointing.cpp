// Checkpoints of real training runs: exact resume, resume at another world size, faults
// (corrupt, partial, killed or out of disk during a save, lost), retention, config_saver.
#include "tests/engine/train/runs_fixture.h"

#include <QDirIterator>
#include <QThread>
#include <QtTest>

#include <sys/mount.h>
#include <cmath>
#include <csignal>

using namespace lathe::testing;

class TestCheckpointing : public QObject, private RunsDir {
    Q_OBJECT
private Q_SLOTS:
    void exactResume_data() {
        QTest::addColumn<QString>("launcher");  // "" = one process, else --nproc value
        QTest::addColumn<QString>("dp");
        QTest::addColumn<QString>("optim");
        QTest::addColumn<QStringList>("extra");
        QTest::newRow("1 rank") << ""
                                << "ddp"
                                << "adamw" << QStringList{};
        QTest::newRow("2 ranks ddp") << "2"
                                     << "ddp"
                                     << "adamw" << QStringList{};
        QTest::newRow("2 ranks fsdp") << "2"
                                      << "fsdp"
                                      << "adamw" << QStringList{};
        // The skip-step history is part of the checkpoint: a window of 6 and sigma 1 make it skip
        // some steps.
        QTest::newRow("1 rank skip_step_adamw") << ""
                                                << "ddp"
                                                << "skip_step_adamw" << QStringList{};
        QTest::newRow("2 ranks fsdp skip_step_adamw") << "2"
                                                      << "fsdp"
                                                      << "skip_step_adamw" << QStringList{};
        QTest::newRow("2 ranks fsdp lion") << "2"
                                           << "fsdp"
                                           << "lion" << QStringList{};
        // bf16 compute copies on one rank: the checkpoint holds the fp32 masters, and the copies
        // made from them on resume are the ones the uninterrupted run computed with.
        QTest::newRow("1 rank bf16 compute copies")
            << ""
            << "ddp"
            << "adamw" << QStringList{"train_module.dp_config.param_dtype=bfloat16"};
    }

    void exactResume() {
        QFETCH(QString, launcher);
        QFETCH(QString, dp);
        QFETCH(QString, optim);
        QFETCH(QStringList, extra);
        auto cmd = [&](const QString& run, const QStringList& more) {
            QStringList a = args(
                run,
                QStringList{"trainer.max_duration=40steps", "trainer.metrics_collect_interval=1",
                            "trainer.callbacks.checkpointer.save_interval=1000",
                            "train_module.dp_config.name=" + dp, "train_module.optim.name=" + optim,
                            "train_module.optim.rolling_interval_length=6",
                            "train_module.optim.sigma_factor=1"} +
                    extra + more);
            if (!launcher.isEmpty()) {
                a.removeFirst();
                a = QStringList{"launch", "--nproc", launcher} + a;
            }
            return a;
        };
        const QString tag = launcher + dp + optim + QString::number(extra.size());
        QString one = "once" + tag, two = "twice" + tag;
        // Skip-step runs skip at steps 35 and 36: stopped at 30, their decision needs the
        // history from before the resume.
        const bool skip = optim.startsWith("skip_step");
        const int stop = skip ? 30 : 20;
        auto r = run_engine(cmd(one, {}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        r = run_engine(cmd(two, {QString("trainer.hard_stop=%1steps").arg(stop)}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(QFile::exists(folder(two) + QString("/step%1/.metadata.json").arg(stop)));
        r = run_engine(cmd(two, {}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint"));
        auto a = losses(read_metrics(folder(one) + "/metrics.jsonl"));
        auto b = losses(read_metrics(folder(two) + "/metrics.jsonl"));
        QCOMPARE(a.size(), 40);
        QCOMPARE(b.size(), 40);
        if (skip) {
            // Steps after the resume were skipped, so the restored history decided something.
            auto m = read_metrics(folder(two) + "/metrics.jsonl");
            int skipped = 0;
            for (int s = stop + 1; s <= 40; ++s)
                skipped += m[s].value("optim/step skipped").toDouble() > 0.5;
            QVERIFY2(skipped > 0, "no step skipped after the resume: the case proves nothing");
        }
        for (int s = 1; s <= 40; ++s)
            QVERIFY2(a[s] == b[s], qPrintable(QString("step %1: %2 vs %3")
                                                  .arg(s)
                                                  .arg(a[s], 0, 'g', 17)
                                                  .arg(b[s], 0, 'g', 17)));
        auto wa = tensor_checksums(folder(one) + "/step40/model_and_optim/rank0.lathe");
        auto wb = tensor_checksums(folder(two) + "/step40/model_and_optim/rank0.lathe");
        QVERIFY(wa.size() > 10);
        QCOMPARE(wa, wb);
    }

    void resumeAtDifferentWorldSize() {
        auto r = run_engine(
            {"launch", "--nproc", "2", "tiny", "run_name=reshard", "trainer.max_duration=20steps",
             "trainer.hard_stop=10steps", "launch.num_threads=1"},
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        r = run_engine(args("reshard", {"trainer.max_duration=20steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("written by 2 rank(s), this run has 1"), qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint"));
        QVERIFY(QFile::exists(folder("reshard") + "/step20/.metadata.json"));
    }

    void corruptCheckpointFallsBack() {
        auto r =
            run_engine(args("corrupt", {"trainer.max_duration=30steps", "trainer.hard_stop=10steps",
                                        "trainer.callbacks.checkpointer.save_interval=5",
                                        "trainer.callbacks.checkpointer.save_async=false"}),
                       runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QString bad = folder("corrupt") + "/step10/model_and_optim/rank0.lathe";
        QFile f(bad);
        QVERIFY(f.open(QIODevice::ReadWrite));
        f.resize(f.size() / 2);  // truncated
        f.close();
        // load_path pointing at the broken one with "always": a clear error naming the file.
        auto fail = run_engine(
            args("other", {"trainer.load_path=" + folder("corrupt") + "/step10",
                           "trainer.load_strategy=always", "trainer.max_duration=30steps"}),
            runs());
        QCOMPARE(fail.exit_code, 1);
        QVERIFY2(fail.output.contains(bad) && fail.output.contains("truncated"),
                 qPrintable(fail.output));
        // The run itself: step10 is set aside as unusable (not deleted), the run falls back to
        // step5 and trains past step 10 again, saving a new step10 (no "already exists" dead end).
        const QStringList every5 = {"trainer.max_duration=30steps",
                                    "trainer.callbacks.checkpointer.save_interval=5",
                                    "trainer.callbacks.checkpointer.save_async=false"};
        r = run_engine(args("corrupt", every5 + QStringList{"trainer.hard_stop=15steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("set aside as step10.unusable"), qPrintable(r.output));
        QVERIFY2(r.output.contains("falling back to " + folder("corrupt") + "/step5"),
                 qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint " + folder("corrupt") + "/step5"));
        QVERIFY(QFile::exists(folder("corrupt") + "/step10/.metadata.json"));
        QVERIFY(QFile::exists(folder("corrupt") + "/step15/.metadata.json"));
        QVERIFY(QFile::exists(folder("corrupt") + "/step10.unusable/model_and_optim/rank0.lathe"));
        const QJsonObject why = read_json(folder("corrupt") + "/step10.unusable/unusable.json");
        QVERIFY2(why.value("reason").toString().contains("truncated"),
                 qPrintable(why.value("reason").toString()));
        QVERIFY(read_text(folder("corrupt") + "/history.jsonl").contains("\"set_aside_unusable\""));
        // inspect --verify names the damage and fails; the re-saved step10 verifies.
        auto v =
            run_engine({"inspect", "--verify", folder("corrupt") + "/step10.unusable"}, runs());
        QCOMPARE(v.exit_code, 1);
        QVERIFY2(v.output.contains("truncated") && v.output.contains("set_aside_as_unusable"),
                 qPrintable(v.output));
        v = run_engine({"inspect", "--verify", folder("corrupt") + "/step10"}, runs());
        QCOMPARE(v.exit_code, 0);
        QCOMPARE(QJsonDocument::fromJson(v.output.toUtf8()).object().value("verified").toBool(),
                 true);
        // An empty checkpoint folder, and an unfinished one with only empty folders in it,
        // verify nothing: --verify fails and says why (issue 34).
        QVERIFY(QDir().mkpath(folder("corrupt") + "/step99"));
        QVERIFY(QDir().mkpath(folder("corrupt") + "/step98-tmp/model_and_optim"));
        for (const QString& empty : {QString("/step99"), QString("/step98-tmp")}) {
            v = run_engine({"inspect", "--verify", folder("corrupt") + empty}, runs());
            QCOMPARE(v.exit_code, 1);
            QVERIFY2(v.output.contains("no checkpoint here"), qPrintable(v.output));
        }
        QVERIFY(QDir(folder("corrupt") + "/step99").removeRecursively());
        QVERIFY(QDir(folder("corrupt") + "/step98-tmp").removeRecursively());

        // A train state that contradicts its folder (global_step 12 inside step15): unusable too.
        const QString train15 = folder("corrupt") + "/step15/train/rank0.json";
        QJsonObject state = read_json(train15);
        state["global_step"] = 12;
        QVERIFY(write_text(train15, QJsonDocument(state).toJson()));
        r = run_engine(args("corrupt", every5 + QStringList{"trainer.hard_stop=20steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(
            r.output.contains("set aside as step15.unusable") && r.output.contains("for step 12"),
            qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint " + folder("corrupt") + "/step10"));
        QVERIFY(QFile::exists(folder("corrupt") + "/step20/.metadata.json"));

        // A garbage .metadata.json: set aside with its tensors, never deleted as "partial".
        QVERIFY(write_text(folder("corrupt") + "/step20/.metadata.json", "{\"ephem"));
        r = run_engine(args("corrupt", every5 + QStringList{"trainer.hard_stop=21steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("set aside as step20.unusable"), qPrintable(r.output));
        QVERIFY(QFile::exists(folder("corrupt") + "/step20.unusable/model_and_optim/rank0.lathe"));
        QVERIFY(r.output.contains("loaded checkpoint " + folder("corrupt") + "/step15"));
    }

    void partialCheckpointsAreCleanedUp() {
        auto r = run_engine(
            args("partial", {"trainer.max_duration=30steps", "trainer.hard_stop=5steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        // What a SIGKILL during a save leaves: a -tmp folder, and a renamed folder without metadata.
        QDir().mkpath(folder("partial") + "/step9-tmp/train");
        QDir().mkpath(folder("partial") + "/step8/model_and_optim");
        r = run_engine(
            args("partial", {"trainer.max_duration=30steps", "trainer.hard_stop=6steps"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        // Only the -tmp folder is deleted; the renamed one may hold good tensors: set aside.
        QVERIFY(
            r.output.contains("removed partial checkpoint " + folder("partial") + "/step9-tmp"));
        QVERIFY2(r.output.contains("set aside as step8.unusable: no .metadata.json"),
                 qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint " + folder("partial") + "/step5"));
        QVERIFY(!QDir(folder("partial") + "/step9-tmp").exists());
        QVERIFY(QDir(folder("partial") + "/step8.unusable/model_and_optim").exists());
    }

    void killDuringSaveKeepsEarlierCheckpoints() {
        // Save every step and SIGKILL the engine mid-run: whatever it was writing must not count.
        QProcess p;
        auto e = QProcessEnvironment::systemEnvironment();
        e.insert("LATHE_RUNS_DIR", runs());
        p.setProcessEnvironment(e);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(engine_path(),
                args("killed", {"trainer.max_duration=1000steps",
                                "trainer.callbacks.checkpointer.save_interval=1",
                                "trainer.callbacks.checkpointer.max_checkpoints=1000"}));
        QVERIFY(p.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(QDir(folder("killed")).entryList({"step*"}).size() >= 4, 60000);
        ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
        p.waitForFinished();
        // status.json still says "running"; its process is gone: `runs` lists it as interrupted
        // (issue 34), as the workbench's Runs dock does.
        auto listed = run_engine({"runs", runs(), "--json"}, runs());
        QVERIFY2(listed.exit_code == 0, qPrintable(listed.output));
        QString state;
        for (const auto& line : listed.output.split('\n', Qt::SkipEmptyParts)) {
            const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
            if (o["name"].toString() == "killed") state = o["state"].toString();
        }
        QVERIFY2(state == "interrupted", qPrintable(listed.output));
        QVERIFY(read_text(folder("killed") + "/status.json").contains("\"running\""));
        auto r = run_engine(
            args("killed", {"trainer.max_duration=1000steps", "trainer.hard_stop=1steps"}), runs());
        // hard_stop is already passed after loading: the run loads the newest complete one and stops.
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(r.output.contains("loaded checkpoint"));
        // The next start says what happened to the one before it.
        QVERIFY2(r.output.contains("the previous run of this folder was interrupted"),
                 qPrintable(r.output));
        for (const auto& name : QDir(folder("killed")).entryList({"step*"}, QDir::Dirs)) {
            QVERIFY2(!name.endsWith("-tmp"), qPrintable(name));
            QVERIFY2(QFile::exists(folder("killed") + "/" + name + "/.metadata.json"),
                     qPrintable(name));
        }
    }

    void diskFullDuringSave() {
        QString mnt = runs() + "/small";
        QDir().mkpath(mnt);
        if (::mount("tmpfs", mnt.toUtf8().constData(), "tmpfs", 0, "size=3m") != 0) {
            QSKIP("cannot mount a tmpfs here (needs root)");
        }
        auto r = run_engine(
            args("full", {"trainer.save_folder=" + mnt + "/full", "trainer.max_duration=40steps",
                          "trainer.callbacks.checkpointer.save_interval=2",
                          "trainer.callbacks.checkpointer.max_checkpoints=1000",
                          "trainer.callbacks.checkpointer.save_async=false"}),
            runs());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains("No space left on device"), qPrintable(r.output));
        // Earlier checkpoints are intact; no partial one is left; they still load.
        auto names = QDir(mnt + "/full").entryList({"step*"}, QDir::Dirs);
        QVERIFY(!names.isEmpty());
        for (const auto& n : names)
            QVERIFY2(QFile::exists(mnt + "/full/" + n + "/.metadata.json"), qPrintable(n));
        QString status = QString::fromUtf8([&] {
            QFile f(mnt + "/full/status.json");
            f.open(QIODevice::ReadOnly);
            return f.readAll();
        }());
        QVERIFY2(status.contains("\"failed\""), qPrintable(status));
        QString keep = QDir(runs()).filePath("kept");
        QVERIFY(QDir().rename(mnt + "/full", keep) ||
                QProcess::execute("cp", {"-r", mnt + "/full", keep}) == 0);
        ::umount(mnt.toUtf8().constData());
        auto again =
            run_engine(args("full2", {"trainer.load_path=" + keep, "trainer.max_duration=40steps",
                                      "trainer.hard_stop=1steps"}),
                       runs());
        QVERIFY2(again.exit_code == 0 && again.output.contains("loaded checkpoint"),
                 qPrintable(again.output));
    }

    // A run folder whose checkpoints are all gone (an emptied bucket, a deleted folder) but that
    // has trained before is not silently started over (issue 34): the run stops, naming why and
    // the way to start afresh, which then works.
    void lostCheckpointsStopTheRun() {
        const QStringList every3 = {"trainer.max_duration=6steps",
                                    "trainer.callbacks.checkpointer.save_interval=3"};
        auto r = run_engine(args("lost", every3), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        for (const auto& name : QDir(folder("lost")).entryList({"step*"}, QDir::Dirs))
            QVERIFY(QDir(folder("lost") + "/" + name).removeRecursively());
        r = run_engine(args("lost", every3), runs());
        QVERIFY2(r.exit_code != 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("has trained before") && r.output.contains("reached step 6") &&
                     r.output.contains("trainer.load_strategy=never"),
                 qPrintable(r.output));
        r = run_engine(args("lost", every3 + QStringList{"trainer.load_strategy=never"}), runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(QFile::exists(folder("lost") + "/step6/.metadata.json"));
    }

    void retention() {
        auto r =
            run_engine(args("keep", {"trainer.max_duration=20steps",
                                     "trainer.callbacks.checkpointer.save_interval=5",
                                     "trainer.callbacks.checkpointer.ephemeral_save_interval=2",
                                     "trainer.callbacks.checkpointer.max_checkpoints=2"}),
                       runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto names = QDir(folder("keep")).entryList({"step*"}, QDir::Dirs, QDir::Name);
        QCOMPARE(names, QStringList({"step15", "step20"}));
    }

    // config_saver is a callback: its file in every checkpoint, under its fname; none when off.
    void configSaverWritesIntoCheckpoints() {
        const QStringList two = {"trainer.max_duration=2steps"};
        auto r = run_engine(
            args("saver", two + QStringList{"trainer.callbacks.config_saver.fname=resolved.json"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        const QJsonObject saved = read_json(folder("saver") + "/step2/resolved.json");
        QCOMPARE(saved["run_name"].toString(), QString("saver"));
        QCOMPARE(saved["trainer"]
                     .toObject()["callbacks"]
                     .toObject()["config_saver"]
                     .toObject()["fname"]
                     .toString(),
                 QString("resolved.json"));
        QVERIFY(!QFile::exists(folder("saver") + "/step2/config.json"));
        r = run_engine(
            args("nosaver", two + QStringList{"trainer.callbacks.config_saver.enabled=false"}),
            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(QFile::exists(folder("nosaver") + "/step2/.metadata.json"));
        QVERIFY(!QFile::exists(folder("nosaver") + "/step2/config.json"));
    }
};

QTEST_GUILESS_MAIN(TestCheckpointing)
#include "test_checkpointing.moc"
