// RunSession: which run the plots show and where their points come from. Not a widget: the main
// window and the tests drive the same object.
//
//   startNew()  a fresh run from the GUI: the store is cleared, points come from the control
//   channel. openRun()   a run on disk: its curves from metrics.jsonl (RunMetricsLoader); a run
//   that is
//               still running in another process is followed live from the file.
//   resume()    continue a run from a checkpoint: the run's curve is loaded (if not shown), the
//               points after the checkpoint's step become an abandoned branch, and the engine's
//               live points continue the curve from step + 1. As a new run: the parent's curve up
//               to the checkpoint's step (nothing abandoned), then the new run's points. Live wall
//               times are shifted so the wall-time axis keeps counting from the first line shown.
#pragma once

#include "ui/checkpoints/resume_plan.h"
#include "ui/control/run_controller.h"

#include <QObject>

namespace lathe::ui {

class MetricStore;
class RunMetricsLoader;

class RunSession : public QObject {
    Q_OBJECT

public:
    RunSession(RunController* run, MetricStore* store, QObject* parent = nullptr);

    RunController* run() const { return run_; }
    MetricStore* store() const { return store_; }
    RunMetricsLoader* loader() const { return loader_; }
    /// The run folder shown ("" for a GUI run whose folder is not known yet).
    QString shownRun() const { return shown_; }
    /// Whether the shown run is being followed from its metrics.jsonl.
    bool isFollowing() const;

    /// Starts a fresh run (RunController::start) after clearing the store.
    bool startNew(const lathe::config::Json& config, const RunOptions& options,
                  QString* error = nullptr);
    /// Shows the run in `runDir`; follows it when `follow` (a run still writing). Refused while a
    /// GUI run is active.
    bool openRun(const QString& runDir, bool follow, QString* error = nullptr);
    /// Starts `launch` (ResumePlan::prepareLaunch) from `plan`'s checkpoint.
    bool resume(const ResumePlan& plan, const ResumePlan::Launch& launch, QString* error = nullptr);

Q_SIGNALS:
    void shownRunChanged(const QString& runDir);

private:
    void setShown(const QString& runDir);

    RunController* run_;
    MetricStore* store_;
    RunMetricsLoader* loader_;
    QString shown_;
    double wallOffset_ = 0;  ///< added to live wall times
};

}  // namespace lathe::ui
