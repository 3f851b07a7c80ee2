// Short human-readable numbers for the runs and checkpoints tables.
#pragma once

#include <QString>

#include <cmath>

namespace lathe::ui {

/// 950, 41.0k, 2.05M, 1.20B; "–" for a negative (unknown) count.
inline QString formatCount(double v) {
    if (!std::isfinite(v) || v < 0) return QStringLiteral("–");
    if (v >= 1e9) return QString::number(v / 1e9, 'f', 2) + QLatin1Char('B');
    if (v >= 1e6) return QString::number(v / 1e6, 'f', 2) + QLatin1Char('M');
    if (v >= 1e3) return QString::number(v / 1e3, 'f', 1) + QLatin1Char('k');
    return QString::number(v, 'f', 0);
}

/// 512 B, 660 KiB, 1.3 GiB.
inline QString formatBytes(qint64 bytes) {
    if (bytes < 0) return QStringLiteral("–");
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    return QStringLiteral("%1 %2").arg(QString::number(v, 'f', u == 0 || v >= 100 ? 0 : 1),
                                       QLatin1String(units[u]));
}

/// "4m 05s", "1h 02m", "12s".
inline QString formatSeconds(double s) {
    if (!std::isfinite(s) || s < 0) return QStringLiteral("–");
    const qint64 t = std::llround(s);
    if (t >= 3600)
        return QStringLiteral("%1h %2m").arg(t / 3600).arg((t % 3600) / 60, 2, 10,
                                                           QLatin1Char('0'));
    if (t >= 60) return QStringLiteral("%1m %2s").arg(t / 60).arg(t % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1s").arg(t);
}

}  // namespace lathe::ui
