// MainWindow: the workbench. The config editor (left dock), the live plots (centre), the log
// (bottom dock) and the run-control toolbar (Start with the number of ranks, Checkpoint now, Stop,
// Kill once a stop has timed out, the run state, a progress bar with step/total, tokens/s, ETA).
// Closing during a run asks first and never leaves an engine process behind. Layout is kept in
// QSettings between sessions.
#pragma once

#include "run/run_controller.h"

#include <QMainWindow>

class QAction;
class QLabel;
class QLineEdit;
class QProgressBar;
class QSpinBox;

namespace lathe::ui {

class ConfigEditor;
class LogModel;
class LogView;
class MetricStore;
class PlotPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    ConfigEditor* editor() const { return editor_; }
    PlotPanel* plots() const { return plots_; }
    MetricStore* store() const { return store_; }
    LogModel* logModel() const { return logModel_; }
    RunController* run() const { return run_; }
    QAction* startAction() const { return start_; }
    QAction* checkpointAction() const { return checkpoint_; }
    QAction* stopAction() const { return stop_; }
    QAction* killAction() const { return kill_; }
    QSpinBox* ranksBox() const { return ranks_; }
    QLabel* stateLabel() const { return state_; }
    QProgressBar* progressBar() const { return progress_; }
    QLabel* speedLabel() const { return speed_; }

    /// Number of CUDA devices the NVIDIA driver reports (0 without one); no CUDA library needed.
    static int cudaDeviceCount();
    /// "4m 05s", "1h 02m", "12s".
    static QString formatDuration(double seconds);

public Q_SLOTS:
    bool startRun();

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildActions();
    void buildToolbar();
    void buildMenus();
    void onStateChanged(RunController::State state);
    void onStatus(const lathe::protocol::Status& status);
    void onFinished(int exitCode, const QString& summary, const QStringList& lastLines);
    void updateTitle();
    void saveLayout();
    void restoreLayout();

    ConfigEditor* editor_ = nullptr;
    MetricStore* store_ = nullptr;
    PlotPanel* plots_ = nullptr;
    LogModel* logModel_ = nullptr;
    LogView* logView_ = nullptr;
    RunController* run_ = nullptr;

    QAction* start_ = nullptr;
    QAction* checkpoint_ = nullptr;
    QAction* stop_ = nullptr;
    QAction* kill_ = nullptr;
    QAction* killInToolbar_ = nullptr;
    QSpinBox* ranks_ = nullptr;
    QLineEdit* devices_ = nullptr;
    QLabel* state_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* speed_ = nullptr;
    bool closeAfterRun_ = false;
};

}  // namespace lathe::ui
