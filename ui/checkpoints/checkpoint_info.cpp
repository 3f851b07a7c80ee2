#include "ui/checkpoints/checkpoint_info.h"

#include "engine/protocol/cli_output.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/run_folder/tensor_file_header.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace lathe::ui {
namespace {

const QString kModelFile = QString::fromLatin1(run_folder::kModelTensorFile);

// A JSON object from a file; empty with `error` when it cannot be read.
QJsonObject readObject(const QString& path, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        *error = f.errorString();
        return {};
    }
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError) {
        *error = pe.errorString();
        return {};
    }
    if (!doc.isObject()) {
        *error = QObject::tr("not a JSON object");
        return {};
    }
    return doc.object();
}

qint64 folderSize(const QString& dir) {
    qint64 total = 0;
    QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::NoSymLinks,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        it.next();
        total += it.fileInfo().size();
    }
    return total;
}

}  // namespace

bool CheckpointInfo::operator==(const CheckpointInfo& o) const {
    return name == o.name && path == o.path && step == o.step && status == o.status &&
           reason == o.reason && ephemeral == o.ephemeral && tokens == o.tokens &&
           worldSize == o.worldSize && time == o.time && sizeBytes == o.sizeBytes &&
           abandoned == o.abandoned && remote == o.remote;
}

bool isRemotePath(const QString& path) {
    return path.startsWith(QLatin1String("s3://")) || path.startsWith(QLatin1String("http://")) ||
           path.startsWith(QLatin1String("https://"));
}

QString remoteCheckpointFolder(const QString& runDir) {
    QString error;
    const QJsonObject config =
        readObject(QDir(runDir).filePath(QString::fromLatin1(run_folder::kConfigFile)), &error);
    QString folder = config.value(QStringLiteral("trainer"))
                         .toObject()
                         .value(QStringLiteral("save_folder"))
                         .toString();
    while (folder.endsWith(QLatin1Char('/'))) folder.chop(1);
    return isRemotePath(folder) ? folder : QString();
}

QVector<CheckpointInfo> checkpointsFromInspect(const QByteArray& json, QString* error) {
    protocol::CheckpointListing listing;
    try {
        listing = protocol::read_output<protocol::CheckpointListing>(json.toStdString(), "inspect");
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return {};
    }
    QVector<CheckpointInfo> out;
    for (const auto& o : listing.checkpoints) {
        CheckpointInfo c;
        c.path = QString::fromStdString(o.path);
        QString name = c.path;
        while (name.endsWith(QLatin1Char('/'))) name.chop(1);
        c.name = name.mid(name.lastIndexOf(QLatin1Char('/')) + 1);
        const auto parsed = run_folder::parse_checkpoint_name(c.name.toStdString());
        if (!parsed) continue;
        c.step = parsed->step;
        c.remote = true;
        c.status = o.complete ? CheckpointInfo::Status::Complete : CheckpointInfo::Status::Partial;
        c.reason = QString::fromStdString(o.problem.value_or(""));
        if (o.metadata && o.metadata->is_object()) {
            const auto& meta = *o.metadata;
            const auto e = meta.find("ephemeral");
            c.ephemeral = e != meta.end() && e->is_boolean() && e->get<bool>();
            const auto w = meta.find("world_size");
            c.worldSize = w != meta.end() && w->is_number_integer() ? w->get<int>() : 0;
        }
        c.tokens = o.global_train_tokens_seen.value_or(-1);
        c.sizeBytes = o.total_bytes;
        out.push_back(c);
    }
    std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
        return a.step != b.step ? a.step < b.step : a.name < b.name;
    });
    return out;
}

QString checkpointLabel(const CheckpointInfo& c) {
    QString step = QString::number(c.step);
    const QString prefix = QStringLiteral("step") + step;
    if (c.step < 0 || !c.name.startsWith(prefix)) return c.step < 0 ? c.name : step;
    QString rest = c.name.mid(prefix.size());
    if (rest.isEmpty()) return step;
    if (rest == QLatin1String("-tmp"))
        rest = QObject::tr("saving");
    else if (rest.startsWith(QLatin1Char('.')))
        rest.remove(0, 1);
    return QStringLiteral("%1 · %2").arg(step, rest);
}

QString checkpointStatusName(CheckpointInfo::Status status) {
    switch (status) {
        case CheckpointInfo::Status::Complete:
            return QObject::tr("complete");
        case CheckpointInfo::Status::Partial:
            return QObject::tr("partial");
        case CheckpointInfo::Status::Abandoned:
            return QObject::tr("abandoned");
        case CheckpointInfo::Status::Unusable:
            return QObject::tr("unusable");
    }
    return {};
}

bool isCheckpointName(const QString& folderName) {
    return run_folder::parse_checkpoint_name(folderName.toStdString()).has_value();
}

namespace {

// lathe::Error's text without the path in front (the GUI shows the file beside it).
QString reasonOf(const std::exception& e, const std::string& path) {
    std::string what = e.what();
    if (what.rfind(path + ": ", 0) == 0) what = what.substr(path.size() + 2);
    return QString::fromStdString(what);
}

}  // namespace

QString checkTensorFile(const QString& path) {
    const std::string p = path.toStdString();
    try {
        run_folder::read_tensor_file_header(p);
    } catch (const std::exception& e) {
        return reasonOf(e, p);
    }
    return {};
}

QString verifyTensorData(const QString& path, const std::atomic<bool>* cancel) {
    const std::string p = path.toStdString();
    try {
        run_folder::verify_tensor_file_data(p, cancel);
    } catch (const std::exception& e) {
        return reasonOf(e, p);
    }
    return {};
}

CheckpointInfo inspectCheckpoint(const QString& dir) {
    CheckpointInfo c;
    const QFileInfo fi(dir);
    c.name = fi.fileName();
    c.path = fi.absoluteFilePath();
    c.time = fi.lastModified().toUTC();
    const auto name = run_folder::parse_checkpoint_name(c.name.toStdString());
    if (!name) return c;
    using Kind = run_folder::CheckpointName::Kind;
    c.step = name->step;
    const QDir d(c.path);
    c.sizeBytes = folderSize(c.path);
    c.abandoned = name->kind == Kind::Abandoned;

    if (name->kind == Kind::Temporary) {
        c.status = CheckpointInfo::Status::Partial;
        c.reason = QObject::tr("temporary folder of a save that is in progress or was interrupted");
        return c;
    }
    if (name->kind == Kind::Unusable) {
        c.status = CheckpointInfo::Status::Unusable;
        std::string error;
        const auto record = run_folder::read_record<run_folder::UnusableCheckpoint>(
            d.filePath(QString::fromLatin1(run_folder::kUnusableReasonFile)).toStdString(), &error);
        c.reason = record ? QObject::tr("set aside when it could not be loaded: %1")
                                .arg(QString::fromStdString(record->reason))
                          : QObject::tr("set aside when it could not be loaded (%1: %2)")
                                .arg(QString::fromLatin1(run_folder::kUnusableReasonFile),
                                     QString::fromStdString(error));
        return c;
    }
    const QString metaPath = d.filePath(QString::fromLatin1(run_folder::kCheckpointMetadataFile));
    if (!QFileInfo::exists(metaPath)) {
        c.status = CheckpointInfo::Status::Partial;
        c.reason = QObject::tr("no .metadata.json: the save did not finish");
        return c;
    }
    c.time = QFileInfo(metaPath).lastModified().toUTC();
    // From here on a problem makes it unusable.
    auto unusable = [&](const QString& why) {
        c.status = CheckpointInfo::Status::Unusable;
        c.reason = c.abandoned ? QObject::tr("abandoned; %1").arg(why) : why;
        return c;
    };
    QString error;
    const QJsonObject meta = readObject(metaPath, &error);
    if (!error.isEmpty()) return unusable(QObject::tr("unreadable .metadata.json: %1").arg(error));
    c.ephemeral = meta.value(QLatin1String("ephemeral")).toBool(false);
    c.worldSize = meta.value(QLatin1String("world_size")).toInt(1);
    const QJsonObject train =
        readObject(d.filePath(QString::fromStdString(run_folder::train_state_file(0))), &error);
    if (!error.isEmpty())
        return unusable(QObject::tr("unreadable train/rank0.json: %1").arg(error));
    if (!train.value(QLatin1String("global_step")).isDouble())
        return unusable(QObject::tr("train/rank0.json has no global_step"));
    c.tokens = train.value(QLatin1String("global_train_tokens_seen")).toInteger(-1);
    const qint64 savedStep = train.value(QLatin1String("global_step")).toInteger();
    if (savedStep != c.step)
        return unusable(
            QObject::tr("train/rank0.json is for step %1, not %2").arg(savedStep).arg(c.step));
    for (int k = 1; k < c.worldSize; ++k) {
        if (!QFileInfo::exists(d.filePath(QString::fromStdString(run_folder::train_state_file(k)))))
            return unusable(QObject::tr("train/rank%1.json is missing (world size %2)")
                                .arg(k)
                                .arg(c.worldSize));
    }
    if (!QFileInfo::exists(d.filePath(kModelFile)))
        return unusable(QObject::tr("%1 is missing").arg(kModelFile));
    if (QString e = checkTensorFile(d.filePath(kModelFile)); !e.isEmpty())
        return unusable(QStringLiteral("%1: %2").arg(kModelFile, e));
    if (c.abandoned) {
        c.status = CheckpointInfo::Status::Abandoned;
        c.reason = QObject::tr("set aside when the run was resumed from an earlier step");
    } else {
        c.status = CheckpointInfo::Status::Complete;
    }
    return c;
}

QVector<CheckpointInfo> scanCheckpoints(const QString& runDir) {
    QVector<CheckpointInfo> out;
    const QDir d(runDir);
    for (const QString& name :
         d.entryList({QStringLiteral("step*")}, QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (!isCheckpointName(name)) continue;
        out.append(inspectCheckpoint(d.filePath(name)));
    }
    std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
        return a.step != b.step ? a.step < b.step : a.name < b.name;
    });
    return out;
}

bool removeCheckpoint(const QString& dir, QString* error) {
    QDir d(dir);
    if (!d.exists()) {
        if (error) *error = QObject::tr("%1 does not exist").arg(dir);
        return false;
    }
    const QString meta = d.filePath(QString::fromLatin1(run_folder::kCheckpointMetadataFile));
    if (QFileInfo::exists(meta) && !QFile::remove(meta)) {
        if (error) *error = QObject::tr("cannot remove %1").arg(meta);
        return false;
    }
    if (!d.removeRecursively()) {
        if (error) *error = QObject::tr("cannot remove every file of %1").arg(dir);
        return false;
    }
    return true;
}

}  // namespace lathe::ui
