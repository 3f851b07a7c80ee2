// The Data page against the real lathe-engine: PrepareJob's arguments and progress lines, then a
// small folder of text prepared from the dialog (a SentencePiece tokenizer trained on it first),
// Cancel keeping the finished shards, and the main window training on the result.
#include "engine/protocol/cli_output.h"
#include "tests/byte_chat_tokenizer.h"
#include "tests/engine_runner.h"
#include "ui/config/config_editor.h"
#include "ui/control/run_toolbar.h"
#include "ui/data/chat_preview.h"
#include "ui/data/data_dialog.h"
#include "ui/data/mixture_editor.h"
#include "ui/main_window.h"

#include <QAction>
#include <QCheckBox>
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>

using lathe::ui::ChatPreview;
using lathe::ui::DataDialog;
using lathe::ui::MainWindow;
using lathe::ui::PrepareJob;
using lathe::ui::PrepareRequest;

namespace {

// Deterministic text: sentences of words from a small vocabulary, some non-ASCII.
QString makeText(quint32 seed, int sentences) {
    static const QStringList words = {
        QStringLiteral("the"),    QStringLiteral("lathe"),   QStringLiteral("turns"),
        QStringLiteral("wood"),   QStringLiteral("into"),    QStringLiteral("round"),
        QStringLiteral("shapes"), QStringLiteral("while"),   QStringLiteral("a"),
        QStringLiteral("model"),  QStringLiteral("learns"),  QStringLiteral("café"),
        QStringLiteral("naïve"),  QStringLiteral("Straße"),  QStringLiteral("12"),
        QStringLiteral("2026"),   QStringLiteral("quickly"), QStringLiteral("slowly")};
    QRandomGenerator rng(seed);
    QString out;
    for (int s = 0; s < sentences; ++s) {
        const int n = 4 + static_cast<int>(rng.bounded(10));
        for (int w = 0; w < n; ++w) {
            out += words[static_cast<int>(rng.bounded(static_cast<quint32>(words.size())))];
            out += w + 1 < n ? QStringLiteral(" ") : QStringLiteral(".\n");
        }
    }
    return out;
}

void writeFile(const QString& path, const QString& text) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text.toUtf8());
}

// A byte-level tokenizer.json with ChatML's two special tokens, and a tokenizer_config.json with a
// ChatML template, in `dir`.
QString writeChatTokenizer(const QString& dir) {
    lathe::testing::write_byte_chat_tokenizer(dir);
    const QJsonObject config{
        {"eos_token", "<|im_end|>"},
        {"chat_template",
         "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
         "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
         "'<|im_start|>assistant\\n' }}{% endif %}"}};
    writeFile(dir + "/tokenizer_config.json", QString::fromUtf8(QJsonDocument(config).toJson()));
    return dir + "/tokenizer.json";
}

}  // namespace

class TestDataDialog : public QObject {
    Q_OBJECT

    QTemporaryDir root_;
    QString text_;  // a folder of text files

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
        QCoreApplication::setApplicationName(QStringLiteral("lathe-test"));
        QVERIFY(QFileInfo(lathe::testing::engine_path()).isExecutable());
        qputenv("LATHE_ENGINE", lathe::testing::engine_path().toUtf8());
        text_ = root_.path() + "/text";
        QVERIFY(QDir().mkpath(text_));
        for (int i = 0; i < 40; ++i)
            writeFile(text_ + QStringLiteral("/doc%1.txt").arg(i, 2, 10, QLatin1Char('0')),
                      makeText(static_cast<quint32>(i), 60));
    }

    // Every test starts from the preset and the default panels, not from the last test's form
    // (the window restores both from QSettings).
    void init() {
        QSettings s;
        s.remove(QStringLiteral("editor/session"));
        s.remove(QStringLiteral("plots/panels"));
    }

    void requestsAndProgressLines() {
        PrepareRequest r;
        QVERIFY(r.problem().contains(QStringLiteral("Add text")));
        r.inputs = {text_};
        QVERIFY(r.problem().contains(QStringLiteral("folder")));
        r.outDir = root_.path() + "/out";
        QVERIFY(r.problem().contains(QStringLiteral("tokenizer")));
        r.trainVocabSize = 500;
        QVERIFY(r.problem().isEmpty());
        QCOMPARE(r.trainArguments().mid(0, 3),
                 (QStringList{QStringLiteral("tokenizer"), QStringLiteral("train"), text_}));
        QVERIFY(r.prepareArguments().contains(r.trainedTokenizerPath()));
        QVERIFY(r.prepareArguments().contains(QStringLiteral("json")));
        QVERIFY(!r.prepareArguments().contains(QStringLiteral("--chat")));
        // Chat data: the model's own tokenizer, --chat, assistant turns unless asked otherwise.
        r.chat = true;
        QVERIFY(r.problem().contains(QStringLiteral("own tokenizer")));
        r.trainVocabSize = 0;
        r.tokenizer = text_ + QStringLiteral("/doc00.txt");
        QVERIFY(r.problem().isEmpty());
        QVERIFY(r.prepareArguments().contains(QStringLiteral("--chat")));
        QVERIFY(r.prepareArguments().contains(QStringLiteral("assistant")));
        QVERIFY(!r.prepareArguments().contains(QStringLiteral("--field")));
        r.trainOnAll = true;
        QVERIFY(r.prepareArguments().contains(QStringLiteral("all")));
        r.chat = false;
        r.trainVocabSize = 500;

        // The lines as the engine writes them (engine/protocol/cli_output.h).
        PrepareJob job;
        namespace proto = lathe::protocol;
        proto::PrepareProgress progress;
        progress.bytes_done = 50;
        progress.bytes_total = 200;
        progress.tokens = 1234;
        progress.shards = 2;
        progress.mb_per_s = 3.5;
        progress.eta_s = 4;
        job.readProgressLine(QByteArray::fromStdString(proto::write_output(progress)));
        QCOMPARE(job.fraction(), 0.25);
        QVERIFY(job.message().contains(QStringLiteral("1234 tokens")));
        job.readProgressLine("not json");  // ignored
        proto::PrepareDone done;
        done.folder = "/d";
        done.tokenizer = "/d/tokenizer.model";
        done.dtype = "uint16";
        done.tokens = 9;
        done.documents = 3;
        done.shards = 1;
        done.padded_vocab_size = 512;
        job.readProgressLine(QByteArray::fromStdString(proto::write_output(done)));
        QVERIFY2(job.protocolError().isEmpty(), qPrintable(job.protocolError()));
        const auto changes = job.result().configChanges();
        QCOMPARE(changes.size(), 5);
        QCOMPARE(changes[1].second, lathe::config::Json::array({"/d"}));
        QCOMPARE(changes[4].second, lathe::config::Json(512));

        // A renamed or retyped field is an error naming it, not a silent 0.
        PrepareJob renamed;
        auto line = proto::write_output(done);
        line.replace(line.find("\"tokens\""), 8, "\"n_tokens\"");
        renamed.readProgressLine(QByteArray::fromStdString(line));
        QVERIFY2(renamed.protocolError().contains(QStringLiteral("tokens: missing")),
                 qPrintable(renamed.protocolError()));
        QVERIFY(renamed.result().folder.isEmpty());
    }

    // From the window: prepare with a tokenizer trained on the text, then train on it.
    void chatPreviewShowsWhatTheLossSees() {
        const QString tok = writeChatTokenizer(root_.path() + "/chat-model");
        const QString jsonl = root_.path() + "/chats.jsonl";
        writeFile(jsonl,
                  "\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}, "
                  "{\"role\": \"assistant\", \"content\": \"Hi there\"}]}\n");
        // Assistant turns only: "Hi there" (8 byte tokens), <|im_end|> and "\n" are trained; the
        // user turn and the assistant header are context.
        auto p = ChatPreview::of(tok, jsonl, false);
        QVERIFY2(p.error.isEmpty(), qPrintable(p.error));
        QCOMPARE(p.where, jsonl + ":2");
        QCOMPARE(p.trainedTokens, 10);
        QCOMPARE(p.runs.size(), 2);
        QVERIFY(!p.runs[0].trained && p.runs[0].text.endsWith("<|im_start|>assistant\n"));
        QVERIFY(p.runs[1].trained && p.runs[1].text == "Hi there<|im_end|>\n");
        QCOMPARE(ChatPreview::of(tok, jsonl, true).trainedTokens, p.totalTokens);

        DataDialog d;
        d.addInputs({jsonl});
        d.setTokenizerFile(tok);
        QVERIFY(d.chatPreviewHtml().isEmpty());  // chat off: no preview
        d.setChat(true);
        QVERIFY2(d.chatPreviewHtml().contains("Hi there"), qPrintable(d.chatPreviewHtml()));
        QVERIFY(d.chatPreviewHtml().contains(">10<"));
        QVERIFY(d.request().prepareArguments().contains("--chat"));

        QVERIFY2(d.chatPreviewHtml().contains(tok.section('/', 0, -2) + "/tokenizer_config.json"),
                 qPrintable(d.chatPreviewHtml()));  // the template in force

        // Another template and a variable, typed in as a user does: the preview renders with
        // them (and the line's tools) and says which template is in force; Prepare passes both.
        const QString other = root_.path() + "/house.jinja";
        writeFile(other,
                  "{{ style }}|{{ tools[0].name }}|{% for m in messages %}{{ m['content'] + "
                  "'<|im_end|>' }}{% endfor %}");
        writeFile(jsonl,
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}, "
                  "{\"role\": \"assistant\", \"content\": \"Hi there\"}], "
                  "\"tools\": [{\"name\": \"calc\"}]}\n");
        auto* templateEdit = d.findChild<QLineEdit*>(QStringLiteral("dataChatTemplate"));
        auto* argsEdit = d.findChild<QLineEdit*>(QStringLiteral("dataTemplateArgs"));
        QVERIFY(templateEdit && argsEdit && templateEdit->isEnabled());
        QTest::keyClicks(templateEdit, other);
        QTest::keyClicks(argsEdit, QStringLiteral("style=\"very terse\""));
        QVERIFY2(d.chatPreviewHtml().contains("very terse|calc|Hello") &&
                     d.chatPreviewHtml().contains("Template: " + other),
                 qPrintable(d.chatPreviewHtml()));
        const auto args = d.request().prepareArguments();
        QVERIFY2(args.contains("--chat-template") && args.contains(other) &&
                     args.contains("--template-arg") && args.contains("style=very terse"),
                 qPrintable(args.join(' ')));
        auto* skip = d.findChild<QCheckBox*>(QStringLiteral("dataSkipUnmaskable"));
        QVERIFY(skip && skip->isEnabled());
        QTest::mouseClick(skip, Qt::LeftButton, {}, QPoint(8, skip->height() / 2));
        QVERIFY(d.request().prepareArguments().join(' ').contains("--unmaskable skip"));
        argsEdit->clear();
        d.setOutputFolder(root_.path() + "/chat-out");
        QVERIFY2(d.request().problem().isEmpty(), qPrintable(d.request().problem()));
        QTest::keyClicks(argsEdit, QStringLiteral("nonsense"));
        QVERIFY(d.request().problem().contains("NAME=VALUE"));
        QVERIFY(d.chatPreviewHtml().contains("NAME=VALUE"));
        templateEdit->clear();
        argsEdit->clear();
        // A built-in template, from the Built-in menu.
        auto* builtin = d.findChild<QToolButton*>(QStringLiteral("dataChatBuiltin"));
        QVERIFY(builtin && builtin->menu() && !builtin->menu()->actions().isEmpty());
        builtin->menu()->actions().constFirst()->trigger();
        QCOMPARE(templateEdit->text(), QStringLiteral("builtin:chatml"));
        QVERIFY2(d.chatPreviewHtml().contains("Template: builtin:chatml") &&
                     d.request().problem().isEmpty(),
                 qPrintable(d.chatPreviewHtml()));
        templateEdit->clear();

        // A line that is not a conversation: the preview says where and why.
        writeFile(jsonl, "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\n");
        p = ChatPreview::of(tok, jsonl, false);
        QVERIFY(p.error.contains(jsonl + ":1") && p.error.contains("unknown role"));
        QVERIFY(p.html().contains("unknown role"));
    }

    void prepareAndTrainFromTheWindow() {
        MainWindow w;
        w.setRunsRoot(root_.path() + "/runs");
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        DataDialog* d = w.showDataDialog();
        QVERIFY(d->isVisible());
        d->addInputs({text_});
        d->setTrainTokenizer(400, QStringLiteral("bpe"));
        d->setOutputFolder(root_.path() + "/tokens");
        d->setShardSize(QStringLiteral("16KB"));
        QSignalSpy finished(d->job(), &PrepareJob::finished);
        QVERIFY2(d->prepare(), qPrintable(d->statusText()));
        QVERIFY(finished.wait(180000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(d->statusText()));
        const auto& r = d->job()->result();
        QVERIFY(r.shards > 1);
        QCOMPARE(r.paddedVocabSize, 512);
        QVERIFY(QFileInfo(r.tokenizer).isFile());
        QVERIFY(r.tokenizer.endsWith(QStringLiteral("tokenizer.model")));

        // The editor now trains on it.
        const auto& doc = w.editor()->document();
        QCOMPARE(doc["dataset"]["source"], lathe::config::Json("numpy"));
        QCOMPARE(doc["dataset"]["paths"], lathe::config::Json::array({r.folder.toStdString()}));
        QCOMPARE(doc["dataset"]["tokenizer"], lathe::config::Json(r.tokenizer.toStdString()));
        QCOMPARE(doc["model"]["vocab_size"], lathe::config::Json(512));
        QVERIFY(w.editor()->isValid());

        w.editor()->editField(QStringLiteral("run_name"), "from-data");
        w.editor()->editField(QStringLiteral("trainer.max_duration"),
                              lathe::config::Json{{"value", 4}, {"unit", "steps"}});
        w.editor()->editField(QStringLiteral("launch.num_threads"), 1);
        QVERIFY(w.startRun());
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("finished"),
                                  180000);
        const QString ckpt = root_.path() + "/runs/from-data/step4";
        QVERIFY2(QFileInfo(ckpt + "/tokenizer.model").isFile(), qPrintable(ckpt));
    }

    // The Mixture tab: sources with ratios, planned tokens at once, the engine's plan (tokens
    // held, repetition) on Estimate with a warning past max repetition, Apply into the config
    // (issue 32 item 5).
    void mixtureEditorPlansAndApplies() {
        using lathe::ui::MixtureEditor;
        using lathe::ui::MixtureModel;
        using Json = lathe::config::Json;
        auto writeTokens = [&](const QString& name, int n) {
            QFile f(root_.path() + "/" + name);
            if (!f.open(QIODevice::WriteOnly)) return QString();
            for (int i = 0; i < n; ++i) {
                const quint16 t = quint16(i % 200);
                f.write(reinterpret_cast<const char*>(&t), 2);
            }
            return f.fileName();
        };
        const QString web = writeTokens(QStringLiteral("web.npy"), 5000);
        const QString code = writeTokens(QStringLiteral("code.npy"), 2000);

        MainWindow w;
        w.editor()->editField(QStringLiteral("dataset.token_dtype"), "uint16");
        w.editor()->editField(QStringLiteral("dataset.sequence_length"), 64);
        DataDialog* d = w.showDataDialog();
        MixtureEditor* m = d->mixtureEditor();
        MixtureModel* model = m->model();
        QCOMPARE(model->addSource({web}), 0);
        QCOMPARE(model->addSource({code}), 1);
        QCOMPARE(model->sources()[0].name, QStringLiteral("web"));
        QCOMPARE(model->sources()[1].ratio, 0.0);  // what the first one left
        QVERIFY(m->problemsText().contains(QStringLiteral("requested_tokens")));
        auto* requested = m->findChild<QLineEdit*>(QStringLiteral("mixtureRequested"));
        QTest::keyClicks(requested, QStringLiteral("4096"));
        QCOMPARE(model->requestedTokens(), std::optional<qint64>(4096));
        QVERIFY(model->setData(model->index(0, MixtureModel::Ratio), 0.5));
        QVERIFY(model->setData(model->index(1, MixtureModel::Ratio), 1.5));
        QVERIFY2(m->problemsText().contains(QStringLiteral("sum to 2")),
                 qPrintable(m->problemsText()));
        model->normalizeRatios();
        QCOMPARE(model->sources()[0].ratio, 0.25);
        QCOMPARE(model->plannedTokens(1), std::optional<qint64>(3072));
        QCOMPARE(model->data(model->index(1, MixtureModel::Planned)).toString(),
                 QStringLiteral("3.1k"));

        // The engine's plan: what each source holds, and code needs 1.54x its tokens.
        QSignalSpy estimated(m, &MixtureEditor::estimated);
        m->findChild<QPushButton*>(QStringLiteral("mixtureEstimate"))->click();
        QVERIFY(estimated.wait(60000));
        QVERIFY2(estimated.at(0).at(0).toBool(), qPrintable(estimated.at(0).at(1).toString()));
        QCOMPARE(model->sources()[0].available, std::optional<qint64>(5000));
        QCOMPARE(model->sources()[1].available, std::optional<qint64>(2000));
        QCOMPARE(*model->sources()[1].repetitions, 1.536);
        QCOMPARE(model->data(model->index(1, MixtureModel::Repetition)).toString(),
                 QStringLiteral("1.54×"));
        QVERIFY(
            model->data(model->index(1, MixtureModel::Repetition), Qt::ForegroundRole).isValid());
        QVERIFY2(m->problemsText().contains(QStringLiteral("code needs 3.1k tokens but has 2.0k")),
                 qPrintable(m->problemsText()));
        auto* apply = m->findChild<QPushButton*>(QStringLiteral("mixtureApply"));
        QVERIFY(!apply->isEnabled());
        QVERIFY(!m->apply());

        // Allowing two passes over code clears it without asking the engine again.
        QVERIFY(model->setData(model->index(1, MixtureModel::MaxRepetition), 2.0));
        QVERIFY2(m->problemsText().isEmpty(), qPrintable(m->problemsText()));
        QVERIFY(apply->isEnabled());
        apply->click();
        const Json& doc = w.editor()->document();
        QCOMPARE(doc["dataset"]["source"], Json("numpy"));
        QCOMPARE(doc["dataset"]["mixture"]["requested_tokens"], Json(4096));
        QCOMPARE(doc["dataset"]["mixture"]["sources"].size(), std::size_t(2));
        QCOMPARE(doc["dataset"]["mixture"]["sources"][1]["source_name"], Json("code"));
        QCOMPARE(doc["dataset"]["mixture"]["sources"][1]["max_repetition_ratio"], Json(2.0));

        // A bad path: the engine's message, naming the field.
        QVERIFY(model->setData(model->index(1, MixtureModel::Paths), root_.path() + "/none.npy"));
        QVERIFY(m->estimate());
        QVERIFY(estimated.wait(60000));
        QVERIFY(!estimated.last().at(0).toBool());
        QVERIFY2(m->problemsText().contains(QStringLiteral("dataset.mixture.sources[1].paths")),
                 qPrintable(m->problemsText()));

        // The table round-trips dataset.mixture, and a new window's editor fills it.
        MixtureModel copy;
        QVERIFY(copy.fromJson(doc["dataset"]["mixture"]));
        QCOMPARE(copy.toJson(), doc["dataset"]["mixture"]);
        QVERIFY(!copy.fromJson(Json("not a mixture")));
    }

    // Cancel stops prepare-data and keeps its finished shards; Prepare again goes on.
    // A job that ends without the data leaves the bar empty, not at the last fraction it showed
    // (issue 34: a failed Prepare left it at 100%).
    void failedPrepareEmptiesTheBar() {
        DataDialog d;
        auto* bar = d.findChild<QProgressBar*>(QStringLiteral("dataProgress"));
        QVERIFY(bar);
        Q_EMIT d.job()->progressChanged(1.0, QStringLiteral("writing the manifest"));
        QCOMPARE(bar->value(), 1000);
        Q_EMIT d.job()->finished(false);
        QCOMPARE(bar->value(), 0);
        QCOMPARE(bar->maximum(), 1000);
    }

    void cancelKeepsShards() {
        const QString big = root_.path() + "/big";
        QVERIFY(QDir().mkpath(big));
        for (int i = 0; i < 8; ++i)
            writeFile(big + QStringLiteral("/part%1.txt").arg(i), makeText(100 + i, 20000));
        DataDialog d;
        d.addInputs({big});
        d.setTokenizerFile(root_.path() + "/tokens/tokenizer.model");
        d.setOutputFolder(root_.path() + "/big-tokens");
        d.setShardSize(QStringLiteral("4KB"));
        QSignalSpy finished(d.job(), &PrepareJob::finished);
        QVERIFY2(d.prepare(), qPrintable(d.statusText()));
        QTRY_VERIFY_WITH_TIMEOUT(
            QFileInfo::exists(root_.path() + "/big-tokens/.prepare-state.json") ||
                !finished.isEmpty(),
            60000);
        d.job()->cancel();
        QVERIFY(finished.wait(60000) || !finished.isEmpty());
        QCOMPARE(d.job()->state(), PrepareJob::State::Cancelled);
        QVERIFY(d.statusText().contains(QStringLiteral("kept")));
        QVERIFY(QFileInfo::exists(root_.path() + "/big-tokens/part-00000.npy"));
        QVERIFY(d.prepare());
        QVERIFY(finished.wait(180000));
        QVERIFY2(finished.last().at(0).toBool(), qPrintable(d.statusText()));
        QVERIFY(QFileInfo::exists(root_.path() + "/big-tokens/manifest.json"));
    }
};

QTEST_MAIN(TestDataDialog)
#include "test_data_dialog.moc"
