#include "ui/checkpoints/resume_bar.h"

#include <QButtonGroup>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace lathe::ui {

ResumeBar::ResumeBar(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("resumeBar"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    title_ = new QLabel(this);
    title_->setWordWrap(true);
    layout->addWidget(title_);

    auto* modeRow = new QHBoxLayout;
    same_ = new QRadioButton(tr("Continue this run"), this);
    same_->setToolTip(
        tr("Newer checkpoints are set aside as abandoned; the curve continues from "
           "this step"));
    asNew_ = new QRadioButton(tr("As a new run:"), this);
    name_ = new QLineEdit(this);
    name_->setObjectName(QStringLiteral("resumeName"));
    auto* group = new QButtonGroup(this);
    group->addButton(same_);
    group->addButton(asNew_);
    same_->setChecked(true);
    modeRow->addWidget(same_);
    modeRow->addWidget(asNew_);
    modeRow->addWidget(name_, 1);
    layout->addLayout(modeRow);

    auto* ranksRow = new QHBoxLayout;
    ranksRow->addWidget(new QLabel(tr("Ranks:"), this));
    ranks_ = new QSpinBox(this);
    ranks_->setObjectName(QStringLiteral("resumeRanks"));
    ranks_->setRange(1, 1024);
    ranksRow->addWidget(ranks_);
    ranksRow->addStretch(1);
    layout->addLayout(ranksRow);

    changes_ = new QListWidget(this);
    changes_->setObjectName(QStringLiteral("resumeChanges"));
    changes_->setMaximumHeight(110);
    layout->addWidget(changes_);
    refusal_ = new QLabel(this);
    refusal_->setObjectName(QStringLiteral("resumeRefusal"));
    refusal_->setWordWrap(true);
    refusal_->setStyleSheet(QStringLiteral("QLabel { color: #c62828; }"));
    layout->addWidget(refusal_);

    auto* buttons = new QHBoxLayout;
    buttons->addStretch(1);
    cancel_ = new QPushButton(tr("Cancel"), this);
    resume_ = new QPushButton(tr("Resume"), this);
    resume_->setObjectName(QStringLiteral("resumeEdited"));
    resume_->setDefault(true);
    buttons->addWidget(cancel_);
    buttons->addWidget(resume_);
    layout->addLayout(buttons);

    connect(same_, &QRadioButton::toggled, this, &ResumeBar::updateState);
    connect(name_, &QLineEdit::textChanged, this, &ResumeBar::updateState);
    connect(resume_, &QPushButton::clicked, this, [this] {
        if (canResume()) Q_EMIT resumeRequested(mode(), newRunName(), ranks());
    });
    connect(cancel_, &QPushButton::clicked, this, [this] {
        clearPlan();
        Q_EMIT cancelled();
    });
    hide();
}

void ResumeBar::setPlan(const ResumePlan& plan) {
    plan_ = plan;
    edited_ = plan.baseConfig();
    title_->setText(tr("<b>Resume %1 from step %2</b><br>Edit the config on the left; the fields "
                       "below differ from the checkpoint's.")
                        .arg(plan.runName().toHtmlEscaped())
                        .arg(plan.step()));
    name_->setText(ResumePlan::suggestNewRunName(plan.runsRoot(), plan.runName(), plan.step()));
    ranks_->setValue(plan.worldSize());
    same_->setChecked(true);
    show();
    updateState();
}

void ResumeBar::clearPlan() {
    plan_.reset();
    hide();
}

void ResumeBar::setEditedConfig(const Json& config) {
    edited_ = config;
    updateState();
}

bool ResumeBar::canResume() const {
    if (!plan_ || !refusalText_.isEmpty()) return false;
    return mode() == ResumePlan::Mode::SameRun || !newRunName().trimmed().isEmpty();
}

ResumePlan::Mode ResumeBar::mode() const {
    return same_->isChecked() ? ResumePlan::Mode::SameRun : ResumePlan::Mode::NewRun;
}

void ResumeBar::setMode(ResumePlan::Mode mode) {
    (mode == ResumePlan::Mode::SameRun ? same_ : asNew_)->setChecked(true);
}

QString ResumeBar::newRunName() const {
    return name_->text();
}

int ResumeBar::ranks() const {
    return ranks_->value();
}

void ResumeBar::updateState() {
    name_->setEnabled(asNew_->isChecked());
    changes_->clear();
    refusalText_.clear();
    if (!plan_) {
        resume_->setEnabled(false);
        return;
    }
    for (const config::ConfigDifference& c : plan_->changes(edited_)) {
        if (c.kind == config::ResumeChangeKind::Ignored) continue;
        auto* item = new QListWidgetItem(QStringLiteral("%1: %2 → %3")
                                             .arg(QString::fromStdString(c.path),
                                                  QString::fromStdString(c.before),
                                                  QString::fromStdString(c.after)));
        if (c.kind == config::ResumeChangeKind::Unsafe) {
            item->setForeground(QColor(0xc6, 0x28, 0x28));
            item->setToolTip(tr("The model and sequence length cannot change on resume."));
        } else {
            item->setForeground(QColor(0xef, 0x6c, 0x00));
            item->setToolTip(
                tr("Allowed: this changes what the run means, and is recorded in its "
                   "history.jsonl."));
        }
        changes_->addItem(item);
    }
    if (changes_->count() == 0)
        changes_->addItem(tr("No changes: the run continues as it was configured."));
    refusalText_ = plan_->refusal(edited_);
    refusal_->setText(refusalText_);
    refusal_->setVisible(!refusalText_.isEmpty());
    resume_->setEnabled(canResume());
}

}  // namespace lathe::ui
