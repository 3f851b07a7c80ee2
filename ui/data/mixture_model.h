// MixtureModel: the Data page's mixture editor as a table model over dataset.mixture (OLMo-core's
// SourceMixtureDatasetConfig). One row per source: name, paths, target ratio, max repetition and
// max source fraction (editable), then what the engine's plan (`lathe-engine dataset --plan`)
// says of it: the tokens its files hold, the tokens its ratio needs and the repetition that
// takes. problems() lists what the engine would refuse (ratios that do not sum to 1, a source
// that needs more repetition than allowed, a missing name or path) before a run is started.
#pragma once

#include "engine/config/io.h"
#include "engine/protocol/cli_output.h"

#include <QAbstractTableModel>
#include <QStringList>
#include <QVector>

#include <optional>

namespace lathe::ui {

class MixtureModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column {
        Name,
        Paths,
        Ratio,
        MaxRepetition,
        MaxFraction,
        Available,
        Planned,
        Repetition,
        ColumnCount
    };

    struct Source {
        QString name;
        QStringList paths;
        double ratio = 0;
        double maxRepetition = 1;
        double maxFraction = 1;
        // From the last plan (absent until estimated, or when the source changed since).
        std::optional<qint64> available;
        std::optional<double> repetitions;
    };

    explicit MixtureModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

    const QVector<Source>& sources() const { return sources_; }
    /// Adds a source of these files or folders, named after the first one (unique); its ratio is
    /// what the others leave (at least 0).
    int addSource(const QStringList& paths, const QString& name = {});
    void removeSource(int row);
    /// Makes the ratios sum to 1, keeping their proportions (equal shares when all are 0).
    void normalizeRatios();

    std::optional<qint64> requestedTokens() const { return requested_; }
    void setRequestedTokens(std::optional<qint64> tokens);
    /// Planned tokens of a source: target_ratio x requested_tokens (as the engine rounds).
    std::optional<qint64> plannedTokens(int row) const;

    /// dataset.mixture as JSON ({"sources": [...], "requested_tokens": N}).
    lathe::config::Json toJson() const;
    /// Replaces the sources from a dataset.mixture object; false (and no change) if it is not one.
    bool fromJson(const lathe::config::Json& mixture);
    /// Takes `lathe-engine dataset --plan`'s answer: each named source's tokens and repetitions.
    void setPlan(const lathe::protocol::MixturePlan& plan);

    /// What the engine would refuse, one line each ("" problems: none).
    QStringList problems() const;

Q_SIGNALS:
    void changed();

private:
    void clearPlan(int row);
    /// Source `row`'s repetition from its tokens held (the last plan) and its planned tokens.
    void updateRepetitions(int row);
    QVector<Source> sources_;
    std::optional<qint64> requested_;
};

}  // namespace lathe::ui
