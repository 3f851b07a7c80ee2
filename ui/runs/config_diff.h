// Config differences between two runs (or a checkpoint and an edited config), as lathe_config
// computes them (engine/config/diff.h). ConfigDiffModel shows them as a table (path, A, B).
#pragma once

#include "engine/config/diff.h"
#include "engine/config/io.h"

#include <QAbstractTableModel>
#include <QString>
#include <QVector>

namespace lathe::ui {

using Json = lathe::config::Json;

/// A difference as the GUI shows it; computed by lathe::config::diff_documents().
struct ConfigDifference {
    QString path;
    QString a;  ///< compact JSON text, or kAbsent
    QString b;
    config::ResumeChangeKind kind = config::ResumeChangeKind::Changed;
    bool operator==(const ConfigDifference& o) const {
        return path == o.path && a == o.a && b == o.b && kind == o.kind;
    }
};

inline const QString kAbsent = QString::fromLatin1(config::kAbsent);

/// config::diff_documents(a, b) in Qt strings: `a`'s order, then the paths only `b` has.
QVector<ConfigDifference> diffConfigs(const Json& a, const Json& b);
/// Reads a JSON file; false with `error` when missing or malformed.
bool readJsonFile(const QString& path, Json& out, QString* error = nullptr);

class ConfigDiffModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { PathColumn, AColumn, BColumn, ColumnCount };

    explicit ConfigDiffModel(QObject* parent = nullptr);

    void setConfigs(const Json& a, const Json& b, const QString& labelA, const QString& labelB);
    void clear();
    const QVector<ConfigDifference>& differences() const { return rows_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    QVector<ConfigDifference> rows_;
    QString labelA_ = QStringLiteral("A"), labelB_ = QStringLiteral("B");
};

}  // namespace lathe::ui
