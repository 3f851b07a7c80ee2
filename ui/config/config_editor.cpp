#include "ui/config/config_editor.h"

#include "engine/config/null_defaults.h"

#include "ui/config/layout_diagram.h"

#include "engine/config/memory_estimate.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSaveFile>
#include <QScrollArea>
#include <QSet>
#include <QStyle>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <QUndoCommand>
#include <QUndoStack>
#include <QVBoxLayout>

namespace lathe::ui {
namespace cfg = lathe::config;

namespace {

QString toQ(const std::string& s) {
    return QString::fromStdString(s);
}

// Commands that merge while the same field is being typed into.
bool mergesWhileTyping(FieldSpec::Kind k) {
    return k != FieldSpec::Kind::Bool && k != FieldSpec::Kind::Enum;
}

}  // namespace

/// One field edit. The first redo() comes from push(): the editor already shows the value.
class SetFieldCommand : public QUndoCommand {
public:
    SetFieldCommand(ConfigEditor* editor, QString path, Json before, Json after, bool merges)
        : QUndoCommand(QObject::tr("Edit %1").arg(path)),
          editor_(editor),
          path_(std::move(path)),
          before_(std::move(before)),
          after_(std::move(after)),
          merges_(merges) {}
    int id() const override { return 1; }
    bool mergeWith(const QUndoCommand* other) override {
        auto* o = static_cast<const SetFieldCommand*>(other);
        if (!merges_ || o->path_ != path_) return false;
        after_ = o->after_;
        return true;
    }
    void redo() override {
        editor_->applyField(path_, after_, !first_);
        first_ = false;
    }
    void undo() override { editor_->applyField(path_, before_, true); }

private:
    ConfigEditor* editor_;
    QString path_;
    Json before_, after_;
    bool merges_;
    bool first_ = true;
};

/// A whole new document: a preset, an opened file.
class ReplaceDocumentCommand : public QUndoCommand {
public:
    // The document's file and origin go with it: after a preset or a run's config, Save must
    // not write the file the previous document came from (issue 45 item 2), and undo brings
    // both back.
    ReplaceDocumentCommand(ConfigEditor* editor, const QString& text, Json after,
                           QString afterPreset, Json afterPresetDoc, QString afterFile,
                           QString afterOrigin)
        : QUndoCommand(text),
          editor_(editor),
          before_(editor->doc_),
          after_(std::move(after)),
          beforePreset_(editor->preset_),
          afterPreset_(std::move(afterPreset)),
          beforePresetDoc_(editor->presetDoc_),
          afterPresetDoc_(std::move(afterPresetDoc)),
          beforeFile_(editor->file_),
          afterFile_(std::move(afterFile)),
          beforeOrigin_(editor->origin_),
          afterOrigin_(std::move(afterOrigin)) {}
    void redo() override { apply(after_, afterPreset_, afterPresetDoc_, afterFile_, afterOrigin_); }
    void undo() override {
        apply(before_, beforePreset_, beforePresetDoc_, beforeFile_, beforeOrigin_);
    }

private:
    void apply(const Json& doc, const QString& preset, const Json& presetDoc, const QString& file,
               const QString& origin) {
        editor_->file_ = file;
        editor_->origin_ = origin;
        editor_->applyDocument(doc, preset, presetDoc);
        Q_EMIT editor_->currentFileChanged(file);
    }

    ConfigEditor* editor_;
    Json before_, after_;
    QString beforePreset_, afterPreset_;
    Json beforePresetDoc_, afterPresetDoc_;
    QString beforeFile_, afterFile_;
    QString beforeOrigin_, afterOrigin_;
};

ConfigEditor::ConfigEditor(QWidget* parent) : QWidget(parent) {
    root_ = parseSchema(cfg::json_schema());
    undo_ = new QUndoStack(this);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);

    // Presets and files.
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Preset:"), this));
    presetBox_ = new QComboBox(this);
    presetBox_->setObjectName(QStringLiteral("presetBox"));
    for (const auto& n : cfg::preset_names()) presetBox_->addItem(toQ(n));
    presetBox_->setToolTip(
        tr("Start from a built-in preset; fields that differ from it are "
           "marked with ●."));
    bar->addWidget(presetBox_, 1);
    auto tool = [&](QStyle::StandardPixmap icon, const QString& tip) {
        auto* b = new QToolButton(this);
        b->setIcon(style()->standardIcon(icon));
        b->setToolTip(tip);
        b->setAutoRaise(true);
        bar->addWidget(b);
        return b;
    };
    auto* open = tool(QStyle::SP_DialogOpenButton, tr("Open a config (JSON or YAML)"));
    auto* save = tool(QStyle::SP_DialogSaveButton, tr("Save the config (JSON or YAML)"));
    advancedBox_ = new QCheckBox(tr("All fields"), this);
    advancedBox_->setObjectName(QStringLiteral("advancedFields"));
    advancedBox_->setChecked(advanced_);
    advancedBox_->setToolTip(
        tr("Show every field. Off: the model, data, duration, batch, learning rate, "
           "checkpoints and parallelism, and whatever has a problem or differs from the preset."));
    connect(advancedBox_, &QCheckBox::toggled, this, &ConfigEditor::setAdvanced);
    auto* undoButton = tool(QStyle::SP_ArrowBack, tr("Undo"));
    auto* redoButton = tool(QStyle::SP_ArrowForward, tr("Redo"));
    layout->addLayout(bar);
    connect(open, &QToolButton::clicked, this, &ConfigEditor::openInteractive);
    connect(save, &QToolButton::clicked, this, &ConfigEditor::saveInteractive);
    connect(undoButton, &QToolButton::clicked, undo_, &QUndoStack::undo);
    connect(redoButton, &QToolButton::clicked, undo_, &QUndoStack::redo);
    connect(undo_, &QUndoStack::canUndoChanged, undoButton, &QToolButton::setEnabled);
    connect(undo_, &QUndoStack::canRedoChanged, redoButton, &QToolButton::setEnabled);
    undoButton->setEnabled(false);
    redoButton->setEnabled(false);

    // The form, and the resolved JSON.
    tabs_ = new QTabWidget(this);
    // Beside the tabs, where it takes no width of its own (a 1366-pixel screen).
    tabs_->setCornerWidget(advancedBox_, Qt::TopRightCorner);
    auto* scroll = new QScrollArea(tabs_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    auto* content = new QWidget(scroll);
    auto* contentLayout = new QVBoxLayout(content);
    contentLayout->setContentsMargins(2, 2, 2, 2);
    contentLayout->setSpacing(6);
    // Top-level scalars first, as "general".
    FieldSpec general;
    general.kind = FieldSpec::Kind::Group;
    general.key = tr("general");
    general.description = tr("Name and seed of the run.");
    for (const auto& c : root_.children)
        if (c.kind != FieldSpec::Kind::Group) general.children.push_back(c);
    if (!general.children.empty()) contentLayout->addWidget(buildGroup(general, 0));
    for (const auto& c : root_.children)
        if (c.kind == FieldSpec::Kind::Group) contentLayout->addWidget(buildGroup(c, 0));
    contentLayout->addStretch(1);
    scroll->setWidget(content);
    tabs_->addTab(scroll, tr("Settings"));
    resolved_ = new QPlainTextEdit(tabs_);
    resolved_->setObjectName(QStringLiteral("resolvedJson"));
    resolved_->setReadOnly(true);
    resolved_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    resolved_->setToolTip(tr("The config as the engine will read it (read-only)."));
    tabs_->addTab(resolved_, tr("Resolved JSON"));
    layout->addWidget(tabs_, 1);

    buildStatusArea(layout);

    connect(presetBox_, &QComboBox::activated, this, [this](int) {
        const QString name = presetBox_->currentText();
        if (!confirmReplace(tr("preset %1").arg(name))) {
            QSignalBlocker block(presetBox_);
            presetBox_->setCurrentText(preset_);
            return;
        }
        loadPreset(name);
    });

    // The initial preset is not an edit.
    const QString initial = QString::fromLatin1(cfg::kDefaultPreset);
    const auto text = cfg::preset_text(initial.toStdString());
    Json presetDoc = cfg::to_json(cfg::load(initial.toStdString()).config);
    origin_ = tr("preset %1").arg(initial);
    applyDocument(presetDoc, initial, presetDoc);
    Q_UNUSED(text);
}

void ConfigEditor::buildStatusArea(QVBoxLayout* layout) {
    // The parallel layout on the workbench's ranks, redrawn as the mesh fields change.
    auto* layoutBox = new QGroupBox(tr("Parallel layout"), this);
    layoutBox->setToolTip(
        tr("Ranks as the engine will arrange them: data parallelism (train_module.dp_config) down, "
           "tensor parallelism (train_module.tp_config) across."));
    auto* layoutBoxLayout = new QVBoxLayout(layoutBox);
    layoutBoxLayout->setContentsMargins(4, 2, 4, 2);
    diagram_ = new LayoutDiagram(layoutBox);
    layoutBoxLayout->addWidget(diagram_);
    layout->addWidget(layoutBox);

    // The summary has a fixed height and scrolls when longer: a long warning (a 7B model on this
    // machine) once grew it and left the form 6 rows (issue 45 item 11).
    auto* summaryScroll = new QScrollArea(this);
    summaryScroll->setObjectName(QStringLiteral("validationSummaryArea"));
    summaryScroll->setFrameShape(QFrame::NoFrame);
    summaryScroll->setWidgetResizable(true);
    summaryScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    summary_ = new QLabel(summaryScroll);
    summary_->setObjectName(QStringLiteral("validationSummary"));
    summary_->setWordWrap(true);  // the memory figures are long: they must not widen the dock
    summary_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    summaryScroll->setWidget(summary_);
    summaryScroll->setFixedHeight(summary_->fontMetrics().lineSpacing() * 5 + 4);
    layout->addWidget(summaryScroll);
    problems_ = new QListWidget(this);
    problems_->setObjectName(QStringLiteral("problems"));
    problems_->setMaximumHeight(problems_->fontMetrics().height() * 6);
    problems_->hide();
    layout->addWidget(problems_);
    connect(problems_, &QListWidget::itemActivated, this,
            [this](QListWidgetItem* item) { revealField(item->data(Qt::UserRole).toString()); });
    connect(problems_, &QListWidget::itemClicked, this,
            [this](QListWidgetItem* item) { revealField(item->data(Qt::UserRole).toString()); });
}

QWidget* ConfigEditor::buildGroup(const FieldSpec& group, int depth) {
    auto* box = new QWidget(this);
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(depth > 0 ? 12 : 0, 0, 0, 0);
    v->setSpacing(2);

    auto* header = new QHBoxLayout;
    auto* toggle = new QToolButton(box);
    toggle->setObjectName(QStringLiteral("section:") + group.path);
    toggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    toggle->setAutoRaise(true);
    toggle->setCheckable(true);
    toggle->setText(group.key);
    QFont f = toggle->font();
    f.setBold(true);
    if (depth == 0) f.setPointSizeF(f.pointSizeF() * 1.1);
    toggle->setFont(f);
    toggle->setToolTip(group.description);
    header->addWidget(toggle);
    FieldEditor* enabled = nullptr;
    if (group.isSwitchable()) {
        enabled = new FieldEditor(*group.child(QStringLiteral("enabled")), box);
        enabled->setToolTip(
            tr("enabled: %1").arg(group.child(QStringLiteral("enabled"))->description));
        editors_.insert(enabled->spec().path, enabled);
        connect(enabled, &FieldEditor::edited, this, [this, enabled] { onEdited(enabled); });
        header->addWidget(enabled);
    }
    auto* desc = new QLabel(group.description, box);
    desc->setEnabled(false);  // the palette's disabled text: a quiet grey in light and dark themes
    desc->setTextInteractionFlags(Qt::NoTextInteraction);
    // Clipped where the dock is narrow (the whole text is the section's tooltip): a long
    // description once made the form wider than the dock, so it scrolled sideways and hid the
    // fields' units and unset boxes (issue 45 item 11).
    desc->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    desc->setToolTip(group.description);
    header->addWidget(desc, 1);
    v->addLayout(header);

    auto* body = new QWidget(box);
    auto* bodyLayout = new QVBoxLayout(body);
    bodyLayout->setContentsMargins(0, 0, 0, 0);
    bodyLayout->setSpacing(2);
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    // A long key (max_sequence_length, nested three deep) puts its field on the next line
    // instead of widening the form.
    form->setRowWrapPolicy(QFormLayout::WrapLongRows);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    form->setContentsMargins(depth > 0 ? 12 : 4, 0, 0, 0);
    bodyLayout->addLayout(form);
    for (const auto& c : group.children) {
        if (c.kind == FieldSpec::Kind::Group) continue;
        if (enabled && c.key == QLatin1String("enabled")) continue;
        addFieldRow(form, c, body);
    }
    for (const auto& c : group.children)
        if (c.kind == FieldSpec::Kind::Group) bodyLayout->addWidget(buildGroup(c, depth + 1));
    v->addWidget(body);

    connect(toggle, &QToolButton::toggled, this, [toggle, body](bool open) {
        toggle->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
        body->setVisible(open);
    });
    const bool open = depth == 0;
    toggle->setChecked(open);
    toggle->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
    body->setVisible(open);
    if (!group.path.isEmpty()) toggles_.insert(group.path, toggle);
    if (enabled) groupBodies_.insert(group.path, body);
    QStringList fields;
    for (const FieldSpec* leaf : leafFields(group)) fields << leaf->path;
    groupBoxes_.emplace_back(box, fields);
    return box;
}

const QStringList& ConfigEditor::basicFields() {
    static const QStringList fields = {
        QStringLiteral("run_name"),
        QStringLiteral("model.d_model"),
        QStringLiteral("model.n_layers"),
        QStringLiteral("model.n_heads"),
        QStringLiteral("model.vocab_size"),
        QStringLiteral("dataset.source"),
        QStringLiteral("dataset.paths"),
        QStringLiteral("dataset.tokenizer"),
        QStringLiteral("dataset.sequence_length"),
        QStringLiteral("dataset.mixture.sources"),
        QStringLiteral("dataset.mixture.requested_tokens"),
        QStringLiteral("data_loader.global_batch_size"),
        QStringLiteral("train_module.rank_microbatch_size"),
        QStringLiteral("train_module.max_sequence_length"),
        QStringLiteral("train_module.optim.lr"),
        QStringLiteral("train_module.scheduler.name"),
        QStringLiteral("train_module.scheduler.warmup"),
        QStringLiteral("train_module.autocast_precision"),
        QStringLiteral("train_module.dp_config.name"),
        QStringLiteral("train_module.tp_config.degree"),
        QStringLiteral("train_module.ac_config.mode"),
        QStringLiteral("trainer.max_duration"),
        QStringLiteral("trainer.save_folder"),
        QStringLiteral("trainer.load_path"),
        QStringLiteral("trainer.callbacks.checkpointer.save_interval"),
        QStringLiteral("trainer.callbacks.checkpointer.max_checkpoints"),
        QStringLiteral("launch.nproc"),
    };
    return fields;
}

void ConfigEditor::setAdvanced(bool all) {
    {
        QSignalBlocker block(advancedBox_);
        advancedBox_->setChecked(all);
    }
    if (all == advanced_) return;
    advanced_ = all;
    updateVisibility();
    Q_EMIT advancedChanged(all);
}

bool ConfigEditor::isFieldShown(const QString& path) const {
    if (advanced_ || basicFields().contains(path)) return true;
    const FieldEditor* e = editors_.value(path);
    return (e && !e->issue().isEmpty()) || isChangedFromPreset(path);
}

void ConfigEditor::updateVisibility() {
    // A hidden row is taken out of its form and put back at its place when shown: hiding both
    // widgets of a QFormLayout row (or setRowVisible) corrupted Qt 6.4's later relayouts.
    QSet<QString> shown;
    for (auto it = forms_.begin(); it != forms_.end(); ++it) {
        const QString& path = it.key();
        QFormLayout* form = it.value();
        const bool visible = isFieldShown(path);
        if (visible) shown.insert(path);
        if (visible == !hiddenFields_.contains(path)) continue;
        QLabel* label = labels_.value(path);
        FieldEditor* editor = editors_.value(path);
        if (visible) {
            hiddenFields_.remove(path);
            int row = 0;
            for (const QString& other : formOrder_.value(form)) {
                if (other == path) break;
                if (!hiddenFields_.contains(other)) ++row;
            }
            form->insertRow(row, label, editor);
            label->show();
            editor->show();
        } else {
            hiddenFields_.insert(path);
            QFormLayout::TakeRowResult taken = form->takeRow(editor);
            delete taken.labelItem;  // the layout items, not the widgets
            delete taken.fieldItem;
            label->hide();
            editor->hide();
        }
    }
    for (const auto& [box, fields] : groupBoxes_) {
        bool any = advanced_;
        for (const QString& f : fields) any = any || shown.contains(f);
        if (box->isHidden() == any) box->setVisible(any);
    }
}

void ConfigEditor::addFieldRow(QFormLayout* form, const FieldSpec& f, QWidget* parent) {
    auto* editor = new FieldEditor(f, parent);
    auto* label = new QLabel(f.key, parent);
    label->setToolTip(f.description);
    label->setBuddy(editor->input());
    editors_.insert(f.path, editor);
    labels_.insert(f.path, label);
    forms_.insert(f.path, form);
    formOrder_[form] << f.path;
    form->addRow(label, editor);
    connect(editor, &FieldEditor::edited, this, [this, editor] { onEdited(editor); });
}

void ConfigEditor::onEdited(FieldEditor* editor) {
    const QString path = editor->spec().path;
    Json before = valueAt(doc_, path);
    Json after = editor->value();
    if (before == after) return;
    undo_->push(new SetFieldCommand(this, path, std::move(before), std::move(after),
                                    mergesWhileTyping(editor->spec().kind)));
}

void ConfigEditor::editField(const QString& path, const Json& value) {
    Json before = valueAt(doc_, path);
    if (before == value) return;
    undo_->push(new SetFieldCommand(this, path, std::move(before), value, false));
    // The command's first redo() leaves the editor alone: show the value now.
    if (auto* e = editors_.value(path)) e->setValue(value);
}

void ConfigEditor::applyField(const QString& path, const Json& value, bool updateEditor) {
    setValueAt(doc_, path, value);
    if (updateEditor) {
        if (auto* e = editors_.value(path)) e->setValue(value);
    }
    updateSwitches();
    revalidate();
    updateMarkers();
    updateVisibility();
    Q_EMIT documentChanged();
}

void ConfigEditor::applyDocument(const Json& doc, const QString& preset, const Json& presetDoc) {
    doc_ = doc;
    preset_ = preset;
    presetDoc_ = presetDoc;
    {
        QSignalBlocker block(presetBox_);
        presetBox_->setCurrentText(preset);
    }
    refreshEditors();
    updateSwitches();
    revalidate();
    updateMarkers();
    updateVisibility();
    Q_EMIT documentChanged();
}

void ConfigEditor::refreshEditors() {
    for (auto it = editors_.begin(); it != editors_.end(); ++it)
        it.value()->setValue(valueAt(doc_, it.key()));
}

void ConfigEditor::updateSwitches() {
    for (auto it = groupBodies_.begin(); it != groupBodies_.end(); ++it) {
        const Json on = valueAt(doc_, it.key() + QStringLiteral(".enabled"));
        it.value()->setEnabled(!on.is_boolean() || on.get<bool>());
    }
}

void ConfigEditor::revalidate() {
    cfg::Loaded loaded = cfg::load_document(doc_, "editor");
    issues_ = loaded.issues;
    QHash<QString, QStringList> byField;
    problems_->clear();
    for (const auto& issue : issues_) {
        const QString path = toQ(issue.path);
        const QString field = fieldForIssue(root_, path);
        QString msg = toQ(issue.message);
        if (!field.isEmpty() && path != field)
            msg = path.mid(field.size()) + QStringLiteral(": ") + msg;
        if (!field.isEmpty() && msg.startsWith(QLatin1Char('.'))) msg.remove(0, 1);
        if (!field.isEmpty()) byField[field] << msg;
        auto* item = new QListWidgetItem(toQ(issue.to_string()), problems_);
        item->setData(Qt::UserRole, field);
        item->setIcon(style()->standardIcon(QStyle::SP_MessageBoxWarning));
    }
    for (auto it = editors_.begin(); it != editors_.end(); ++it)
        it.value()->setIssue(byField.value(it.key()).join(QLatin1Char('\n')));
    problems_->setVisible(!issues_.empty());
    resolved_->setPlainText(toQ(cfg::to_json(loaded.config).dump(2)));
    config_ = loaded.config;
    // Unset fields show what the engine will use ("default: 0.999"), which can follow other
    // fields (the optimizer, d_model).
    const auto defaults = cfg::null_field_defaults(config_);
    for (auto it = editors_.begin(); it != editors_.end(); ++it) {
        if (!it.value()->spec().nullable) continue;
        const auto found = defaults.find(it.key().toStdString());
        it.value()->setEffectiveDefault(
            found == defaults.end() ? std::nullopt : std::optional<Json>(found->second));
    }
    updateLayout();
    const bool valid = issues_.empty();
    if (valid != valid_) {
        valid_ = valid;
        Q_EMIT validityChanged(valid);
    }
}

bool ConfigEditor::isChangedFromPreset(const QString& path) const {
    return valueAt(doc_, path) != valueAt(presetDoc_, path);
}

void ConfigEditor::updateMarkers() {
    for (auto it = editors_.begin(); it != editors_.end(); ++it) {
        const QString& path = it.key();
        const bool changed = isChangedFromPreset(path);
        QLabel* label = labels_.value(path);
        QWidget* target = label ? static_cast<QWidget*>(label) : it.value();
        if (target->property("changed").toBool() == changed &&
            target->property("changed").isValid())
            continue;
        target->setProperty("changed", changed);
        QFont f = target->font();
        f.setBold(changed);
        target->setFont(f);
        const QString desc = it.value()->spec().description;
        if (label) {
            label->setText(changed ? QStringLiteral("● ") + it.value()->spec().key
                                   : it.value()->spec().key);
        }
        target->setToolTip(changed ? tr("%1\nChanged from the preset '%2' (preset value: %3)")
                                         .arg(desc, preset_, toQ(valueAt(presetDoc_, path).dump()))
                                   : desc);
    }
}

Json ConfigEditor::completeDocument(const Json& raw) const {
    Json base = cfg::to_json(cfg::load_document(raw).config);
    return deepMerge(base, raw);
}

void ConfigEditor::setWorldSize(int ranks) {
    ranks = std::max(1, ranks);
    if (ranks == worldSize_) return;
    worldSize_ = ranks;
    updateLayout();
}

const cfg::ParallelLayout& ConfigEditor::parallelLayout() const {
    return diagram_->parallelLayout();
}

void ConfigEditor::updateLayout() {
    const auto layout = cfg::parallel_layout(config_, worldSize_);
    updateSummary(layout);
    if (!diagram_) return;
    const auto& old = diagram_->parallelLayout();
    const bool same = old.world == layout.world && old.tp == layout.tp && old.dp == layout.dp &&
                      old.replicas == layout.replicas && old.shard == layout.shard &&
                      old.strategy == layout.strategy && old.problems == layout.problems;
    diagram_->setParallelLayout(layout);
    if (!same) Q_EMIT parallelLayoutChanged();
}

void ConfigEditor::updateSummary(const cfg::ParallelLayout& layout) {
    const QString refusedBefore = engineRefusal_;
    engineRefusal_.clear();
    showSummary(layout);
    if (engineRefusal_ != refusedBefore) Q_EMIT engineRefusalChanged(engineRefusal_);
}

void ConfigEditor::showSummary(const cfg::ParallelLayout& layout) {
    if (!issues_.empty()) {
        summary_->setText(tr("✖ %n problem(s): the run cannot start until they are fixed.", nullptr,
                             int(issues_.size())));
        return;
    }
    // Start is disabled by a layout that cannot run on the chosen ranks: the summary says so
    // rather than "valid" (issue 34).
    if (!layout.ok()) {
        summary_->setText(tr("✖ The config cannot run on %1: %2")
                              .arg(worldSize_ == 1 ? tr("1 rank") : tr("%1 ranks").arg(worldSize_),
                                   toQ(layout.problems.front())));
        return;
    }
    // What Start will ask of the machine, before Start: the model's size, its training state and
    // a step's expected peak; on a machine without a GPU, checked against its free memory as the
    // engine will check it.
    const auto estimate = cfg::estimate_training_memory(config_, worldSize_);
    const int64_t available = hostMemory_ ? hostMemory_() : 0;
    const std::string refusal =
        available > 0
            ? cfg::memory_refusal(estimate, available, "this machine", worldSize_, &config_)
            : std::string();
    if (!refusal.empty()) {
        engineRefusal_ = toQ(refusal);
        summary_->setText(tr("⚠ The engine will refuse this run: %1").arg(engineRefusal_));
        return;
    }
    summary_->setText(tr("✔ The config is valid.") + QStringLiteral(" ") +
                      tr("Training needs %1.").arg(toQ(estimate.describe())));
}

QString ConfigEditor::summaryText() const {
    return summary_->text();
}

Json ConfigEditor::resolvedJson() const {
    return cfg::to_json(cfg::load_document(doc_).config);
}

void ConfigEditor::setDocument(const Json& doc, const QString& origin) {
    undo_->push(new ReplaceDocumentCommand(this, tr("Replace the config"), completeDocument(doc),
                                           preset_, presetDoc_, QString(),
                                           origin.isEmpty() ? tr("untitled config") : origin));
    undo_->setClean();  // nothing typed yet
}

QString ConfigEditor::documentName() const {
    return file_.isEmpty() ? origin_ : QDir::toNativeSeparators(file_);
}

bool ConfigEditor::isModified() const {
    return !undo_->isClean();
}

bool ConfigEditor::confirmReplace(const QString& what) {
    if (!isModified()) return true;
    QMessageBox box(QMessageBox::Question, tr("Unsaved changes"),
                    tr("The config (%1) has changes that are not saved.").arg(documentName()),
                    QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, this);
    box.setObjectName(QStringLiteral("unsavedChangesBox"));
    box.setInformativeText(tr("Save them before opening %1?").arg(what));
    box.setDefaultButton(QMessageBox::Save);
    const int answer = box.exec();
    if (answer == QMessageBox::Discard) return true;
    if (answer == QMessageBox::Save) return saveInteractive();
    return false;
}

Json ConfigEditor::sessionState() const {
    return Json{{"document", doc_},
                {"preset", preset_.toStdString()},
                {"file", file_.toStdString()},
                {"origin", origin_.toStdString()},
                {"modified", !undo_->isClean()}};
}

bool ConfigEditor::restoreSession(const Json& state) {
    if (!state.is_object()) return false;
    const auto doc = state.find("document");
    if (doc == state.end() || !doc->is_object()) return false;
    const auto text = [&](const char* key) {
        const auto it = state.find(key);
        return it != state.end() && it->is_string() ? QString::fromStdString(it->get<std::string>())
                                                    : QString();
    };
    QString preset = preset_;
    Json presetDoc = presetDoc_;
    if (const QString name = text("preset"); !name.isEmpty()) {
        cfg::Loaded l = cfg::load(name.toStdString());
        if (cfg::preset_text(name.toStdString()) && l.ok()) {
            preset = name;
            presetDoc = cfg::to_json(l.config);
        }
    }
    applyDocument(completeDocument(*doc), preset, presetDoc);
    undo_->clear();
    const QString file = text("file");
    file_ = !file.isEmpty() && QFileInfo::exists(file) ? file : QString();
    origin_ = text("origin").isEmpty() ? tr("preset %1").arg(preset_) : text("origin");
    const auto modified = state.find("modified");
    if (modified != state.end() && modified->is_boolean() && modified->get<bool>())
        undo_->resetClean();
    Q_EMIT currentFileChanged(file_);
    return true;
}

bool ConfigEditor::loadPreset(const QString& name) {
    cfg::Loaded l = cfg::load(name.toStdString());
    if (!cfg::preset_text(name.toStdString()) || !l.ok()) return false;
    Json doc = cfg::to_json(l.config);
    undo_->push(new ReplaceDocumentCommand(this, tr("Preset %1").arg(name), doc, name, doc,
                                           QString(), tr("preset %1").arg(name)));
    undo_->setClean();
    return true;
}

bool ConfigEditor::openFile(const QString& path, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = tr("Cannot read %1: %2").arg(path, f.errorString());
        return false;
    }
    const std::string text = f.readAll().toStdString();
    std::vector<cfg::Issue> issues;
    const std::string p = path.toStdString();
    Json raw = cfg::parse_document(text, cfg::format_for_path(p), p, issues);
    if (!issues.empty() || !raw.is_object()) {
        if (error)
            *error = issues.empty() ? tr("%1: the config must be an object").arg(path)
                                    : toQ(issues.front().to_string());
        return false;
    }
    undo_->push(new ReplaceDocumentCommand(this, tr("Open %1").arg(QFileInfo(path).fileName()),
                                           completeDocument(raw), preset_, presetDoc_, path,
                                           QFileInfo(path).fileName()));
    undo_->setClean();
    return true;
}

bool ConfigEditor::saveFile(const QString& path, QString* error) {
    QSaveFile f(path);
    const std::string text = cfg::dump_document(doc_, cfg::format_for_path(path.toStdString()));
    if (!f.open(QIODevice::WriteOnly) || f.write(QByteArray::fromStdString(text)) < 0 ||
        !f.commit()) {
        if (error) *error = tr("Cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    file_ = path;
    undo_->setClean();
    Q_EMIT currentFileChanged(file_);
    return true;
}

void ConfigEditor::openInteractive() {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open config"), QFileInfo(file_).path(),
                                     tr("Configs (*.json *.yaml *.yml);;All files (*)"));
    if (path.isEmpty() || !confirmReplace(QFileInfo(path).fileName())) return;
    QString error;
    if (!openFile(path, &error)) QMessageBox::warning(this, tr("Open config"), error);
}

bool ConfigEditor::saveInteractive() {
    if (file_.isEmpty()) return saveAsInteractive();
    QString error;
    if (!saveFile(file_, &error)) {
        QMessageBox::warning(this, tr("Save config"), error);
        return false;
    }
    return true;
}

bool ConfigEditor::saveAsInteractive() {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save config"), file_.isEmpty() ? QStringLiteral("config.yaml") : file_,
        tr("YAML (*.yaml *.yml);;JSON (*.json)"));
    if (path.isEmpty()) return false;
    QString error;
    if (!saveFile(path, &error)) {
        QMessageBox::warning(this, tr("Save config"), error);
        return false;
    }
    return true;
}

void ConfigEditor::revealField(const QString& path) {
    if (path.isEmpty()) return;
    if (!isFieldShown(path)) setAdvanced(true);
    tabs_->setCurrentIndex(0);
    QString prefix;
    for (const QString& part : path.split(QLatin1Char('.'))) {
        prefix = prefix.isEmpty() ? part : prefix + QLatin1Char('.') + part;
        if (auto* t = toggles_.value(prefix)) t->setChecked(true);
    }
    if (auto* e = editors_.value(path)) {
        QTimer::singleShot(0, e, [e] {
            for (QWidget* w = e->parentWidget(); w; w = w->parentWidget()) {
                if (auto* area = qobject_cast<QScrollArea*>(w)) {
                    area->ensureWidgetVisible(e);
                    break;
                }
            }
            e->setFocus();
        });
    }
}

}  // namespace lathe::ui
