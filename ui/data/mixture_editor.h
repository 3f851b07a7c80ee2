// MixtureEditor: the Data page's Mixture tab, a thin view over MixtureModel. Add sources (token
// files or prepared folders), set their ratios and limits and the tokens the mixture holds, see
// each source's planned tokens at once and, after Estimate (`lathe-engine dataset --plan` on the
// window's config with this mixture), the tokens its files hold and the repetition its ratio
// takes, in red with the reason when it is more than allowed. Apply puts dataset.mixture into the
// config editor.
#pragma once

#include "ui/data/mixture_model.h"

#include <QWidget>

#include <functional>

class QLabel;
class QTemporaryFile;
class QLineEdit;
class QPushButton;
class QTableView;

namespace lathe::ui {

class EngineCommand;

class MixtureEditor : public QWidget {
    Q_OBJECT

public:
    explicit MixtureEditor(QWidget* parent = nullptr);

    MixtureModel* model() const { return model_; }
    /// The window's config (the estimate runs on it, with this mixture).
    void setConfigProvider(std::function<lathe::config::Json()> provider) {
        config_ = std::move(provider);
    }
    /// Loads dataset.mixture of `config` unless the user has edited the table since.
    void loadFromConfig(const lathe::config::Json& config);
    /// Runs the engine's plan (asynchronous; estimated() when done). False when one is running
    /// or the table has no source.
    bool estimate();
    bool isEstimating() const;
    /// The problems line's text ("" when none).
    QString problemsText() const;
    /// Apply: emits applyToConfig with dataset.source and dataset.mixture's sources and
    /// requested_tokens; false while the table has problems.
    bool apply();

Q_SIGNALS:
    void applyToConfig(const QVector<std::pair<QString, lathe::config::Json>>& changes);
    /// An estimate finished: ok, or the engine's error in `message`.
    void estimated(bool ok, const QString& message);

private:
    void refresh();
    void onEstimated(bool ok);
    MixtureModel* model_;
    QTableView* table_;
    QLineEdit* requested_;
    QLabel* problems_;
    QPushButton* estimate_;
    QPushButton* apply_;
    EngineCommand* command_;
    QTemporaryFile* planConfig_ = nullptr;  ///< the config the running estimate reads
    std::function<lathe::config::Json()> config_;
    bool edited_ = false;
    bool loading_ = false;
    QString engineError_;
};

}  // namespace lathe::ui
