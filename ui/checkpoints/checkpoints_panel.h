// CheckpointsPanel: the checkpoints of the selected run (CheckpointsModel) and what can be done
// with one: Resume (continue the run from it), Resume as new run, Edit & resume (ResumeBar),
// Verify (full CRC check in the background), Delete (after confirmation) and Open folder.
// Resume is offered only for complete, usable checkpoints. Thin: the logic is in the model.
#pragma once

#include "ui/checkpoints/checkpoints_model.h"
#include "ui/checkpoints/resume_bar.h"

#include <QWidget>

class QGridLayout;
class QLabel;
class QPushButton;
class QTableView;

namespace lathe::ui {

class CheckpointsPanel : public QWidget {
    Q_OBJECT

public:
    explicit CheckpointsPanel(CheckpointsModel* model, QWidget* parent = nullptr);

    CheckpointsModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    ResumeBar* resumeBar() const { return resumeBar_; }
    QPushButton* resumeButton() const { return resume_; }
    QPushButton* resumeAsNewButton() const { return resumeNew_; }
    QPushButton* editResumeButton() const { return editResume_; }
    QPushButton* deleteButton() const { return delete_; }
    QPushButton* verifyButton() const { return verify_; }

    /// The checkpoint folder of the current row ("" when none).
    QString currentCheckpoint() const;
    bool selectCheckpoint(const QString& nameOrPath);
    /// Deletes the current checkpoint, asking first when `ask`. False when nothing was deleted.
    bool deleteCurrent(bool ask = true);
    /// While a run is active the resume buttons stay disabled, saying why, whatever is selected.
    void setRunActive(bool active);

Q_SIGNALS:
    /// One click: resume from `checkpoint` with its own config.
    void resumeRequested(const QString& checkpoint, lathe::ui::ResumePlan::Mode mode);
    /// Load the checkpoint's config into the editor and show the ResumeBar.
    void editResumeRequested(const QString& checkpoint);
    /// The selected checkpoint changed (empty: none selected).
    void currentCheckpointChanged(const QString& checkpoint);

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void updateButtons();
    /// The six buttons in one row, or in two rows of three.
    void arrangeButtons(bool oneRow);

    CheckpointsModel* model_;
    QLabel* title_ = nullptr;
    QTableView* view_ = nullptr;
    QPushButton* resume_ = nullptr;
    QPushButton* resumeNew_ = nullptr;
    QPushButton* editResume_ = nullptr;
    QPushButton* verify_ = nullptr;
    QPushButton* delete_ = nullptr;
    QPushButton* folder_ = nullptr;
    ResumeBar* resumeBar_ = nullptr;
    QGridLayout* buttons_ = nullptr;
    bool buttonsInOneRow_ = false;
    bool runActive_ = false;
};

}  // namespace lathe::ui
