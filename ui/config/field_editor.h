// FieldEditor: the editor of one config field, chosen by its schema: a check box, a bounded spin
// box, a combo box for an enum, value + unit for a duration, a line edit with a picker for a path,
// comma-separated text for a list, JSON text for anything else; an "unset" (null) check box for optional
// fields; the reason underneath when the value is invalid.
#pragma once

#include "ui/config/schema_fields.h"

#include <QWidget>

#include <optional>

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QToolButton;
class QVBoxLayout;

namespace lathe::ui {

class ScientificSpinBox;

class FieldEditor : public QWidget {
    Q_OBJECT

public:
    FieldEditor(const FieldSpec& spec, QWidget* parent = nullptr);

    const FieldSpec& spec() const { return spec_; }
    /// Shows `value` (no edited() signal). A value of the wrong shape is shown as best it can.
    void setValue(const Json& value);
    Json value() const;

    /// Marks the field invalid with `message`, or clears the mark when empty.
    void setIssue(const QString& message);
    QString issue() const { return issue_; }
    bool isNull() const;
    /// What the engine uses while the field is null (config::null_field_defaults), shown in the
    /// unset field as "default: 0.999"; nullopt: the description's words for null ("unset:
    /// disables"). Unticking "unset" starts from this value.
    void setEffectiveDefault(const std::optional<Json>& value);
    /// The text an unset field shows in place of a value.
    QString nullPlaceholder() const { return nullText_; }
    /// What the input shows as text ("" for a placeholder; numbers, strings, the combo's text).
    QString shownText() const;

    /// The widget that takes focus (tests drive it).
    QWidget* input() const { return input_; }
    QCheckBox* nullBox() const { return null_; }
    QComboBox* unitBox() const { return unit_; }
    QToolButton* pickerButton() const { return picker_; }

Q_SIGNALS:
    void edited();

private:
    void build();
    void buildNullToggle(QHBoxLayout* row);
    void buildMessages(QVBoxLayout* outer);
    void setNullState(bool isNull);
    /// While null: the input emptied, with nullText_ in its place.
    void showNullPlaceholder();
    void clearNullPlaceholder();
    void pickPath();
    Json scalarValue() const;
    void setScalar(const Json& v);
    void showNumber(double x);
    Json fallbackValue() const;

    FieldSpec spec_;
    QWidget* input_ = nullptr;
    QCheckBox* check_ = nullptr;
    ScientificSpinBox* spin_ = nullptr;
    QComboBox* combo_ = nullptr;
    QComboBox* unit_ = nullptr;
    QLineEdit* line_ = nullptr;
    QToolButton* picker_ = nullptr;
    QCheckBox* null_ = nullptr;
    QLabel* error_ = nullptr;
    /// Why the last keystroke was not taken (a letter in a number); hidden at the next edit.
    QLabel* note_ = nullptr;
    QWidget* frame_ = nullptr;
    QString issue_;
    std::optional<Json> effective_;
    QString nullText_;
    QString linePlaceholder_;  ///< the line edit's own hint ("JSON"), back once a value is set
    bool updating_ = false;
};

}  // namespace lathe::ui
