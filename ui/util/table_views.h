// Shared set-up of the read-only row tables (runs, checkpoints).
#pragma once

#include <QAbstractItemView>
#include <QHeaderView>
#include <QTableView>

namespace lathe::ui {

/// A table of whole rows, read-only, no row numbers, no word wrap, each column as wide as its
/// text and the last one stretched (at Qt's default 100 px a column, the Runs dock showed 3 of
/// its 10 columns and cut the rest; issue 45 item 12).
inline void setUpRowTable(QTableView* view, QAbstractItemView::SelectionMode selection) {
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(selection);
    view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view->verticalHeader()->hide();
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->horizontalHeader()->setStretchLastSection(true);
    view->setWordWrap(false);
}

}  // namespace lathe::ui
