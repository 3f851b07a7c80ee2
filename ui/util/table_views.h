// Shared set-up of the read-only row tables (runs, checkpoints).
#pragma once

#include <QAbstractItemView>
#include <QHeaderView>
#include <QTableView>

namespace lathe::ui {

/// A table of whole rows, read-only, no row numbers, the last column stretched, no word wrap.
inline void setUpRowTable(QTableView* view, QAbstractItemView::SelectionMode selection) {
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(selection);
    view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view->verticalHeader()->hide();
    view->horizontalHeader()->setStretchLastSection(true);
    view->setWordWrap(false);
}

}  // namespace lathe::ui
