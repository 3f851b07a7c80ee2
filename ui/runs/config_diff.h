// Config differences between two runs (or a checkpoint and an edited config): the leaf fields by
// dotted path, only those that differ. ConfigDiffModel shows them as a table (path, A, B).
#pragma once

#include "config/io.h"

#include <QAbstractTableModel>
#include <QString>
#include <QVector>

#include <utility>
#include <vector>

namespace lathe::ui {

using Json = lathe::config::Json;

struct ConfigDifference {
    QString path;
    QString a;  ///< compact JSON text, or kAbsent
    QString b;
    bool operator==(const ConfigDifference& o) const {
        return path == o.path && a == o.a && b == o.b;
    }
};

inline const QString kAbsent = QStringLiteral("(absent)");

/// Leaf values by dotted path in document order; arrays are leaves (compact JSON text).
std::vector<std::pair<QString, QString>> flattenConfig(const Json& doc);
/// The fields whose values differ, in `a`'s order, then the paths only `b` has.
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
