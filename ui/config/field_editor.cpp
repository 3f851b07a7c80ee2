#include "ui/config/field_editor.h"

#include "engine/config/null_defaults.h"

#include "ui/config/scientific_spin_box.h"
#include "ui/config/wheel_guard.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QToolButton>
#include <QVBoxLayout>

#include <cmath>

namespace lathe::ui {
namespace {

QString toQ(const std::string& s) {
    return QString::fromStdString(s);
}

QString listText(const Json& v) {
    if (!v.is_array()) return v.is_null() ? QString() : toQ(v.dump());
    QStringList parts;
    for (const auto& x : v) parts << (x.is_string() ? toQ(x.get<std::string>()) : toQ(x.dump()));
    return parts.join(QStringLiteral(", "));
}

}  // namespace

FieldEditor::FieldEditor(const FieldSpec& spec, QWidget* parent) : QWidget(parent), spec_(spec) {
    setObjectName(QStringLiteral("field:") + spec_.path);
    build();
    setValue(spec_.defaultValue);
}

void FieldEditor::build() {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    outer->setSpacing(1);
    frame_ = new QWidget(this);
    frame_->setObjectName(QStringLiteral("fieldFrame"));
    frame_->setAttribute(Qt::WA_StyledBackground, true);
    auto* row = new QHBoxLayout(frame_);
    row->setContentsMargins(1, 1, 1, 1);
    row->setSpacing(4);
    outer->addWidget(frame_);

    auto numberBox = [&](bool integer) {
        spin_ = new ScientificSpinBox(integer, frame_);
        WheelGuard::install(spin_);
        if (spec_.minimum) spin_->setMinimum(*spec_.minimum);
        if (spec_.maximum) spin_->setMaximum(*spec_.maximum);
        connect(spin_, &QDoubleSpinBox::valueChanged, this, [this] {
            if (note_) note_->hide();
            if (!updating_) Q_EMIT edited();
        });
        // A refused keystroke is said, not dropped in silence (issue 34).
        connect(spin_, &ScientificSpinBox::inputRefused, this, [this, integer](const QString& t) {
            note_->setText(integer ? tr("\u201c%1\u201d is not a whole number: digits, a sign and "
                                        "an exponent (5e6) only")
                                         .arg(t)
                                   : tr("\u201c%1\u201d is not a number: digits, a sign, a point "
                                        "and an exponent (3e-4) only")
                                         .arg(t));
            note_->show();
        });
        row->addWidget(spin_, 1);
        return spin_;
    };

    switch (spec_.kind) {
        case FieldSpec::Kind::Bool:
            check_ = new QCheckBox(frame_);
            connect(check_, &QCheckBox::toggled, this, [this] {
                if (!updating_) Q_EMIT edited();
            });
            row->addWidget(check_, 1);
            input_ = check_;
            break;
        case FieldSpec::Kind::Integer:
        case FieldSpec::Kind::Number:
            input_ = numberBox(spec_.kind == FieldSpec::Kind::Integer);
            break;
        case FieldSpec::Kind::Duration:
            input_ = numberBox(true);
            unit_ = new QComboBox(frame_);
            WheelGuard::install(unit_);
            unit_->addItems(spec_.enumValues);
            connect(unit_, &QComboBox::currentIndexChanged, this, [this] {
                if (!updating_) Q_EMIT edited();
            });
            row->addWidget(unit_);
            break;
        case FieldSpec::Kind::Enum:
            combo_ = new QComboBox(frame_);
            WheelGuard::install(combo_);
            combo_->addItems(spec_.enumValues);
            connect(combo_, &QComboBox::currentIndexChanged, this, [this] {
                if (!updating_) Q_EMIT edited();
            });
            row->addWidget(combo_, 1);
            input_ = combo_;
            break;
        case FieldSpec::Kind::String:
        case FieldSpec::Kind::Path:
        case FieldSpec::Kind::List:
        case FieldSpec::Kind::JsonText:
        case FieldSpec::Kind::Group:
            line_ = new QLineEdit(frame_);
            connect(line_, &QLineEdit::textEdited, this, [this] {
                if (!updating_) Q_EMIT edited();
            });
            row->addWidget(line_, 1);
            input_ = line_;
            if (spec_.kind == FieldSpec::Kind::List)
                line_->setPlaceholderText(tr("comma-separated"));
            if (spec_.kind == FieldSpec::Kind::JsonText) line_->setPlaceholderText(tr("JSON"));
            linePlaceholder_ = line_->placeholderText();
            if (spec_.format == QLatin1String("path")) {
                picker_ = new QToolButton(frame_);
                picker_->setText(QStringLiteral("…"));
                picker_->setToolTip(spec_.kind == FieldSpec::Kind::List
                                        ? tr("Add a file or folder")
                                        : tr("Choose a file or folder"));
                connect(picker_, &QToolButton::clicked, this, &FieldEditor::pickPath);
                row->addWidget(picker_);
            }
            break;
    }
    if (spec_.nullable) buildNullToggle(row);
    buildMessages(outer);

    setToolTip(spec_.description);
    setFocusProxy(input_);
}

// "unset": the field left null in the config, so its default applies.
void FieldEditor::buildNullToggle(QHBoxLayout* row) {
    null_ = new QCheckBox(tr("unset"), frame_);
    null_->setToolTip(
        tr("Leave unset (null in the config), so the default applies: %1").arg(spec_.description));
    connect(null_, &QCheckBox::toggled, this, [this](bool on) {
        setNullState(on);
        if (on) {
            showNullPlaceholder();
        } else {
            clearNullPlaceholder();
            const bool was = updating_;
            updating_ = true;
            setScalar(fallbackValue());  // the engine's value, to edit from
            updating_ = was;
        }
        if (!updating_) Q_EMIT edited();
    });
    nullText_ = toQ(lathe::config::null_placeholder(spec_.description.toStdString(), nullptr));
    row->addWidget(null_);
}

// The lines under the field: its error and a note on refused input.
void FieldEditor::buildMessages(QVBoxLayout* outer) {
    error_ = new QLabel(this);
    error_->setObjectName(QStringLiteral("fieldError"));
    error_->setWordWrap(true);
    QPalette p = error_->palette();
    p.setColor(QPalette::WindowText, QColor(0xd3, 0x2f, 0x2f));
    error_->setPalette(p);
    error_->hide();
    outer->addWidget(error_);
    note_ = new QLabel(this);
    note_->setObjectName(QStringLiteral("fieldNote"));
    note_->setWordWrap(true);
    note_->hide();
    outer->addWidget(note_);
}

void FieldEditor::setNullState(bool isNull) {
    for (QWidget* w : {static_cast<QWidget*>(check_), static_cast<QWidget*>(spin_),
                       static_cast<QWidget*>(combo_), static_cast<QWidget*>(unit_),
                       static_cast<QWidget*>(line_), static_cast<QWidget*>(picker_)})
        if (w) w->setEnabled(!isNull);
}

bool FieldEditor::isNull() const {
    return null_ && null_->isChecked();
}

void FieldEditor::setEffectiveDefault(const std::optional<Json>& value) {
    if (value == effective_ && !nullText_.isEmpty()) return;
    effective_ = value;
    nullText_ = toQ(lathe::config::null_placeholder(spec_.description.toStdString(),
                                                    value ? &*value : nullptr));
    if (isNull()) showNullPlaceholder();
}

void FieldEditor::showNullPlaceholder() {
    if (spin_) spin_->showPlaceholder(nullText_);
    if (line_) {
        line_->clear();
        line_->setPlaceholderText(nullText_);
    }
    if (combo_) {
        combo_->setPlaceholderText(nullText_);
        combo_->setCurrentIndex(-1);
    }
    if (check_) {
        check_->setChecked(effective_ && effective_->is_boolean() && effective_->get<bool>());
        // Elided, whole in the tooltip: the text beside a check box is its minimum width, and
        // the form must fit the dock (issue 45 item 11).
        check_->setText(check_->fontMetrics().elidedText(nullText_, Qt::ElideRight, 170));
        check_->setToolTip(nullText_);
    }
}

void FieldEditor::clearNullPlaceholder() {
    if (spin_) spin_->showPlaceholder(QString());
    if (line_) line_->setPlaceholderText(linePlaceholder_);
    if (check_) {
        check_->setText(QString());
        check_->setToolTip(QString());
    }
}

QString FieldEditor::shownText() const {
    if (spin_) return spin_->shownText();
    if (line_) return line_->text();
    if (combo_) return combo_->currentText();
    if (check_) return check_->isChecked() ? QStringLiteral("true") : QStringLiteral("false");
    return {};
}

Json FieldEditor::fallbackValue() const {
    // What the editor shows while the field is null: what the engine uses, the default if it has
    // one, else a bound.
    if (effective_) return *effective_;
    if (!spec_.defaultValue.is_null()) return spec_.defaultValue;
    switch (spec_.kind) {
        case FieldSpec::Kind::Bool:
            return true;
        case FieldSpec::Kind::Integer:
            return static_cast<int64_t>(spec_.minimum.value_or(0) +
                                        (spec_.exclusiveMinimum ? 1 : 0));
        case FieldSpec::Kind::Number:
            return spec_.minimum && spec_.exclusiveMinimum ? Json(1.0)
                                                           : Json(spec_.minimum.value_or(0.0));
        case FieldSpec::Kind::Enum:
            return spec_.enumValues.isEmpty() ? Json("")
                                              : Json(spec_.enumValues.first().toStdString());
        case FieldSpec::Kind::Duration:
            return Json{{"value", 1}, {"unit", spec_.enumValues.value(0).toStdString()}};
        default:
            return "";
    }
}

void FieldEditor::setValue(const Json& v) {
    updating_ = true;
    const bool isNullValue = v.is_null() && spec_.nullable;
    if (null_) null_->setChecked(isNullValue);
    setNullState(isNullValue);
    if (isNullValue) {
        showNullPlaceholder();
    } else {
        clearNullPlaceholder();
        setScalar(v.is_null() ? fallbackValue() : v);
    }
    updating_ = false;
}

void FieldEditor::setScalar(const Json& v) {
    switch (spec_.kind) {
        case FieldSpec::Kind::Bool:
            check_->setChecked(v.is_boolean() ? v.get<bool>() : false);
            break;
        case FieldSpec::Kind::Integer:
        case FieldSpec::Kind::Number:
            if (v.is_number()) showNumber(v.get<double>());
            break;
        case FieldSpec::Kind::Duration: {
            Json d = v;
            if (v.is_string()) {
                if (auto parsed = lathe::config::parse_duration(v.get<std::string>()))
                    d = Json{{"value", parsed->value},
                             {"unit", lathe::config::enum_to_string(parsed->unit)}};
            }
            if (d.is_object()) {
                if (d.contains("value") && d["value"].is_number())
                    showNumber(d["value"].get<double>());
                if (d.contains("unit") && d["unit"].is_string())
                    unit_->setCurrentText(toQ(d["unit"].get<std::string>()));
            }
            break;
        }
        case FieldSpec::Kind::Enum:
            if (v.is_string()) {
                const QString s = toQ(v.get<std::string>());
                if (combo_->findText(s) < 0) combo_->addItem(s);  // shown, and flagged invalid
                combo_->setCurrentText(s);
            }
            break;
        case FieldSpec::Kind::String:
        case FieldSpec::Kind::Path:
            line_->setText(v.is_string() ? toQ(v.get<std::string>()) : toQ(v.dump()));
            break;
        case FieldSpec::Kind::List:
            line_->setText(listText(v));
            break;
        case FieldSpec::Kind::JsonText:
        case FieldSpec::Kind::Group:
            line_->setText(toQ(v.dump()));
            break;
    }
}

void FieldEditor::showNumber(double x) {
    // The schema's bounds limit typing; a value from a file outside them is still shown as it
    // is (and marked invalid by the validation) rather than silently clamped.
    const double lo = spec_.minimum ? *spec_.minimum : spin_->minimum();
    const double hi = spec_.maximum ? *spec_.maximum : spin_->maximum();
    spin_->setRange(std::min(lo, x), std::max(hi, x));
    spin_->setValue(x);
}

Json FieldEditor::value() const {
    if (isNull()) return nullptr;
    return scalarValue();
}

Json FieldEditor::scalarValue() const {
    switch (spec_.kind) {
        case FieldSpec::Kind::Bool:
            return check_->isChecked();
        case FieldSpec::Kind::Integer:
            return static_cast<int64_t>(std::llround(spin_->value()));
        case FieldSpec::Kind::Number:
            return spin_->value();
        case FieldSpec::Kind::Duration:
            return Json{{"value", static_cast<int64_t>(std::llround(spin_->value()))},
                        {"unit", unit_->currentText().toStdString()}};
        case FieldSpec::Kind::Enum:
            return combo_->currentText().toStdString();
        case FieldSpec::Kind::String:
        case FieldSpec::Kind::Path:
            return line_->text().toStdString();
        case FieldSpec::Kind::List: {
            Json out = Json::array();
            for (const QString& raw : line_->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
                const QString item = raw.trimmed();
                if (item.isEmpty()) continue;
                if (spec_.itemType == QLatin1String("string")) {
                    out.push_back(item.toStdString());
                    continue;
                }
                bool ok = false;
                if (spec_.itemType == QLatin1String("integer")) {
                    const qlonglong n = item.toLongLong(&ok);
                    if (ok) {
                        out.push_back(static_cast<int64_t>(n));
                        continue;
                    }
                } else {
                    const double d = QLocale::c().toDouble(item, &ok);
                    if (ok) {
                        out.push_back(d);
                        continue;
                    }
                }
                out.push_back(item.toStdString());  // kept as text: the validation names it
            }
            return out;
        }
        case FieldSpec::Kind::JsonText:
        case FieldSpec::Kind::Group: {
            const std::string text = line_->text().toStdString();
            Json j = Json::parse(text, nullptr, false);
            return j.is_discarded() ? Json(text) : j;
        }
    }
    return nullptr;
}

void FieldEditor::setIssue(const QString& message) {
    if (message == issue_) return;
    issue_ = message;
    error_->setText(message);
    error_->setVisible(!message.isEmpty());
    frame_->setProperty("invalid", !message.isEmpty());
    frame_->setStyleSheet(message.isEmpty()
                              ? QString()
                              : QStringLiteral("QWidget#fieldFrame { border: 1px solid #d32f2f; "
                                               "border-radius: 3px; }"));
}

void FieldEditor::pickPath() {
    const bool folder =
        spec_.key.contains(QLatin1String("folder")) || spec_.key.contains(QLatin1String("dir"));
    QString start = line_->text().section(QLatin1Char(','), -1).trimmed();
    QString path = folder ? QFileDialog::getExistingDirectory(this, spec_.path, start)
                          : QFileDialog::getOpenFileName(this, spec_.path, start);
    if (path.isEmpty()) return;
    if (spec_.kind == FieldSpec::Kind::List && !line_->text().trimmed().isEmpty()) {
        line_->setText(line_->text() + QStringLiteral(", ") + path);
    } else {
        line_->setText(path);
    }
    Q_EMIT edited();
}

}  // namespace lathe::ui
