#include "ui/runs/runs_panel.h"
#include "ui/util/table_views.h"

#include <QComboBox>
#include <QDesktopServices>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>

namespace lathe::ui {

RunsPanel::RunsPanel(RunsModel* model, QWidget* parent)
    : QWidget(parent), model_(model), proxy_(new RunsFilterModel(this)) {
    proxy_->setSourceModel(model_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 4);

    auto* bar = new QHBoxLayout;
    filter_ = new QLineEdit(this);
    filter_->setObjectName(QStringLiteral("runsFilter"));
    filter_->setPlaceholderText(tr("Filter runs…"));
    filter_->setClearButtonEnabled(true);
    bar->addWidget(filter_, 1);
    state_ = new QComboBox(this);
    state_->setObjectName(QStringLiteral("runsState"));
    state_->addItem(tr("all states"), -1);
    for (RunState s : {RunState::Running, RunState::Finished, RunState::Stopped, RunState::Failed,
                       RunState::Interrupted, RunState::Unknown})
        state_->addItem(runStateName(s), static_cast<int>(s));
    bar->addWidget(state_);
    layout->addLayout(bar);

    view_ = new QTableView(this);
    view_->setObjectName(QStringLiteral("runsView"));
    view_->setModel(proxy_);
    view_->setSortingEnabled(true);
    view_->sortByColumn(RunsModel::StartedColumn, Qt::DescendingOrder);
    setUpRowTable(view_, QAbstractItemView::ExtendedSelection);
    layout->addWidget(view_, 1);

    auto* buttons = new QHBoxLayout;
    open_ = new QPushButton(tr("Open"), this);
    open_->setObjectName(QStringLiteral("openRun"));
    open_->setToolTip(
        tr("Show the run's curves, config and logs (a running run is followed live)"));
    compare_ = new QPushButton(tr("Compare…"), this);
    compare_->setObjectName(QStringLiteral("compareRuns"));
    compare_->setToolTip(tr("Overlay the curves of the selected runs and compare their configs"));
    folder_ = new QPushButton(tr("Open folder"), this);
    notes_ = new QPushButton(tr("Notes…"), this);
    notes_->setObjectName(QStringLiteral("runNotes"));
    notes_->setToolTip(tr("Tags and notes on the run (its notes.json); the filter finds them"));
    buttons->addWidget(open_);
    buttons->addWidget(compare_);
    buttons->addWidget(notes_);
    buttons->addWidget(folder_);
    buttons->addStretch(1);
    layout->addLayout(buttons);
    root_ = new QLabel(this);
    root_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    root_->setText(tr("Runs folder: %1").arg(QDir::toNativeSeparators(model_->root())));
    layout->addWidget(root_);

    connect(filter_, &QLineEdit::textChanged, proxy_, &RunsFilterModel::setTextFilter);
    connect(state_, &QComboBox::currentIndexChanged, this, [this](int) {
        const int s = state_->currentData().toInt();
        proxy_->setStateFilter(s < 0 ? QList<RunState>{}
                                     : QList<RunState>{static_cast<RunState>(s)});
    });
    connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &RunsPanel::updateButtons);
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                Q_EMIT currentRunChanged(current.data(RunsModel::PathRole).toString());
            });
    connect(view_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
        Q_EMIT openRequested(index.data(RunsModel::PathRole).toString());
    });
    connect(open_, &QPushButton::clicked, this, [this] {
        if (const QString run = currentRun(); !run.isEmpty()) Q_EMIT openRequested(run);
    });
    connect(compare_, &QPushButton::clicked, this, [this] {
        const QStringList runs = selectedRuns();
        if (runs.size() >= 2) Q_EMIT compareRequested(runs);
    });
    connect(notes_, &QPushButton::clicked, this, [this] {
        if (const QString run = currentRun(); !run.isEmpty()) editNotes(run);
    });
    connect(folder_, &QPushButton::clicked, this, [this] {
        const QString run = currentRun();
        QDesktopServices::openUrl(QUrl::fromLocalFile(run.isEmpty() ? model_->root() : run));
    });
    connect(model_, &QAbstractItemModel::modelReset, this, [this] {
        root_->setText(tr("Runs folder: %1").arg(QDir::toNativeSeparators(model_->root())));
    });
    updateButtons();
}

QStringList RunsPanel::selectedRuns() const {
    QStringList out;
    QModelIndexList rows = view_->selectionModel()->selectedRows();
    std::sort(rows.begin(), rows.end(),
              [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
    for (const QModelIndex& i : rows) out << i.data(RunsModel::PathRole).toString();
    return out;
}

QString RunsPanel::currentRun() const {
    const QModelIndex i = view_->selectionModel()->currentIndex();
    if (i.isValid()) return i.data(RunsModel::PathRole).toString();
    const QStringList sel = selectedRuns();
    return sel.isEmpty() ? QString() : sel.front();
}

bool RunsPanel::selectRun(const QString& runDir) {
    const int row = model_->rowOf(runDir);
    if (row < 0) return false;
    const QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
    if (!i.isValid()) return false;
    view_->selectionModel()->setCurrentIndex(
        i, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    view_->scrollTo(i);
    return true;
}

bool RunsPanel::editNotes(const QString& runDir) {
    const RunInfo info = readRunInfo(runDir);
    QDialog dialog(this);
    dialog.setObjectName(QStringLiteral("runNotesDialog"));
    dialog.setWindowTitle(tr("Notes on %1").arg(info.name));
    auto* form = new QFormLayout(&dialog);
    auto* tags = new QLineEdit(info.tags.join(QStringLiteral(", ")), &dialog);
    tags->setObjectName(QStringLiteral("runTags"));
    tags->setPlaceholderText(tr("baseline, lr-sweep"));
    auto* notes = new QPlainTextEdit(info.notes, &dialog);
    notes->setObjectName(QStringLiteral("runNotesText"));
    auto* error = new QLabel(&dialog);
    error->setStyleSheet(QStringLiteral("color: #c62828"));
    error->setWordWrap(true);
    auto* buttons =
        new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, &dialog);
    form->addRow(tr("Tags:"), tags);
    form->addRow(tr("Notes:"), notes);
    form->addRow(error);
    form->addRow(buttons);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    connect(buttons, &QDialogButtonBox::accepted, &dialog, [&] {
        QString why;
        if (writeRunNotes(runDir, tags->text(), notes->toPlainText(), &why)) {
            dialog.accept();
        } else {
            error->setText(why);  // the dialog stays, with what was typed
        }
    });
    if (dialog.exec() != QDialog::Accepted) return false;
    model_->refresh();
    return true;
}

void RunsPanel::updateButtons() {
    const int n = static_cast<int>(view_->selectionModel()->selectedRows().size());
    open_->setEnabled(n >= 1);
    notes_->setEnabled(n >= 1);
    compare_->setEnabled(n >= 2);
}

}  // namespace lathe::ui
