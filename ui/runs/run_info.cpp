#include "runs/run_info.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <cerrno>
#include <cmath>

#include <signal.h>

namespace lathe::ui {
namespace {

bool sameNumber(double a, double b) {
    return a == b || (std::isnan(a) && std::isnan(b));
}

qint64 integer(const QJsonObject& o, const char* key, qint64 fallback = -1) {
    const QJsonValue v = o.value(QLatin1String(key));
    return v.isDouble() ? static_cast<qint64>(v.toDouble()) : fallback;
}

double number(const QJsonObject& o, const char* key) {
    const QJsonValue v = o.value(QLatin1String(key));
    return v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN();
}

QDateTime isoTime(const QJsonObject& o, const char* key) {
    QDateTime t = QDateTime::fromString(o.value(QLatin1String(key)).toString(), Qt::ISODate);
    if (t.isValid()) t = t.toUTC();
    return t;
}

// Reads a small JSON object file; false (with `error`) when missing or not an object.
bool readObject(const QString& path, QJsonObject& out, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = f.errorString();
        return false;
    }
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.read(1 << 20), &pe);
    if (pe.error != QJsonParseError::NoError || !doc.isObject()) {
        if (error)
            *error = pe.error != QJsonParseError::NoError ? pe.errorString()
                                                          : QStringLiteral("not an object");
        return false;
    }
    out = doc.object();
    return true;
}

}  // namespace

bool RunInfo::operator==(const RunInfo& o) const {
    return name == o.name && path == o.path && state == o.state && reason == o.reason &&
           pid == o.pid && startedAt == o.startedAt && updatedAt == o.updatedAt &&
           sameNumber(elapsedS, o.elapsedS) && step == o.step && maxSteps == o.maxSteps &&
           tokens == o.tokens && maxTokens == o.maxTokens && worldSize == o.worldSize &&
           model == o.model && sameNumber(lastLoss, o.lastLoss) && parentRun == o.parentRun &&
           parentStep == o.parentStep && hasConfig == o.hasConfig && hasMetrics == o.hasMetrics;
}

bool processAlive(qint64 pid) {
    if (pid <= 0) return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
    // A recycled pid belongs to some other program: check its command line where we can.
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
    if (!QDir(QStringLiteral("/proc/self")).exists()) return true;
    if (!cmdline.open(QIODevice::ReadOnly)) return false;
    return cmdline.read(4096).contains("lathe");
}

QString defaultRunsRoot() {
    const QString env = qEnvironmentVariable("LATHE_RUNS_DIR");
    if (!env.isEmpty()) return env;
    const QString xdg = qEnvironmentVariable("XDG_DATA_HOME");
    if (!xdg.isEmpty()) return xdg + QStringLiteral("/lathe/runs");
    return QDir::homePath() + QStringLiteral("/.local/share/lathe/runs");
}

QString runStateName(RunState state) {
    switch (state) {
        case RunState::Unknown:
            return QObject::tr("unknown");
        case RunState::Running:
            return QObject::tr("running");
        case RunState::Finished:
            return QObject::tr("finished");
        case RunState::Stopped:
            return QObject::tr("stopped");
        case RunState::Failed:
            return QObject::tr("failed");
        case RunState::Interrupted:
            return QObject::tr("interrupted");
    }
    return {};
}

bool isRunFolder(const QString& dir) {
    const QDir d(dir);
    return d.exists(QStringLiteral("status.json")) || d.exists(QStringLiteral("config.json")) ||
           d.exists(QStringLiteral("metrics.jsonl"));
}

RunInfo readRunInfo(const QString& dir, const RunInfoOptions& options) {
    RunInfo info;
    const QFileInfo fi(dir);
    info.name = fi.fileName();
    info.path = fi.absoluteFilePath();
    const QDir d(info.path);
    info.hasConfig = d.exists(QStringLiteral("config.json"));
    const QFileInfo metrics(d.filePath(QStringLiteral("metrics.jsonl")));
    info.hasMetrics = metrics.exists();

    QJsonObject parent;
    if (readObject(d.filePath(QStringLiteral("parent.json")), parent, nullptr)) {
        info.parentRun = parent.value(QLatin1String("parent_run")).toString();
        info.parentStep = integer(parent, "parent_step");
    }

    QJsonObject s;
    QString error;
    if (!readObject(d.filePath(QStringLiteral("status.json")), s, &error)) {
        info.reason = QFile::exists(d.filePath(QStringLiteral("status.json")))
                          ? QObject::tr("status.json unreadable: %1").arg(error)
                          : QObject::tr("no status.json");
        return info;
    }
    const QString state = s.value(QLatin1String("state")).toString();
    if (state == QLatin1String("running")) {
        info.state = RunState::Running;
    } else if (state == QLatin1String("finished")) {
        info.state = RunState::Finished;
    } else if (state == QLatin1String("stopped")) {
        info.state = RunState::Stopped;
    } else if (state == QLatin1String("failed")) {
        info.state = RunState::Failed;
    } else {
        info.reason = QObject::tr("unknown state \"%1\"").arg(state);
    }
    if (info.reason.isEmpty()) info.reason = s.value(QLatin1String("reason")).toString();
    info.pid = integer(s, "pid", 0);
    info.startedAt = isoTime(s, "started_at");
    info.updatedAt = isoTime(s, "updated_at");
    info.elapsedS = number(s, "elapsed_s");
    info.step = integer(s, "step");
    info.maxSteps = integer(s, "max_steps");
    info.tokens = integer(s, "tokens");
    info.maxTokens = integer(s, "max_tokens");
    info.worldSize = static_cast<int>(integer(s, "world_size", 0));
    info.model = s.value(QLatin1String("model")).toString();
    info.lastLoss = number(s, "last_loss");

    if (info.state == RunState::Running) {
        const QDateTime now = options.now.isValid() ? options.now : QDateTime::currentDateTimeUtc();
        // The freshest sign of life: the status or a metric line.
        QDateTime last = info.updatedAt;
        if (metrics.exists() && (!last.isValid() || metrics.lastModified().toUTC() > last))
            last = metrics.lastModified().toUTC();
        const bool alive = options.alive ? options.alive(info.pid) : true;
        if (!alive) {
            info.state = RunState::Interrupted;
            info.reason =
                QObject::tr("its process (%1) is gone without a final status").arg(info.pid);
        } else if (last.isValid() && last.secsTo(now) > options.staleAfterS) {
            info.state = RunState::Interrupted;
            info.reason = QObject::tr("no update for %1 min").arg(last.secsTo(now) / 60);
        }
    }
    return info;
}

}  // namespace lathe::ui
