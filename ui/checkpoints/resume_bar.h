// ResumeBar: "Edit & resume" for one checkpoint. While it is shown the config editor holds the
// checkpoint's config; every edit is checked against it (ResumePlan): unsafe changes are listed in
// red and block Resume with the engine's reason, meaning-changing ones are listed with a note.
// The user picks "continue this run" or "as a new run" (name), and the number of ranks (default:
// the run's last world size). Thin: ResumePlan decides.
#pragma once

#include "ui/checkpoints/resume_plan.h"

#include <QWidget>

#include <optional>

class QButtonGroup;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QRadioButton;
class QSpinBox;

namespace lathe::ui {

class ResumeBar : public QWidget {
    Q_OBJECT

public:
    explicit ResumeBar(QWidget* parent = nullptr);

    void setPlan(const ResumePlan& plan);
    void clearPlan();
    bool hasPlan() const { return plan_.has_value(); }
    const ResumePlan& plan() const { return *plan_; }
    /// Re-checks the edited config (connect to the editor's documentChanged).
    void setEditedConfig(const Json& config);
    /// Whether the last edited config may resume.
    bool canResume() const;

    ResumePlan::Mode mode() const;
    void setMode(ResumePlan::Mode mode);
    QString newRunName() const;
    int ranks() const;
    QPushButton* resumeButton() const { return resume_; }
    QListWidget* changesList() const { return changes_; }
    QLabel* refusalLabel() const { return refusal_; }
    QLineEdit* nameEdit() const { return name_; }
    QSpinBox* ranksBox() const { return ranks_; }

Q_SIGNALS:
    void resumeRequested(lathe::ui::ResumePlan::Mode mode, const QString& newRunName, int ranks);
    void cancelled();

private:
    void updateState();

    std::optional<ResumePlan> plan_;
    Json edited_;
    QString refusalText_;
    QLabel* title_ = nullptr;
    QRadioButton* same_ = nullptr;
    QRadioButton* asNew_ = nullptr;
    QLineEdit* name_ = nullptr;
    QSpinBox* ranks_ = nullptr;
    QListWidget* changes_ = nullptr;
    QLabel* refusal_ = nullptr;
    QPushButton* resume_ = nullptr;
    QPushButton* cancel_ = nullptr;
};

}  // namespace lathe::ui
