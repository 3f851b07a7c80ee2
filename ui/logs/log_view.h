// LogView: the engine's output and log events, filterable by level and source (rank), searchable,
// following the newest line unless scrolled away.
#pragma once

#include "ui/logs/log_model.h"

#include <QWidget>

class QComboBox;
class QLineEdit;
class QTreeView;

namespace lathe::ui {

class LogView : public QWidget {
    Q_OBJECT

public:
    explicit LogView(LogModel* model, QWidget* parent = nullptr);
    LogFilterModel* filter() const { return filter_; }
    QTreeView* view() const { return view_; }

private:
    void addRank(int rank);

    LogModel* model_;
    LogFilterModel* filter_;
    QTreeView* view_;
    QComboBox* level_;
    QComboBox* rank_;
    QLineEdit* search_;
};

}  // namespace lathe::ui
