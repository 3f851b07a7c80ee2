// Training from each data source: bad files named, text, document masking, numpy token files.
#include "tests/engine/train/runs_fixture.h"

#include <QDirIterator>
#include <QThread>
#include <QtTest>

#include <sys/mount.h>
#include <cmath>
#include <csignal>

using namespace lathe::testing;

class TestDataSources : public QObject, private RunsDir {
    Q_OBJECT
private Q_SLOTS:
    void badDataFileIsNamed() {
        QString empty = runs() + "/empty.txt";
        QFile(empty).open(QIODevice::WriteOnly);
        auto r = run_engine(args("bad", {"dataset.source=text", "dataset.paths=[" + empty + "]"}),
                            runs());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.output.contains(empty + ": file is empty"), qPrintable(r.output));
    }

    void textSourceTrains() {
        QString text = runs() + "/corpus.txt";
        QFile f(text);
        QVERIFY(f.open(QIODevice::WriteOnly));
        for (int i = 0; i < 2000; ++i) f.write("the quick brown fox jumps over the lazy dog. ");
        f.close();
        auto r = run_engine(args("text", {"dataset.source=text", "dataset.paths=[" + text + "]",
                                          "trainer.max_duration=30steps"}),
                            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        auto l = losses(read_metrics(folder("text") + "/metrics.jsonl"));
        QVERIFY(l.last() < l.first());
    }

    // dataset.generate_doc_lengths reaches the model: with an EOS id that never occurs the run is
    // the plain causal one; with the space as EOS (a document per word) every loss changes.
    // (Packed documents equal documents alone: test_model.)
    void documentMaskingTrains() {
        const QStringList base = {"trainer.max_duration=3steps",
                                  "trainer.metrics_collect_interval=1",
                                  "trainer.callbacks.checkpointer.enabled=false"};
        auto run = [&](const QString& name, const QStringList& extra) {
            const auto r = run_engine(args(name, base + extra), runs());
            return std::pair{r, losses(read_metrics(folder(name) + "/metrics.jsonl"))};
        };
        const auto [r0, plain] = run("docs-off", {});
        QVERIFY2(r0.exit_code == 0, qPrintable(r0.output));
        const auto [r1, one_doc] =
            run("docs-none", {"dataset.generate_doc_lengths=true", "dataset.eos_token_id=255"});
        QVERIFY2(r1.exit_code == 0, qPrintable(r1.output));
        const auto [r2, words] =
            run("docs-words", {"dataset.generate_doc_lengths=true", "dataset.eos_token_id=32"});
        QVERIFY2(r2.exit_code == 0, qPrintable(r2.output));
        QVERIFY2(r2.output.contains("documents masked at token 32"), qPrintable(r2.output));
        QCOMPARE(plain.size(), 3);
        QCOMPARE(one_doc.keys(), plain.keys());
        QCOMPARE(words.keys(), plain.keys());
        for (auto it = plain.begin(); it != plain.end(); ++it) {
            QVERIFY2(std::abs(one_doc[it.key()] - it.value()) <= 1e-6 * it.value(),
                     qPrintable(QString("step %1: %2 vs %3")
                                    .arg(it.key())
                                    .arg(one_doc[it.key()])
                                    .arg(it.value())));
            QVERIFY2(std::abs(words[it.key()] - it.value()) > 1e-4 * it.value(),
                     qPrintable(QString("step %1: %2 vs %3")
                                    .arg(it.key())
                                    .arg(words[it.key()])
                                    .arg(it.value())));
        }
        // Bytes have no EOS of their own: refused before training, naming the field.
        const auto bad = run_engine(
            args("docs-bad", base + QStringList{"dataset.generate_doc_lengths=true"}), runs());
        QCOMPARE(bad.exit_code, 2);
        QVERIFY2(bad.output.contains("dataset.eos_token_id"), qPrintable(bad.output));
    }

    void numpySourceTrains() {
        QString path = runs() + "/tokens.npy";
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        QVector<quint16> tokens;
        for (int i = 0; i < 40000; ++i) tokens.append(static_cast<quint16>((i * 7) % 300));
        f.write(reinterpret_cast<const char*>(tokens.constData()), tokens.size() * 2);
        f.close();
        auto r = run_engine(args("npy", {"dataset.source=numpy", "dataset.paths=[" + path + "]",
                                         "model.vocab_size=512", "trainer.max_duration=10steps"}),
                            runs());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        // A token beyond the vocabulary is named with its file and position.
        auto bad =
            run_engine(args("npy2", {"dataset.source=numpy", "dataset.paths=[" + path + "]",
                                     "model.vocab_size=256", "trainer.max_duration=10steps"}),
                       runs());
        QCOMPARE(bad.exit_code, 1);
        QVERIFY2(
            bad.output.contains(path + ": token") && bad.output.contains("outside the vocabulary"),
            qPrintable(bad.output));
        // The whole file is checked before the first step (issue 34): a bad token near its end
        // stops the run at the start, with its position, not at the batch that holds it.
        const QString late = runs() + "/late.npy";
        QFile g(late);
        QVERIFY(g.open(QIODevice::WriteOnly));
        QVector<quint16> ok(40000, 5);
        ok[39000] = 400;
        g.write(reinterpret_cast<const char*>(ok.constData()), ok.size() * 2);
        g.close();
        auto lateRun =
            run_engine(args("late", {"dataset.source=numpy", "dataset.paths=[" + late + "]",
                                     "model.vocab_size=256", "trainer.max_duration=10steps",
                                     "trainer.metrics_collect_interval=1"}),
                       runs());
        QCOMPARE(lateRun.exit_code, 1);
        QVERIFY2(lateRun.output.contains(late + ": token 400 at position 39000 (byte 78000)"),
                 qPrintable(lateRun.output));
        QVERIFY(!QFile::exists(folder("late") + "/metrics.jsonl"));
        // Each file's largest token is kept in the run folder, by size and modification time.
        const auto ranges = read_json(folder("npy") + "/token_ranges.json");
        QCOMPARE(ranges.size(), 1);
        QCOMPARE(ranges.begin().value().toObject()["max_token"].toInt(), 299);
    }
};

QTEST_GUILESS_MAIN(TestDataSources)
#include "test_data_sources.moc"
