// How the workbench launches lathe-engine: where the executable is, and the options of a training
// run. Below ui/control (RunController starts runs) and ui/checkpoints (a resume plans one), so
// neither includes the other for these.
#pragma once

#include <QString>
#include <QStringList>

namespace lathe::ui {

/// $LATHE_ENGINE, else `lathe-engine` beside the running executable.
QString findEngine();

struct RunOptions {
    int ranks = 1;          ///< launch.nproc
    QString cudaDevices;    ///< CUDA_VISIBLE_DEVICES for the engine; empty inherits ours
    QStringList overrides;  ///< extra "a.b.c=value" arguments
    QString runsDir;        ///< --runs-dir: the runs root; empty lets the engine choose
    QString resumeFrom;     ///< --resume-from: continue the same run from this checkpoint
};

}  // namespace lathe::ui
