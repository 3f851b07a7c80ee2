// A spin box for config numbers: shows and accepts scientific notation (3e-4, 5e6) in the C locale
// as the config files spell them, keeps full double precision, and steps by the leading digit
// (0.003 -> 0.004). In integer mode it holds whole numbers up to 2^53.
#pragma once

#include <QDoubleSpinBox>

namespace lathe::ui {

class ScientificSpinBox : public QDoubleSpinBox {
    Q_OBJECT

public:
    explicit ScientificSpinBox(bool integer, QWidget* parent = nullptr);

    bool isInteger() const { return integer_; }
    QString textFromValue(double value) const override;
    double valueFromText(const QString& text) const override;
    QValidator::State validate(QString& text, int& pos) const override;
    void fixup(QString& input) const override;
    void stepBy(int steps) override;
    /// Empties the box and shows `text` greyed in its place (an unset field's default), until
    /// showPlaceholder("") shows the number again.
    void showPlaceholder(const QString& text);
    QString placeholder() const;
    /// What the box shows ("" while a placeholder stands in).
    QString shownText() const;

Q_SIGNALS:
    /// A keystroke was refused: `text` (what the box would have held) is no number, and cannot
    /// become one by typing more. Qt drops such keys without a word; the field says why.
    void inputRefused(const QString& text);

private:
    bool integer_;
    bool blank_ = false;  ///< a placeholder stands in for the number
};

}  // namespace lathe::ui
