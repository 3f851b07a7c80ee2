// ConfigEditor: the form editor of an ExperimentConfig, generated from lathe_config's JSON Schema.
// Sections per top-level group (nested groups collapsible; callbacks switched on and off from
// their header), typed field editors with the description as tooltip, validation on every edit
// through lathe::config::load_document() with the invalid field marked and the reason shown,
// markers on values that differ from the chosen preset, presets, open/save JSON or YAML,
// undo/redo, and a read-only view of the resolved JSON.
#pragma once

#include "engine/config/layout.h"
#include "ui/config/field_editor.h"
#include "ui/config/schema_fields.h"

#include <QHash>
#include <QSet>
#include <QWidget>

#include <functional>
#include <vector>

class QComboBox;
class QFormLayout;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QTabWidget;
class QUndoStack;
class QVBoxLayout;

namespace lathe::ui {

class LayoutDiagram;

class ConfigEditor : public QWidget {
    Q_OBJECT

public:
    explicit ConfigEditor(QWidget* parent = nullptr);

    /// The document being edited: every field (canonical), plus whatever invalid values the user
    /// typed or a file held.
    const Json& document() const { return doc_; }
    /// The config as the engine would resolve it (defaults for anything invalid).
    Json resolvedJson() const;
    const std::vector<lathe::config::Issue>& issues() const { return issues_; }
    bool isValid() const { return issues_.empty(); }

    /// Replaces the document (undoable) with one that is no file's: `origin` names it ("run
    /// baseline"), the document has no file, so Save asks where. Missing fields get their
    /// defaults; values are kept as given, valid or not.
    void setDocument(const Json& doc, const QString& origin = QString());
    /// Loads a preset and makes it the baseline of the "changed" markers (undoable; no file).
    bool loadPreset(const QString& name);
    QString presetName() const { return preset_; }
    bool openFile(const QString& path, QString* error = nullptr);
    bool saveFile(const QString& path, QString* error = nullptr);
    /// The file the document was opened from or saved to; empty for a preset, a run's config...
    QString currentFile() const { return file_; }
    /// What the window's title names: the file, else where the document came from.
    QString documentName() const;
    /// Whether the document has edits since it was loaded or saved.
    bool isModified() const;
    /// Before the document is replaced by `what` ("preset tiny"): unsaved edits ask Save, Discard
    /// or Cancel. True when the replacement may go ahead.
    bool confirmReplace(const QString& what);

    FieldEditor* editorFor(const QString& path) const { return editors_.value(path); }
    /// Whether the field differs from the preset (its label carries the marker).
    bool isChangedFromPreset(const QString& path) const;
    QUndoStack* undoStack() const { return undo_; }
    const FieldSpec& schema() const { return root_; }
    /// What the next session starts from: {"document", "preset", "file", "modified"}.
    Json sessionState() const;
    /// Restores a sessionState(): the document as it was, every value kept as typed, with its
    /// preset's change markers and its file; the undo history starts there. Anything that is not
    /// a saved state is ignored (false).
    bool restoreSession(const Json& state);
    /// Sets a field as if the user had edited it (undoable).
    void editField(const QString& path, const Json& value);
    /// The config as resolved at the last validation (defaults for anything invalid).
    const lathe::config::ExperimentConfig& resolvedConfig() const { return config_; }
    /// Basic or all fields. Basic shows what most runs change (basicFields()), plus any field with
    /// a problem or changed from the preset, so nothing that matters is hidden.
    void setAdvanced(bool all);
    bool isAdvanced() const { return advanced_; }
    /// The fields basic mode shows: the model's size, the data, the duration, the batch, the
    /// learning rate and its schedule, checkpoints and parallelism.
    static const QStringList& basicFields();
    /// Whether the field's row is shown (false in basic mode for an advanced field).
    bool isFieldShown(const QString& path) const;
    /// The parallel layout of the config on worldSize() ranks, as the engine will check it.
    const lathe::config::ParallelLayout& parallelLayout() const;
    int worldSize() const { return worldSize_; }
    LayoutDiagram* layoutDiagram() const { return diagram_; }
    /// Where the summary learns the free memory a run on this machine has (the window gives
    /// config::host_available_memory when there is no GPU; unset or 0: not checked).
    void setHostMemory(std::function<int64_t()> available) {
        hostMemory_ = std::move(available);
        revalidate();
    }
    QString summaryText() const;
    /// Why the engine will refuse this config as it stands (the memory pre-flight on this
    /// machine); empty when it will not. Start is disabled with it.
    QString engineRefusal() const { return engineRefusal_; }

public Q_SLOTS:
    /// The ranks the run will have (the workbench's Ranks box): the layout is checked against it.
    void setWorldSize(int ranks);
    void openInteractive();
    bool saveInteractive();
    bool saveAsInteractive();

Q_SIGNALS:
    void validityChanged(bool valid);
    void documentChanged();
    void currentFileChanged(const QString& path);
    void advancedChanged(bool all);
    /// The parallel layout changed (a mesh field or the world size).
    void parallelLayoutChanged();
    /// engineRefusal() changed.
    void engineRefusalChanged(const QString& why);

private:
    friend class SetFieldCommand;
    friend class ReplaceDocumentCommand;

    /// Under the tabs: the parallel layout diagram, the validation summary, the problems.
    void buildStatusArea(QVBoxLayout* layout);
    QWidget* buildGroup(const FieldSpec& group, int depth);
    void addFieldRow(QFormLayout* form, const FieldSpec& f, QWidget* parent);
    void onEdited(FieldEditor* editor);
    void applyField(const QString& path, const Json& value, bool updateEditor);
    void applyDocument(const Json& doc, const QString& preset, const Json& presetDoc);
    void refreshEditors();
    void revalidate();
    void updateMarkers();
    void updateVisibility();
    Json completeDocument(const Json& raw) const;
    void updateSwitches();
    void revealField(const QString& path);
    void updateLayout();
    /// The line under the tabs: the problems, a layout that cannot run, or the model's memory.
    void updateSummary(const lathe::config::ParallelLayout& layout);
    void showSummary(const lathe::config::ParallelLayout& layout);

    FieldSpec root_;
    Json doc_;
    Json presetDoc_;
    QString preset_;
    QString file_;
    QString origin_;  ///< where a document that is no file came from ("preset tiny")
    std::vector<lathe::config::Issue> issues_;
    bool valid_ = true;

    QHash<QString, FieldEditor*> editors_;
    QHash<QString, QLabel*> labels_;
    QHash<QString, QWidget*> groupBodies_;        // switchable groups: greyed when disabled
    QHash<QString, class QToolButton*> toggles_;  // group path -> its expand button
    QComboBox* presetBox_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QPlainTextEdit* resolved_ = nullptr;
    QListWidget* problems_ = nullptr;
    QLabel* summary_ = nullptr;
    QUndoStack* undo_ = nullptr;
    lathe::config::ExperimentConfig config_;
    int worldSize_ = 1;
    LayoutDiagram* diagram_ = nullptr;
    std::function<int64_t()> hostMemory_;
    QString engineRefusal_;
    bool advanced_ = true;
    class QCheckBox* advancedBox_ = nullptr;
    QHash<QString, class QFormLayout*> forms_;                  // field path -> its form
    std::vector<std::pair<QWidget*, QStringList>> groupBoxes_;  // a group and its fields
    QSet<QString> hiddenFields_;                                // rows basic mode hides
    QHash<class QFormLayout*, QStringList> formOrder_;          // a form's fields, in order
};

}  // namespace lathe::ui
