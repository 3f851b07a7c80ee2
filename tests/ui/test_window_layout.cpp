// The window's first layout on the screen it opens on (issue 45 items 9, 11 and 12): run under
// Xvfb at 1280x720, 1366x768 and 1600x1000 (one CTest test each, see tests/ui/CMakeLists.txt).
// Every control is on screen and reachable, the plots show at least one full panel (two rows
// from 768 px), the config form never scrolls sideways and keeps its rows when the summary is
// long, and the Runs table shows all of its columns.
#include "tests/ui/runs/run_fixtures.h"
#include "ui/config/config_editor.h"
#include "ui/control/run_toolbar.h"
#include "ui/main_window.h"
#include "ui/plots/metric_plot.h"
#include "ui/plots/plot_panel.h"
#include "ui/runs/runs_model.h"
#include "ui/runs/runs_panel.h"

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolBar>
#include <QtTest>

using namespace lathe::ui;
using namespace lathe::testing;

namespace {

QString describe(const QWidget* w) {
    return QStringLiteral("%1 '%2' (%3)")
        .arg(QString::fromLatin1(w->metaObject()->className()), w->objectName(),
             w->property("text").toString());
}

QString rectText(const QRect& r) {
    return QStringLiteral("%1,%2 %3x%4").arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height());
}

// Whether `w` sits inside a scroll area's viewport (scrolled to, not laid out on screen).
bool insideScrollArea(const QWidget* w, const QWidget* stop) {
    for (const QWidget* p = w->parentWidget(); p && p != stop; p = p->parentWidget())
        if (qobject_cast<const QAbstractScrollArea*>(p)) return true;
    return false;
}

// The controls of `root` a user clicks or types into, each wholly inside `within` (window
// coordinates) and at least its minimum size: nothing cut off by the screen's edge or squeezed.
void checkControls(QWidget* root, const QRect& within, const QWidget* window) {
    QList<QWidget*> controls;
    for (auto* b : root->findChildren<QAbstractButton*>()) controls << b;
    for (auto* e : root->findChildren<QLineEdit*>()) controls << e;
    for (auto* c : root->findChildren<QComboBox*>()) controls << c;
    for (auto* s : root->findChildren<QAbstractSpinBox*>()) controls << s;
    for (QWidget* c : controls) {
        // Qt's own dock title buttons report a hint a few pixels over what the style draws.
        if (!c->isVisible() || insideScrollArea(c, root) ||
            c->objectName().startsWith(QLatin1String("qt_")))
            continue;
        if (qobject_cast<QLineEdit*>(c) && qobject_cast<QAbstractSpinBox*>(c->parentWidget()))
            continue;
        if (qobject_cast<QLineEdit*>(c) && qobject_cast<QComboBox*>(c->parentWidget())) continue;
        const QRect r(c->mapTo(window, QPoint(0, 0)), c->size());
        QVERIFY2(within.contains(r),
                 qPrintable(QStringLiteral("%1 at %2 is outside %3")
                                .arg(describe(c), rectText(r), rectText(within))));
        QVERIFY2(c->width() >= c->minimumSizeHint().width() - 1,
                 qPrintable(QStringLiteral("%1 squeezed to %2 px (needs %3)")
                                .arg(describe(c))
                                .arg(c->width())
                                .arg(c->minimumSizeHint().width())));
    }
}

QScrollArea* settingsScroll(ConfigEditor* editor) {
    for (auto* s : editor->findChildren<QScrollArea*>())
        if (s->widget() && s->widget()->findChild<QWidget*>(QStringLiteral("section:model")))
            return s;
    return nullptr;
}

}  // namespace

class TestWindowLayout : public QObject {
    Q_OBJECT
    QTemporaryDir runs_;
    QRect screen_;

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // QSettings away from the user's
        QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
        QCoreApplication::setApplicationName(QStringLiteral("lathe-layout-test"));
        QVERIFY(runs_.isValid());
        qputenv("LATHE_RUNS_DIR", runs_.path().toUtf8());
        // A run with every column filled in.
        QJsonObject s = status(QStringLiteral("finished"), 1200, 1200, 2.4956);
        s[QStringLiteral("model")] = QStringLiteral("768d x 12 layers, vocab 50280");
        QVERIFY(writeJson(runs_.filePath(QStringLiteral("olmo-sweep-lr3e-4/status.json")), s));
        QVERIFY(writeFile(runs_.filePath(QStringLiteral("olmo-sweep-lr3e-4/notes.json")),
                          R"({"tags":["baseline","lr-sweep"],"notes":""})"));
        screen_ = QGuiApplication::primaryScreen()->availableGeometry();
        qInfo("screen %dx%d", screen_.width(), screen_.height());
    }

    void init() { QSettings().clear(); }

    void everyControlIsOnScreen() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTest::qWait(100);
        QVERIFY2(screen_.contains(w.frameGeometry()),
                 qPrintable(QStringLiteral("window %1 on a screen of %2")
                                .arg(rectText(w.frameGeometry()), rectText(screen_))));
        const QRect inside = w.rect();
        QVERIFY(inside.contains(QRect(w.menuBar()->mapTo(&w, QPoint()), w.menuBar()->size())));
        QVERIFY(inside.contains(QRect(w.statusBar()->mapTo(&w, QPoint()), w.statusBar()->size())));
        // Every toolbar action has its button on screen (none in the overflow menu).
        for (QAction* a : w.toolbar()->actions()) {
            if (a->isSeparator() || !a->isVisible()) continue;
            QWidget* b = w.toolbar()->widgetForAction(a);
            QVERIFY2(b && b->isVisible(), qPrintable(a->text()));
            QVERIFY2(inside.contains(QRect(b->mapTo(&w, QPoint()), b->size())),
                     qPrintable(a->text()));
        }
        checkControls(w.toolbar(), inside, &w);
        // Every dock: shown (raised where it is a tab), on screen, its controls whole.
        for (auto* dock : w.findChildren<QDockWidget*>()) {
            dock->raise();
            QTest::qWait(50);
            QVERIFY2(dock->isVisible() && !dock->visibleRegion().isEmpty(),
                     qPrintable(dock->objectName()));
            const QRect r(dock->mapTo(&w, QPoint()), dock->size());
            QVERIFY2(inside.contains(r),
                     qPrintable(dock->objectName() + QLatin1Char(' ') + rectText(r)));
            checkControls(dock, r, &w);
        }
        checkControls(w.plots(), inside, &w);
    }

    // One full panel at least, two rows of them from 768 px; the form shows a dozen rows and
    // never scrolls sideways, with every field on; the Runs table shows its ten columns.
    void roomForWhatMatters() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTest::qWait(100);
        auto* plotScroll = w.plots()->findChild<QScrollArea*>();
        QVERIFY(plotScroll);
        const int plotRows = screen_.height() >= 768 ? 2 : 1;
        QVERIFY2(
            plotScroll->viewport()->height() >=
                plotRows * MetricPlot::kMinimumHeight + (plotRows - 1) * 4,
            qPrintable(QStringLiteral("plots %1 px tall").arg(plotScroll->viewport()->height())));
        QVERIFY2(w.plots()->columns() >= 1 && plotScroll->viewport()->width() >=
                                                  MetricPlot::kMinimumWidth * w.plots()->columns(),
                 qPrintable(QString::number(plotScroll->viewport()->width())));

        w.editor()->setAdvanced(true);
        QScrollArea* form = settingsScroll(w.editor());
        QVERIFY(form);
        QTest::qWait(50);
        const int rowHeight = w.editor()->fontMetrics().height() + 10;
        QVERIFY2(form->viewport()->height() >= 12 * rowHeight,
                 qPrintable(QStringLiteral("form %1 px tall").arg(form->viewport()->height())));
        QVERIFY2(form->horizontalScrollBar()->maximum() == 0,
                 qPrintable(QStringLiteral("the form scrolls sideways by %1 px (%2 wide in %3)")
                                .arg(form->horizontalScrollBar()->maximum())
                                .arg(form->widget()->minimumSizeHint().width())
                                .arg(form->viewport()->width())));
        // Focusing the widest field scrolls nothing sideways.
        auto* duration =
            form->widget()->findChild<QWidget*>(QStringLiteral("field:trainer.max_duration"));
        QVERIFY(duration);
        for (auto* child : duration->findChildren<QWidget*>()) {
            if (child->focusPolicy() == Qt::NoFocus || !child->isVisible()) continue;
            child->setFocus();
            QTest::qWait(20);
            QCOMPARE(form->horizontalScrollBar()->value(), 0);
        }
        // A long summary (a huge model on this machine) keeps the form as tall as it was.
        const int before = form->viewport()->height();
        w.editor()->editField(QStringLiteral("model.d_model"), 16384);
        w.editor()->editField(QStringLiteral("model.n_layers"), 96);
        QTest::qWait(50);
        QVERIFY2(
            form->viewport()->height() >= before - 2,
            qPrintable(
                QStringLiteral("form %1 -> %2 px").arg(before).arg(form->viewport()->height())));

        auto* runsDock = w.findChild<QDockWidget*>(QStringLiteral("runsDock"));
        runsDock->raise();
        auto* view = w.runsPanel()->findChild<QTableView*>(QStringLiteral("runsView"));
        QTRY_COMPARE(view->model()->rowCount(), 1);
        QTest::qWait(50);
        // From 1366 px every column shows; at 1280x720 ("usable") the table may scroll.
        const bool allColumns = screen_.width() >= 1366;
        for (int c = 0; c < RunsModel::ColumnCount; ++c) {
            const int right = view->horizontalHeader()->sectionViewportPosition(c) +
                              view->horizontalHeader()->sectionSize(c);
            const QString title = view->model()->headerData(c, Qt::Horizontal).toString();
            QVERIFY2(
                !view->isColumnHidden(c) && (!allColumns || right <= view->viewport()->width()),
                qPrintable(QStringLiteral("column %1 ends at %2 of %3")
                               .arg(title)
                               .arg(right)
                               .arg(view->viewport()->width())));
            // And its text is not elided.
            const QString text = view->model()->index(0, c).data().toString();
            QVERIFY2(
                !allColumns || view->columnWidth(c) >= view->fontMetrics().horizontalAdvance(text),
                qPrintable(title + QStringLiteral(": ") + text));
        }
    }

    // A saved layout from a larger screen still fits this one.
    void savedLayoutFromALargerScreenFits() {
        {
            MainWindow w;
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            w.resize(2400, 1500);
            QTest::qWait(50);
            w.close();
        }
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY2(screen_.contains(w.frameGeometry()), qPrintable(rectText(w.frameGeometry())));
    }
};

QTEST_MAIN(TestWindowLayout)
#include "test_window_layout.moc"
