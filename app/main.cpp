// lathe: the workbench window. `lathe [CONFIG]` opens a config file; `lathe --version`.
#include "config/config_editor.h"
#include "config/io.h"
#include "main_window.h"

#include <QApplication>
#include <QMessageBox>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    // Answered before Qt starts, so it works without a display.
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--version") || !std::strcmp(argv[i], "-v")) {
            std::printf("lathe %s (git %s)\nLibTorch: see lathe-engine --version\n",
                        lathe::config::version(), lathe::config::git_revision());
            return 0;
        }
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf(
                "usage: lathe [CONFIG]\n\n"
                "The Lathe workbench: edit a config, start training, watch it live.\n"
                "CONFIG is a JSON or YAML config to open. The engine is lathe-engine beside this\n"
                "program (or $LATHE_ENGINE).\n\n"
                "  --version   print the version and exit\n");
            return 0;
        }
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Lathe"));
    QApplication::setOrganizationName(QStringLiteral("Lathe"));
    QApplication::setApplicationVersion(QString::fromLatin1(lathe::config::version()));
    QApplication::setDesktopFileName(QStringLiteral("lathe"));

    lathe::ui::MainWindow window;
    const QStringList args = QApplication::arguments();
    if (args.size() > 1) {
        QString error;
        if (!window.editor()->openFile(args.at(1), &error))
            QMessageBox::warning(&window, QObject::tr("Open config"), error);
    }
    window.show();
    return app.exec();
}
