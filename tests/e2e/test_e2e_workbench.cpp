// End to end, under Xvfb: the real workbench window against a real lathe-engine process.
// Start tiny -> at least 20 points plotted -> Checkpoint now -> a new step{N} folder -> Stop ->
// the engine exits 0 with a final checkpoint; a screenshot of the window is saved.
// New run from a Hugging Face model: a Llama-style folder (made by the engine's own export) fills
// the editor (family, sizes, load_path) and trains from its weights; a model Lathe cannot load is
// refused with the field named, and the editor keeps its config.
#include "ui/control/run_toolbar.h"
#include "ui/main_window.h"

#include "ui/config/config_editor.h"
#include "ui/logs/log_model.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"

#include <QAction>
#include <QDir>
#include <QLabel>
#include <QMessageBox>
#include <QProcess>
#include <QRegularExpression>
#include <QSettings>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

using lathe::ui::MainWindow;

class TestE2EWorkbench : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
        QCoreApplication::setApplicationName(QStringLiteral("lathe-e2e"));
        qputenv("LATHE_ENGINE", qgetenv("LATHE_BIN_DIR") + "/lathe-engine");
    }

    // Every test starts from the preset and the default panels, not from the last test's form
    // (the window restores both from QSettings).
    void init() {
        QSettings s;
        s.remove(QStringLiteral("editor/session"));
        s.remove(QStringLiteral("plots/panels"));
    }

    void trainCheckpointStop() {
        QTemporaryDir runs;
        qputenv("LATHE_RUNS_DIR", runs.path().toUtf8());
        MainWindow w;
        w.resize(1500, 950);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(w.editor()->loadPreset(QStringLiteral("tiny")));
        // Long enough that Stop, not the end of training, finishes the run.
        w.editor()->editField(QStringLiteral("trainer.max_duration"),
                              lathe::config::Json{{"value", 5000}, {"unit", "steps"}});
        w.editor()->editField(QStringLiteral("trainer.metrics_collect_interval"), 1);
        w.editor()->editField(QStringLiteral("run_name"), "e2e");
        QVERIFY(w.editor()->isValid());
        w.toolbar()->startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("running"),
                                  60000);

        const QString runDir = runs.path() + "/e2e";
        // The engine left a core to the window (LATHE_RESERVE_CORES=1 from the RunController).
        const int threads = std::max(1, QThread::idealThreadCount() - 1);
        auto logged = [&](const QString& text) {
            for (int i = 0; i < w.logModel()->rowCount(); ++i) {
                if (w.logModel()->entry(i).message.contains(text)) return true;
            }
            return false;
        };
        QTRY_VERIFY_WITH_TIMEOUT(logged(QStringLiteral("%1 CPU thread(s) per rank").arg(threads)),
                                 30000);
        auto plotted = [&] {
            auto* plot = w.plots()->plotFor(QStringLiteral("train/CE loss"));
            return plot && plot->graphCount() > 0 && plot->graph(0)->dataCount() >= 20;
        };
        QTRY_VERIFY_WITH_TIMEOUT(plotted(), 60000);
        // Complete or not, but not the temporary step{N}-tmp folders.
        auto steps = [&] {
            QStringList out;
            for (const auto& s : QDir(runDir).entryList({"step*"}, QDir::Dirs)) {
                if (QRegularExpression(QStringLiteral("^step\\d+$")).match(s).hasMatch()) out << s;
            }
            return out;
        };
        const QStringList before = steps();

        double writeSeconds = -1;
        connect(w.run(), &lathe::ui::RunController::checkpointSaved, this,
                [&](const lathe::protocol::CheckpointSaved& c) { writeSeconds = c.duration_s; });
        w.toolbar()->checkpointAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(steps().size() > before.size(), 30000);
        QString made;
        for (const auto& s : steps()) {
            if (!before.contains(s)) made = s;
        }
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(runDir + "/" + made + "/.metadata.json"), 30000);
        // The engine reports how long the write took (not the 0 it once sent).
        QTRY_VERIFY_WITH_TIMEOUT(writeSeconds > 0, 30000);
        QVERIFY(writeSeconds < 60);

        // The loss in the plot falls.
        const auto* loss = w.plots()->store()->series(QStringLiteral("train/CE loss"));
        QVERIFY(loss && loss->size() >= 20);
        QVERIFY(loss->value.back() < loss->value.front());

        QTest::qWait(300);
        const QString shots = qEnvironmentVariable("LATHE_ARTIFACTS", QDir::tempPath());
        QDir().mkpath(shots);
        QVERIFY(w.grab().save(shots + "/e2e-workbench.png"));

        w.toolbar()->stopAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("stopped"),
                                  60000);
        QCOMPARE(w.run()->exitCode(), 0);
        // A final checkpoint exists, newer than the one requested above.
        QStringList complete;
        for (const auto& s : steps()) {
            if (QFile::exists(runDir + "/" + s + "/.metadata.json")) complete << s;
        }
        std::sort(complete.begin(), complete.end(), [](const QString& a, const QString& b) {
            return a.mid(4).toLongLong() < b.mid(4).toLongLong();
        });
        QVERIFY(!complete.isEmpty());
        QVERIFY2(complete.last().mid(4).toLongLong() > made.mid(4).toLongLong(),
                 qPrintable(complete.join(' ')));
        QFile status(runDir + "/status.json");
        QVERIFY(status.open(QIODevice::ReadOnly));
        QVERIFY(status.readAll().contains("\"stopped\""));
    }

    void newRunFromHuggingFaceModel() {
        QTemporaryDir work;
        const QString engine = qEnvironmentVariable("LATHE_ENGINE");
        auto runEngine = [&](const QStringList& args) {
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(engine, args);
            const bool done = p.waitForFinished(300000);
            const QByteArray out = p.readAll();
            if (!done || p.exitCode() != 0) qWarning("%s", out.constData());
            return done && p.exitCode() == 0;
        };
        // A Llama-style model (pre-norm, no QK-norm, grouped-query attention), as transformers'
        // LlamaForCausalLM folder.
        QVERIFY(runEngine({"train", "tiny_llama", "run_name=src",
                           "trainer.save_folder=" + work.path() + "/src",
                           "trainer.max_duration=2steps", "launch.num_threads=1"}));
        const QString hf = work.path() + "/my-llama";
        QVERIFY(runEngine({"export", work.path() + "/src/step2", hf}));
        // The user's data: raw uint16 token files.
        QFile tokens(work.path() + "/tokens.u16");
        QVERIFY(tokens.open(QIODevice::WriteOnly));
        for (int i = 0; i < 64 * 8 * 8; ++i) {
            const quint16 id = quint16((i * 37 + i / 64) % 256);
            tokens.write(reinterpret_cast<const char*>(&id), sizeof id);
        }
        tokens.close();

        QTemporaryDir runs;
        qputenv("LATHE_RUNS_DIR", runs.path().toUtf8());
        MainWindow w;
        w.resize(1366, 768);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(w.newRunFromHfModel(hf));
        const auto& doc = w.editor()->document();
        QCOMPARE(QString::fromStdString(doc["model"]["block_name"].get<std::string>()),
                 QStringLiteral("default"));
        QCOMPARE(doc["model"]["qk_norm"].get<bool>(), false);
        QCOMPARE(doc["model"]["n_kv_heads"].get<int>(), 2);
        QCOMPARE(QString::fromStdString(doc["run_name"].get<std::string>()),
                 QStringLiteral("my-llama-finetune"));
        QCOMPARE(QDir(QString::fromStdString(doc["trainer"]["load_path"].get<std::string>()))
                     .canonicalPath(),
                 QDir(hf).canonicalPath());
        // Without data the run cannot start: the problem names dataset.paths.
        QVERIFY(!w.editor()->isValid());
        w.editor()->editField(
            QStringLiteral("dataset.paths"),
            lathe::config::Json::array({(work.path() + "/tokens.u16").toStdString()}));
        w.editor()->editField(QStringLiteral("trainer.max_duration"),
                              lathe::config::Json{{"value", 4}, {"unit", "steps"}});
        w.editor()->editField(QStringLiteral("trainer.metrics_collect_interval"), 1);
        QVERIFY(w.editor()->isValid());
        w.toolbar()->startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("finished"),
                                  120000);
        QCOMPARE(w.run()->exitCode(), 0);
        bool loaded = false;
        for (int i = 0; i < w.logModel()->rowCount(); ++i)
            loaded = loaded || w.logModel()->entry(i).message.contains(
                                   QStringLiteral("loaded the weights of Hugging Face model"));
        QVERIFY(loaded);
        const auto* loss = w.plots()->store()->series(QStringLiteral("train/CE loss"));
        QVERIFY(loss && loss->size() == 4);

        // A model Lathe cannot load: refused with the field named; the editor keeps its config.
        const QString bad = work.path() + "/mistral";
        QVERIFY(QDir().mkpath(bad));
        QVERIFY(QFile::copy(hf + "/model.safetensors", bad + "/model.safetensors"));
        QFile in(hf + "/config.json");
        QVERIFY(in.open(QIODevice::ReadOnly));
        auto cfg = lathe::config::Json::parse(in.readAll().toStdString());
        cfg["architectures"] = lathe::config::Json::array({"MistralForCausalLM"});
        QFile out(bad + "/config.json");
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(QByteArray::fromStdString(cfg.dump()));
        out.close();
        const auto before = w.editor()->document();
        QVERIFY(!w.newRunFromHfModel(bad));
        auto* box = w.findChild<QMessageBox*>(QStringLiteral("problemBox"));
        QVERIFY(box);
        QVERIFY2(box->text().contains(QStringLiteral("architectures")), qPrintable(box->text()));
        QVERIFY(w.editor()->document() == before);
    }
};

QTEST_MAIN(TestE2EWorkbench)
#include "test_e2e_workbench.moc"
