#include "ui/util/engine_launch.h"

#include <QCoreApplication>
#include <QDir>

namespace lathe::ui {

QString findEngine() {
    QString env = qEnvironmentVariable("LATHE_ENGINE");
    if (!env.isEmpty()) return env;
    return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("lathe-engine"));
}

}  // namespace lathe::ui
