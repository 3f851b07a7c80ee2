// Run folders written by hand, as the engine writes them (for the runs and checkpoints tests).
#pragma once

#include "engine/run_folder/crc32c.h"

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <QVector>
#include <QtTest>

namespace lathe::testing {

inline const QString kLoss = QStringLiteral("train/CE loss");

/// from, from + 1, ..., to (a series' expected steps).
inline QVector<double> range(int from, int to) {
    QVector<double> v;
    for (int i = from; i <= to; ++i) v << i;
    return v;
}

inline bool writeFile(const QString& path, const QByteArray& data) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return false;
    return f.write(data) == data.size();
}

inline bool writeJson(const QString& path, const QJsonObject& o) {
    return writeFile(path, QJsonDocument(o).toJson(QJsonDocument::Compact) + "\n");
}

inline QJsonObject status(const QString& state, qint64 step, qint64 maxSteps, double loss,
                          qint64 pid = 0,
                          const QString& updatedAt = QStringLiteral("2026-01-01T10:00:00Z")) {
    return QJsonObject{{"state", state},
                       {"reason", state == QLatin1String("failed") ? "boom" : ""},
                       {"pid", pid},
                       {"started_at", "2026-01-01T09:00:00Z"},
                       {"updated_at", updatedAt},
                       {"elapsed_s", 3600.0},
                       {"step", step},
                       {"max_steps", maxSteps},
                       {"tokens", step * 2048},
                       {"max_tokens", maxSteps * 2048},
                       {"world_size", 1},
                       {"model", "64d x 2 layers, vocab 256"},
                       {"last_loss", loss}};
}

/// A Lathe tensor file with `n` float32 tensors of `floats` values each (CRCs filled in).
inline QByteArray tensorFile(int n = 2, int floats = 16) {
    QJsonArray tensors;
    QByteArray data;
    for (int t = 0; t < n; ++t) {
        QByteArray bytes(floats * 4, '\0');
        for (int i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((t * 31 + i) & 0xff);
        tensors.append(QJsonObject{{"name", QStringLiteral("t%1").arg(t)},
                                   {"dtype", "float32"},
                                   {"shape", QJsonArray{floats}},
                                   {"offset", data.size()},
                                   {"nbytes", bytes.size()},
                                   {"crc32c", static_cast<qint64>(lathe::run_folder::crc32c(
                                                  bytes.constData(), bytes.size()))}});
        data += bytes;
    }
    const QByteArray header =
        QJsonDocument(QJsonObject{{"tensors", tensors}}).toJson(QJsonDocument::Compact);
    QByteArray out("LATHETS1");
    quint64 h = static_cast<quint64>(header.size());
    for (int i = 0; i < 8; ++i) out.append(static_cast<char>((h >> (8 * i)) & 0xff));
    return out + header + data;
}

/// A complete checkpoint step{step}/ (or `name`) in `runDir`.
inline QString makeCheckpoint(const QString& runDir, qint64 step, bool ephemeral = false,
                              const QString& name = {}, const QJsonObject& config = {}) {
    QString dir = runDir + "/" + (name.isEmpty() ? QStringLiteral("step%1").arg(step) : name);
    writeJson(dir + "/train/rank0.json", QJsonObject{{"global_step", step},
                                                     {"global_train_tokens_seen", step * 2048},
                                                     {"epoch", 1},
                                                     {"world_size", 1}});
    writeFile(dir + "/model_and_optim/rank0.lathe", tensorFile());
    if (!config.isEmpty()) writeJson(dir + "/config.json", config);
    writeJson(dir + "/.metadata.json", QJsonObject{{"ephemeral", ephemeral},
                                                   {"version", "0.1.0"},
                                                   {"world_size", 1},
                                                   {"format", "lathe-checkpoint-v1"}});
    return dir;
}

/// One metrics.jsonl line.
inline QByteArray metricLine(qint64 step, double loss, double wall = -1) {
    QJsonObject o{{"step", step},
                  {"tokens", step * 2048},
                  {"wall_time", wall >= 0 ? wall : 1.7e9 + static_cast<double>(step)},
                  {"values", QJsonObject{{"train/CE loss", loss}, {"optim/LR (group 0)", 1e-3}}}};
    return QJsonDocument(o).toJson(QJsonDocument::Compact) + "\n";
}

inline bool appendFile(const QString& path, const QByteArray& data) {
    QFile f(path);
    if (!f.open(QIODevice::Append)) return false;
    return f.write(data) == data.size();
}

}  // namespace lathe::testing
