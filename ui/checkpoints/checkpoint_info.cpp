#include "checkpoints/checkpoint_info.h"

#include "sinks/crc32c.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include <algorithm>
#include <cstring>

namespace lathe::ui {
namespace {

constexpr char kTensorMagic[8] = {'L', 'A', 'T', 'H', 'E', 'T', 'S', '1'};
constexpr quint64 kMaxHeaderBytes = quint64(1) << 30;
const QString kModelFile = QStringLiteral("model_and_optim/rank0.lathe");

const QRegularExpression& nameRe() {
    static const QRegularExpression re(QStringLiteral(R"(^step(\d+)(-tmp|\.abandoned\d*)?$)"));
    return re;
}

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

struct TensorHeader {
    QJsonArray tensors;
    qint64 dataStart = 0;
    qint64 fileSize = 0;
};

// Reads and checks the header; empty on success, else the reason.
QString readHeader(QFile& f, TensorHeader& out) {
    out.fileSize = f.size();
    char head[16];
    if (f.read(head, 16) != 16) return QObject::tr("shorter than its 16-byte preamble");
    if (std::memcmp(head, kTensorMagic, 8) != 0)
        return QObject::tr("not a Lathe tensor file (bad magic)");
    quint64 hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | static_cast<unsigned char>(head[8 + i]);
    if (hlen > kMaxHeaderBytes || static_cast<qint64>(16 + hlen) > out.fileSize)
        return QObject::tr("truncated: %1 bytes, the header alone needs %2")
            .arg(out.fileSize)
            .arg(16 + hlen);
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.read(static_cast<qint64>(hlen)), &pe);
    if (pe.error != QJsonParseError::NoError || !doc.isObject() ||
        !doc.object().value(QLatin1String("tensors")).isArray())
        return QObject::tr("unreadable header: %1")
            .arg(pe.error != QJsonParseError::NoError ? pe.errorString()
                                                      : QObject::tr("no tensor list"));
    out.tensors = doc.object().value(QLatin1String("tensors")).toArray();
    out.dataStart = static_cast<qint64>(16 + hlen);
    qint64 need = 0;
    for (const QJsonValue& t : out.tensors) {
        const QJsonObject o = t.toObject();
        const qint64 offset = o.value(QLatin1String("offset")).toInteger(-1);
        const qint64 nbytes = o.value(QLatin1String("nbytes")).toInteger(-1);
        if (offset < 0 || nbytes < 0)
            return QObject::tr("bad entry for tensor \"%1\" in the header")
                .arg(o.value(QLatin1String("name")).toString());
        need = std::max(need, offset + nbytes);
    }
    if (out.dataStart + need > out.fileSize)
        return QObject::tr("truncated: %1 bytes, its header says %2")
            .arg(out.fileSize)
            .arg(out.dataStart + need);
    return {};
}

}  // namespace

bool CheckpointInfo::operator==(const CheckpointInfo& o) const {
    return name == o.name && path == o.path && step == o.step && status == o.status &&
           reason == o.reason && ephemeral == o.ephemeral && tokens == o.tokens &&
           worldSize == o.worldSize && time == o.time && sizeBytes == o.sizeBytes &&
           abandoned == o.abandoned;
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
    return nameRe().match(folderName).hasMatch();
}

QString checkTensorFile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return f.errorString();
    TensorHeader h;
    return readHeader(f, h);
}

QString verifyTensorData(const QString& path, const std::atomic<bool>* cancel) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return f.errorString();
    TensorHeader h;
    if (QString e = readHeader(f, h); !e.isEmpty()) return e;
    QByteArray buffer;
    for (const QJsonValue& t : h.tensors) {
        if (cancel && cancel->load()) return QObject::tr("cancelled");
        const QJsonObject o = t.toObject();
        const QString name = o.value(QLatin1String("name")).toString();
        qint64 left = o.value(QLatin1String("nbytes")).toInteger();
        if (!f.seek(h.dataStart + o.value(QLatin1String("offset")).toInteger()))
            return QObject::tr("cannot seek to tensor \"%1\"").arg(name);
        std::uint32_t crc = 0;
        while (left > 0) {
            buffer = f.read(std::min<qint64>(left, 8 << 20));
            if (buffer.isEmpty()) return QObject::tr("cannot read tensor \"%1\"").arg(name);
            crc = lathe::sinks::crc32c(buffer.constData(), static_cast<std::size_t>(buffer.size()),
                                       crc);
            left -= buffer.size();
        }
        if (o.contains(QLatin1String("crc32c")) &&
            static_cast<quint64>(o.value(QLatin1String("crc32c")).toInteger()) != crc)
            return QObject::tr("tensor \"%1\" is corrupt (CRC-32C mismatch)").arg(name);
    }
    return {};
}

CheckpointInfo inspectCheckpoint(const QString& dir) {
    CheckpointInfo c;
    const QFileInfo fi(dir);
    c.name = fi.fileName();
    c.path = fi.absoluteFilePath();
    c.time = fi.lastModified().toUTC();
    const auto m = nameRe().match(c.name);
    if (!m.hasMatch()) return c;
    c.step = m.captured(1).toLongLong();
    const QString suffix = m.captured(2);
    const QDir d(c.path);
    c.sizeBytes = folderSize(c.path);
    c.abandoned = suffix.startsWith(QLatin1String(".abandoned"));

    if (suffix == QLatin1String("-tmp")) {
        c.status = CheckpointInfo::Status::Partial;
        c.reason = QObject::tr("temporary folder of a save that is in progress or was interrupted");
        return c;
    }
    const QString metaPath = d.filePath(QStringLiteral(".metadata.json"));
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
    const QJsonObject train = readObject(d.filePath(QStringLiteral("train/rank0.json")), &error);
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
        if (!QFileInfo::exists(d.filePath(QStringLiteral("train/rank%1.json").arg(k))))
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
        if (!nameRe().match(name).hasMatch()) continue;
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
    const QString meta = d.filePath(QStringLiteral(".metadata.json"));
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
