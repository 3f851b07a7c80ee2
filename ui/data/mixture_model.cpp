#include "ui/data/mixture_model.h"

#include "engine/config/memory_estimate.h"
#include "engine/config/rules.h"

#include <QBrush>
#include <QColor>
#include <QFileInfo>

#include <cmath>

namespace lathe::ui {
namespace {

using Json = lathe::config::Json;

QString count(double v) {
    return QString::fromStdString(lathe::config::human_count(v));
}

}  // namespace

MixtureModel::MixtureModel(QObject* parent) : QAbstractTableModel(parent) {}

int MixtureModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(sources_.size());
}

int MixtureModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant MixtureModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal) return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
            case Ratio:
                return tr(
                    "target_ratio: the source's share of requested_tokens; the ratios sum "
                    "to 1");
            case MaxRepetition:
                return tr("max_repetition_ratio: how many times over its tokens may be used");
            case MaxFraction:
                return tr("max_source_fraction: the share of its tokens that may be used");
            case Available:
                return tr("Tokens in the source's files (Estimate asks the engine)");
            case Planned:
                return tr("target_ratio x requested_tokens");
            case Repetition:
                return tr(
                    "Planned tokens over usable tokens: above max repetition, the engine "
                    "refuses the mixture");
            default:
                return {};
        }
    }
    if (role != Qt::DisplayRole) return {};
    switch (section) {
        case Name:
            return tr("Source");
        case Paths:
            return tr("Files");
        case Ratio:
            return tr("Ratio");
        case MaxRepetition:
            return tr("Max repetition");
        case MaxFraction:
            return tr("Max fraction");
        case Available:
            return tr("Tokens");
        case Planned:
            return tr("Planned");
        case Repetition:
            return tr("Repetition");
        default:
            return {};
    }
}

Qt::ItemFlags MixtureModel::flags(const QModelIndex& index) const {
    Qt::ItemFlags f = QAbstractTableModel::flags(index);
    if (index.column() <= MaxFraction) f |= Qt::ItemIsEditable;
    return f;
}

std::optional<qint64> MixtureModel::plannedTokens(int row) const {
    if (!requested_ || row < 0 || row >= sources_.size()) return std::nullopt;
    return qint64(double(*requested_) * sources_[row].ratio);
}

QVariant MixtureModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= sources_.size()) return {};
    const Source& s = sources_[index.row()];
    const bool over = s.repetitions && *s.repetitions > s.maxRepetition + 1e-12;
    if (role == Qt::ForegroundRole && over &&
        (index.column() == Repetition || index.column() == MaxRepetition))
        return QBrush(QColor(0xc6, 0x28, 0x28));
    if (role == Qt::ToolTipRole && index.column() == Paths) return s.paths.join(QLatin1Char('\n'));
    if (role == Qt::ToolTipRole && over)
        return tr("%1 needs its tokens %2 times over; max_repetition_ratio allows %3")
            .arg(s.name)
            .arg(*s.repetitions, 0, 'f', 3)
            .arg(s.maxRepetition);
    if (role == Qt::TextAlignmentRole && index.column() >= Ratio)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::EditRole) {
        switch (index.column()) {
            case Name:
                return s.name;
            case Paths:
                return s.paths.join(QStringLiteral("; "));
            case Ratio:
                return s.ratio;
            case MaxRepetition:
                return s.maxRepetition;
            case MaxFraction:
                return s.maxFraction;
            default:
                return {};
        }
    }
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
        case Name:
            return s.name;
        case Paths: {
            QStringList names;
            for (const QString& p : s.paths) names << QFileInfo(p).fileName();
            return names.join(QStringLiteral(", "));
        }
        case Ratio:
            return QString::number(s.ratio, 'g', 6);
        case MaxRepetition:
            return QString::number(s.maxRepetition, 'g', 6);
        case MaxFraction:
            return QString::number(s.maxFraction, 'g', 6);
        case Available:
            return s.available ? count(double(*s.available)) : QStringLiteral("?");
        case Planned: {
            const auto planned = plannedTokens(index.row());
            return planned ? count(double(*planned)) : QStringLiteral("–");
        }
        case Repetition:
            if (!s.repetitions) return QStringLiteral("?");
            return std::isfinite(*s.repetitions)
                       ? QStringLiteral("%1×").arg(*s.repetitions, 0, 'f', 2)
                       : QStringLiteral("∞");
        default:
            return {};
    }
}

bool MixtureModel::setData(const QModelIndex& index, const QVariant& value, int role) {
    if (role != Qt::EditRole || !index.isValid() || index.row() >= sources_.size()) return false;
    Source& s = sources_[index.row()];
    bool ok = true;
    switch (index.column()) {
        case Name:
            s.name = value.toString().trimmed();
            break;
        case Paths: {
            QStringList paths;
            for (const QString& p : value.toString().split(QLatin1Char(';'), Qt::SkipEmptyParts))
                if (!p.trimmed().isEmpty()) paths << p.trimmed();
            s.paths = paths;
            clearPlan(index.row());
            break;
        }
        case Ratio:
            s.ratio = value.toDouble(&ok);
            break;
        case MaxRepetition:
            s.maxRepetition = value.toDouble(&ok);
            break;
        case MaxFraction:
            s.maxFraction = value.toDouble(&ok);
            clearPlan(index.row());
            break;
        default:
            return false;
    }
    if (!ok) return false;
    updateRepetitions(index.row());
    Q_EMIT dataChanged(this->index(index.row(), 0), this->index(index.row(), ColumnCount - 1));
    Q_EMIT changed();
    return true;
}

int MixtureModel::addSource(const QStringList& paths, const QString& name) {
    QString base = name;
    if (base.isEmpty() && !paths.isEmpty()) base = QFileInfo(paths.front()).completeBaseName();
    if (base.isEmpty()) base = QStringLiteral("source");
    QString unique = base;
    for (int n = 2;; ++n) {
        bool taken = false;
        for (const auto& s : sources_) taken |= s.name == unique;
        if (!taken) break;
        unique = QStringLiteral("%1_%2").arg(base).arg(n);
    }
    double used = 0;
    for (const auto& s : sources_) used += s.ratio;
    Source s;
    s.name = unique;
    s.paths = paths;
    s.ratio = std::max(0.0, 1.0 - used);
    const int row = int(sources_.size());
    beginInsertRows({}, row, row);
    sources_.append(s);
    endInsertRows();
    Q_EMIT changed();
    return row;
}

void MixtureModel::removeSource(int row) {
    if (row < 0 || row >= sources_.size()) return;
    beginRemoveRows({}, row, row);
    sources_.removeAt(row);
    endRemoveRows();
    Q_EMIT changed();
}

void MixtureModel::normalizeRatios() {
    if (sources_.isEmpty()) return;
    double sum = 0;
    for (const auto& s : sources_) sum += std::max(0.0, s.ratio);
    for (auto& s : sources_)
        s.ratio = sum > 0 ? std::max(0.0, s.ratio) / sum : 1.0 / double(sources_.size());
    for (int r = 0; r < sources_.size(); ++r) updateRepetitions(r);
    Q_EMIT dataChanged(index(0, 0), index(int(sources_.size()) - 1, ColumnCount - 1));
    Q_EMIT changed();
}

void MixtureModel::setRequestedTokens(std::optional<qint64> tokens) {
    if (tokens == requested_) return;
    requested_ = tokens;
    for (int r = 0; r < sources_.size(); ++r) {
        sources_[r].repetitions.reset();
        updateRepetitions(r);
    }
    if (!sources_.isEmpty())
        Q_EMIT dataChanged(index(0, 0), index(int(sources_.size()) - 1, ColumnCount - 1));
    Q_EMIT changed();
}

void MixtureModel::updateRepetitions(int row) {
    // The repetition follows from the plan's tokens without asking the engine again.
    Source& s = sources_[row];
    if (s.available && requested_ && *s.available > 0 && s.maxFraction > 0)
        s.repetitions = double(*plannedTokens(row)) / (double(*s.available) * s.maxFraction);
}

void MixtureModel::clearPlan(int row) {
    sources_[row].available.reset();
    sources_[row].repetitions.reset();
}

Json MixtureModel::toJson() const {
    Json sources = Json::array();
    for (const auto& s : sources_) {
        Json paths = Json::array();
        for (const QString& p : s.paths) paths.push_back(p.toStdString());
        sources.push_back({{"source_name", s.name.toStdString()},
                           {"target_ratio", s.ratio},
                           {"paths", paths},
                           {"max_repetition_ratio", s.maxRepetition},
                           {"max_source_fraction", s.maxFraction}});
    }
    return Json{{"sources", sources},
                {"requested_tokens", requested_ ? Json(*requested_) : Json(nullptr)}};
}

bool MixtureModel::fromJson(const Json& mixture) {
    if (!mixture.is_object()) return false;
    const auto list = mixture.find("sources");
    if (list == mixture.end() || !list->is_array()) return false;
    QVector<Source> sources;
    for (const Json& j : *list) {
        if (!j.is_object()) return false;
        Source s;
        if (j.contains("source_name") && j["source_name"].is_string())
            s.name = QString::fromStdString(j["source_name"].get<std::string>());
        if (j.contains("paths") && j["paths"].is_array())
            for (const Json& p : j["paths"])
                if (p.is_string()) s.paths << QString::fromStdString(p.get<std::string>());
        auto number = [&](const char* key, double fallback) {
            return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
        };
        s.ratio = number("target_ratio", 0);
        s.maxRepetition = number("max_repetition_ratio", 1);
        s.maxFraction = number("max_source_fraction", 1);
        sources << s;
    }
    beginResetModel();
    sources_ = sources;
    const auto requested = mixture.find("requested_tokens");
    requested_ = requested != mixture.end() && requested->is_number_integer()
                     ? std::optional<qint64>(requested->get<qint64>())
                     : std::nullopt;
    endResetModel();
    Q_EMIT changed();
    return true;
}

void MixtureModel::setPlan(const lathe::protocol::MixturePlan& plan) {
    for (const auto& p : plan.sources) {
        const QString name = QString::fromStdString(p.name);
        for (auto& s : sources_) {
            if (s.name != name) continue;
            s.available = p.available_tokens;
            // JSON has no infinity: an unknown (null) number means no usable tokens.
            s.repetitions = std::isfinite(p.repetitions) ? p.repetitions : INFINITY;
        }
    }
    if (!sources_.isEmpty())
        Q_EMIT dataChanged(index(0, 0), index(int(sources_.size()) - 1, ColumnCount - 1));
    Q_EMIT changed();
}

QStringList MixtureModel::problems() const {
    QStringList out;
    if (sources_.isEmpty()) return out;
    if (!requested_ || *requested_ <= 0)
        out << tr("requested_tokens: set how many tokens the mixture holds");
    double sum = 0;
    QStringList ratios;
    for (const auto& s : sources_) {
        sum += s.ratio;
        ratios << QStringLiteral("%1 %2").arg(s.name).arg(s.ratio);
    }
    if (!lathe::config::mixture_ratios_sum_to_one(sum))
        out << tr("the ratios sum to %1, not 1 (%2): Normalize fixes it")
                   .arg(sum, 0, 'g', 6)
                   .arg(ratios.join(QStringLiteral(", ")));
    QStringList seen;
    for (int r = 0; r < sources_.size(); ++r) {
        const Source& s = sources_[r];
        const QString label = s.name.isEmpty() ? tr("source %1").arg(r + 1) : s.name;
        if (s.name.isEmpty()) out << tr("%1: no name").arg(label);
        if (!s.name.isEmpty() && seen.contains(s.name))
            out << tr("%1: the name is used twice").arg(label);
        seen << s.name;
        if (s.paths.isEmpty()) out << tr("%1: no files").arg(label);
        if (s.ratio < 0 || s.ratio > 1) out << tr("%1: the ratio must be in [0, 1]").arg(label);
        if (s.maxRepetition < 1) out << tr("%1: max repetition must be at least 1").arg(label);
        if (s.maxFraction <= 0 || s.maxFraction > 1)
            out << tr("%1: max fraction must be in (0, 1]").arg(label);
        if (s.repetitions && *s.repetitions > s.maxRepetition + 1e-12)
            out << tr("%1 needs %2 tokens but has %3%4: that repeats them %5 times, and max "
                      "repetition allows %6. Raise it, or lower the ratio or requested tokens.")
                       .arg(label, count(double(plannedTokens(r).value_or(0))),
                            s.available ? count(double(*s.available)) : QStringLiteral("?"),
                            s.maxFraction < 1 ? tr(" (%1 usable)").arg(s.maxFraction) : QString())
                       .arg(*s.repetitions, 0, 'f', 2)
                       .arg(s.maxRepetition);
    }
    return out;
}

}  // namespace lathe::ui
