#include "ui/runs/run_info.h"

#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <cmath>

namespace lathe::ui {
namespace {

bool sameNumber(double a, double b) {
    return a == b || (std::isnan(a) && std::isnan(b));
}

QDateTime isoTime(const std::string& text) {
    QDateTime t = QDateTime::fromString(QString::fromStdString(text), Qt::ISODate);
    if (t.isValid()) t = t.toUTC();
    return t;
}

}  // namespace

bool RunInfo::operator==(const RunInfo& o) const {
    return name == o.name && path == o.path && state == o.state && reason == o.reason &&
           pid == o.pid && startedAt == o.startedAt && updatedAt == o.updatedAt &&
           sameNumber(elapsedS, o.elapsedS) && step == o.step && maxSteps == o.maxSteps &&
           tokens == o.tokens && maxTokens == o.maxTokens && worldSize == o.worldSize &&
           model == o.model && sameNumber(lastLoss, o.lastLoss) && tags == o.tags &&
           notes == o.notes && parentRun == o.parentRun && parentStep == o.parentStep &&
           hasConfig == o.hasConfig && hasMetrics == o.hasMetrics;
}

bool processAlive(qint64 pid) {
    return run_folder::lathe_process_alive(pid);
}

QString defaultRunsRoot() {
    return QString::fromStdString(run_folder::default_runs_root());
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

QString runFile(const QString& runDir, const char* name) {
    return QDir(runDir).filePath(QString::fromLatin1(name));
}

bool isRunFolder(const QString& dir) {
    return run_folder::is_run_folder(dir.toStdString());
}

RunInfo readRunInfo(const QString& dir, const RunInfoOptions& options) {
    RunInfo info;
    const QFileInfo fi(dir);
    info.name = fi.fileName();
    info.path = fi.absoluteFilePath();
    const QDir d(info.path);
    const std::string folder = info.path.toStdString();
    auto file = [&](const char* name) { return run_folder::join(folder, name); };
    info.hasConfig = d.exists(QString::fromLatin1(run_folder::kConfigFile));
    const QFileInfo metrics(d.filePath(QString::fromLatin1(run_folder::kMetricsJsonlFile)));
    info.hasMetrics = metrics.exists();

    if (const auto n =
            run_folder::read_record<run_folder::RunNotes>(file(run_folder::kNotesFile))) {
        for (const auto& t : n->tags) info.tags << QString::fromStdString(t);
        info.notes = QString::fromStdString(n->notes);
    }
    if (const auto parent =
            run_folder::read_record<run_folder::ParentLink>(file(run_folder::kParentFile))) {
        info.parentRun = QString::fromStdString(parent->parent_run);
        info.parentStep = parent->parent_step;
    }

    std::string error;
    const auto s =
        run_folder::read_record<run_folder::RunStatus>(file(run_folder::kStatusFile), &error);
    if (!s) {
        info.reason =
            d.exists(QString::fromLatin1(run_folder::kStatusFile))
                ? QObject::tr("status.json unreadable: %1").arg(QString::fromStdString(error))
                : QObject::tr("no status.json");
        return info;
    }
    using run_folder::RunStatus;
    if (s->state == RunStatus::kRunning) {
        info.state = RunState::Running;
    } else if (s->state == RunStatus::kFinished) {
        info.state = RunState::Finished;
    } else if (s->state == RunStatus::kStopped) {
        info.state = RunState::Stopped;
    } else if (s->state == RunStatus::kFailed) {
        info.state = RunState::Failed;
    } else if (s->state == RunStatus::kInterrupted) {  // its workbench went away
        info.state = RunState::Interrupted;
    } else {
        info.reason = QObject::tr("unknown state \"%1\"").arg(QString::fromStdString(s->state));
    }
    if (info.reason.isEmpty()) info.reason = QString::fromStdString(s->reason);
    info.pid = s->pid;
    info.startedAt = isoTime(s->started_at);
    info.updatedAt = isoTime(s->updated_at);
    info.elapsedS = s->elapsed_s;
    info.step = s->step;
    info.maxSteps = s->max_steps;
    info.tokens = s->tokens;
    info.maxTokens = s->max_tokens;
    info.worldSize = static_cast<int>(s->world_size);
    info.model = QString::fromStdString(s->model);
    info.lastLoss = s->last_loss.value_or(std::numeric_limits<double>::quiet_NaN());

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

bool writeRunNotes(const QString& runDir, const QString& tags, const QString& notes,
                   QString* error) {
    try {
        run_folder::RunNotes n;
        n.tags = run_folder::parse_tags(tags.toStdString());
        n.notes = notes.toStdString();
        run_folder::write_record(runFile(runDir, run_folder::kNotesFile).toStdString(), n);
        return true;
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
}

}  // namespace lathe::ui
