// lathe: the workbench window. `lathe [CONFIG]` opens a config file; `lathe --version`;
// `lathe --smoke-test` (for installation checks) shows the window, runs the engine it would use
// with --version, prints both and exits.
#include "build_info.h"
#include "engine/config/io.h"
#include "ui/config/config_editor.h"
#include "ui/control/run_controller.h"
#include "ui/main_window.h"
#include "ui/util/unix_signals.h"

#include <QApplication>
#include <QMessageBox>
#include <QProcess>
#include <QTimer>

#include <csignal>
#include <cstdio>
#include <cstring>

namespace {

// Shows that the installed window and engine work together: the engine lathe would start for a
// run (beside this program, or $LATHE_ENGINE) answers --version. Exit code 0 when it does.
int smokeTest(const QWidget& window) {
    if (!window.isVisible()) {
        std::fprintf(stderr, "lathe --smoke-test: the window did not show\n");
        return 1;
    }
    const QString engine = lathe::ui::findEngine();
    QProcess process;
    process.start(engine, {QStringLiteral("--version")});
    const bool ok = process.waitForFinished(60000) &&
                    process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0;
    std::printf("lathe --smoke-test: window shown (%s); engine %s: %s\n",
                qPrintable(QApplication::platformName()), qPrintable(engine),
                ok ? process.readAllStandardOutput().trimmed().constData() : "FAILED");
    if (!ok) std::fprintf(stderr, "%s\n", qPrintable(process.errorString()));
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    bool smoke = false;
    // Answered before Qt starts, so it works without a display.
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--version") || !std::strcmp(argv[i], "-v")) {
            // The same line as `lathe-engine --version`; LibTorch is the one the engine was built with.
            std::printf("lathe %s (git %s, LibTorch %s, CUDA %s)\n", lathe::config::version(),
                        lathe::config::git_revision(), LATHE_BUILD_TORCH_VERSION,
                        LATHE_BUILD_TORCH_CUDA ? "compiled in" : "not compiled in");
            return 0;
        }
        if (!std::strcmp(argv[i], "--smoke-test")) smoke = true;
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf(
                "usage: lathe [CONFIG]\n\n"
                "The Lathe workbench: edit a config, start training, watch it live.\n"
                "CONFIG is a JSON or YAML config to open. The engine is lathe-engine beside this\n"
                "program (or $LATHE_ENGINE).\n\n"
                "  --version      print the version and exit\n"
                "  --smoke-test   show the window, check the engine starts, exit (0: all well)\n");
            return 0;
        }
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Lathe"));
    QApplication::setOrganizationName(QStringLiteral("Lathe"));
    QApplication::setApplicationVersion(QString::fromLatin1(lathe::config::version()));
    QApplication::setDesktopFileName(
        QStringLiteral("io.github.lathe.Lathe"));  // resources/*.desktop

    lathe::ui::MainWindow window;
    QStringList args = QApplication::arguments();
    args.removeAll(QStringLiteral("--smoke-test"));
    if (args.size() > 1) {
        QString error;
        if (!window.editor()->openFile(args.at(1), &error))
            QMessageBox::warning(&window, QObject::tr("Open config"), error);
    }
    // SIGTERM/SIGINT quit as the Quit action does: engines stopped, control folder removed.
    lathe::ui::UnixSignalNotifier unixSignals({SIGINT, SIGTERM});
    QObject::connect(
        &unixSignals, &lathe::ui::UnixSignalNotifier::received, &window, [&window](int s) {
            window.quitGracefully(QString::fromLatin1(s == SIGINT ? "SIGINT" : "SIGTERM"));
        });
    window.show();
    if (smoke) QTimer::singleShot(0, &window, [&window] { QApplication::exit(smokeTest(window)); });
    return app.exec();
}
