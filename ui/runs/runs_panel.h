// RunsPanel: the runs under the runs root (RunsModel through RunsFilterModel) with a text and a
// state filter, and the actions on the selection: Open (curves, config, logs; a running run is
// followed live), Compare (two or more runs), Open folder. Thin: the logic is in the models.
#pragma once

#include "ui/runs/runs_model.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;

namespace lathe::ui {

class RunsPanel : public QWidget {
    Q_OBJECT

public:
    explicit RunsPanel(RunsModel* model, QWidget* parent = nullptr);

    RunsModel* model() const { return model_; }
    RunsFilterModel* proxy() const { return proxy_; }
    QTableView* view() const { return view_; }
    QLineEdit* filterEdit() const { return filter_; }
    QComboBox* stateBox() const { return state_; }
    QPushButton* openButton() const { return open_; }
    QPushButton* compareButton() const { return compare_; }
    QPushButton* notesButton() const { return notes_; }
    /// Tags and notes of `runDir`: a small dialog (tags as "a, b", free text), written to its
    /// notes.json as `lathe-engine notes` writes it. False when cancelled or refused.
    bool editNotes(const QString& runDir);

    /// Run folders of the selected rows, in view order.
    QStringList selectedRuns() const;
    QString currentRun() const;
    /// Selects (and makes current) the run in `runDir`; false when it is not listed.
    bool selectRun(const QString& runDir);

Q_SIGNALS:
    void currentRunChanged(const QString& runDir);
    void openRequested(const QString& runDir);
    void compareRequested(const QStringList& runDirs);

private:
    void updateButtons();

    RunsModel* model_;
    RunsFilterModel* proxy_;
    QTableView* view_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QComboBox* state_ = nullptr;
    QPushButton* open_ = nullptr;
    QPushButton* compare_ = nullptr;
    QPushButton* folder_ = nullptr;
    QPushButton* notes_ = nullptr;
    QLabel* root_ = nullptr;
};

}  // namespace lathe::ui
