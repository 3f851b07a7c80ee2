#include "ui/config/scientific_spin_box.h"

#include <QLineEdit>
#include <QLocale>
#include <QRegularExpression>

#include <cmath>

namespace lathe::ui {

namespace {
constexpr double kMaxInteger = 9007199254740992.0;  // 2^53: exact in a double
}

ScientificSpinBox::ScientificSpinBox(bool integer, QWidget* parent)
    : QDoubleSpinBox(parent), integer_(integer) {
    setDecimals(integer ? 0 : 320);  // no rounding of doubles: precision is the text's
    setRange(integer ? -kMaxInteger : -1e300, integer ? kMaxInteger : 1e300);
    setLocale(QLocale::c());
    setKeyboardTracking(true);
    setCorrectionMode(QAbstractSpinBox::CorrectToNearestValue);
    setAccelerated(true);
}

QString ScientificSpinBox::textFromValue(double value) const {
    // While a placeholder stands in, every redraw of the text (Qt re-formats it when the box is
    // shown, polished or loses focus) must leave it empty, not the value underneath.
    if (blank_) return {};
    if (integer_) return QString::number(static_cast<qint64>(std::llround(value)));
    return QString::number(value, 'g', 15);
}

double ScientificSpinBox::valueFromText(const QString& text) const {
    bool ok = false;
    double v = QLocale::c().toDouble(text.trimmed(), &ok);
    if (!ok) return value();
    return integer_ ? std::round(v) : v;
}

QValidator::State ScientificSpinBox::validate(QString& text, int&) const {
    const QString t = text.trimmed();
    if (t.isEmpty() || t == QLatin1String("-") || t == QLatin1String("+"))
        return QValidator::Intermediate;
    bool ok = false;
    const double v = QLocale::c().toDouble(t, &ok);
    if (!ok) {
        // "1e", "1.5e-" are on their way to a number.
        static const QRegularExpression partial(QStringLiteral(R"(^[+-]?\d*\.?\d*([eE][+-]?)?$)"));
        if (partial.match(t).hasMatch()) return QValidator::Intermediate;
        // (validate is const for Qt; telling the field is not a change of state.)
        Q_EMIT const_cast<ScientificSpinBox*>(this)->inputRefused(t);
        return QValidator::Invalid;
    }
    if (integer_ && v != std::round(v)) return QValidator::Intermediate;
    if (v < minimum() || v > maximum()) return QValidator::Intermediate;
    return QValidator::Acceptable;
}

void ScientificSpinBox::fixup(QString& input) const {
    bool ok = false;
    double v = QLocale::c().toDouble(input.trimmed(), &ok);
    if (!ok) v = value();
    input = textFromValue(std::clamp(v, minimum(), maximum()));
}

void ScientificSpinBox::stepBy(int steps) {
    const double v = value();
    double step = 1;
    if (!integer_) {
        // One unit of the leading digit: 0.003 -> 0.001; 0 -> 0.1.
        step = v == 0 ? 0.1 : std::pow(10.0, std::floor(std::log10(std::abs(v))));
        // Going down from 1eN would land on 0: step by the next digit down instead.
        if (steps < 0 && std::abs(v) == step) step /= 10;
    } else if (std::abs(v) >= 1000) {
        step = std::pow(10.0, std::floor(std::log10(std::abs(v))) - 1);
    }
    setValue(std::clamp(v + steps * step, minimum(), maximum()));
    selectAll();
}

void ScientificSpinBox::showPlaceholder(const QString& text) {
    blank_ = !text.isEmpty();
    lineEdit()->setPlaceholderText(text);
    lineEdit()->setText(textFromValue(value()));
}

QString ScientificSpinBox::placeholder() const {
    return lineEdit()->placeholderText();
}

QString ScientificSpinBox::shownText() const {
    return lineEdit()->text();
}

}  // namespace lathe::ui
