#include "ui/control/run_session.h"

#include "ui/plots/metric_store.h"
#include "ui/runs/run_metrics_loader.h"

#include <QDateTime>
#include <QFileInfo>

#include <cmath>

namespace lathe::ui {

RunSession::RunSession(RunController* run, MetricStore* store, QObject* parent)
    : QObject(parent), run_(run), store_(store), loader_(new RunMetricsLoader(store, this)) {
    connect(run_, &RunController::metricsReceived, this, [this](const lathe::protocol::Metrics& m) {
        if (wallOffset_ == 0) {
            store_->append(m);
            return;
        }
        lathe::protocol::Metrics shifted = m;
        shifted.wall_time += wallOffset_;
        store_->append(shifted);
    });
    connect(run_, &RunController::helloReceived, this, [this](const lathe::protocol::Hello& h) {
        if (!h.run_dir.empty())
            setShown(QFileInfo(QString::fromStdString(h.run_dir)).absoluteFilePath());
    });
}

bool RunSession::isFollowing() const {
    return loader_->isFollowing();
}

void RunSession::setShown(const QString& runDir) {
    if (runDir == shown_) return;
    shown_ = runDir;
    Q_EMIT shownRunChanged(shown_);
}

bool RunSession::startNew(const lathe::config::Json& config, const RunOptions& options,
                          QString* error) {
    if (run_->isActive()) {
        if (error) *error = tr("a run is already in progress");
        return false;
    }
    loader_->close();
    store_->clear();
    wallOffset_ = 0;
    setShown(QString());
    if (!run_->start(config, options)) {
        if (error) *error = run_->errorString();
        return false;
    }
    return true;
}

bool RunSession::openRun(const QString& runDir, bool follow, QString* error) {
    if (run_->isActive()) {
        if (error) *error = tr("a run is in progress: its plots stay until it ends");
        return false;
    }
    if (!loader_->open(runDir, error)) return false;
    loader_->setFollowing(follow);
    wallOffset_ = 0;
    setShown(loader_->runDir());
    return true;
}

bool RunSession::resume(const ResumePlan& plan, const ResumePlan::Launch& launch, QString* error) {
    if (run_->isActive()) {
        if (error) *error = tr("a run is already in progress");
        return false;
    }
    // The curve so far. A new run shows its parent's curve up to the checkpoint (its folder
    // already holds parent.json), exactly as when it is opened later.
    if (launch.mode == ResumePlan::Mode::NewRun) {
        if (!loader_->open(launch.runDir, error)) return false;
    } else if (loader_->runDir() != plan.runDir() || shown_ != plan.runDir()) {
        if (!loader_->open(plan.runDir(), error)) return false;
    } else {
        loader_->poll();  // lines written since it was opened
    }
    loader_->setFollowing(false);
    store_->abandonAfter(static_cast<double>(plan.step()));
    // Live wall times count from the engine's start; the loaded ones from the run's first line.
    const double origin = loader_->wallOrigin();
    wallOffset_ = std::isfinite(origin)
                      ? static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0 - origin
                      : 0;
    loader_->close();
    setShown(launch.runDir);
    if (!run_->start(launch.config, launch.options)) {
        if (error) *error = run_->errorString();
        return false;
    }
    return true;
}

}  // namespace lathe::ui
