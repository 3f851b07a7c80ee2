// RunToolbar: the workbench's run controls over one RunController. Start with the number of ranks
// (and CUDA devices where the driver reports GPUs), Checkpoint now, Stop, Kill once a stop has
// timed out, the run state, a progress bar with step/total beside it, tokens/s and the ETA. The
// window decides whether Start may run (the config's validity and layout: setStartable) and what
// Start does (startRequested); everything else the toolbar does with the controller itself.
#pragma once

#include "engine/protocol/messages.h"
#include "ui/control/run_controller.h"

#include <QToolBar>

class QAction;
class QLabel;
class QLineEdit;
class QProgressBar;
class QSpinBox;

namespace lathe::ui {

class RunToolbar : public QToolBar {
    Q_OBJECT

public:
    /// `cudaDevices`: the GPUs the driver reports (0: no CUDA devices box, one rank by default).
    RunToolbar(RunController* run, int cudaDevices, QWidget* parent = nullptr);

    QAction* startAction() const { return start_; }
    QAction* checkpointAction() const { return checkpoint_; }
    QAction* stopAction() const { return stop_; }
    QAction* killAction() const { return kill_; }
    QSpinBox* ranksBox() const { return ranks_; }
    QLabel* stateLabel() const { return state_; }
    QProgressBar* progressBar() const { return progress_; }
    /// The progress text beside the bar ("step 30 / 60 (50%)").
    QString progressText() const;
    QLabel* speedLabel() const { return speed_; }

    /// The ranks and CUDA devices a run started now gets.
    void fillOptions(RunOptions& options) const;
    /// Whether Start may run when no run is active; `why` is its tooltip when not.
    void setStartable(bool startable, const QString& why);
    /// The ranks the config's mesh asks for: the Ranks box's tooltip says so, and while it is
    /// enabled it takes the value if `layoutOk` is false or it holds fewer.
    void proposeRanks(int proposed, bool layoutOk);
    /// Records the mesh's world size as proposed already, leaving the box as it is (at start).
    void noteProposedRanks(int proposed) { proposedRanks_ = proposed; }
    /// A ranks value restored from the last session (kept only without a CUDA devices box, where
    /// the GPUs decide).
    void restoreRanks(int ranks);
    /// A run is being started: busy bar, "starting…", no speed yet.
    void beginRun();
    /// The start failed: back to "no run".
    void startFailed();
    /// Stop with a final checkpoint, remembering that the user asked (the run then ends
    /// "stopped", not "finished").
    void stopRun();
    /// "failed: …" or "<summary> · <progress>" once the engine has exited.
    void showFinished(bool ok, const QString& summary);
    /// A run started elsewhere (a cluster job, a shell) that the window shows and follows, or
    /// empty: while no run of the window's own is active, Checkpoint now and Stop ask it through
    /// its folder's control drop-box (controlRequested).
    void setFollowedRun(const QString& runDir);
    QString followedRun() const { return followedRun_; }

Q_SIGNALS:
    void startRequested();
    /// Checkpoint now ("checkpoint") or Stop ("stop") for the followed run.
    void controlRequested(const QString& runDir, const QString& command);

private:
    void build(int cudaDevices);
    void onStateChanged(RunController::State state);
    void onStatus(const lathe::protocol::Status& status);
    void setProgressText(const QString& text);

    RunController* run_;
    QString followedRun_;
    QAction* start_ = nullptr;
    QAction* checkpoint_ = nullptr;
    QAction* stop_ = nullptr;
    QAction* kill_ = nullptr;
    QSpinBox* ranks_ = nullptr;
    int proposedRanks_ = 0;  ///< the mesh's world size, as last proposed
    QLineEdit* devices_ = nullptr;
    QLabel* state_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* progressText_ = nullptr;
    QLabel* speed_ = nullptr;
    bool startable_ = true;
    QString notStartableWhy_;
    /// Stop (or a quit that stops) was asked for this run: it ends "stopped", not "finished".
    bool stopRequested_ = false;
    QString lastRate_;  ///< the last tokens/s shown, kept (without an ETA) once the run ends
};

}  // namespace lathe::ui
