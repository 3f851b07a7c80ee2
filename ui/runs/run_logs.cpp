#include "ui/runs/run_logs.h"

#include "ui/logs/log_model.h"

#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QStringList>

namespace lathe::ui {

int loadRunLogs(const QString& runDir, LogModel* model, int maxLinesPerRank) {
    static const QRegularExpression fileRe(QStringLiteral(R"(^rank(\d+)\.log$)"));
    static const QRegularExpression lineRe(
        QStringLiteral(R"(^\d\d:\d\d:\d\d(?:\.\d+)?\s+(\w+)\s+(?:\[rank\s?(\d+)\]\s?)?(.*)$)"));
    const QDir logs(runDir + QStringLiteral("/logs"));
    int total = 0;
    for (const QString& name :
         logs.entryList({QStringLiteral("rank*.log")}, QDir::Files, QDir::Name)) {
        const auto fm = fileRe.match(name);
        if (!fm.hasMatch()) continue;
        const int fileRank = fm.captured(1).toInt();
        QFile f(logs.filePath(name));
        if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) continue;
        QStringList lines;
        while (!f.atEnd()) {
            lines << QString::fromUtf8(f.readLine()).trimmed();
            if (lines.size() > maxLinesPerRank) lines.removeFirst();
        }
        for (const QString& line : std::as_const(lines)) {
            if (line.isEmpty()) continue;
            QString level = QStringLiteral("info");
            int rank = fileRank;
            QString message = line;
            if (const auto m = lineRe.match(line); m.hasMatch()) {
                const QString l = m.captured(1).toLower();
                if (l == QLatin1String("warn") || l == QLatin1String("warning")) {
                    level = QStringLiteral("warning");
                } else if (l == QLatin1String("error") || l == QLatin1String("critical")) {
                    level = QStringLiteral("error");
                } else if (l == QLatin1String("debug") || l == QLatin1String("trace")) {
                    level = QStringLiteral("debug");
                }
                if (!m.captured(2).isEmpty()) rank = m.captured(2).toInt();
                message = m.captured(3);
            }
            model->append(rank, level, message);
            ++total;
        }
    }
    model->flush();
    return total;
}

}  // namespace lathe::ui
