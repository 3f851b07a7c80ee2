#include "checkpoints/resume_plan.h"

#include "checkpoints/checkpoint_info.h"
#include "runs/config_diff.h"
#include "runs/run_info.h"

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>

namespace lathe::ui {

std::optional<ResumePlan> ResumePlan::fromCheckpoint(const QString& checkpointDir, QString* error) {
    const CheckpointInfo info = inspectCheckpoint(checkpointDir);
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return std::nullopt;
    };
    if (info.step < 0) return fail(QObject::tr("%1 is not a checkpoint folder").arg(checkpointDir));
    if (!info.canResumeAsNewRun())
        return fail(QObject::tr("checkpoint %1 is %2: %3")
                        .arg(info.name, checkpointStatusName(info.status), info.reason));
    ResumePlan p;
    p.checkpointDir_ = info.path;
    p.runDir_ = QFileInfo(info.path).absolutePath();
    p.runName_ = QFileInfo(p.runDir_).fileName();
    p.runsRoot_ = QFileInfo(p.runDir_).absolutePath();
    p.step_ = info.step;
    p.tokens_ = info.tokens;
    p.worldSize_ = std::max(1, info.worldSize);
    const RunInfo run = readRunInfo(p.runDir_);
    if (run.worldSize > 0) p.worldSize_ = run.worldSize;
    QString why;
    if (!readJsonFile(info.path + QStringLiteral("/config.json"), p.base_, &why) &&
        !readJsonFile(p.runDir_ + QStringLiteral("/config.json"), p.base_, &why))
        return fail(QObject::tr("no config to resume with: %1").arg(why));
    if (p.base_.contains("run_name") && p.base_["run_name"].is_string())
        p.runName_ = QString::fromStdString(p.base_["run_name"].get<std::string>());
    return p;
}

bool ResumePlan::isUnsafePath(const QString& path) {
    return path.startsWith(QLatin1String("model.")) ||
           path == QLatin1String("dataset.sequence_length") ||
           path == QLatin1String("train_module.max_sequence_length");
}

bool ResumePlan::isIgnoredPath(const QString& path) {
    return path == QLatin1String("trainer.save_folder") ||
           path.startsWith(QLatin1String("trainer.load_")) ||
           path == QLatin1String("trainer.hard_stop") ||
           path.startsWith(QLatin1String("launch.")) || path == QLatin1String("run_name");
}

QString ResumePlan::suggestNewRunName(const QString& runsRoot, const QString& runName,
                                      qint64 step) {
    const QString base = QStringLiteral("%1-from-step%2").arg(runName).arg(step);
    QString name = base;
    for (int i = 2; QFileInfo::exists(QDir(runsRoot).filePath(name)); ++i)
        name = QStringLiteral("%1-%2").arg(base).arg(i);
    return name;
}

QVector<ResumeChange> ResumePlan::changes(const Json& edited) const {
    QVector<ResumeChange> out;
    for (const ConfigDifference& d : diffConfigs(base_, edited)) {
        ResumeChange c{d.path, d.a, d.b, ResumeChange::Kind::Changed};
        if (isIgnoredPath(d.path)) {
            c.kind = ResumeChange::Kind::Ignored;
        } else if (isUnsafePath(d.path)) {
            c.kind = ResumeChange::Kind::Unsafe;
        }
        out.append(c);
    }
    return out;
}

QString ResumePlan::refusal(const Json& edited) const {
    QStringList lines;
    for (const ResumeChange& c : changes(edited))
        if (c.kind == ResumeChange::Kind::Unsafe)
            lines << QStringLiteral("  %1: %2 -> %3").arg(c.path, c.before, c.after);
    if (lines.isEmpty()) return {};
    return QObject::tr("cannot resume %1 with a different model or sequence length:\n%2")
        .arg(checkpointDir_, lines.join(QLatin1Char('\n')));
}

std::optional<ResumePlan::Launch> ResumePlan::prepareLaunch(const Json& edited, Mode mode,
                                                            const QString& newRunName, int ranks,
                                                            QString* error) const {
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return std::nullopt;
    };
    if (const QString why = refusal(edited); !why.isEmpty()) return fail(why);
    Launch l;
    l.mode = mode;
    l.config = edited;
    l.options.ranks = std::max(1, ranks);
    l.options.runsDir = runsRoot_;
    if (mode == Mode::SameRun) {
        // The same folder and name: the engine continues this run.
        l.config["run_name"] = runName_.toStdString();
        l.config["trainer"]["save_folder"] = runDir_.toStdString();
        l.options.resumeFrom = checkpointDir_;
        l.runDir = runDir_;
        return l;
    }
    const QString name = newRunName.trimmed();
    if (name.isEmpty() || name.contains(QLatin1Char('/')) || name == QLatin1String(".") ||
        name == QLatin1String(".."))
        return fail(QObject::tr("\"%1\" is not a usable run name").arg(name));
    const QString dir = QDir(runsRoot_).filePath(name);
    if (QFileInfo::exists(dir)) return fail(QObject::tr("a run named %1 already exists").arg(name));
    l.config["run_name"] = name.toStdString();
    l.config["trainer"]["save_folder"] = "";
    l.config["trainer"]["load_path"] = checkpointDir_.toStdString();
    l.config["trainer"]["load_strategy"] = "always";
    l.runDir = dir;
    if (!QDir().mkpath(dir)) return fail(QObject::tr("cannot create %1").arg(dir));
    const Json parent = {{"parent_run", runName_.toStdString()},
                         {"parent_step", step_},
                         {"checkpoint", checkpointDir_.toStdString()},
                         {"parent_dir", runDir_.toStdString()}};
    QSaveFile f(dir + QStringLiteral("/parent.json"));
    if (!f.open(QIODevice::WriteOnly) ||
        f.write(QByteArray::fromStdString(parent.dump(2) + "\n")) < 0 || !f.commit())
        return fail(QObject::tr("cannot write %1/parent.json: %2").arg(dir, f.errorString()));
    return l;
}

}  // namespace lathe::ui
