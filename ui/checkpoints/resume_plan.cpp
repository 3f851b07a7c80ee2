#include "ui/checkpoints/resume_plan.h"

#include "ui/checkpoints/checkpoint_info.h"

#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "ui/runs/config_diff.h"
#include "ui/runs/run_info.h"

#include <QDir>
#include <QFileInfo>

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
    const QString config = QString::fromLatin1(run_folder::kConfigFile);
    if (!readJsonFile(QDir(info.path).filePath(config), p.base_, &why) &&
        !readJsonFile(QDir(p.runDir_).filePath(config), p.base_, &why))
        return fail(QObject::tr("no config to resume with: %1").arg(why));
    if (p.base_.contains("run_name") && p.base_["run_name"].is_string())
        p.runName_ = QString::fromStdString(p.base_["run_name"].get<std::string>());
    return p;
}

std::optional<ResumePlan> ResumePlan::fromRemoteCheckpoint(const CheckpointInfo& info,
                                                           const QString& runDir, QString* error) {
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return std::nullopt;
    };
    if (!info.remote || info.step < 0)
        return fail(QObject::tr("%1 is not a remote checkpoint").arg(info.path));
    if (!info.canResumeAsNewRun())
        return fail(QObject::tr("checkpoint %1 is %2: %3")
                        .arg(info.name, checkpointStatusName(info.status), info.reason));
    ResumePlan p;
    p.checkpointDir_ = info.path;
    p.runDir_ = QFileInfo(runDir).absoluteFilePath();
    p.runName_ = QFileInfo(p.runDir_).fileName();
    p.runsRoot_ = QFileInfo(p.runDir_).absolutePath();
    p.step_ = info.step;
    p.tokens_ = info.tokens;
    p.worldSize_ = std::max(1, info.worldSize);
    p.remoteFolder_ = remoteCheckpointFolder(p.runDir_);
    const RunInfo run = readRunInfo(p.runDir_);
    if (run.worldSize > 0) p.worldSize_ = run.worldSize;
    QString why;
    if (!readJsonFile(QDir(p.runDir_).filePath(QString::fromLatin1(run_folder::kConfigFile)),
                      p.base_, &why))
        return fail(QObject::tr("no config to resume with: %1").arg(why));
    if (p.base_.contains("run_name") && p.base_["run_name"].is_string())
        p.runName_ = QString::fromStdString(p.base_["run_name"].get<std::string>());
    return p;
}

QString ResumePlan::suggestNewRunName(const QString& runsRoot, const QString& runName,
                                      qint64 step) {
    const QString base = QStringLiteral("%1-from-step%2").arg(runName).arg(step);
    QString name = base;
    for (int i = 2; QFileInfo::exists(QDir(runsRoot).filePath(name)); ++i)
        name = QStringLiteral("%1-%2").arg(base).arg(i);
    return name;
}

std::vector<config::ConfigDifference> ResumePlan::changes(const Json& edited) const {
    return config::diff_documents(base_, edited);
}

QString ResumePlan::refusal(const Json& edited) const {
    return QString::fromStdString(config::resume_refusal(checkpointDir_.toStdString(),
                                                         config::diff_documents(base_, edited)));
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
        // A remote run keeps its checkpoints where they are; its run folder follows from the
        // runs root and the name.
        l.config["trainer"]["save_folder"] =
            (remoteFolder_.isEmpty() ? runDir_ : remoteFolder_).toStdString();
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
    run_folder::ParentLink parent;
    parent.parent_run = runName_.toStdString();
    parent.parent_step = step_;
    parent.checkpoint = checkpointDir_.toStdString();
    parent.parent_dir = runDir_.toStdString();
    const std::string parentFile = run_folder::join(dir.toStdString(), run_folder::kParentFile);
    try {
        run_folder::write_record(parentFile, parent);
    } catch (const std::exception& e) {
        return fail(QObject::tr("cannot write %1").arg(QString::fromStdString(e.what())));
    }
    return l;
}

}  // namespace lathe::ui
