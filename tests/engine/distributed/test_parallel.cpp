// Tensor parallelism, the 2-D mesh and HSDP (issue 17): each layout trains `tiny` with the per-step
// losses and gradient norms of one rank (fp32, 20 steps, 1e-5 relative), saves the same whole
// weights, and its checkpoints resume under another layout. Bad layouts are refused before any
// work, naming the field.
#include "tests/engine_runner.h"

#include <QJsonArray>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

using namespace lathe::testing;

namespace {

QStringList common(const QString& run, int steps) {
    return {"tiny",
            "run_name=" + run,
            "launch.num_threads=1",
            "trainer.metrics_collect_interval=1",
            QString("trainer.max_duration=%1steps").arg(steps),
            "trainer.callbacks.checkpointer.save_interval=10"};
}

QStringList launch(int nproc, const QStringList& rest) {
    return QStringList{"launch", "--nproc", QString::number(nproc)} + rest;
}

QMap<qint64, double> series(const QString& metrics_file, const QString& name) {
    // Every line's values by step. A step written twice (seen once in about twenty 4-rank runs
    // on two busy cores, not reproduced since) is merged and reported, so that the comparison
    // is about the numbers; test_callbacks' metricsFileHasEveryStepOnce guards the file itself.
    QMap<qint64, double> out;
    QFile f(metrics_file);
    if (!f.open(QIODevice::ReadOnly)) return out;
    QSet<qint64> seen;
    while (!f.atEnd()) {
        const QByteArray line = f.readLine().trimmed();
        if (line.isEmpty()) continue;
        const auto o = QJsonDocument::fromJson(line).object();
        const qint64 step = o.value("step").toInteger();
        if (seen.contains(step))
            qWarning("%s: step %lld written again: %s", qPrintable(metrics_file), step,
                     line.constData());
        seen.insert(step);
        const auto values = o.value("values").toObject();
        if (values.contains(name)) out[step] = values.value(name).toDouble();
    }
    return out;
}

// Every step of `b` within `rel` of `a` (and the same steps).
QString compare(const QMap<qint64, double>& a, const QMap<qint64, double>& b, double rel,
                const QString& what) {
    if (a.keys() != b.keys()) {
        QStringList missing;
        for (auto k : a.keys())
            if (!b.contains(k)) missing << QString::number(k);
        return QString("%1: steps differ (%2 vs %3; missing: %4)")
            .arg(what)
            .arg(a.size())
            .arg(b.size())
            .arg(missing.join(' '));
    }
    for (auto it = a.begin(); it != a.end(); ++it) {
        const double x = it.value(), y = b[it.key()];
        if (!(std::fabs(x - y) <= rel * std::fabs(x)))
            return QString("%1 at step %2: %3 vs %4")
                .arg(what)
                .arg(it.key())
                .arg(x, 0, 'g', 10)
                .arg(y, 0, 'g', 10);
    }
    return {};
}

// float32 tensors of a Lathe tensor file by name.
QMap<QString, QVector<float>> read_tensors(const QString& path) {
    QMap<QString, QVector<float>> out;
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return out;
    const QByteArray all = f.readAll();
    quint64 hlen = 0;
    memcpy(&hlen, all.constData() + 8, 8);
    const auto doc = QJsonDocument::fromJson(all.mid(16, static_cast<int>(hlen)));
    for (const auto& t : doc.object().value("tensors").toArray()) {
        const auto o = t.toObject();
        if (o.value("dtype").toString() != "float32") continue;
        const qint64 off = 16 + static_cast<qint64>(hlen) + o.value("offset").toInteger();
        const qint64 n = o.value("nbytes").toInteger() / 4;
        QVector<float> v(static_cast<int>(n));
        memcpy(v.data(), all.constData() + off, static_cast<size_t>(n) * 4);
        out[o.value("name").toString()] = v;
    }
    return out;
}

}  // namespace

class TestParallel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString folder(const QString& run) const { return dir_.path() + "/" + run; }
    QString metrics(const QString& run) const { return folder(run) + "/metrics.jsonl"; }

    // The one-rank reference of a variant ("" or "z" for z-loss), trained once.
    QString reference(const QString& variant, const QStringList& extra) {
        QString run = "ref" + variant;
        if (!QFile::exists(folder(run) + "/step20/.metadata.json")) {
            const auto r = run_engine(QStringList{"train"} + common(run, 20) + extra, dir_.path());
            if (r.exit_code != 0) qWarning("%s", qPrintable(r.output));
        }
        return run;
    }

private Q_SLOTS:
    void layoutsMatchOneRank_data() {
        QTest::addColumn<int>("nproc");
        QTest::addColumn<QStringList>("layout");
        QTest::addColumn<QString>("logged");  // the layout as the engine logs it
        QTest::addColumn<bool>("z_loss");
        QTest::newRow("tp 2") << 2 << QStringList{"train_module.tp_config.degree=2"} << "tp 2"
                              << false;
        // The replicated LM head with z-loss, and activation checkpointing under TP.
        QTest::newRow("tp 2, whole LM head, z-loss, full AC")
            << 2
            << QStringList{"train_module.tp_config.degree=2",
                           "train_module.tp_config.loss_parallel=false",
                           "train_module.ac_config.mode=full"}
            << "tp 2" << true;
        QTest::newRow("tp 2, z-loss, micro-batches")
            << 2
            << QStringList{"train_module.tp_config.degree=2",
                           "train_module.rank_microbatch_size=512"}
            << "tp 2" << true;
        QTest::newRow("ddp 2 x tp 2")
            << 4 << QStringList{"train_module.tp_config.degree=2"} << "ddp over 2 x tp 2" << false;
        QTest::newRow("fsdp 2 x tp 2")
            << 4
            << QStringList{"train_module.tp_config.degree=2", "train_module.dp_config.name=fsdp"}
            << "fsdp over 2 x tp 2" << false;
        QTest::newRow("hsdp 2 replicas x 2 shards")
            << 4
            << QStringList{"train_module.dp_config.name=hsdp",
                           "train_module.dp_config.shard_degree=2",
                           "train_module.rank_microbatch_size=512"}
            << "hsdp 2 replicas x 2 shards" << false;
    }
    void layoutsMatchOneRank() {
        QFETCH(int, nproc);
        QFETCH(QStringList, layout);
        QFETCH(QString, logged);
        QFETCH(bool, z_loss);
        const QStringList z =
            z_loss ? QStringList{"train_module.z_loss_multiplier=1e-4"} : QStringList{};
        const QString ref = reference(z_loss ? "z" : "", z);
        const QString run = "l" + QString::number(qHash(layout.join(' ') + z.join(' ')));
        const auto r = run_engine(launch(nproc, common(run, 20) + layout + z), dir_.path());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("layout " + logged), qPrintable(r.output));
        for (const char* name : {"train/CE loss", "optim/total grad norm"}) {
            const auto a = series(metrics(ref), name), b = series(metrics(run), name);
            QCOMPARE(a.size(), 20);
            const QString problem = compare(a, b, 1e-5, name);
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
        }
        if (z_loss) {
            const auto a = series(metrics(ref), "train/Z loss"),
                       b = series(metrics(run), "train/Z loss");
            QCOMPARE(a.size(), 20);
            const QString problem = compare(a, b, 1e-4, "train/Z loss");
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
        }
        // The checkpoint holds the whole tensors, as the one-rank run's (model and optimizer
        // state), whatever the layout.
        const auto wa = read_tensors(folder(ref) + "/step20/model_and_optim/rank0.lathe");
        const auto wb = read_tensors(folder(run) + "/step20/model_and_optim/rank0.lathe");
        QVERIFY(wa.size() > 10);
        QCOMPARE(wb.keys(), wa.keys());
        for (const auto& k : wa.keys()) {
            const auto &x = wa[k], &y = wb[k];
            QVERIFY2(x.size() == y.size(), qPrintable(k));
            for (int i = 0; i < x.size(); ++i)
                QVERIFY2(std::fabs(x[i] - y[i]) <= 1e-5f * std::max(1.0f, std::fabs(x[i])),
                         qPrintable(QString("%1[%2]: %3 vs %4").arg(k).arg(i).arg(x[i]).arg(y[i])));
        }
    }

    // A run saved under one layout resumes under another: the steps after the resume still
    // match the one-rank run.
    void checkpointsResumeUnderAnotherLayout_data() {
        QTest::addColumn<int>("first_nproc");
        QTest::addColumn<QStringList>("first");
        QTest::addColumn<int>("second_nproc");
        QTest::addColumn<QStringList>("second");
        QTest::newRow("tp 2 -> 1 rank")
            << 2 << QStringList{"train_module.tp_config.degree=2"} << 1 << QStringList{};
        QTest::newRow("fsdp 2 -> tp 2") << 2 << QStringList{"train_module.dp_config.name=fsdp"} << 2
                                        << QStringList{"train_module.tp_config.degree=2"};
    }
    void checkpointsResumeUnderAnotherLayout() {
        QFETCH(int, first_nproc);
        QFETCH(QStringList, first);
        QFETCH(int, second_nproc);
        QFETCH(QStringList, second);
        const QString ref = reference("", {});
        const QString run = "r" + QString::number(qHash(first.join(' ') + second.join(' ')));
        auto cmd = [&](int nproc, const QStringList& extra) {
            const QStringList a = common(run, 20) + extra;
            return nproc > 1 ? launch(nproc, a) : QStringList{"train"} + a;
        };
        auto r = run_engine(cmd(first_nproc, first + QStringList{"trainer.hard_stop=10steps"}),
                            dir_.path());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY(QFile::exists(folder(run) + "/step10/.metadata.json"));
        r = run_engine(cmd(second_nproc, second), dir_.path());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        QVERIFY2(r.output.contains("loaded checkpoint"), qPrintable(r.output));
        const auto a = series(metrics(ref), "train/CE loss"),
                   b = series(metrics(run), "train/CE loss");
        QCOMPARE(b.size(), 20);
        const QString problem = compare(a, b, 1e-5, "train/CE loss");
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    // Refused before any work, with the field and the numbers.
    void badLayoutsAreRefused_data() {
        QTest::addColumn<QStringList>("command");
        QTest::addColumn<QString>("message");
        QTest::newRow("degree does not divide the heads")
            << QStringList{"validate", "tiny", "train_module.tp_config.degree=3"}
            << "train_module.tp_config.degree: 3 does not divide model.n_heads (4)";
        QTest::newRow("degree does not divide the kv heads")
            << QStringList{"validate", "tiny", "model.n_heads=8", "model.n_kv_heads=2",
                           "train_module.tp_config.degree=4"}
            << "does not divide model.n_kv_heads (2)";
        QTest::newRow("world not divisible by the degree")
            << launch(3, {"tiny", "run_name=bad3", "train_module.tp_config.degree=2"})
            << "train_module.tp_config.degree: 2 does not divide the world size (3 ranks)";
        QTest::newRow("one rank with tp 2")
            << QStringList{"train", "tiny", "run_name=bad1", "train_module.tp_config.degree=2"}
            << "does not divide the world size (1 rank)";
        QTest::newRow("hsdp shard degree")
            << launch(4, {"tiny", "run_name=badh", "train_module.dp_config.name=hsdp",
                          "train_module.dp_config.shard_degree=3",
                          "train_module.rank_microbatch_size=512"})
            << "train_module.dp_config.shard_degree: 3 does not divide the data-parallel ranks (4)";
        QTest::newRow("shard degree without hsdp")
            << QStringList{"validate", "tiny", "train_module.dp_config.shard_degree=2"}
            << "only for name hsdp";
    }
    void badLayoutsAreRefused() {
        QFETCH(QStringList, command);
        QFETCH(QString, message);
        const auto r = run_engine(command, dir_.path());
        QVERIFY2(r.exit_code == 2, qPrintable(r.output));
        QVERIFY2(r.output.contains(message), qPrintable(r.output));
        QVERIFY(!QDir(dir_.path() + "/bad3").exists() && !QDir(dir_.path() + "/badh").exists());
    }
};

QTEST_GUILESS_MAIN(TestParallel)
#include "test_parallel.moc"
