// The Samples dock: SamplesModel reads samples.jsonl (bad lines skipped, a resumed run's abandoned
// steps dropped) and takes live steps; SamplesPanel's slider shows any step and follows the newest
// only when the newest is shown; Try it runs a child `generate` (the fake engine), shows its text or
// its error, and Stop ends it without blocking the window.
#include "ui/samples/samples_model.h"
#include "ui/samples/samples_panel.h"

#include <QCheckBox>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace lathe::ui;

namespace {

void write_lines(const QString& dir, const std::string& text) {
    std::ofstream(QDir(dir).filePath(QStringLiteral("samples.jsonl")).toStdString()) << text;
}

std::string line(int step, const std::string& prompt, const std::string& text) {
    return "{\"step\":" + std::to_string(step) + ",\"prompt\":\"" + prompt + "\",\"text\":\"" +
           text + "\",\"ids\":[1]}\n";
}

}  // namespace

class TestSamples : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void modelReadsTheFile() {
        QTemporaryDir dir;
        write_lines(dir.path(), line(10, "A", "a10") + line(10, "B", "b10") + "not json\n" +
                                    line(20, "A", "a20") + line(20, "B", "b20") +
                                    line(30, "A", "a30") +
                                    // resumed from step 20: 30 was abandoned
                                    line(25, "A", "a25") + "{\"step\":\"x\"}\n");
        SamplesModel m;
        QSignalSpy reset(&m, &SamplesModel::reset);
        QCOMPARE(m.loadRun(dir.path()), 2);
        QCOMPARE(reset.count(), 1);
        QCOMPARE(m.steps().size(), 3);
        QCOMPARE(m.steps()[0].step, 10);
        QCOMPARE(m.steps()[0].samples.size(), 2);
        QCOMPARE(m.steps()[1].samples[1].text, QStringLiteral("b20"));
        QCOMPARE(m.steps()[2].step, 25);
        QCOMPARE(m.indexOfStep(30), -1);
        // Live steps append; one at or before the last replaces from there on.
        QSignalSpy added(&m, &SamplesModel::stepAdded);
        m.addStep(40, {{QStringLiteral("A"), QStringLiteral("a40")}});
        QCOMPARE(m.steps().size(), 4);
        m.addStep(25, {{QStringLiteral("A"), QStringLiteral("again")}});
        QCOMPARE(m.steps().size(), 3);
        QCOMPARE(m.steps().back().samples[0].text, QStringLiteral("again"));
        QCOMPARE(added.count(), 2);
        // A run without samples is no error.
        QTemporaryDir empty;
        QCOMPARE(m.loadRun(empty.path()), 0);
        QVERIFY(m.isEmpty());
    }

    void panelShowsAndFollows() {
        QTemporaryDir dir;
        write_lines(dir.path(), line(10, "The ", "first") + line(20, "The ", "second"));
        SamplesModel m;
        SamplesPanel panel(&m);
        QCOMPARE(panel.shownStep(), -1);
        m.loadRun(dir.path());
        QCOMPARE(panel.shownStep(), 20);  // the newest first
        QVERIFY(panel.shownText().contains(QStringLiteral("The second")));
        panel.showIndex(0);
        QCOMPARE(panel.shownStep(), 10);
        QVERIFY(panel.shownText().contains(QStringLiteral("The first")));
        // A new step does not move a user who looks at an older one...
        m.addStep(30, {{QStringLiteral("The "), QStringLiteral("third")}});
        QCOMPARE(panel.shownStep(), 10);
        // ...but follows when the newest is shown.
        panel.showIndex(2);
        m.addStep(40, {{QStringLiteral("The "), QStringLiteral("<fourth> & more")}});
        QCOMPARE(panel.shownStep(), 40);
        QVERIFY(panel.shownText().contains(QStringLiteral("The <fourth> & more")));
    }

    void tryItRunsAChildAndCanBeStopped() {
        const QString engine = qEnvironmentVariable("LATHE_ENGINE");
        QVERIFY2(!engine.isEmpty(), "LATHE_ENGINE must name the fake engine");
        SamplesModel m;
        SamplesPanel panel(&m);
        panel.setEnginePath(engine);
        QVERIFY(!panel.generate());  // no source yet
        panel.setModelSource(QStringLiteral("/some/run"), true);
        panel.promptEdit()->setText(QStringLiteral("abc"));
        QSignalSpy done(&panel, &SamplesPanel::generationFinished);
        QVERIFY(panel.generate());
        QVERIFY(panel.isGenerating());
        QVERIFY(done.wait(10000));
        QCOMPARE(done.at(0).at(0).toBool(), true);
        QCOMPARE(panel.tryItOutput(), QStringLiteral("abccba"));  // prompt + the fake's text
        // Ids for a run without a tokenizer; a text prompt is refused before anything starts.
        panel.setModelSource(QStringLiteral("/some/run"), false);
        QVERIFY(!panel.generate());
        QVERIFY(panel.tryItOutput().contains(QStringLiteral("token ids")));
        panel.promptEdit()->setText(QStringLiteral("1, 2,3"));
        QVERIFY(panel.generate());
        QVERIFY(done.wait(10000));
        QCOMPARE(panel.tryItOutput(), QStringLiteral("1 2 3"));
        // Stop ends a slow one at once.
        qputenv("LATHE_FAKE_GENERATE_MS", "20000");
        QVERIFY(panel.generate());
        QElapsedTimer t;
        t.start();
        panel.stopGenerating();
        QVERIFY(done.wait(5000));
        QVERIFY(t.elapsed() < 5000);
        QCOMPARE(done.last().at(0).toBool(), false);
        QCOMPARE(panel.tryItOutput(), QStringLiteral("Stopped."));
        qunsetenv("LATHE_FAKE_GENERATE_MS");
        // The engine's error is shown.
        qputenv("LATHE_FAKE_MODE", "fail");
        QVERIFY(panel.generate());
        QVERIFY(done.wait(10000));
        QVERIFY(panel.tryItOutput().contains(QStringLiteral("no such folder")));
        qunsetenv("LATHE_FAKE_MODE");
    }

    // Sampling options reach the engine; chat mode talks in turns, passing the conversation so
    // far (issue 34 item 10; issue 32's "generate in chat format" from the window).
    void tryItSamplesAndChats() {
        const QString engine = qEnvironmentVariable("LATHE_ENGINE");
        QVERIFY2(!engine.isEmpty(), "LATHE_ENGINE must name the fake engine");
        SamplesModel m;
        SamplesPanel panel(&m);
        panel.setEnginePath(engine);
        panel.setModelSource(QStringLiteral("/some/run"), true);
        QSignalSpy done(&panel, &SamplesPanel::generationFinished);
        panel.promptEdit()->setText(QStringLiteral("abc"));
        QVERIFY(panel.generate());
        QVERIFY(done.wait(10000));
        QVERIFY(!panel.lastArguments().contains(QStringLiteral("--top-k")));  // off by default
        QVERIFY(!panel.lastArguments().contains(QStringLiteral("--top-p")));
        panel.setSampling(16, 0.7, 40, 0.9);
        QVERIFY(panel.generate());
        QVERIFY(done.wait(10000));
        const QString args = panel.lastArguments().join(QLatin1Char(' '));
        QVERIFY2(args.contains(QStringLiteral("--max-new-tokens 16 --temperature 0.7")) &&
                     args.contains(QStringLiteral("--top-k 40")) &&
                     args.contains(QStringLiteral("--top-p 0.9")),
                 qPrintable(args));

        // Chat: each turn carries the conversation so far; the reply joins it.
        panel.findChild<QCheckBox*>(QStringLiteral("tryItChat"))->setChecked(true);
        QVERIFY(panel.chatMode());
        auto* system = panel.findChild<QLineEdit*>(QStringLiteral("tryItSystem"));
        QVERIFY(system && !system->isHidden());
        system->setText(QStringLiteral("Be brief."));
        panel.promptEdit()->setText(QStringLiteral("hello"));
        QVERIFY(panel.generate());
        QVERIFY(panel.promptEdit()->text().isEmpty());
        QVERIFY(done.wait(10000));
        QVERIFY(done.last().at(0).toBool());
        QCOMPARE(panel.conversation().size(), 2);
        QCOMPARE(panel.conversation()[1].second, QStringLiteral("turn 1: olleh"));
        QVERIFY(panel.lastArguments().contains(QStringLiteral("--chat")));
        QVERIFY(panel.lastArguments().contains(QStringLiteral("--messages")));
        const int sys = int(panel.lastArguments().indexOf(QStringLiteral("--system")));
        QVERIFY(sys > 0);
        QCOMPARE(panel.lastArguments()[sys + 1], QStringLiteral("Be brief."));
        panel.promptEdit()->setText(QStringLiteral("abc"));
        QVERIFY(panel.generate());
        QVERIFY(done.wait(10000));
        QCOMPARE(panel.conversation().size(), 4);
        QCOMPARE(panel.conversation()[3].second, QStringLiteral("turn 2: cba"));
        QCOMPARE(panel.tryItOutput(), QStringLiteral("You: hello\n\nModel: turn 1: olleh\n\n"
                                                     "You: abc\n\nModel: turn 2: cba"));
        // A failed turn leaves the conversation as it was and gives the prompt back.
        qputenv("LATHE_FAKE_MODE", "fail");
        panel.promptEdit()->setText(QStringLiteral("again"));
        QVERIFY(panel.generate());
        QVERIFY(done.wait(10000));
        qunsetenv("LATHE_FAKE_MODE");
        QVERIFY(!done.last().at(0).toBool());
        QCOMPARE(panel.conversation().size(), 4);
        QCOMPARE(panel.promptEdit()->text(), QStringLiteral("again"));
        QVERIFY(panel.tryItOutput().contains(QStringLiteral("no such folder")));
        // New chat starts over; a run without a tokenizer cannot chat.
        panel.findChild<QPushButton*>(QStringLiteral("tryItNewChat"))->click();
        QVERIFY(panel.conversation().isEmpty());
        panel.setModelSource(QStringLiteral("/some/run"), false);
        panel.promptEdit()->setText(QStringLiteral("1,2"));
        QVERIFY(!panel.generate());
        QVERIFY(panel.tryItOutput().contains(QStringLiteral("no tokenizer")));
    }
};

QTEST_MAIN(TestSamples)
#include "test_samples.moc"
