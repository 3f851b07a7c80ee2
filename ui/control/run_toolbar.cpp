#include "ui/control/run_toolbar.h"

#include "ui/runs/run_format.h"

#include <QAction>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QSpinBox>
#include <QStyle>

#include <cmath>

namespace lathe::ui {
namespace {

QString stateStyle(RunController::State s) {
    QString color;
    switch (s) {
        case RunController::State::Idle:
            color = QStringLiteral("#757575");
            break;
        case RunController::State::Starting:
        case RunController::State::Checkpointing:
        case RunController::State::Stopping:
            color = QStringLiteral("#ef6c00");
            break;
        case RunController::State::Running:
            color = QStringLiteral("#2e7d32");
            break;
        case RunController::State::Finished:
            color = QStringLiteral("#1565c0");
            break;
        case RunController::State::Failed:
            color = QStringLiteral("#c62828");
            break;
    }
    return QStringLiteral(
               "QLabel { color: white; background: %1; border-radius: 4px; "
               "padding: 2px 8px; font-weight: bold; }")
        .arg(color);
}

QString formatRate(double tokensPerS) {
    if (!std::isfinite(tokensPerS) || tokensPerS <= 0) return QStringLiteral("–");
    if (tokensPerS >= 1e6) return QString::number(tokensPerS / 1e6, 'f', 2) + QStringLiteral("M");
    if (tokensPerS >= 1e3) return QString::number(tokensPerS / 1e3, 'f', 1) + QStringLiteral("k");
    return QString::number(tokensPerS, 'f', 0);
}

}  // namespace

RunToolbar::RunToolbar(RunController* run, int cudaDevices, QWidget* parent)
    : QToolBar(tr("Run"), parent), run_(run) {
    setObjectName(QStringLiteral("runToolbar"));
    setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    build(cudaDevices);
    connect(run_, &RunController::stateChanged, this, &RunToolbar::onStateChanged);
    connect(run_, &RunController::statusReceived, this, &RunToolbar::onStatus);
    connect(run_, &RunController::stopTimedOut, this, [this] {
        kill_->setEnabled(true);
        kill_->setVisible(true);
    });
    // No ETA for a run that is over: the last speed stays, for the record.
    connect(run_, &RunController::finished, this, [this](int, const QString& summary) {
        const bool ok = run_->state() == RunController::State::Finished;
        speed_->setText(lastRate_.isEmpty() ? QString() : tr("  %1 tokens/s").arg(lastRate_));
        if (progress_->maximum() == 0) progress_->setRange(0, 1);
        if (ok && progress_->maximum() > 0) progress_->setValue(progress_->value());
        setProgressText(ok ? tr("%1 · %2").arg(summary, progressText())
                           : tr("failed: %1").arg(summary));
    });
    onStateChanged(run_->state());
}

void RunToolbar::build(int cudaDevices) {
    start_ = new QAction(style()->standardIcon(QStyle::SP_MediaPlay), tr("&Start"), this);
    start_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    start_->setToolTip(tr("Start training with this config (Ctrl+R)"));
    connect(start_, &QAction::triggered, this, &RunToolbar::startRequested);

    checkpoint_ =
        new QAction(style()->standardIcon(QStyle::SP_DriveHDIcon), tr("&Checkpoint now"), this);
    checkpoint_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
    checkpoint_->setToolTip(tr("Save a checkpoint at the next step (Ctrl+K)"));
    connect(checkpoint_, &QAction::triggered, run_, [this] {
        if (run_->isActive())
            run_->requestCheckpoint();
        else if (!followedRun_.isEmpty())
            Q_EMIT controlRequested(followedRun_, QStringLiteral("checkpoint"));
    });

    stop_ = new QAction(style()->standardIcon(QStyle::SP_MediaStop), tr("S&top"), this);
    stop_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
    stop_->setToolTip(tr("Finish the step, save a final checkpoint and exit (Ctrl+.)"));
    connect(stop_, &QAction::triggered, this, &RunToolbar::stopRun);

    kill_ = new QAction(style()->standardIcon(QStyle::SP_BrowserStop), tr("&Kill"), this);
    kill_->setToolTip(tr("End every engine process now (no checkpoint)"));
    connect(kill_, &QAction::triggered, run_, &RunController::kill);

    addAction(start_);
    addWidget(new QLabel(tr(" Ranks: "), this));
    ranks_ = new QSpinBox(this);
    ranks_->setObjectName(QStringLiteral("ranks"));
    ranks_->setRange(1, 1024);
    ranks_->setToolTip(tr("Number of processes (launch.nproc): one per GPU, or CPU processes"));
    addWidget(ranks_);
    if (cudaDevices > 0) {
        addWidget(new QLabel(tr(" CUDA devices: "), this));
        devices_ = new QLineEdit(this);
        devices_->setPlaceholderText(tr("all %1").arg(cudaDevices));
        devices_->setToolTip(tr("CUDA_VISIBLE_DEVICES for the engine, e.g. 0,1"));
        devices_->setMaximumWidth(100);
        addWidget(devices_);
        ranks_->setValue(cudaDevices);
    }
    addSeparator();
    addAction(checkpoint_);
    addAction(stop_);
    addAction(kill_);
    kill_->setVisible(false);
    addSeparator();
    state_ = new QLabel(this);
    state_->setObjectName(QStringLiteral("runState"));
    state_->setToolTip(tr("State of the run"));
    addWidget(state_);
    progress_ = new QProgressBar(this);
    progress_->setObjectName(QStringLiteral("runProgress"));
    progress_->setMinimumWidth(120);
    progress_->setMaximumWidth(240);
    progress_->setRange(0, 1);
    progress_->setValue(0);
    // The text goes beside the bar: drawn on it, part of it sits on the fill and part on the
    // groove, and in many styles one of the two hides it.
    progress_->setTextVisible(false);
    progress_->setMaximumHeight(progress_->fontMetrics().height());
    progressText_ = new QLabel(this);
    progressText_->setObjectName(QStringLiteral("runProgressText"));
    progressText_->setMinimumWidth(progressText_->fontMetrics().horizontalAdvance(
        QStringLiteral("  step 999999 / 999999 (100%)  ")));
    addWidget(new QLabel(QStringLiteral("  "), this));
    addWidget(progress_);
    addWidget(progressText_);
    setProgressText(tr("no run"));
    speed_ = new QLabel(this);
    speed_->setObjectName(QStringLiteral("runSpeed"));
    speed_->setMinimumWidth(speed_->fontMetrics().horizontalAdvance(
        QStringLiteral("  99.9k tokens/s · ETA 99h 59m  ")));
    addWidget(speed_);
}

QString RunToolbar::progressText() const {
    return progressText_->text().trimmed();
}

void RunToolbar::setProgressText(const QString& text) {
    progressText_->setText(QStringLiteral("  ") + text);
    progress_->setToolTip(text);
}

void RunToolbar::fillOptions(RunOptions& options) const {
    options.ranks = ranks_->value();
    if (devices_) options.cudaDevices = devices_->text().trimmed();
}

void RunToolbar::setStartable(bool startable, const QString& why) {
    startable_ = startable;
    notStartableWhy_ = why;
    start_->setEnabled(!run_->isActive() && startable_);
    start_->setToolTip(startable_ ? tr("Start training with this config (Ctrl+R)") : why);
}

void RunToolbar::proposeRanks(int proposed, bool layoutOk) {
    ranks_->setToolTip(
        tr("Number of processes (launch.nproc): one per GPU, or CPU processes. The config's "
           "parallel layout asks for %n rank(s) or a multiple.",
           nullptr, proposed));
    if (proposed == proposedRanks_) return;
    proposedRanks_ = proposed;
    if (!ranks_->isEnabled()) return;
    if (!layoutOk || ranks_->value() < proposed) ranks_->setValue(proposed);
}

void RunToolbar::restoreRanks(int ranks) {
    if (!devices_) ranks_->setValue(ranks);
}

void RunToolbar::beginRun() {
    progress_->setRange(0, 0);
    setProgressText(tr("starting…"));
    speed_->clear();
    lastRate_.clear();
    stopRequested_ = false;
}

void RunToolbar::startFailed() {
    progress_->setRange(0, 1);
    setProgressText(tr("no run"));
}

void RunToolbar::stopRun() {
    if (!run_->isActive() && !followedRun_.isEmpty()) {
        Q_EMIT controlRequested(followedRun_, QStringLiteral("stop"));
        return;
    }
    stopRequested_ = true;
    run_->requestStop(true);
}

void RunToolbar::setFollowedRun(const QString& runDir) {
    if (runDir == followedRun_) return;
    followedRun_ = runDir;
    onStateChanged(run_->state());
}

void RunToolbar::onStateChanged(RunController::State s) {
    // A run ended by Stop says so (issue 34: it showed "finished" beside an ETA).
    state_->setText(s == RunController::State::Finished && stopRequested_
                        ? tr("stopped")
                        : RunController::stateName(s));
    state_->setStyleSheet(stateStyle(s));
    const bool active = run_->isActive();
    setStartable(startable_, notStartableWhy_);
    ranks_->setEnabled(!active);
    if (devices_) devices_->setEnabled(!active);
    checkpoint_->setEnabled(s == RunController::State::Running);
    stop_->setEnabled(s == RunController::State::Starting || s == RunController::State::Running ||
                      s == RunController::State::Checkpointing);
    // A run started elsewhere that the window follows: the buttons go through its folder.
    const bool followed = !active && !followedRun_.isEmpty();
    if (followed) {
        checkpoint_->setEnabled(true);
        stop_->setEnabled(true);
    }
    checkpoint_->setToolTip(followed ? tr("Ask the followed run (started elsewhere) for a "
                                          "checkpoint at its next step, through its folder's "
                                          "control drop-box (Ctrl+K)")
                                     : tr("Save a checkpoint at the next step (Ctrl+K)"));
    stop_->setToolTip(followed ? tr("Ask the followed run (started elsewhere) to stop with a "
                                    "final checkpoint, through its folder's control drop-box "
                                    "(Ctrl+.)")
                               : tr("Finish the step, save a final checkpoint and exit (Ctrl+.)"));
    if (!active) {
        kill_->setEnabled(false);
        kill_->setVisible(false);
    } else if (s != RunController::State::Stopping) {
        kill_->setEnabled(false);
    }
}

void RunToolbar::onStatus(const lathe::protocol::Status& st) {
    if (st.total_steps && *st.total_steps > 0) {
        const int total = static_cast<int>(std::min<int64_t>(*st.total_steps, INT32_MAX));
        progress_->setRange(0, total);
        progress_->setValue(static_cast<int>(std::min<int64_t>(st.step, total)));
        const double pct =
            100.0 * static_cast<double>(st.step) / static_cast<double>(*st.total_steps);
        setProgressText(tr("step %1 / %2 (%3%)")
                            .arg(st.step)
                            .arg(*st.total_steps)
                            .arg(static_cast<int>(std::min(100.0, pct))));
    } else {
        progress_->setRange(0, 0);
        setProgressText(tr("step %1").arg(st.step));
    }
    lastRate_ = formatRate(st.tokens_per_s);
    speed_->setText(tr("  %1 tokens/s · ETA %2")
                        .arg(lastRate_, st.eta_s ? formatSeconds(*st.eta_s) : QStringLiteral("–")));
}

}  // namespace lathe::ui
