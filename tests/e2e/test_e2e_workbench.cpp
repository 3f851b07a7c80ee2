// End to end, under Xvfb: the real workbench window against a real lathe-engine process.
// Start tiny -> at least 20 points plotted -> Checkpoint now -> a new step{N} folder -> Stop ->
// the engine exits 0 with a final checkpoint; a screenshot of the window is saved.
// New run from a Hugging Face model: a Llama-style folder (made by the engine's own export) fills
// the editor (family, sizes, load_path) and trains from its weights; a model Lathe cannot load is
// refused with the field named, and the editor keeps its config.
#include "tests/byte_chat_tokenizer.h"
#include "ui/control/run_toolbar.h"
#include "ui/main_window.h"

#include "ui/checkpoints/export_dialog.h"
#include "ui/config/config_editor.h"
#include "ui/data/data_dialog.h"
#include "ui/data/prepare_job.h"
#include "ui/logs/log_model.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"
#include "ui/samples/samples_panel.h"

#include <QAction>
#include <QCheckBox>
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcess>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

using lathe::ui::DataDialog;
using lathe::ui::MainWindow;
using lathe::ui::PrepareJob;

namespace {

void writeText(const QString& path, const QString& text) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text.toUtf8());
}

// Runs the engine (LATHE_ENGINE) to the end: true when it exits 0. Its standard output goes to
// `output` when given; on a failure everything it printed is logged.
bool runEngine(const QStringList& args, QByteArray* output = nullptr) {
    QProcess p;
    p.setProcessChannelMode(output ? QProcess::SeparateChannels : QProcess::MergedChannels);
    p.start(qEnvironmentVariable("LATHE_ENGINE"), args);
    const bool done = p.waitForFinished(300000);
    const QByteArray out = p.readAllStandardOutput();
    if (output) *output = out;
    if (!done || p.exitCode() != 0)
        qWarning("%s%s", out.constData(), p.readAllStandardError().constData());
    return done && p.exitCode() == 0;
}

}  // namespace

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

    // Chat fine-tuning, end to end in the window (issue 44): a Hugging Face folder with a chat
    // template -> New run from it -> Prepare data (chat conversations, clicked) -> Start -> Try
    // it, Chat (typed) -> File > Export to Hugging Face. The template travels the whole way:
    // transformers' apply_chat_template on the export renders what Lathe trained on, and
    // `generate --chat` on the export answers as Try it did.
    void chatFineTuneJourney() {
        const QString python = qEnvironmentVariable("LATHE_TEST_PYTHON");
        if (python.isEmpty() || !QFileInfo(python).isExecutable())
            QSKIP("needs the test environment's Python (transformers)");
        QTemporaryDir work;
        // The model folder: Llama-style weights, a byte-level tokenizer with ChatML's special
        // tokens, and its chat template, as a Hugging Face chat model's folder holds them.
        QVERIFY(runEngine({"train", "tiny_llama", "run_name=chat-src",
                           "trainer.save_folder=" + work.path() + "/src", "model.vocab_size=384",
                           "trainer.max_duration=1steps", "launch.num_threads=1"}));
        const QString hf = work.path() + "/chat-model";
        QVERIFY(runEngine({"export", work.path() + "/src/step1", hf}));
        {
            QFile cfg(hf + "/config.json");
            QVERIFY(cfg.open(QIODevice::ReadOnly));
            auto j = lathe::config::Json::parse(cfg.readAll().toStdString());
            cfg.close();
            j.erase("lathe");  // its own note says "bytes": this folder has a tokenizer now
            QVERIFY(cfg.open(QIODevice::WriteOnly | QIODevice::Truncate));
            cfg.write(QByteArray::fromStdString(j.dump(2)));
        }
        QVERIFY(!lathe::testing::write_byte_chat_tokenizer(hf).isEmpty());
        const QString chatml =
            "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
            "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
            "'<|im_start|>assistant\\n' }}{% endif %}";
        writeText(hf + "/chat_template.jinja", chatml);
        writeText(
            hf + "/tokenizer_config.json",
            "{\"eos_token\": \"<|im_end|>\", \"tokenizer_class\": \"PreTrainedTokenizerFast\"}");
        // The user's chats: one question, always the same answer, to learn in a few steps.
        QString chats;
        for (int i = 0; i < 64; ++i)
            chats += QStringLiteral(
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"Say hi %1\"}, "
                         "{\"role\": \"assistant\", \"content\": \"hi\"}]}\n")
                         .arg(i % 4);
        writeText(work.path() + "/chats.jsonl", chats);

        QTemporaryDir runs;
        qputenv("LATHE_RUNS_DIR", runs.path().toUtf8());
        MainWindow w;
        w.resize(1366, 768);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(w.newRunFromHfModel(hf));

        // Prepare data: the chats, the model's tokenizer, Chat conversations clicked.
        DataDialog* d = w.showDataDialog();
        d->addInputs({work.path() + "/chats.jsonl"});
        d->setTokenizerFile(hf + "/tokenizer.json");
        auto* chat = d->findChild<QCheckBox*>(QStringLiteral("dataChat"));
        QVERIFY(chat);
        QTest::mouseClick(chat, Qt::LeftButton, {}, QPoint(8, chat->height() / 2));
        QVERIFY(chat->isChecked());
        QVERIFY2(d->chatPreviewHtml().contains("Template: " + hf + "/chat_template.jinja"),
                 qPrintable(d->chatPreviewHtml()));
        d->setOutputFolder(work.path() + "/chat-tokens");
        QSignalSpy prepared(d->job(), &PrepareJob::finished);
        QVERIFY2(d->prepare(), qPrintable(d->statusText()));
        QVERIFY(prepared.wait(180000));
        QVERIFY2(prepared.at(0).at(0).toBool(), qPrintable(d->statusText()));
        d->close();

        // Train, from the window's own Start.
        w.editor()->editField(QStringLiteral("dataset.sequence_length"), 64);
        w.editor()->editField(QStringLiteral("train_module.max_sequence_length"), 64);
        w.editor()->editField(QStringLiteral("data_loader.global_batch_size"), 256);
        w.editor()->editField(QStringLiteral("train_module.rank_microbatch_size"), 256);
        w.editor()->editField(QStringLiteral("trainer.max_duration"),
                              lathe::config::Json{{"value", 40}, {"unit", "steps"}});
        w.editor()->editField(QStringLiteral("train_module.optim.lr"), 3e-3);
        w.editor()->editField(QStringLiteral("launch.num_threads"), 1);
        QString issues;
        for (const auto& i : w.editor()->issues())
            issues += QString::fromStdString(i.to_string()) + "\n";
        QVERIFY2(w.editor()->isValid(), qPrintable(issues));
        w.toolbar()->startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("finished"),
                                  240000);
        QCOMPARE(w.run()->exitCode(), 0);
        const QString runDir =
            runs.path() + "/" +
            QString::fromStdString(w.editor()->document()["run_name"].get<std::string>());
        const QString ckpt = runDir + "/step40";
        QVERIFY2(QFileInfo(ckpt + "/chat_template.jinja").isFile(), qPrintable(ckpt));

        // Try it, Chat, greedy: typed in and sent with Enter.
        auto* panel = w.samplesPanel();
        auto* tryChat = panel->findChild<QCheckBox*>(QStringLiteral("tryItChat"));
        QTest::mouseClick(tryChat, Qt::LeftButton, {}, QPoint(8, tryChat->height() / 2));
        QVERIFY(panel->chatMode());
        panel->setSampling(6, 0, 0, 1.0);
        QSignalSpy answered(panel, &lathe::ui::SamplesPanel::generationFinished);
        QTest::keyClicks(panel->promptEdit(), QStringLiteral("Say hi 2"));
        QTest::keyClick(panel->promptEdit(), Qt::Key_Return);
        QVERIFY(answered.wait(120000));
        QVERIFY2(answered.last().at(0).toBool(), qPrintable(answered.last().at(1).toString()));
        QCOMPARE(panel->conversation().size(), 2);
        const QString reply = panel->conversation()[1].second;
        QVERIFY2(reply.startsWith(QStringLiteral("hi")), qPrintable(reply));  // it learnt

        // File > Export to Hugging Face, from the window.
        auto* exporter = w.showExportDialog();
        const QString exported = work.path() + "/exported";
        exporter->setCheckpoint(ckpt);
        exporter->setOutputFolder(exported);
        QSignalSpy exportedSpy(exporter, &lathe::ui::ExportDialog::finished);
        QVERIFY2(exporter->startExport(), qPrintable(exporter->statusText()));
        QVERIFY(exportedSpy.wait(120000));
        QVERIFY2(exportedSpy.at(0).at(0).toBool(), qPrintable(exportedSpy.at(0).at(1).toString()));

        // transformers on the export renders what Lathe trained on ...
        writeText(work.path() + "/prompt.jsonl",
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"Say hi 2\"}]}\n");
        QByteArray lathe;
        QVERIFY(runEngine(
            {"chat", work.path() + "/prompt.jsonl", "--tokenizer",
             work.path() + "/chat-tokens/tokenizer.json", "--text", "--generation-prompt"},
            &lathe));
        QProcess py;
        py.start(python, {"-c",
                          "import sys; from transformers import AutoTokenizer; "
                          "t = AutoTokenizer.from_pretrained(sys.argv[1]); "
                          "sys.stdout.write(t.apply_chat_template([{'role': 'user', 'content': "
                          "'Say hi 2'}], tokenize=False, add_generation_prompt=True))",
                          exported});
        QVERIFY(py.waitForFinished(120000));
        QVERIFY2(py.exitCode() == 0, py.readAllStandardError().right(1500).constData());
        const QByteArray hfText = py.readAllStandardOutput();
        QVERIFY2(!hfText.isEmpty() && hfText == lathe, qPrintable(hfText + " vs " + lathe));
        // ... and generate on the export answers as Try it did.
        QByteArray answer;
        QVERIFY(runEngine({"generate", exported, "--chat", "--prompt", "Say hi 2",
                           "--max-new-tokens", "6", "--temperature", "0", "--json"},
                          &answer));
        const auto j = lathe::config::Json::parse(answer.split('\n').first().toStdString());
        QCOMPARE(QString::fromStdString(j["reply"].get<std::string>()), reply);
    }
};

QTEST_MAIN(TestE2EWorkbench)
#include "test_e2e_workbench.moc"
