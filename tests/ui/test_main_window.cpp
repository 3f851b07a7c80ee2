// The assembled window against the fake engine: Start, live metrics into the plots, Checkpoint,
// Stop, state label and progress, the sampler's text in the Samples dock, a screenshot (to $LATHE_SCREENSHOT when set), and SIGTERM
// quitting as the Quit action does.
#include "ui/config/layout_diagram.h"
#include "ui/control/run_toolbar.h"
#include "ui/help/help.h"
#include "ui/main_window.h"

#include "ui/config/config_editor.h"
#include "ui/logs/log_model.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"
#include "ui/runs/run_format.h"
#include "ui/samples/samples_model.h"
#include "ui/samples/samples_panel.h"
#include "ui/util/unix_signals.h"

#include "tests/ui/runs/run_fixtures.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTimer>
#include <QtTest>

#include <csignal>
#include <memory>

using lathe::ui::formatSeconds;
using lathe::ui::HelpBrowser;
using lathe::ui::MainWindow;
using State = lathe::ui::RunController::State;

namespace {

QByteArray readAll(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Answers the next modal window from inside its exec(): a message box with a click on `button`,
// any other dialog (a file dialog) with Escape. `seen` (optional) says it came.
// `text` (optional) receives a message box's text and informative text; `named`: click the
// button of that object name instead.
void answerModal(QMessageBox::StandardButton button, bool* seen = nullptr, QString* text = nullptr,
                 const QString& named = QString()) {
    auto* timer = new QTimer;
    timer->setInterval(20);
    QObject::connect(timer, &QTimer::timeout, [timer, button, seen, text, named] {
        QWidget* modal = QApplication::activeModalWidget();
        if (!modal) return;
        timer->stop();
        timer->deleteLater();
        if (seen) *seen = true;
        auto* box = qobject_cast<QMessageBox*>(modal);
        if (box && text) *text = box->text() + QLatin1Char('\n') + box->informativeText();
        if (box && !named.isEmpty())
            QTest::mouseClick(box->findChild<QPushButton*>(named), Qt::LeftButton);
        else if (box && button != QMessageBox::NoButton)
            QTest::mouseClick(box->button(button), Qt::LeftButton);
        else
            QTest::keyClick(modal, Qt::Key_Escape);
    });
    timer->start();
}

}  // namespace

class TestMainWindow : public QObject {
    Q_OBJECT
    QTemporaryDir runs_;

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // QSettings away from the user's
        QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
        QCoreApplication::setApplicationName(QStringLiteral("lathe-test"));
        // Runs of the machine's own runs folder are none of these tests' business.
        QVERIFY(runs_.isValid());
        qputenv("LATHE_RUNS_DIR", runs_.path().toUtf8());
    }

    // Every test starts from the preset and the default panels, not from the last test's form
    // (the window restores both from QSettings).
    void init() {
        QSettings s;
        s.remove(QStringLiteral("editor/session"));
        s.remove(QStringLiteral("plots/panels"));
    }

    void formatting() {
        QCOMPARE(formatSeconds(5), QStringLiteral("5s"));
        QCOMPARE(formatSeconds(245), QStringLiteral("4m 05s"));
        QCOMPARE(formatSeconds(3720), QStringLiteral("1h 02m"));
        QCOMPARE(formatSeconds(-1), QStringLiteral("–"));
    }

    void runFromTheWindow() {
        qputenv("LATHE_FAKE_MODE", "normal");
        qputenv("LATHE_FAKE_STEPS", "60");
        qputenv("LATHE_FAKE_STEP_MS", "25");
        qputenv("LATHE_FAKE_SAMPLES", "10");
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QCOMPARE(w.toolbar()->stateLabel()->text(), QStringLiteral("idle"));
        QVERIFY(w.toolbar()->startAction()->isEnabled());
        QVERIFY(!w.toolbar()->stopAction()->isEnabled());
        QVERIFY(!w.toolbar()->checkpointAction()->isEnabled());

        // An invalid config cannot be started.
        w.editor()->editField(QStringLiteral("model.d_model"), 0);
        QVERIFY(!w.toolbar()->startAction()->isEnabled());
        w.editor()->undoStack()->undo();
        QVERIFY(w.toolbar()->startAction()->isEnabled());

        w.toolbar()->startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("running"),
                                  20000);
        QVERIFY(!w.editor()->isEnabled());  // no edits under a running engine
        QVERIFY(!w.toolbar()->ranksBox()->isEnabled());
        QVERIFY(w.toolbar()->checkpointAction()->isEnabled());
        w.toolbar()->checkpointAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(w.toolbar()->progressBar()->value() >= 30, 20000);
        QVERIFY2(w.toolbar()->progressText().contains(QStringLiteral("/ 60")),
                 qPrintable(w.toolbar()->progressText()));
        QVERIFY(!w.toolbar()->progressBar()->isTextVisible());
        QVERIFY(w.toolbar()->speedLabel()->text().contains(QStringLiteral("tokens/s")));
        QVERIFY(w.plots()->store()->series(QStringLiteral("train/CE loss")));
        QTRY_VERIFY(w.plots()->plotFor(QStringLiteral("train/CE loss"))->graph(0)->dataCount() >
                    20);
        // The sampler's text reaches the Samples dock, newest step shown.
        QTRY_VERIFY_WITH_TIMEOUT(w.samplesPanel()->model()->steps().size() >= 2, 20000);
        QTRY_VERIFY(w.samplesPanel()->shownText().contains(QStringLiteral("text at step")));
        QCOMPARE(w.samplesPanel()->shownStep(), w.samplesPanel()->model()->steps().back().step);
        if (qEnvironmentVariableIsSet("LATHE_SCREENSHOT")) {
            QTest::qWait(200);
            QVERIFY(w.grab().save(qEnvironmentVariable("LATHE_SCREENSHOT")));
        }
        w.toolbar()->stopAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("stopped"),
                                  20000);
        // Stopped, not "finished", and no ETA for a run that is over (issue 34).
        QVERIFY2(!w.toolbar()->speedLabel()->text().contains(QStringLiteral("ETA")),
                 qPrintable(w.toolbar()->speedLabel()->text()));
        QVERIFY(w.toolbar()->speedLabel()->text().contains(QStringLiteral("tokens/s")));
        QVERIFY(w.toolbar()->startAction()->isEnabled());
        QVERIFY(w.editor()->isEnabled());
        bool sawCheckpoint = false;
        w.logModel()->flush();
        for (int i = 0; i < w.logModel()->rowCount(); ++i)
            sawCheckpoint |=
                w.logModel()->entry(i).message.contains(QStringLiteral("checkpoint of step"));
        QVERIFY(sawCheckpoint);
    }

    // The form's edits, typed values that do not validate included, and the plot panels survive
    // a restart (issue 34). Undo starts from the restored form.
    void formAndPanelsSurviveRestart() {
        lathe::ui::MetricGroup extra{QStringLiteral("Masked labels"),
                                     {QStringLiteral("train/masked labels (%)")}};
        {
            MainWindow w;
            w.editor()->editField(QStringLiteral("optim.lr"), 0.0123);
            w.editor()->editField(QStringLiteral("model.n_layers"), "many");
            w.plots()->addPanel(extra);
            w.close();
        }
        MainWindow w;
        const auto& doc = w.editor()->document();
        QCOMPARE(doc["optim"]["lr"].get<double>(), 0.0123);
        QCOMPARE(doc["model"]["n_layers"], lathe::config::Json("many"));
        QVERIFY(!w.editor()->isValid());
        QVERIFY(w.editor()->isChangedFromPreset(QStringLiteral("optim.lr")));
        QCOMPARE(w.plots()->groups().back(), extra);
        QVERIFY(!w.editor()->undoStack()->canUndo());
        QVERIFY(!w.editor()->undoStack()->isClean());  // still unsaved
    }

    // Save writes the document the editor shows (issue 45 item 2): after a preset or a run's
    // config replaced a file's, Ctrl+S asks where instead of overwriting that file; unsaved edits
    // ask Save / Discard / Cancel before a preset replaces them. Real key events throughout.
    void saveTargetsTheShownDocument() {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("ft.yaml"));
        MainWindow w;
        w.show();
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));  // the window's shortcuts need it
        auto* editor = w.editor();
        editor->editField(QStringLiteral("optim.lr"), 0.0042);
        QVERIFY(editor->saveFile(file));
        const QByteArray saved = readAll(file);
        QVERIFY(w.windowTitle().contains(QStringLiteral("ft.yaml")) && !w.isWindowModified());

        editor->editField(QStringLiteral("optim.lr"), 0.005);
        QVERIFY(w.isWindowModified());
        auto* presets = editor->findChild<QComboBox*>(QStringLiteral("presetBox"));
        QVERIFY(presets);
        const QString before = presets->currentText();

        // Another preset, chosen with the keyboard; the question is answered Cancel: nothing
        // changes.
        answerModal(QMessageBox::Cancel);
        presets->setFocus();
        QTest::keyClick(presets, Qt::Key_Down);
        QCOMPARE(editor->document()["optim"]["lr"].get<double>(), 0.005);
        QCOMPARE(presets->currentText(), before);
        QCOMPARE(editor->currentFile(), file);

        // Discard: the preset replaces the edits, and the document is no longer ft.yaml.
        answerModal(QMessageBox::Discard);
        QTest::keyClick(presets, Qt::Key_Down);
        QVERIFY(presets->currentText() != before);
        QCOMPARE(editor->presetName(), presets->currentText());
        QVERIFY(editor->currentFile().isEmpty());
        QVERIFY2(!w.windowTitle().contains(QStringLiteral("ft.yaml")) &&
                     w.windowTitle().contains(presets->currentText()),
                 qPrintable(w.windowTitle()));

        // Ctrl+S now asks where (the Save As dialog, closed with Escape): ft.yaml is untouched.
        // (The window is active again once the question has gone.)
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        bool asked = false;
        answerModal(QMessageBox::NoButton, &asked);
        QTest::keyClick(&w, Qt::Key_S, Qt::ControlModifier);
        QVERIFY(asked);
        QCOMPARE(readAll(file), saved);

        // Undo brings back the edits and their file.
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier);
        QCOMPARE(editor->currentFile(), file);
        QCOMPARE(editor->document()["optim"]["lr"].get<double>(), 0.005);

        // A run's config opened over it (after Discard) is no file either.
        const QString run = dir.filePath(QStringLiteral("runs/baseline"));
        QVERIFY(QDir().mkpath(run));
        {
            QFile f(run + QStringLiteral("/config.json"));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"({"run_name": "baseline", "optim": {"lr": 0.001}})");
        }
        answerModal(QMessageBox::Discard);
        QVERIFY(w.openRun(run));
        QVERIFY(editor->currentFile().isEmpty());
        QVERIFY2(w.windowTitle().contains(QStringLiteral("run baseline")),
                 qPrintable(w.windowTitle()));
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        asked = false;
        answerModal(QMessageBox::NoButton, &asked);
        QTest::keyClick(&w, Qt::Key_S, Qt::ControlModifier);
        QVERIFY(asked);
        QCOMPARE(readAll(file), saved);
    }

    // Start with the run_name of an existing run (issue 45 item 3) says so first: its newest
    // checkpoint and whether this config can continue it (the refusal in full when not), with a
    // fresh name offered; nothing starts until the user chooses.
    void existingRunNameAsksFirst() {
        qputenv("LATHE_FAKE_MODE", "normal");
        qputenv("LATHE_FAKE_STEPS", "20");
        qputenv("LATHE_FAKE_STEP_MS", "10");
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.editor()->editField(QStringLiteral("run_name"), "taken");
        QVERIFY(w.editor()->isValid());
        // The run "taken" with a checkpoint at step 5 of a config with another d_model.
        lathe::config::Json other = w.editor()->resolvedJson();
        other["model"]["d_model"] = 128;
        const QString runDir = runs_.path() + QStringLiteral("/taken");
        const QJsonObject saved =
            QJsonDocument::fromJson(QByteArray::fromStdString(other.dump())).object();
        QVERIFY(lathe::testing::writeJson(runDir + QStringLiteral("/config.json"), saved));
        lathe::testing::makeCheckpoint(runDir, 5, false, {}, saved);

        // Cancel: nothing starts.
        QString text;
        answerModal(QMessageBox::Cancel, nullptr, &text);
        w.toolbar()->startAction()->trigger();
        QVERIFY2(text.contains(QStringLiteral("taken")) &&
                     text.contains(QStringLiteral("step 5")) &&
                     text.contains(QStringLiteral("model.d_model: 128 -> 64")),
                 qPrintable(text));
        QCOMPARE(w.toolbar()->stateLabel()->text(), QStringLiteral("idle"));

        // The fresh name: it starts as taken-2.
        answerModal(QMessageBox::NoButton, nullptr, nullptr, QStringLiteral("newRunNameButton"));
        w.toolbar()->startAction()->trigger();
        QCOMPARE(w.editor()->document()["run_name"], lathe::config::Json("taken-2"));
        QTRY_VERIFY_WITH_TIMEOUT(w.toolbar()->stateLabel()->text() != QStringLiteral("idle"),
                                 20000);
        w.toolbar()->stopAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(!w.toolbar()->stopAction()->isEnabled(), 20000);
    }

    // When the window already says the engine will refuse the run (the memory pre-flight),
    // Start is disabled with that reason (issue 45 item 4), and comes back when it fits.
    // Help has the documentation, the keyboard shortcuts and a first-run guide, besides About
    // (issue 45 item 12); the first-run bar goes once dismissed.
    void helpHasDocsShortcutsAndAGuide() {
        QSettings().remove(QStringLiteral("help/firstRunDismissed"));
        {
            MainWindow w;
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            auto* bar = w.findChild<QWidget*>(QStringLiteral("firstRunBar"));
            QVERIFY(bar && bar->isVisible());
            // The guide, from the bar.
            QTest::mouseClick(w.findChild<QPushButton*>(QStringLiteral("firstRunGuide")),
                              Qt::LeftButton);
            auto* guide = w.findChild<QMessageBox*>(QStringLiteral("gettingStartedBox"));
            QVERIFY(guide && guide->isVisible());
            QVERIFY(!guide->isModal());
            QVERIFY(guide->text().contains(QLatin1String("Ctrl+R")));
            guide->close();
            // The documentation: README and docs/*.md, rendered.
            HelpBrowser* docs = w.showDocumentation(QStringLiteral("gui.md"));
            QVERIFY(docs->isVisible());
            QVERIFY(docs->pages()->count() > 10);
            QCOMPARE(docs->pages()->item(0)->text(), QStringLiteral("README.md"));
            QVERIFY2(docs->browser()->toPlainText().contains(QLatin1String("Fits the screen")),
                     qPrintable(docs->browser()->toPlainText().left(300)));
            QVERIFY(docs->showPage(QStringLiteral("ARCHITECTURE.md")));
            QVERIFY(!docs->showPage(QStringLiteral("nothing.md")));
            docs->close();
            // The shortcuts, read from the menus.
            w.showShortcuts();
            auto* table = w.findChild<QTableWidget*>(QStringLiteral("shortcutsTable"));
            QVERIFY(table && table->isVisible());
            QMap<QString, QString> keys;
            for (int r = 0; r < table->rowCount(); ++r)
                keys[table->item(r, 0)->text()] = table->item(r, 1)->text();
            QCOMPARE(keys.value(QStringLiteral("Run > Start")), QStringLiteral("Ctrl+R"));
            QCOMPARE(keys.value(QStringLiteral("File > Save config")), QStringLiteral("Ctrl+S"));
            QCOMPARE(keys.value(QStringLiteral("Help > Documentation")), QStringLiteral("F1"));
            QVERIFY(keys.contains(QStringLiteral("Run > Stop")));
            // Dismissed, the bar stays away in the next session.
            QTest::mouseClick(w.findChild<QPushButton*>(QStringLiteral("firstRunDismiss")),
                              Qt::LeftButton);
            QVERIFY(!bar->isVisible());
        }
        MainWindow again;
        again.show();
        QVERIFY(QTest::qWaitForWindowExposed(&again));
        QVERIFY(!again.findChild<QWidget*>(QStringLiteral("firstRunBar"))->isVisible());
        QSettings().remove(QStringLiteral("help/firstRunDismissed"));
    }

    // A failed run says why in the open: the engine's error in full and its last lines, not
    // behind "Show Details…" (issue 45 item 4).
    void runFailedShowsTheReason() {
        qputenv("LATHE_FAKE_MODE", "fail");
        MainWindow w;
        w.resize(1366, 768);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.toolbar()->startAction()->trigger();
        QDialog* box = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT(
            (box = w.findChild<QDialog*>(QStringLiteral("runFailedBox"))) && box->isVisible(),
            20000);
        qunsetenv("LATHE_FAKE_MODE");
        QVERIFY(!qobject_cast<QMessageBox*>(box));  // no details to unfold
        auto* reason = box->findChild<QLabel*>(QStringLiteral("runFailedReason"));
        QVERIFY(reason && reason->isVisible());
        QCOMPARE(reason->text(), QStringLiteral("fake failure: the loss is NaN"));
        auto* output = box->findChild<QPlainTextEdit*>(QStringLiteral("runFailedOutput"));
        QVERIFY(output && output->isVisible());
        QVERIFY2(output->toPlainText().contains(QLatin1String("fake failure: the loss is NaN")),
                 qPrintable(output->toPlainText()));
        QVERIFY2(box->width() >= 600 && output->height() >= 150,
                 qPrintable(QStringLiteral("%1x%2").arg(box->width()).arg(output->height())));
        box->accept();
    }

    void startIsOffWhenTheEngineWillRefuse() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(w.toolbar()->startAction()->isEnabled());
        w.editor()->setHostMemory([] { return int64_t(1) << 20; });  // 1 MiB free
        QVERIFY(!w.editor()->engineRefusal().isEmpty());
        QVERIFY(!w.toolbar()->startAction()->isEnabled());
        QVERIFY2(w.toolbar()->startAction()->toolTip().contains(QStringLiteral("will refuse")),
                 qPrintable(w.toolbar()->startAction()->toolTip()));
        w.editor()->setHostMemory([] { return int64_t(1) << 40; });  // 1 TiB free
        QVERIFY(w.editor()->engineRefusal().isEmpty());
        QVERIFY(w.toolbar()->startAction()->isEnabled());
    }

    // The window fits a 1366x768 screen (issue 34: it needed 1651x990 and grew while running),
    // idle and while a run streams its metrics into every dock.
    void fitsSmallScreens() {
        qputenv("LATHE_FAKE_MODE", "normal");
        qputenv("LATHE_FAKE_STEPS", "40");
        qputenv("LATHE_FAKE_STEP_MS", "25");
        qputenv("LATHE_FAKE_SAMPLES", "10");
        MainWindow w;
        w.resize(1366, 768);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto minimum = [&] { return w.minimumSizeHint().expandedTo(w.minimumSize()); };
        QVERIFY2(minimum().width() <= 1366 && minimum().height() <= 768,
                 qPrintable(
                     QStringLiteral("idle: %1x%2").arg(minimum().width()).arg(minimum().height())));
        w.toolbar()->startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("running"),
                                  20000);
        QTRY_VERIFY_WITH_TIMEOUT(w.toolbar()->progressBar()->value() >= 20, 20000);
        QVERIFY2(
            minimum().width() <= 1366 && minimum().height() <= 768,
            qPrintable(
                QStringLiteral("running: %1x%2").arg(minimum().width()).arg(minimum().height())));
        QVERIFY2(w.width() <= 1366 && w.height() <= 768,
                 qPrintable(QStringLiteral("grew to %1x%2").arg(w.width()).arg(w.height())));
        w.toolbar()->stopAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.toolbar()->stateLabel()->text(), QStringLiteral("stopped"),
                                  20000);
    }

    // SIGTERM while a run is going: the engine is stopped with a final checkpoint, the window
    // closes, and once it is gone so is its /tmp/lathe-* control folder (as with Quit).
    void sigtermQuitsGracefully() {
        qputenv("LATHE_FAKE_MODE", "normal");
        qputenv("LATHE_FAKE_STEPS", "100000");
        qputenv("LATHE_FAKE_STEP_MS", "25");
        auto w = std::make_unique<MainWindow>();
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        lathe::ui::UnixSignalNotifier unixSignals({SIGTERM});
        QString why;
        connect(&unixSignals, &lathe::ui::UnixSignalNotifier::received, w.get(), [&](int s) {
            why = s == SIGTERM ? QStringLiteral("SIGTERM") : QStringLiteral("other");
            w->quitGracefully(why);
        });
        w->toolbar()->startAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w->toolbar()->stateLabel()->text(), QStringLiteral("running"),
                                  20000);
        const QString controlDir = QFileInfo(w->run()->socketPath()).absolutePath();
        QVERIFY(controlDir.contains(QStringLiteral("lathe-")));
        QVERIFY(QFileInfo::exists(controlDir));
        ::raise(SIGTERM);
        QTRY_COMPARE(why, QStringLiteral("SIGTERM"));
        QTRY_VERIFY_WITH_TIMEOUT(!w->run()->isActive(), 20000);
        QTRY_VERIFY(!w->isVisible());
        QCOMPARE(w->toolbar()->stateLabel()->text(),
                 QStringLiteral("stopped"));  // stopped, not killed
        w.reset();
        QVERIFY2(!QFileInfo::exists(controlDir), qPrintable(controlDir));
    }

    // A mesh asking for more ranks proposes its world size in the Ranks box; a layout that
    // cannot run on the box's ranks keeps Start disabled, saying why.
    void meshProposesRanks() {
        MainWindow w;
        w.toolbar()->ranksBox()->setValue(1);
        QVERIFY(w.toolbar()->startAction()->isEnabled());
        w.editor()->editField(QStringLiteral("train_module.tp_config.degree"), 2);
        QCOMPARE(w.toolbar()->ranksBox()->value(), 2);
        w.editor()->editField(QStringLiteral("train_module.dp_config.name"), "fsdp");
        QCOMPARE(w.toolbar()->ranksBox()->value(), 4);
        QVERIFY(w.toolbar()->startAction()->isEnabled());
        w.toolbar()->ranksBox()->setValue(3);
        QVERIFY(!w.toolbar()->startAction()->isEnabled());
        QVERIFY2(w.toolbar()->startAction()->toolTip().contains(
                     QStringLiteral("does not divide the world size")),
                 qPrintable(w.toolbar()->startAction()->toolTip()));
        w.toolbar()->ranksBox()->setValue(6);
        QVERIFY(w.toolbar()->startAction()->isEnabled());
        QCOMPARE(w.editor()->layoutDiagram()->text(),
                 QStringLiteral("6 ranks: fsdp over 3 x tp 2"));
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
