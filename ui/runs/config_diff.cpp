#include "ui/runs/config_diff.h"

#include <QFile>

namespace lathe::ui {

bool readJsonFile(const QString& path, Json& out, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = QObject::tr("cannot read %1: %2").arg(path, f.errorString());
        return false;
    }
    const QByteArray data = f.readAll();
    out = Json::parse(data.constData(), data.constData() + data.size(), nullptr, false);
    if (out.is_discarded()) {
        if (error) *error = QObject::tr("%1 is not valid JSON").arg(path);
        out = Json();
        return false;
    }
    return true;
}

ConfigDiffModel::ConfigDiffModel(QObject* parent) : QAbstractTableModel(parent) {}

void ConfigDiffModel::setConfigs(const Json& a, const Json& b, const QString& labelA,
                                 const QString& labelB) {
    beginResetModel();
    rows_ = config::diff_documents(a, b);
    labelA_ = labelA;
    labelB_ = labelB;
    endResetModel();
    Q_EMIT headerDataChanged(Qt::Horizontal, AColumn, BColumn);
}

void ConfigDiffModel::clear() {
    beginResetModel();
    rows_.clear();
    endResetModel();
}

int ConfigDiffModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int ConfigDiffModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ConfigDiffModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || static_cast<std::size_t>(index.row()) >= rows_.size() ||
        index.column() >= ColumnCount)
        return {};
    if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
    const config::ConfigDifference& d = rows_.at(static_cast<std::size_t>(index.row()));
    switch (index.column()) {
        case PathColumn:
            return QString::fromStdString(d.path);
        case AColumn:
            return QString::fromStdString(d.before);
        case BColumn:
            return QString::fromStdString(d.after);
    }
    return {};
}

QVariant ConfigDiffModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case PathColumn:
            return tr("Field");
        case AColumn:
            return labelA_;
        case BColumn:
            return labelB_;
    }
    return {};
}

}  // namespace lathe::ui
