// MainWindow: the workbench. The config editor (left dock), the live plots (centre), the log
// (bottom dock) and the run-control toolbar (ui/control/run_toolbar.h),
// the runs under the runs root (right dock, or a bottom tab on a small screen: open a past run's
// curves, config and logs, follow a run started elsewhere, compare runs) and the selected run's
// checkpoints (Resume, Resume as new run, Edit & resume, Verify, Delete). Closing during a run asks first and never leaves an engine
// process behind. Layout is kept in QSettings between sessions.
#pragma once

#include "ui/checkpoints/resume_plan.h"
#include "ui/control/run_controller.h"

#include <QMainWindow>

#include <optional>
#include <utility>

class QAction;

namespace lathe::ui {

class CheckpointsModel;
class CheckpointsPanel;
class CompareView;
class ConfigEditor;
class DataDialog;
class HelpBrowser;
class ExportDialog;
class LogModel;
class LogView;
class MetricStore;
class PlotPanel;
class RunSession;
class RunToolbar;
class RunsModel;
class RunsPanel;
class SamplesModel;
class SamplesPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    ConfigEditor* editor() const { return editor_; }
    PlotPanel* plots() const { return plots_; }
    LogModel* logModel() const { return logModel_; }
    RunController* run() const { return run_; }
    /// Start, Checkpoint now, Stop, Kill, the ranks, the state, the progress and the speed.
    RunToolbar* toolbar() const { return toolbar_; }
    RunSession* session() const { return session_; }
    RunsPanel* runsPanel() const { return runsPanel_; }
    CheckpointsPanel* checkpointsPanel() const { return checkpointsPanel_; }
    SamplesPanel* samplesPanel() const { return samplesPanel_; }

    /// Where runs live: $LATHE_RUNS_DIR, else the folder chosen in File > Runs folder, else the
    /// engine's default. Passed to the engine as --runs-dir.
    QString runsRoot() const { return runsRoot_; }
    void setRunsRoot(const QString& root);

    /// Number of CUDA devices the NVIDIA driver reports (0 without one); no CUDA library needed.
    static int cudaDeviceCount();

    /// Whether a screen's available area is too small for the docks on three sides: the Runs and
    /// Checkpoints docks then join the Log and Samples tabs at the bottom (on the right they
    /// left the plots about 600 px and showed 3 of the runs' 10 columns; issue 45 item 9).
    static bool isCompact(const QSize& available);
    /// The first layout, and View > Reset layout: the window fits `available` (all of it when
    /// compact), the config editor takes the left edge top to bottom, and the docks get sizes
    /// in proportion to the window.
    void applyDefaultLayout(const QRect& available);

public Q_SLOTS:
    bool startRun();
    /// Shows a run from disk: its curves (followed live while it runs), its config in the editor
    /// (trainer.save_folder cleared) and its logs.
    bool openRun(const QString& runDir);
    /// Resumes from `checkpoint`: with its own config unless `config` is given, with its last
    /// world size unless `ranks` > 0, as a new run named `newRunName` (suggested when empty).
    bool resumeFromCheckpoint(const QString& checkpoint, lathe::ui::ResumePlan::Mode mode,
                              const QString& newRunName = {},
                              const std::optional<lathe::config::Json>& config = std::nullopt,
                              int ranks = 0);
    /// Loads the checkpoint's config into the editor and shows the ResumeBar.
    bool editResume(const QString& checkpoint);
    /// Opens a window overlaying the runs' curves, with their config differences.
    CompareView* compareRuns(const QStringList& runDirs);
    /// The Data page (File > Prepare data): text to token files; its result fills dataset.* and
    /// model.vocab_size in the editor. Made on first use and kept.
    DataDialog* showDataDialog();
    /// File > Export to Hugging Face…: the selected checkpoint (else the run's newest complete
    /// one) to a Hugging Face folder, by `lathe-engine export`. Made on first use and kept.
    ExportDialog* showExportDialog();
    /// File > New run from a Hugging Face model…: the editor gets a fine-tuning config of the
    /// model folder `dir` (its family, sizes, weights and tokenizer; hf::finetune_document). An
    /// unsupported model is refused with the reason, and the editor keeps its config.
    bool newRunFromHfModel(const QString& dir);
    /// Quits as the Quit action's default does, without asking (SIGTERM, SIGINT): a running
    /// engine is stopped with a final checkpoint first; called again, the engine is killed. The
    /// application then quits, so its control folder is removed.
    void quitGracefully(const QString& why);
    /// Help > Getting started: the first-run guide (non-modal).
    void showGettingStarted();
    /// Help > Documentation (F1): README.md and docs/*.md in a browser, at `page` if given.
    HelpBrowser* showDocumentation(const QString& page = {});
    /// Help > Keyboard shortcuts: every menu shortcut, read from the actions.
    void showShortcuts();

protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    /// A run of the config's run_name already exists: says so before Start and asks (continue it
    /// when its newest checkpoint takes this config, or a new name, or cancel). False: do not
    /// start. The new name is written into the editor.
    bool confirmExistingRun();
    void buildMenus();
    void onStateChanged(RunController::State state);
    /// When the config's mesh asks for another world size, proposes it in the Ranks box (if the
    /// box's value cannot run the mesh, or is smaller).
    void proposeRanks();
    void onFinished(int exitCode, const QString& summary, const QStringList& lastLines);
    /// The run failed: the engine's errors in full and its last lines, in a resizable box.
    void showRunFailed(const QString& summary, const QStringList& lastLines);
    void updateTitle();
    /// Window geometry, docks, plot panels and the editor's session, in QSettings.
    void saveLayout();
    void restoreLayout();
    void savePanels();
    void saveEditorSession();
    /// The centre: the first-run bar above the plots.
    void buildCentre();
    void buildRunsDocks();
    /// The Samples dock: the shown run's samples, and Try it on the selected checkpoint.
    void buildSamplesDock(QDockWidget* besides);
    void showProblem(const QString& title, const QString& text);
    /// The plan to resume from `checkpoint`, or nullopt after telling the user why not.
    std::optional<ResumePlan> resumePlanFor(const QString& checkpoint);
    /// The checkpoints a same-run resume from `plan` sets aside (newer, not abandoned yet).
    QStringList checkpointsSetAsideBy(const ResumePlan& plan) const;
    /// Asks before a resume sets checkpoints aside, naming them (unless none would be, or the user
    /// said not to ask again: Edit > Ask before setting checkpoints aside). False: cancelled.
    bool confirmSetAside(const ResumePlan& plan);

    ConfigEditor* editor_ = nullptr;
    DataDialog* dataDialog_ = nullptr;
    ExportDialog* exportDialog_ = nullptr;
    MetricStore* store_ = nullptr;
    PlotPanel* plots_ = nullptr;
    LogModel* logModel_ = nullptr;
    LogView* logView_ = nullptr;
    RunController* run_ = nullptr;
    RunSession* session_ = nullptr;
    RunsModel* runsModel_ = nullptr;
    RunsPanel* runsPanel_ = nullptr;
    CheckpointsModel* checkpointsModel_ = nullptr;
    CheckpointsPanel* checkpointsPanel_ = nullptr;
    SamplesModel* samplesModel_ = nullptr;
    SamplesPanel* samplesPanel_ = nullptr;
    QString runsRoot_;
    QStringList runErrors_;
    QWidget* firstRunBar_ = nullptr;
    HelpBrowser* helpBrowser_ = nullptr;  ///< the errors the running engine reported
    /// Dock sizes of applyDefaultLayout(), applied once the window has its size (QMainWindow
    /// ignores resizeDocks() before that).
    std::optional<std::pair<QSize, bool>> pendingDockSizes_;  ///< the window's size, compact

    RunToolbar* toolbar_ = nullptr;
    QAction* askBeforeSettingAside_ = nullptr;
    bool closeAfterRun_ = false;
    bool quitApplication_ = false;  // quitGracefully(): quit the application once closed
};

}  // namespace lathe::ui
