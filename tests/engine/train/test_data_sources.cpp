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

    // Validation reads its rows as training does (issue 44 item 5): the evaluation before the
    // first step (the same weights in every run) changes with document masking and with label
    // masks, exactly where the training loss does; masks that leave nothing to train on are
    // named instead of a NaN loss.
    void validationHonoursMasks() {
        const QString tokens = runs() + "/val-tokens.npy";
        QVector<quint16> ids;
        for (int i = 0; i < 40000; ++i) ids.append(static_cast<quint16>((i * 7) % 30));
        QVERIFY(write_text(
            tokens, QByteArray(reinterpret_cast<const char*>(ids.constData()), ids.size() * 2)));
        auto mask_file = [&](const QString& name, auto keep) {
            QByteArray bytes(ids.size(), '\0');
            for (int i = 0; i < ids.size(); ++i) bytes[i] = keep(i) ? 1 : 0;
            QString path = runs() + "/" + name;
            write_text(path, bytes);
            return path;
        };
        const QString ones = mask_file("ones.bin", [](int) { return true; });
        const QString half = mask_file("half.bin", [](int i) { return i % 4 < 2; });
        const QString none = mask_file("none.bin", [](int) { return false; });
        const QString no_val = mask_file("noval.bin", [&](int i) { return i < ids.size() / 2; });
        QStringList base = {"dataset.source=numpy",
                            "dataset.paths=[" + tokens + "]",
                            "model.vocab_size=512",
                            "dataset.validation_fraction=0.1",
                            "trainer.max_duration=1steps",
                            "trainer.metrics_collect_interval=1",
                            "trainer.callbacks.checkpointer.enabled=false",
                            "trainer.callbacks.lm_evaluator.enabled=true",
                            "trainer.callbacks.lm_evaluator.eval_on_startup=true",
                            "trainer.callbacks.lm_evaluator.eval_on_finish=false"};
        const QString key = "eval/lm/validation/CE loss";
        struct Losses {
            double eval = 0, train = 0;
            QString output;
        };
        auto run = [&](const QString& name, const QStringList& extra) {
            const auto r = run_engine(args(name, base + extra), runs());
            Losses l;
            l.output = r.output;
            if (r.exit_code != 0) return l;
            const auto m = read_metrics(folder(name) + "/metrics.jsonl");
            for (const auto& row : m)
                if (row.contains(key)) l.eval = row[key].toDouble();
            l.train = losses(m).value(1);
            return l;
        };
        // Weights that have learnt something (at initialisation every token is about as likely,
        // and masks barely move the loss): every run below starts from them.
        {
            QStringList train = base;
            train.replaceInStrings("trainer.max_duration=1steps", "trainer.max_duration=40steps");
            train.removeAll("trainer.callbacks.checkpointer.enabled=false");
            const auto r = run_engine(args("val-base", train), runs());
            QVERIFY2(r.exit_code == 0, qPrintable(r.output));
            QVERIFY2(QFileInfo(folder("val-base") + "/step40").isDir(), qPrintable(r.output));
        }
        base += QStringList{"trainer.load_path=" + folder("val-base") + "/step40",
                            "trainer.load_trainer_state=false"};
        const auto plain = run("val-plain", {});
        QVERIFY2(plain.eval > 0 && plain.train > 0, qPrintable(plain.output));
        const auto one_doc =
            run("val-one-doc", {"dataset.generate_doc_lengths=true", "dataset.eos_token_id=299"});
        const auto docs =
            run("val-docs", {"dataset.generate_doc_lengths=true", "dataset.eos_token_id=0"});
        const auto all_ones = run("val-ones", {"dataset.label_mask_paths=[" + ones + "]"});
        const auto halves = run("val-half", {"dataset.label_mask_paths=[" + half + "]"});
        auto same = [](double a, double b) { return std::abs(a - b) <= 1e-6 * std::abs(b); };
        auto differs = [](double a, double b) { return std::abs(a - b) > 1e-4 * std::abs(b); };
        auto show = [](const char* what, const Losses& a, const Losses& b) {
            return QString("%1: eval %2 vs %3, train %4 vs %5\n%6")
                .arg(what)
                .arg(a.eval, 0, 'g', 10)
                .arg(b.eval, 0, 'g', 10)
                .arg(a.train, 0, 'g', 10)
                .arg(b.train, 0, 'g', 10)
                .arg(a.output.right(2000));
        };
        QVERIFY2(same(one_doc.eval, plain.eval) && same(one_doc.train, plain.train),
                 qPrintable(show("an EOS that never occurs", one_doc, plain)));
        QVERIFY2(differs(docs.eval, plain.eval) && differs(docs.train, plain.train),
                 qPrintable(show("documents of 30 tokens", docs, plain)));
        QVERIFY2(same(all_ones.eval, plain.eval) && same(all_ones.train, plain.train),
                 qPrintable(show("a mask of ones", all_ones, plain)));
        QVERIFY2(differs(halves.eval, plain.eval) && differs(halves.train, plain.train),
                 qPrintable(show("half the labels masked", halves, plain)));

        // Nothing to train on: the instances are named with their file, not a NaN loss.
        const auto bad = run_engine(
            args("val-none", base + QStringList{"dataset.label_mask_paths=[" + none + "]"}),
            runs());
        QCOMPARE(bad.exit_code, 1);
        QVERIFY2(bad.output.contains("every label of this rank's batch is masked") &&
                     bad.output.contains(tokens + ", tokens ") && !bad.output.contains("nan"),
                 qPrintable(bad.output));
        // Nothing to evaluate: a warning, no false CE loss of 0, and training goes on.
        const auto quiet = run("val-noval", {"dataset.label_mask_paths=[" + no_val + "]"});
        QVERIFY2(quiet.train > 0 && quiet.eval == 0, qPrintable(quiet.output));
        QVERIFY2(quiet.output.contains("every label of the") &&
                     quiet.output.contains("no eval/lm/validation/CE loss recorded"),
                 qPrintable(quiet.output));
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
