// lathe-gui-victim: a workbench that will be killed (issue 34 item 7). Starts a real engine run
// through RunController, as the window does (config: the JSON file argv[1], runs folder argv[2]),
// prints "control DIR" (its control folder) and "running STEP" once the engine reports step 3,
// then waits for the SIGKILL the test sends it.
#include "engine/config/io.h"
#include "ui/control/run_controller.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>

#include <cstdio>

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    if (argc != 3) {
        std::fprintf(stderr, "usage: lathe-gui-victim CONFIG.json RUNS_DIR\n");
        return 2;
    }
    QFile file(QString::fromLocal8Bit(argv[1]));
    if (!file.open(QIODevice::ReadOnly)) return 2;
    const auto config = lathe::config::Json::parse(file.readAll().toStdString());
    lathe::ui::RunController run;
    lathe::ui::RunOptions options;
    options.runsDir = QString::fromLocal8Bit(argv[2]);
    if (!run.start(config, options)) {
        std::fprintf(stderr, "cannot start: %s\n", qPrintable(run.errorString()));
        return 1;
    }
    std::printf("control %s\n", qPrintable(QFileInfo(run.socketPath()).absolutePath()));
    std::fflush(stdout);
    bool said = false;
    QObject::connect(&run, &lathe::ui::RunController::statusReceived,
                     [&](const lathe::protocol::Status& s) {
                         if (said || s.step < 3) return;
                         said = true;
                         std::printf("running %lld\n", static_cast<long long>(s.step));
                         std::fflush(stdout);
                     });
    return app.exec();
}
