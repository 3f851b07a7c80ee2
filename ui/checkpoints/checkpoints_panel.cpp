#include "ui/checkpoints/checkpoints_panel.h"
#include "ui/util/table_views.h"

#include <QDesktopServices>
#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QResizeEvent>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>

namespace lathe::ui {

CheckpointsPanel::CheckpointsPanel(CheckpointsModel* model, QWidget* parent)
    : QWidget(parent), model_(model) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 4);
    title_ = new QLabel(tr("Select a run to see its checkpoints."), this);
    layout->addWidget(title_);
    view_ = new QTableView(this);
    view_->setObjectName(QStringLiteral("checkpointsView"));
    view_->setModel(model_);
    setUpRowTable(view_, QAbstractItemView::SingleSelection);
    layout->addWidget(view_, 1);

    resume_ = new QPushButton(tr("Resume"), this);
    resume_->setObjectName(QStringLiteral("resumeCheckpoint"));
    resume_->setToolTip(
        tr("Continue this run from exactly this checkpoint (newer ones are set "
           "aside as abandoned)"));
    resumeNew_ = new QPushButton(tr("Resume as new run"), this);
    resumeNew_->setObjectName(QStringLiteral("resumeAsNewRun"));
    resumeNew_->setToolTip(tr("Start a new run from this checkpoint; this run stays as it is"));
    editResume_ = new QPushButton(tr("Edit && resume…"), this);
    editResume_->setObjectName(QStringLiteral("editResume"));
    editResume_->setToolTip(tr("Change the config (e.g. the learning rate) before resuming"));
    verify_ = new QPushButton(tr("Verify"), this);
    verify_->setToolTip(tr("Check every tensor's CRC-32C (reads the whole checkpoint)"));
    delete_ = new QPushButton(tr("Delete…"), this);
    delete_->setObjectName(QStringLiteral("deleteCheckpoint"));
    folder_ = new QPushButton(tr("Open folder"), this);
    // One row where the dock is wide (a bottom tab), two where it is narrow (beside the plots):
    // see resizeEvent.
    buttons_ = new QGridLayout;
    buttons_->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(buttons_);
    arrangeButtons(false);
    resumeBar_ = new ResumeBar(this);
    layout->addWidget(resumeBar_);

    auto current = [this] { return currentCheckpoint(); };
    connect(resume_, &QPushButton::clicked, this, [this, current] {
        if (!current().isEmpty()) Q_EMIT resumeRequested(current(), ResumePlan::Mode::SameRun);
    });
    connect(resumeNew_, &QPushButton::clicked, this, [this, current] {
        if (!current().isEmpty()) Q_EMIT resumeRequested(current(), ResumePlan::Mode::NewRun);
    });
    connect(editResume_, &QPushButton::clicked, this, [this, current] {
        if (!current().isEmpty()) Q_EMIT editResumeRequested(current());
    });
    connect(verify_, &QPushButton::clicked, this, [this] {
        const int row = view_->selectionModel()->currentIndex().row();
        if (row >= 0) model_->verify(row);
    });
    connect(delete_, &QPushButton::clicked, this, [this] { deleteCurrent(true); });
    connect(folder_, &QPushButton::clicked, this, [this, current] {
        const QString path = current().isEmpty() ? model_->runDir() : current();
        if (!path.isEmpty()) QDesktopServices::openUrl(QUrl::fromLocalFile(path));
    });
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] {
        updateButtons();
        Q_EMIT currentCheckpointChanged(currentCheckpoint());
    });
    connect(model_, &QAbstractItemModel::dataChanged, this, &CheckpointsPanel::updateButtons);
    connect(model_, &QAbstractItemModel::rowsRemoved, this, &CheckpointsPanel::updateButtons);
    auto updateTitle = [this] {
        QString text = model_->runDir().isEmpty()
                           ? tr("Select a run to see its checkpoints.")
                           : tr("Checkpoints of <b>%1</b>")
                                 .arg(QFileInfo(model_->runDir()).fileName().toHtmlEscaped());
        if (!model_->remoteFolder().isEmpty())
            text += tr(" in %1").arg(model_->remoteFolder().toHtmlEscaped());
        if (!model_->remoteError().isEmpty())
            text += QStringLiteral("<br><span style=\"color:#c62828\">%1</span>")
                        .arg(model_->remoteError().toHtmlEscaped());
        title_->setText(text);
    };
    connect(model_, &CheckpointsModel::remoteListed, this, updateTitle);
    connect(model_, &QAbstractItemModel::modelReset, this, [this, updateTitle] {
        updateTitle();
        updateButtons();
        Q_EMIT currentCheckpointChanged(currentCheckpoint());
    });
    updateButtons();
}

QString CheckpointsPanel::currentCheckpoint() const {
    const QModelIndex i = view_->selectionModel()->currentIndex();
    return i.isValid() ? i.data(CheckpointsModel::PathRole).toString() : QString();
}

bool CheckpointsPanel::selectCheckpoint(const QString& nameOrPath) {
    const int row = model_->rowOf(nameOrPath);
    if (row < 0) return false;
    view_->selectionModel()->setCurrentIndex(
        model_->index(row, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    return true;
}

bool CheckpointsPanel::deleteCurrent(bool ask) {
    const int row = view_->selectionModel()->currentIndex().row();
    if (row < 0) return false;
    const CheckpointInfo c = model_->checkpoint(row);
    if (ask &&
        QMessageBox::question(
            this, tr("Delete checkpoint"),
            tr("Delete checkpoint %1 (%2)?\nIts folder %3 is removed "
               "from disk.")
                .arg(c.name, checkpointStatusName(c.status), QDir::toNativeSeparators(c.path)),
            QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel) != QMessageBox::Yes)
        return false;
    QString error;
    if (!model_->remove(row, &error)) {
        QMessageBox::warning(this, tr("Delete checkpoint"), error);
        return false;
    }
    return true;
}

void CheckpointsPanel::updateButtons() {
    const QModelIndex i = view_->selectionModel()->currentIndex();
    const bool any = i.isValid();
    resume_->setEnabled(any && i.data(CheckpointsModel::CanResumeRole).toBool());
    resumeNew_->setEnabled(any && i.data(CheckpointsModel::CanResumeAsNewRole).toBool());
    editResume_->setEnabled(resumeNew_->isEnabled());
    verify_->setEnabled(any && resumeNew_->isEnabled() &&
                        !model_->isVerifying(i.data(CheckpointsModel::PathRole).toString()));
    const bool remote = any && model_->checkpoint(i.row()).remote;
    delete_->setEnabled(any && !remote);
    delete_->setToolTip(remote ? tr("Remote checkpoints are removed by the run's retention or the "
                                    "bucket's own tools")
                               : QString());
    folder_->setEnabled(!remote);
    const QString reason = any ? model_->checkpoint(i.row()).reason : QString();
    resume_->setToolTip(resume_->isEnabled() || reason.isEmpty()
                            ? tr("Continue this run from exactly this checkpoint (newer ones are "
                                 "set aside as abandoned)")
                            : tr("Cannot resume: %1").arg(reason));
    resumeNew_->setToolTip(tr("Start a new run from this checkpoint; this run stays as it is"));
    editResume_->setToolTip(tr("Change the config (e.g. the learning rate) before resuming"));
    if (runActive_) {  // no modal "a run is in progress" after the click: say it on the button
        for (auto* b : {resume_, resumeNew_, editResume_}) {
            b->setEnabled(false);
            b->setToolTip(tr("A run is in progress: stop it before resuming"));
        }
    }
}

void CheckpointsPanel::setRunActive(bool active) {
    if (active == runActive_) return;
    runActive_ = active;
    updateButtons();
}

void CheckpointsPanel::arrangeButtons(bool oneRow) {
    if (buttonsInOneRow_ == oneRow && buttons_->count() > 0) return;
    buttonsInOneRow_ = oneRow;
    while (buttons_->count() > 0) delete buttons_->takeAt(0);
    const QList<QPushButton*> all = {resume_, resumeNew_, editResume_, verify_, delete_, folder_};
    for (int i = 0; i < all.size(); ++i) {
        const int row = oneRow ? 0 : i / 3;
        const int col = oneRow ? i : i % 3;
        buttons_->addWidget(all[i], row, col);
    }
    const int stretchColumn = oneRow ? int(all.size()) : 3;
    for (int c = 0; c <= int(all.size()); ++c) buttons_->setColumnStretch(c, 0);
    buttons_->setColumnStretch(stretchColumn, 1);
}

void CheckpointsPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    int oneRow = 0;
    for (auto* b : {resume_, resumeNew_, editResume_, verify_, delete_, folder_})
        oneRow += b->sizeHint().width() + buttons_->horizontalSpacing();
    arrangeButtons(event->size().width() >= oneRow + 12);
}

}  // namespace lathe::ui
