#include "ui/config/wheel_guard.h"

#include <QAbstractScrollArea>
#include <QCoreApplication>
#include <QEvent>
#include <QWidget>

#include <memory>

namespace lathe::ui {

void WheelGuard::install(QWidget* widget) {
    widget->setFocusPolicy(Qt::StrongFocus);
    widget->installEventFilter(new WheelGuard(widget));
}

bool WheelGuard::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() != QEvent::Wheel) return false;
    auto* widget = static_cast<QWidget*>(watched);
    if (widget->hasFocus()) return false;
    // The nearest scroll area scrolls instead. (A sent event is not propagated to parents as the
    // window system's is, so it goes to the scroll area's viewport directly.)
    for (QWidget* parent = widget->parentWidget(); parent; parent = parent->parentWidget()) {
        if (auto* area = qobject_cast<QAbstractScrollArea*>(parent)) {
            std::unique_ptr<QEvent> copy(event->clone());
            QCoreApplication::sendEvent(area->viewport(), copy.get());
            break;
        }
    }
    return true;
}

}  // namespace lathe::ui
