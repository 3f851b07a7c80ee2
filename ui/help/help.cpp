#include "ui/help/help.h"

#include <QAction>
#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QSplitter>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

namespace lathe::ui {

QString docsFolder() {
    const QString app = QCoreApplication::applicationDirPath();
    QStringList candidates = {app + QStringLiteral("/../share/doc/lathe")};
#ifdef LATHE_SOURCE_TREE
    candidates << QStringLiteral(LATHE_SOURCE_TREE);
#endif
    for (const QString& c : candidates)
        if (QFileInfo::exists(c + QStringLiteral("/docs/ARCHITECTURE.md")))
            return QDir(c).absolutePath();
    return {};
}

QStringList docPages(const QString& folder) {
    if (folder.isEmpty()) return {};
    QStringList out;
    const QDir dir(folder);
    if (dir.exists(QStringLiteral("README.md"))) out << dir.filePath(QStringLiteral("README.md"));
    const QDir docs(dir.filePath(QStringLiteral("docs")));
    for (const QString& name : docs.entryList({QStringLiteral("*.md")}, QDir::Files, QDir::Name))
        out << docs.filePath(name);
    return out;
}

QVector<QPair<QString, QString>> shortcutRows(const QMenuBar* menus) {
    QVector<QPair<QString, QString>> rows;
    auto clean = [](QString text) { return text.remove(QLatin1Char('&')).remove(QChar(0x2026)); };
    for (QAction* top : menus->actions()) {
        const QMenu* menu = top->menu();
        if (!menu) continue;
        for (QAction* a : menu->actions()) {
            if (a->isSeparator() || a->shortcut().isEmpty()) continue;
            rows.append({clean(top->text()) + QStringLiteral(" > ") + clean(a->text()),
                         a->shortcut().toString(QKeySequence::NativeText)});
        }
    }
    return rows;
}

QString gettingStartedHtml() {
    return QCoreApplication::translate(
        "Help",
        "<h3>Getting started</h3>"
        "<ol>"
        "<li><b>Pick a config</b> on the left: a preset (<i>tiny</i> trains in seconds on a "
        "CPU), a file (<i>File &gt; Open config</i>), or a model to fine-tune (<i>File &gt; New "
        "run from a Hugging Face model</i>). Fields that differ from the preset are marked; the "
        "summary under the form says what the run needs.</li>"
        "<li><b>Bring data</b> with <i>File &gt; Prepare data</i>: text, JSONL or chat "
        "conversations become token files, and the config points at them.</li>"
        "<li><b>Start</b> (Ctrl+R). The loss, learning rate and throughput plot live; the "
        "<i>Log</i> tab shows the engine's lines.</li>"
        "<li><b>Checkpoint now</b> (Ctrl+K) saves at the next step; <b>Stop</b> (Ctrl+.) ends "
        "the run with a final checkpoint.</li>"
        "<li><b>Resume</b>: in <i>Runs</i> pick the run, in <i>Checkpoints</i> a checkpoint, "
        "then <i>Resume</i> (the same run), <i>Resume as new run</i> or <i>Edit &amp; "
        "resume</i>.</li>"
        "<li><b>Try it</b> in the <i>Samples</i> tab generates from a checkpoint (Chat for a "
        "fine-tuned model); <i>File &gt; Export to Hugging Face</i> writes a model folder.</li>"
        "</ol>"
        "<p>Everything here is also a <code>lathe-engine</code> command. <i>Help &gt; "
        "Documentation</i> has the details; <i>Help &gt; Keyboard shortcuts</i> lists the "
        "keys.</p>");
}

HelpBrowser::HelpBrowser(const QString& folder, QWidget* parent) : QDialog(parent) {
    setObjectName(QStringLiteral("helpBrowser"));
    setWindowTitle(tr("Lathe documentation"));
    auto* layout = new QVBoxLayout(this);
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    pages_ = new QListWidget(splitter);
    pages_->setObjectName(QStringLiteral("helpPages"));
    browser_ = new QTextBrowser(splitter);
    browser_->setObjectName(QStringLiteral("helpText"));
    browser_->setOpenLinks(false);
    splitter->addWidget(pages_);
    splitter->addWidget(browser_);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({200, 700});
    layout->addWidget(splitter, 1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);

    const QStringList files = docPages(folder);
    for (const QString& f : files) {
        auto* item = new QListWidgetItem(QFileInfo(f).fileName(), pages_);
        item->setData(Qt::UserRole, f);
    }
    if (files.isEmpty())
        browser_->setPlainText(
            tr("The documentation was not found beside this program (share/doc/lathe) or in "
               "its source tree. It is in the docs/ folder of Lathe's sources."));
    connect(pages_, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* item) {
        if (!item) return;
        QFile f(item->data(Qt::UserRole).toString());
        if (!f.open(QIODevice::ReadOnly)) {
            browser_->setPlainText(tr("Cannot read %1: %2").arg(f.fileName(), f.errorString()));
            return;
        }
        browser_->setMarkdown(QString::fromUtf8(f.readAll()));
        browser_->document()->setBaseUrl(QUrl::fromLocalFile(f.fileName()));
    });
    // Links to another page (docs/gui.md, ARCHITECTURE.md#x) open it here; others are ignored
    // (no network is assumed).
    connect(browser_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.isRelative() || url.isLocalFile()) {
            const QString name = QFileInfo(url.path()).fileName();
            if (showPage(name)) return;
        }
        if (url.hasFragment() && url.path().isEmpty()) browser_->scrollToAnchor(url.fragment());
    });
    if (pages_->count() > 0) pages_->setCurrentRow(0);
    resize(980, 680);
}

bool HelpBrowser::showPage(const QString& name) {
    for (int i = 0; i < pages_->count(); ++i) {
        if (pages_->item(i)->text() == name) {
            pages_->setCurrentRow(i);
            return true;
        }
    }
    return false;
}

}  // namespace lathe::ui
