#include "ui/logs/log_view.h"

#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QScrollBar>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>

namespace lathe::ui {

LogView::LogView(LogModel* model, QWidget* parent) : QWidget(parent), model_(model) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 4);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Level:"), this));
    level_ = new QComboBox(this);
    level_->setObjectName(QStringLiteral("logLevel"));
    for (auto l : {LogModel::Level::Debug, LogModel::Level::Info, LogModel::Level::Warning,
                   LogModel::Level::Error})
        level_->addItem(LogModel::levelName(l) + tr(" and above"), static_cast<int>(l));
    level_->setCurrentIndex(1);
    bar->addWidget(level_);
    bar->addWidget(new QLabel(tr("Source:"), this));
    rank_ = new QComboBox(this);
    rank_->setObjectName(QStringLiteral("logRank"));
    rank_->addItem(tr("all"), LogFilterModel::kAllRanks);
    bar->addWidget(rank_);
    search_ = new QLineEdit(this);
    search_->setObjectName(QStringLiteral("logSearch"));
    search_->setPlaceholderText(tr("Search the log…"));
    search_->setClearButtonEnabled(true);
    bar->addWidget(search_, 1);
    auto* clear = new QToolButton(this);
    clear->setText(tr("Clear"));
    bar->addWidget(clear);
    layout->addLayout(bar);

    filter_ = new LogFilterModel(this);
    filter_->setSourceModel(model_);
    filter_->setMinimumLevel(LogModel::Level::Info);
    view_ = new QTreeView(this);
    view_->setModel(filter_);
    view_->setRootIsDecorated(false);
    view_->setUniformRowHeights(true);
    view_->setAlternatingRowColors(true);
    view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    view_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    view_->header()->setStretchLastSection(true);
    view_->setColumnWidth(LogModel::TimeColumn,
                          view_->fontMetrics().horizontalAdvance(QStringLiteral("00:00:00.000__")));
    view_->setColumnWidth(LogModel::SourceColumn,
                          view_->fontMetrics().horizontalAdvance(QStringLiteral("console___")));
    view_->setColumnWidth(LogModel::LevelColumn,
                          view_->fontMetrics().horizontalAdvance(QStringLiteral("warning___")));
    layout->addWidget(view_, 1);

    connect(level_, &QComboBox::currentIndexChanged, this, [this] {
        filter_->setMinimumLevel(static_cast<LogModel::Level>(level_->currentData().toInt()));
    });
    connect(rank_, &QComboBox::currentIndexChanged, this,
            [this] { filter_->setRank(rank_->currentData().toInt()); });
    connect(search_, &QLineEdit::textChanged, filter_, &LogFilterModel::setSearchText);
    connect(clear, &QToolButton::clicked, model_, &LogModel::clear);
    connect(model_, &LogModel::rankSeen, this, &LogView::addRank);
    for (int r : model_->ranks()) addRank(r);
    // Follow the newest line while the view is at the bottom.
    connect(filter_, &QAbstractItemModel::rowsAboutToBeInserted, this, [this] {
        auto* scroll = view_->verticalScrollBar();
        view_->setProperty("atBottom", scroll->value() >= scroll->maximum() - 2);
    });
    connect(filter_, &QAbstractItemModel::rowsInserted, this, [this] {
        if (view_->property("atBottom").toBool()) view_->scrollToBottom();
    });
}

void LogView::addRank(int rank) {
    if (rank_->findData(rank) >= 0) return;
    rank_->addItem(LogModel::sourceName(rank), rank);
}

}  // namespace lathe::ui
