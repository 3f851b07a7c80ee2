// Number and choice fields take the mouse wheel only once they have the focus: scrolling the
// form over them scrolls the form instead of silently editing a value (issue 34: scrolling
// turned label_ignore_index from -100 into -62, and the next run's config.json took it). The
// usual Qt remedy: Qt::StrongFocus, and an unfocused widget's wheel events handed to the form.
#pragma once

#include <QObject>

class QWidget;

namespace lathe::ui {

class WheelGuard : public QObject {
    Q_OBJECT

public:
    /// Guards `widget` (a spin box or combo box); the guard is its child.
    static void install(QWidget* widget);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    using QObject::QObject;
};

}  // namespace lathe::ui
