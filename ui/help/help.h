// Help: the documentation inside the window, the keyboard shortcuts, and a first-run guide
// (issue 45 item 12: Help had only About).
//
// - docsFolder(): where the Markdown documentation is: share/doc/lathe beside the installed
//   program (README.md, docs/*.md, installed by cmake/LathePackaging.cmake), else the source tree
//   the program was built from.
// - HelpBrowser: README.md and docs/*.md, a list of pages and a QTextBrowser that renders the
//   Markdown; links between the pages follow.
// - shortcutRows(): every action of the menus that has a shortcut, "Run > Start" -> "Ctrl+R",
//   read from the actions themselves, so the table cannot go stale.
// - gettingStartedHtml(): the first-run guide, shown once as a bar above the plots and from
//   Help > Getting started.
#pragma once

#include <QDialog>
#include <QPair>
#include <QStringList>

class QListWidget;
class QMenuBar;
class QTextBrowser;

namespace lathe::ui {

/// The folder holding README.md and docs/, or empty when none is found.
QString docsFolder();

/// The pages HelpBrowser lists: README.md, then docs/*.md by name (absolute paths).
QStringList docPages(const QString& folder);

/// {"Menu > Action", "shortcut"} for every menu action with a shortcut, in menu order.
QVector<QPair<QString, QString>> shortcutRows(const QMenuBar* menus);

/// The first-run guide (rich text).
QString gettingStartedHtml();

class HelpBrowser : public QDialog {
    Q_OBJECT

public:
    explicit HelpBrowser(const QString& folder, QWidget* parent = nullptr);
    /// Shows the page whose file name is `name` ("gui.md"); false if there is none.
    bool showPage(const QString& name);
    QTextBrowser* browser() const { return browser_; }
    QListWidget* pages() const { return pages_; }

private:
    QListWidget* pages_ = nullptr;
    QTextBrowser* browser_ = nullptr;
};

}  // namespace lathe::ui
