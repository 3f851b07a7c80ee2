// Runs the real lathe-engine as a child process and reads what it wrote (tests only).
#pragma once

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>
#include <QtTest>

namespace lathe::testing {

inline QString engine_path() {
    return qEnvironmentVariable("LATHE_BIN_DIR") + "/lathe-engine";
}

struct EngineRun {
    int exit_code = -1;
    bool finished = false;
    QString output;
};

/// Runs `lathe-engine args...` with LATHE_RUNS_DIR=runs_dir; stdout and stderr merged.
inline EngineRun run_engine(const QStringList& args, const QString& runs_dir,
                            const QMap<QString, QString>& env = {}, int timeout_ms = 240000) {
    QProcess p;
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert("LATHE_RUNS_DIR", runs_dir);
    for (auto it = env.begin(); it != env.end(); ++it) e.insert(it.key(), it.value());
    p.setProcessEnvironment(e);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(engine_path(), args);
    EngineRun r;
    r.finished = p.waitForFinished(timeout_ms);
    if (!r.finished) {
        p.kill();
        p.waitForFinished();
    }
    r.output = QString::fromUtf8(p.readAll());
    r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    return r;
}

/// A whole file as text; empty when it cannot be read.
inline QString read_text(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

/// A JSON object file; empty when it cannot be read or is not an object.
inline QJsonObject read_json(const QString& path) {
    return QJsonDocument::fromJson(read_text(path).toUtf8()).object();
}

/// Replaces a file's contents; false when it cannot be written.
inline bool write_text(const QString& path, const QByteArray& data) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(data) == data.size();
}

/// step -> values of a run's metrics.jsonl; fails the test on a step seen twice.
inline QMap<qint64, QJsonObject> read_metrics(const QString& path, bool* duplicate = nullptr) {
    QMap<qint64, QJsonObject> out;
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return out;
    while (!f.atEnd()) {
        QByteArray line = f.readLine().trimmed();
        if (line.isEmpty()) continue;
        auto o = QJsonDocument::fromJson(line).object();
        qint64 step = o.value("step").toInteger();
        if (out.contains(step) && duplicate) *duplicate = true;
        out[step] = o.value("values").toObject();
    }
    return out;
}

/// The train/CE loss of each step that has one, in step order.
inline QMap<qint64, double> losses(const QMap<qint64, QJsonObject>& m) {
    QMap<qint64, double> out;
    for (auto it = m.begin(); it != m.end(); ++it) {
        if (it.value().contains("train/CE loss"))
            out[it.key()] = it.value().value("train/CE loss").toDouble();
    }
    return out;
}

/// Empty when `got` has exactly `want`'s steps and losses, bit for bit; else the first
/// difference, "step 3: 2.5 <got_what>, 2.4 <want_what>" (17 digits).
inline QString loss_difference(const QMap<qint64, double>& got, const QMap<qint64, double>& want,
                               const QString& got_what, const QString& want_what) {
    if (got.keys() != want.keys())
        return QString("steps %1..%2 (%3) %4, steps %5..%6 (%7) %8")
            .arg(got.isEmpty() ? 0 : got.firstKey())
            .arg(got.isEmpty() ? 0 : got.lastKey())
            .arg(got.size())
            .arg(got_what)
            .arg(want.isEmpty() ? 0 : want.firstKey())
            .arg(want.isEmpty() ? 0 : want.lastKey())
            .arg(want.size())
            .arg(want_what);
    for (auto it = want.begin(); it != want.end(); ++it)
        if (got[it.key()] != it.value())
            return QString("step %1: %2 %3, %4 %5")
                .arg(it.key())
                .arg(got[it.key()], 0, 'g', 17)
                .arg(got_what)
                .arg(it.value(), 0, 'g', 17)
                .arg(want_what);
    return {};
}

/// The JSON header of a .lathe tensor file (engine/checkpoint/tensor_file.h); empty if unreadable.
inline QJsonObject tensor_file_header(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    QByteArray head = f.read(16);
    if (head.size() < 16) return {};
    quint64 hlen = 0;
    memcpy(&hlen, head.constData() + 8, 8);
    return QJsonDocument::fromJson(f.read(static_cast<qint64>(hlen))).object();
}

/// Each tensor's dtype by name ("float32", "bfloat16", ...).
inline QMap<QString, QString> tensor_dtypes(const QString& path) {
    QMap<QString, QString> out;
    for (const auto& t : tensor_file_header(path).value("tensors").toArray())
        out[t.toObject().value("name").toString()] = t.toObject().value("dtype").toString();
    return out;
}

/// Per-tensor checksums of a Lathe tensor file (from its header), to compare weights exactly.
inline QMap<QString, qint64> tensor_checksums(const QString& path) {
    QMap<QString, qint64> out;
    for (const auto& t : tensor_file_header(path).value("tensors").toArray()) {
        auto o = t.toObject();
        out[o.value("name").toString()] = o.value("crc32c").toInteger();
    }
    return out;
}

}  // namespace lathe::testing
