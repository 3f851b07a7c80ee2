// Config differences between two runs (or a checkpoint and an edited config), as lathe_config
// computes them (engine/config/diff.h). ConfigDiffModel shows them as a table (path, A, B).
#pragma once

#include "engine/config/diff.h"
#include "engine/config/io.h"

#include <QAbstractTableModel>
#include <QString>
#include <QVector>

#include <vector>

namespace lathe::ui {

using Json = lathe::config::Json;

inline const QString kAbsent = QString::fromLatin1(config::kAbsent);
/// Reads a JSON file; false with `error` when missing or malformed.
bool readJsonFile(const QString& path, Json& out, QString* error = nullptr);

class ConfigDiffModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { PathColumn, AColumn, BColumn, ColumnCount };

    explicit ConfigDiffModel(QObject* parent = nullptr);

    void setConfigs(const Json& a, const Json& b, const QString& labelA, const QString& labelB);
    void clear();
    /// config::diff_documents(a, b): `a`'s order, then the paths only `b` has.
    const std::vector<config::ConfigDifference>& differences() const { return rows_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::vector<config::ConfigDifference> rows_;
    QString labelA_ = QStringLiteral("A"), labelB_ = QStringLiteral("B");
};

}  // namespace lathe::ui
