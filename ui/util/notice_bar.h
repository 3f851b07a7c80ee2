// A notice bar: a strip in the tooltip's colours (light and dark themes alike) above a view,
// with a row layout for its text and buttons (the plots' "not following" bar, the first-run bar).
#pragma once

#include <QHBoxLayout>
#include <QPalette>
#include <QWidget>

namespace lathe::ui {

/// A bar named `objectName`; its QHBoxLayout is `bar->layout()`.
inline QWidget* makeNoticeBar(QWidget* parent, const QString& objectName,
                              const QMargins& margins = QMargins(6, 2, 6, 2)) {
    auto* bar = new QWidget(parent);
    bar->setObjectName(objectName);
    bar->setAutoFillBackground(true);
    QPalette palette = bar->palette();
    palette.setColor(QPalette::Window, palette.color(QPalette::ToolTipBase));
    palette.setColor(QPalette::WindowText, palette.color(QPalette::ToolTipText));
    bar->setPalette(palette);
    auto* layout = new QHBoxLayout(bar);
    layout->setContentsMargins(margins);
    return bar;
}

}  // namespace lathe::ui
