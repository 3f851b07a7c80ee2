#include "ui/main_window.h"

#include "ui/checkpoints/checkpoint_info.h"
#include "ui/checkpoints/checkpoints_model.h"
#include "ui/checkpoints/checkpoints_panel.h"
#include "ui/checkpoints/export_dialog.h"
#include "ui/checkpoints/resume_plan.h"
#include "ui/config/config_editor.h"
#include "ui/config/layout_diagram.h"
#include "ui/control/run_session.h"
#include "ui/control/run_toolbar.h"
#include "ui/data/data_dialog.h"
#include "ui/data/mixture_editor.h"
#include "ui/help/help.h"
#include "ui/logs/log_model.h"
#include "ui/logs/log_view.h"
#include "ui/plots/metric_store.h"
#include "ui/plots/plot_panel.h"
#include "ui/runs/compare_view.h"
#include "ui/runs/config_diff.h"
#include "ui/runs/run_info.h"
#include "ui/runs/run_logs.h"
#include "ui/runs/run_metrics_loader.h"
#include "ui/runs/runs_model.h"
#include "ui/runs/runs_panel.h"
#include "ui/samples/samples_model.h"
#include "ui/samples/samples_panel.h"
#include "ui/util/notice_bar.h"

#include "engine/config/memory_estimate.h"
#include "engine/hf/finetune.h"
#include "engine/run_folder/control_requests.h"
#include "engine/run_folder/layout.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QStyle>
#include <QTableWidget>
#include <QTextCursor>
#include <QTimer>
#include <QToolBar>
#include <QUndoStack>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <optional>

namespace lathe::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setObjectName(QStringLiteral("LatheMainWindow"));
    // Control folders of a workbench that was killed (SIGKILL) without removing them.
    for (const QString& dir : RunController::removeStaleFolders())
        qInfo("removed the stale control folder %s", qPrintable(dir));
    store_ = new MetricStore(this);
    logModel_ = new LogModel(this);
    run_ = new RunController(this);
    session_ = new RunSession(run_, store_, this);

    buildCentre();

    auto* editorDock = new QDockWidget(tr("Config"), this);
    editorDock->setObjectName(QStringLiteral("configDock"));
    editor_ = new ConfigEditor(editorDock);
    editorDock->setWidget(editor_);
    addDockWidget(Qt::LeftDockWidgetArea, editorDock);

    auto* logDock = new QDockWidget(tr("Log"), this);
    logDock->setObjectName(QStringLiteral("logDock"));
    logView_ = new LogView(logModel_, logDock);
    logDock->setWidget(logView_);
    addDockWidget(Qt::BottomDockWidgetArea, logDock);

    buildRunsDocks();
    buildSamplesDock(logDock);
    toolbar_ = new RunToolbar(run_, cudaDeviceCount(), this);
    addToolBar(toolbar_);
    connect(toolbar_, &RunToolbar::startRequested, this, &MainWindow::startRun);
    buildMenus();

    connect(run_, &RunController::logLine, logModel_, &LogModel::append);
    connect(run_, &RunController::stateChanged, this, &MainWindow::onStateChanged);
    connect(run_, &RunController::finished, this, &MainWindow::onFinished);
    // Checkpoint now and Stop for a run started elsewhere go through its folder's drop-box.
    connect(toolbar_, &RunToolbar::controlRequested, this,
            [this](const QString& runDir, const QString& command) {
                try {
                    const std::string path = lathe::run_folder::write_control_request(
                        runDir.toStdString(), command == QLatin1String("stop")
                                                  ? lathe::run_folder::ControlCommand::stop
                                                  : lathe::run_folder::ControlCommand::checkpoint);
                    statusBar()->showMessage(tr("Asked %1 to %2 at its next step (%3)")
                                                 .arg(QFileInfo(runDir).fileName(),
                                                      command == QLatin1String("stop")
                                                          ? tr("stop with a final checkpoint")
                                                          : tr("save a checkpoint"),
                                                      QString::fromStdString(path)),
                                             15000);
                } catch (const std::exception& e) {
                    showProblem(tr("Cannot ask the run"), QString::fromUtf8(e.what()));
                }
            });
    connect(run_, &RunController::errorReported, this,
            [this](const QString& message) { runErrors_ << message; });
    connect(run_, &RunController::checkpointSaved, this,
            [this](const lathe::protocol::CheckpointSaved& c) {
                statusBar()->showMessage(tr("Checkpoint of step %1 saved to %2")
                                             .arg(c.step)
                                             .arg(QString::fromStdString(c.path)),
                                         10000);
            });
    connect(run_, &RunController::helloReceived, this, [this](const lathe::protocol::Hello& h) {
        statusBar()->showMessage(
            tr("Engine connected: %1 rank(s) on %2 · run folder %3")
                .arg(h.world_size)
                .arg(QString::fromStdString(h.device), QString::fromStdString(h.run_dir)));
    });
    connect(run_, &RunController::stopTimedOut, this, [this] {
        statusBar()->showMessage(tr("The engine did not stop in time: Kill ends every rank."));
        if (closeAfterRun_) run_->kill();
    });
    connect(editor_, &ConfigEditor::validityChanged, this,
            [this] { onStateChanged(run_->state()); });
    connect(editor_, &ConfigEditor::engineRefusalChanged, this,
            [this] { onStateChanged(run_->state()); });
    // A CPU run's expected peak is checked against this machine's free memory before Start.
    if (cudaDeviceCount() == 0) editor_->setHostMemory(&lathe::config::host_available_memory);
    // The parallel layout is checked against the Ranks box, and the mesh proposes its size there.
    editor_->setWorldSize(toolbar_->ranksBox()->value());
    toolbar_->noteProposedRanks(int(lathe::config::proposed_world_size(editor_->resolvedConfig())));
    connect(toolbar_->ranksBox(), qOverload<int>(&QSpinBox::valueChanged), editor_,
            &ConfigEditor::setWorldSize);
    connect(editor_, &ConfigEditor::parallelLayoutChanged, this, [this] {
        proposeRanks();
        onStateChanged(run_->state());
    });
    connect(editor_, &ConfigEditor::currentFileChanged, this, &MainWindow::updateTitle);
    connect(editor_->undoStack(), &QUndoStack::cleanChanged, this, &MainWindow::updateTitle);

    // The form and the panels survive a restart (saved as they change, so a crash keeps them).
    connect(plots_, &PlotPanel::panelsChanged, this, &MainWindow::savePanels);
    connect(editor_, &ConfigEditor::advancedChanged, this,
            [](bool all) { QSettings().setValue(QStringLiteral("editor/advanced"), all); });
    auto* sessionTimer = new QTimer(this);
    sessionTimer->setSingleShot(true);
    sessionTimer->setInterval(500);
    connect(sessionTimer, &QTimer::timeout, this, &MainWindow::saveEditorSession);
    connect(editor_, &ConfigEditor::documentChanged, sessionTimer, qOverload<>(&QTimer::start));

    onStateChanged(run_->state());
    updateTitle();
    statusBar()->showMessage(tr("Choose a preset or open a config, then press Start."));
    const QScreen* shownOn = screen() ? screen() : QGuiApplication::primaryScreen();
    applyDefaultLayout(shownOn ? shownOn->availableGeometry() : QRect(0, 0, 1366, 768));
    restoreLayout();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildCentre() {
    // The plots, under the first-run bar (shown until dismissed: Help > Getting started keeps
    // the guide).
    auto* centre = new QWidget(this);
    auto* centreLayout = new QVBoxLayout(centre);
    centreLayout->setContentsMargins(0, 0, 0, 0);
    centreLayout->setSpacing(0);
    firstRunBar_ = makeNoticeBar(centre, QStringLiteral("firstRunBar"), QMargins(8, 3, 4, 3));
    auto* barLayout = static_cast<QHBoxLayout*>(firstRunBar_->layout());
    auto* barText = new QLabel(
        tr("New to Lathe? Pick a preset on the left and press Start (Ctrl+R): the loss plots "
           "here as it trains."),
        firstRunBar_);
    barText->setWordWrap(true);
    barLayout->addWidget(barText, 1);
    auto* barGuide = new QPushButton(tr("Getting started"), firstRunBar_);
    barGuide->setObjectName(QStringLiteral("firstRunGuide"));
    barLayout->addWidget(barGuide);
    auto* barClose = new QPushButton(tr("Dismiss"), firstRunBar_);
    barClose->setObjectName(QStringLiteral("firstRunDismiss"));
    barLayout->addWidget(barClose);
    connect(barGuide, &QPushButton::clicked, this, &MainWindow::showGettingStarted);
    connect(barClose, &QPushButton::clicked, this, [this] {
        firstRunBar_->hide();
        QSettings().setValue(QStringLiteral("help/firstRunDismissed"), true);
    });
    firstRunBar_->setVisible(
        !QSettings().value(QStringLiteral("help/firstRunDismissed"), false).toBool());
    centreLayout->addWidget(firstRunBar_);
    plots_ = new PlotPanel(store_, centre);
    centreLayout->addWidget(plots_, 1);
    setCentralWidget(centre);
}

void MainWindow::buildRunsDocks() {
    runsRoot_ = qEnvironmentVariable("LATHE_RUNS_DIR");
    if (runsRoot_.isEmpty()) runsRoot_ = QSettings().value(QStringLiteral("runs/root")).toString();
    if (runsRoot_.isEmpty()) runsRoot_ = defaultRunsRoot();
    runsModel_ = new RunsModel(this);
    runsModel_->setRoot(runsRoot_);
    checkpointsModel_ = new CheckpointsModel(this);

    auto* runsDock = new QDockWidget(tr("Runs"), this);
    runsDock->setObjectName(QStringLiteral("runsDock"));
    runsPanel_ = new RunsPanel(runsModel_, runsDock);
    runsDock->setWidget(runsPanel_);
    addDockWidget(Qt::RightDockWidgetArea, runsDock);

    auto* checkpointsDock = new QDockWidget(tr("Checkpoints"), this);
    checkpointsDock->setObjectName(QStringLiteral("checkpointsDock"));
    checkpointsPanel_ = new CheckpointsPanel(checkpointsModel_, checkpointsDock);
    checkpointsDock->setWidget(checkpointsPanel_);
    addDockWidget(Qt::RightDockWidgetArea, checkpointsDock);

    connect(runsPanel_, &RunsPanel::currentRunChanged, checkpointsModel_,
            &CheckpointsModel::setRunDir);
    connect(runsPanel_, &RunsPanel::openRequested, this, &MainWindow::openRun);
    connect(runsPanel_, &RunsPanel::compareRequested, this, &MainWindow::compareRuns);
    connect(checkpointsPanel_, &CheckpointsPanel::resumeRequested, this,
            [this](const QString& checkpoint, ResumePlan::Mode mode) {
                resumeFromCheckpoint(checkpoint, mode);
            });
    connect(checkpointsPanel_, &CheckpointsPanel::editResumeRequested, this,
            &MainWindow::editResume);
    ResumeBar* bar = checkpointsPanel_->resumeBar();
    connect(editor_, &ConfigEditor::documentChanged, bar, [this, bar] {
        if (bar->hasPlan()) bar->setEditedConfig(editor_->resolvedJson());
    });
    connect(bar, &ResumeBar::resumeRequested, this,
            [this, bar](ResumePlan::Mode mode, const QString& name, int ranks) {
                if (!bar->hasPlan()) return;
                if (!editor_->isValid()) {
                    showProblem(tr("The config has problems"),
                                tr("Fix the config's problems first."));
                    return;
                }
                if (resumeFromCheckpoint(bar->plan().checkpointDir(), mode, name,
                                         editor_->resolvedJson(), ranks))
                    bar->clearPlan();
            });
    // Keep the shown run selected in the Runs dock, also when its folder only becomes a run
    // folder after the engine started.
    auto selectShown = [this] {
        const QString dir = session_->shownRun();
        if (!dir.isEmpty() && runsPanel_->currentRun() != dir) runsPanel_->selectRun(dir);
    };
    connect(session_, &RunSession::shownRunChanged, this, [this, selectShown] {
        runsModel_->refresh();
        selectShown();
    });
    // A shown run that is running in another process (a cluster job, a shell): the toolbar's
    // Checkpoint now and Stop reach it through its folder (re-checked as the runs refresh).
    auto updateFollowed = [this] {
        if (!toolbar_) return;  // (the toolbar is made after the docks)
        const QString dir = session_->shownRun();
        const bool followed = !run_->isActive() && !dir.isEmpty() && session_->isFollowing() &&
                              readRunInfo(dir).state == RunState::Running;
        toolbar_->setFollowedRun(followed ? dir : QString());
    };
    connect(session_, &RunSession::shownRunChanged, this, updateFollowed);
    connect(runsModel_, &QAbstractItemModel::dataChanged, this, updateFollowed);
    connect(runsModel_, &QAbstractItemModel::modelReset, this, updateFollowed);
    connect(run_, &RunController::stateChanged, this, updateFollowed);
    connect(runsModel_, &QAbstractItemModel::rowsInserted, this,
            [this, selectShown](const QModelIndex&, int first, int last) {
                for (int row = first; row <= last; ++row)
                    if (runsModel_->run(row).path == session_->shownRun()) selectShown();
            });
}

namespace {

// Whether the run of `path` (a run folder or one of its checkpoints) has a text form: byte
// tokens, or a tokenizer (dataset.tokenizer), from the config.json found there or in the folder
// above.
bool tokensHaveText(const QString& path) {
    for (const QString& dir : {path, QFileInfo(path).absolutePath()}) {
        lathe::config::Json config;
        if (!readJsonFile(runFile(dir, run_folder::kConfigFile), config) || !config.is_object())
            continue;
        const auto dataset = config.value("dataset", lathe::config::Json::object());
        if (!dataset.is_object()) return true;
        const auto tokenizer = dataset.value("tokenizer", lathe::config::Json());
        return dataset.value("source", std::string("builtin")) != "numpy" ||
               (tokenizer.is_string() && !tokenizer.get<std::string>().empty());
    }
    return true;
}

}  // namespace

void MainWindow::buildSamplesDock(QDockWidget* besides) {
    samplesModel_ = new SamplesModel(this);
    auto* dock = new QDockWidget(tr("Samples"), this);
    dock->setObjectName(QStringLiteral("samplesDock"));
    samplesPanel_ = new SamplesPanel(samplesModel_, dock);
    dock->setWidget(samplesPanel_);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    tabifyDockWidget(besides, dock);
    besides->raise();
    auto updateSource = [this] {
        QString source = checkpointsPanel_->currentCheckpoint();
        if (source.isEmpty()) source = checkpointsModel_->runDir();
        samplesPanel_->setModelSource(source, source.isEmpty() || tokensHaveText(source));
    };
    connect(session_, &RunSession::shownRunChanged, this, [this, updateSource](const QString& dir) {
        if (dir.isEmpty())
            samplesModel_->clear();
        else if (dir != samplesModel_->runDir())
            samplesModel_->loadRun(dir);
        updateSource();
    });
    connect(checkpointsPanel_, &CheckpointsPanel::currentCheckpointChanged, this, updateSource);
    connect(run_, &RunController::samplesReceived, this, [this](const lathe::protocol::Samples& s) {
        QVector<SamplesModel::Sample> samples;
        for (const auto& x : s.samples)
            samples.push_back({QString::fromStdString(x.prompt), QString::fromStdString(x.text)});
        samplesModel_->addStep(s.step, samples);
    });
}

void MainWindow::setRunsRoot(const QString& root) {
    runsRoot_ = root;
    runsModel_->setRoot(root);
    checkpointsModel_->setRunDir(QString());
}

void MainWindow::showProblem(const QString& title, const QString& text) {
    statusBar()->showMessage(text, 15000);
    auto* box = new QMessageBox(QMessageBox::Warning, title, text, QMessageBox::Ok, this);
    box->setObjectName(QStringLiteral("problemBox"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

bool MainWindow::openRun(const QString& runDir) {
    const RunInfo info = readRunInfo(runDir);
    if (!editor_->confirmReplace(tr("run %1").arg(QFileInfo(runDir).fileName()))) return false;
    QString error;
    if (!session_->openRun(runDir, info.state == RunState::Running, &error)) {
        showProblem(tr("Cannot open the run"), error);
        return false;
    }
    lathe::config::Json config;
    if (readJsonFile(runFile(runDir, run_folder::kConfigFile), config) && config.is_object()) {
        // Where it lives is the engine's business: a new name then starts a new folder.
        if (config.contains("trainer") && config["trainer"].is_object())
            config["trainer"]["save_folder"] = "";
        editor_->setDocument(config, tr("run %1").arg(QFileInfo(runDir).fileName()));
    }
    logModel_->clear();
    const int lines = loadRunLogs(runDir, logModel_);
    checkpointsModel_->setRunDir(runDir);
    runsPanel_->selectRun(runDir);
    statusBar()->showMessage(
        tr("Showing run %1 (%2)%3 · %4 log lines")
            .arg(info.name, runStateName(info.state),
                 session_->isFollowing() ? tr(", following it live") : QString())
            .arg(lines),
        15000);
    return true;
}

QStringList MainWindow::checkpointsSetAsideBy(const ResumePlan& plan) const {
    QStringList names;
    if (isRemotePath(plan.checkpointDir())) {
        for (int row = 0; row < checkpointsModel_->rowCount(); ++row) {
            const CheckpointInfo c = checkpointsModel_->checkpoint(row);
            if (c.step > plan.step() && !c.abandoned) names << c.name;
        }
        return names;
    }
    for (const CheckpointInfo& c : scanCheckpoints(plan.runDir()))
        if (c.step > plan.step() && !c.abandoned && c.status != CheckpointInfo::Status::Unusable)
            names << c.name;
    return names;
}

bool MainWindow::confirmSetAside(const ResumePlan& plan) {
    const QStringList names = checkpointsSetAsideBy(plan);
    if (names.isEmpty() || !askBeforeSettingAside_->isChecked()) return true;
    QMessageBox box(QMessageBox::Question, tr("Resume from step %1?").arg(plan.step()),
                    tr("Resuming %1 from step %2 sets its newer checkpoints aside as abandoned: "
                       "%3.")
                        .arg(plan.runName())
                        .arg(plan.step())
                        .arg(names.join(QStringLiteral(", "))),
                    QMessageBox::NoButton, this);
    box.setObjectName(QStringLiteral("confirmSetAside"));
    box.setInformativeText(
        tr("They are renamed (step30 becomes step30.abandoned), kept on disk and still listed, "
           "and their curve is drawn faintly; you can resume from them later. To keep this run "
           "as it is, use Resume as new run instead."));
    auto* resume = box.addButton(tr("Resume"), QMessageBox::AcceptRole);
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(resume);
    auto* dontAsk = new QCheckBox(tr("Don't ask again"), &box);
    box.setCheckBox(dontAsk);
    box.exec();
    if (box.clickedButton() != resume) return false;
    if (dontAsk->isChecked()) askBeforeSettingAside_->setChecked(false);
    return true;
}

bool MainWindow::resumeFromCheckpoint(const QString& checkpoint, ResumePlan::Mode mode,
                                      const QString& newRunName,
                                      const std::optional<lathe::config::Json>& config, int ranks) {
    const auto plan = resumePlanFor(checkpoint);
    if (!plan) return false;
    if (mode == ResumePlan::Mode::SameRun && !confirmSetAside(*plan)) return false;
    QString error;
    const QString name = newRunName.isEmpty() ? ResumePlan::suggestNewRunName(
                                                    plan->runsRoot(), plan->runName(), plan->step())
                                              : newRunName;
    const auto launch = plan->prepareLaunch(config ? *config : plan->baseConfig(), mode, name,
                                            ranks > 0 ? ranks : plan->worldSize(), &error);
    if (!launch) {
        showProblem(tr("Cannot resume"), error);
        return false;
    }
    toolbar_->beginRun();
    if (!session_->resume(*plan, *launch, &error)) {
        toolbar_->startFailed();
        showProblem(tr("Cannot resume"), error);
        return false;
    }
    checkpointsModel_->setRunDir(launch->runDir);
    statusBar()->showMessage(
        mode == ResumePlan::Mode::SameRun
            ? tr("Resuming %1 from step %2").arg(plan->runName()).arg(plan->step())
            : tr("Starting %1 from %2 step %3")
                  .arg(QFileInfo(launch->runDir).fileName(), plan->runName())
                  .arg(plan->step()),
        10000);
    return true;
}

std::optional<ResumePlan> MainWindow::resumePlanFor(const QString& checkpoint) {
    if (run_->isActive()) {
        showProblem(tr("Cannot resume"), tr("A run is in progress."));
        return std::nullopt;
    }
    QString error;
    std::optional<ResumePlan> plan;
    if (isRemotePath(checkpoint)) {
        const int row = checkpointsModel_->rowOf(checkpoint);
        plan = row < 0 ? std::nullopt
                       : ResumePlan::fromRemoteCheckpoint(checkpointsModel_->checkpoint(row),
                                                          checkpointsModel_->runDir(), &error);
        if (row < 0) error = tr("%1 is no longer listed").arg(checkpoint);
    } else {
        plan = ResumePlan::fromCheckpoint(checkpoint, &error);
    }
    if (!plan) showProblem(tr("Cannot resume"), error);
    return plan;
}

bool MainWindow::editResume(const QString& checkpoint) {
    const auto plan = resumePlanFor(checkpoint);
    if (!plan) return false;
    const QString name = tr("resume from %1").arg(QDir::toNativeSeparators(checkpoint));
    if (!editor_->confirmReplace(name)) return false;
    editor_->setDocument(plan->baseConfig(), name);
    checkpointsPanel_->resumeBar()->setPlan(*plan);
    checkpointsPanel_->resumeBar()->setEditedConfig(editor_->resolvedJson());
    return true;
}

CompareView* MainWindow::compareRuns(const QStringList& runDirs) {
    auto* dialog = new QDialog(this);
    dialog->setObjectName(QStringLiteral("compareDialog"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    QStringList names;
    for (const QString& d : runDirs) names << QFileInfo(d).fileName();
    dialog->setWindowTitle(tr("Compare runs: %1").arg(names.join(QStringLiteral(", "))));
    auto* comparison = new RunComparison(dialog);
    comparison->setSmoothingWeight(store_->smoothingWeight());
    comparison->setRuns(runDirs);
    auto* view = new CompareView(comparison, dialog);
    auto* layout = new QVBoxLayout(dialog);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(view);
    dialog->resize(1000, 720);
    dialog->show();
    return view;
}

bool MainWindow::newRunFromHfModel(const QString& dir) {
    lathe::config::Json doc;
    try {
        doc = lathe::hf::finetune_document(dir.toStdString());
    } catch (const std::exception& e) {
        showProblem(tr("Cannot fine-tune this model"), QString::fromStdString(e.what()));
        return false;
    }
    const QString name = tr("fine-tune of %1").arg(QFileInfo(dir).fileName());
    if (!editor_->confirmReplace(name)) return false;
    editor_->setDocument(doc, name);
    statusBar()->showMessage(
        tr("New run from %1: give dataset.paths (token files made with its tokenizer), then "
           "Start.")
            .arg(dir),
        15000);
    return true;
}

DataDialog* MainWindow::showDataDialog() {
    if (!dataDialog_) {
        dataDialog_ = new DataDialog(this);
        connect(dataDialog_, &DataDialog::applyToConfig, this,
                [this](const QVector<std::pair<QString, lathe::config::Json>>& changes) {
                    for (const auto& [path, value] : changes) editor_->editField(path, value);
                });
        dataDialog_->mixtureEditor()->setConfigProvider([this] { return editor_->document(); });
    }
    dataDialog_->mixtureEditor()->loadFromConfig(editor_->document());
    dataDialog_->show();
    dataDialog_->raise();
    return dataDialog_;
}

ExportDialog* MainWindow::showExportDialog() {
    if (!exportDialog_) exportDialog_ = new ExportDialog(this);
    // The checkpoint selected in the dock, else the shown run's newest complete one.
    QString checkpoint = checkpointsPanel_->currentCheckpoint();
    if (checkpoint.isEmpty())
        for (int row = checkpointsModel_->rowCount() - 1; row >= 0 && checkpoint.isEmpty(); --row)
            if (checkpointsModel_->checkpoint(row).canResume())
                checkpoint = checkpointsModel_->checkpoint(row).path;
    if (!checkpoint.isEmpty() && !exportDialog_->isRunning())
        exportDialog_->setCheckpoint(checkpoint);
    exportDialog_->show();
    exportDialog_->raise();
    return exportDialog_;
}

void MainWindow::buildMenus() {
    auto* file = menuBar()->addMenu(tr("&File"));
    auto* open = file->addAction(tr("&Open config…"), editor_, &ConfigEditor::openInteractive);
    open->setShortcut(QKeySequence::Open);
    auto* save = file->addAction(tr("&Save config"), editor_, &ConfigEditor::saveInteractive);
    save->setShortcut(QKeySequence::Save);
    auto* saveAs =
        file->addAction(tr("Save config &as…"), editor_, &ConfigEditor::saveAsInteractive);
    saveAs->setShortcut(QKeySequence::SaveAs);
    file->addAction(tr("New run from a &Hugging Face model…"), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(
            this, tr("Hugging Face model folder (config.json, model.safetensors)"));
        if (!dir.isEmpty()) newRunFromHfModel(dir);
    });
    file->addSeparator();
    file->addAction(tr("Prepare &data…"), this, &MainWindow::showDataDialog);
    file->addAction(tr("&Export to Hugging Face…"), this, &MainWindow::showExportDialog);
    file->addSeparator();
    file->addAction(tr("Export plots as &PNG or SVG…"), plots_, &PlotPanel::exportImageInteractive);
    file->addAction(tr("Export metrics as &CSV…"), plots_, &PlotPanel::exportCsvInteractive);
    file->addSeparator();
    file->addAction(tr("R&uns folder…"), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Runs folder"), runsRoot_);
        if (dir.isEmpty()) return;
        QSettings().setValue(QStringLiteral("runs/root"), dir);
        setRunsRoot(dir);
    });
    file->addSeparator();
    auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    auto* edit = menuBar()->addMenu(tr("&Edit"));
    auto* undo = editor_->undoStack()->createUndoAction(this, tr("&Undo"));
    undo->setShortcut(QKeySequence::Undo);
    auto* redo = editor_->undoStack()->createRedoAction(this, tr("&Redo"));
    redo->setShortcut(QKeySequence::Redo);
    edit->addAction(undo);
    edit->addAction(redo);

    auto* run = menuBar()->addMenu(tr("&Run"));
    run->addAction(toolbar_->startAction());
    run->addAction(toolbar_->checkpointAction());
    run->addAction(toolbar_->stopAction());
    run->addAction(toolbar_->killAction());

    edit->addSeparator();
    askBeforeSettingAside_ = edit->addAction(tr("Ask before setting checkpoints aside"));
    askBeforeSettingAside_->setObjectName(QStringLiteral("askBeforeSettingAside"));
    askBeforeSettingAside_->setCheckable(true);
    askBeforeSettingAside_->setChecked(
        QSettings().value(QStringLiteral("resume/askBeforeSettingAside"), true).toBool());
    connect(askBeforeSettingAside_, &QAction::toggled, this, [](bool on) {
        QSettings().setValue(QStringLiteral("resume/askBeforeSettingAside"), on);
    });

    auto* view = menuBar()->addMenu(tr("&View"));
    for (auto* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
    view->addAction(tr("&Reset plot view"), plots_, &PlotPanel::resetView);
    view->addAction(tr("Reset &layout"), this, [this] {
        const QScreen* shownOn = screen() ? screen() : QGuiApplication::primaryScreen();
        applyDefaultLayout(shownOn ? shownOn->availableGeometry() : geometry());
    });

    auto* help = menuBar()->addMenu(tr("&Help"));
    auto* guide = help->addAction(tr("&Getting started"), this, &MainWindow::showGettingStarted);
    guide->setObjectName(QStringLiteral("helpGettingStarted"));
    auto* docs = help->addAction(tr("&Documentation"), this, [this] { showDocumentation(); });
    docs->setObjectName(QStringLiteral("helpDocumentation"));
    docs->setShortcut(QKeySequence::HelpContents);
    auto* keys = help->addAction(tr("&Keyboard shortcuts"), this, &MainWindow::showShortcuts);
    keys->setObjectName(QStringLiteral("helpShortcuts"));
    help->addSeparator();
    help->addAction(tr("&About Lathe"), this, [this] {
        QMessageBox::about(
            this, tr("About Lathe"),
            tr("<b>Lathe %1</b> (git %2)<br>A desktop workbench for training language models.<br>"
               "Engine: %3<br>Free software under the GNU GPL, version 3 or later.")
                .arg(QString::fromLatin1(lathe::config::version()),
                     QString::fromLatin1(lathe::config::git_revision()), findEngine()));
    });
}

bool MainWindow::isCompact(const QSize& available) {
    return available.width() < 1700 || available.height() < 1000;
}

void MainWindow::applyDefaultLayout(const QRect& available) {
    auto* editorDock = findChild<QDockWidget*>(QStringLiteral("configDock"));
    auto* logDock = findChild<QDockWidget*>(QStringLiteral("logDock"));
    auto* samplesDock = findChild<QDockWidget*>(QStringLiteral("samplesDock"));
    auto* runsDock = findChild<QDockWidget*>(QStringLiteral("runsDock"));
    auto* checkpointsDock = findChild<QDockWidget*>(QStringLiteral("checkpointsDock"));
    const bool compact = isCompact(available.size());
    const QSize size = compact ? available.size()
                               : QSize(std::min(1840, available.width() * 9 / 10),
                                       std::min(1120, available.height() * 9 / 10));
    // The editor is tall: it takes the left edge from the toolbar to the status bar.
    setCorner(Qt::TopLeftCorner, Qt::LeftDockWidgetArea);
    setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
    for (auto* dock : {editorDock, logDock, samplesDock, runsDock, checkpointsDock}) {
        dock->setFloating(false);
        dock->show();
    }
    addDockWidget(Qt::LeftDockWidgetArea, editorDock);
    if (compact) {
        setCorner(Qt::TopRightCorner, Qt::TopDockWidgetArea);
        setCorner(Qt::BottomRightCorner, Qt::BottomDockWidgetArea);
        for (auto* dock : {logDock, samplesDock, runsDock, checkpointsDock})
            addDockWidget(Qt::BottomDockWidgetArea, dock);
        tabifyDockWidget(logDock, samplesDock);
        tabifyDockWidget(samplesDock, runsDock);
        tabifyDockWidget(runsDock, checkpointsDock);
    } else {
        setCorner(Qt::TopRightCorner, Qt::RightDockWidgetArea);
        setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
        addDockWidget(Qt::BottomDockWidgetArea, logDock);
        addDockWidget(Qt::BottomDockWidgetArea, samplesDock);
        tabifyDockWidget(logDock, samplesDock);
        addDockWidget(Qt::RightDockWidgetArea, runsDock);
        addDockWidget(Qt::RightDockWidgetArea, checkpointsDock);
        splitDockWidget(runsDock, checkpointsDock, Qt::Vertical);
    }
    logDock->raise();
    // After the docks moved: the window cannot be smaller than its layout's minimum, which was
    // wider with the Runs docks on the right.
    setWindowState(windowState() & ~(Qt::WindowMaximized | Qt::WindowFullScreen));
    layout()->activate();
    setGeometry(QStyle::alignedRect(Qt::LeftToRight, Qt::AlignCenter, size, available));
    pendingDockSizes_ = std::make_pair(size, compact);
    if (isVisible()) QTimer::singleShot(0, this, [this] { showEvent(nullptr); });
}

void MainWindow::showEvent(QShowEvent* event) {
    if (event) QMainWindow::showEvent(event);
    if (!pendingDockSizes_) return;
    const auto [size, compact] = *pendingDockSizes_;
    pendingDockSizes_.reset();
    auto* editorDock = findChild<QDockWidget*>(QStringLiteral("configDock"));
    auto* logDock = findChild<QDockWidget*>(QStringLiteral("logDock"));
    auto* runsDock = findChild<QDockWidget*>(QStringLiteral("runsDock"));
    resizeDocks({editorDock}, {std::clamp(size.width() * 28 / 100, 380, 480)}, Qt::Horizontal);
    resizeDocks({logDock}, {std::clamp(size.height() * 6 / 25, 176, 280)}, Qt::Vertical);
    if (!compact)
        resizeDocks({runsDock}, {std::clamp(size.width() * 27 / 100, 420, 560)}, Qt::Horizontal);
}

void MainWindow::showGettingStarted() {
    QMessageBox* box = findChild<QMessageBox*>(QStringLiteral("gettingStartedBox"));
    if (!box) {
        box = new QMessageBox(QMessageBox::Information, tr("Getting started"), gettingStartedHtml(),
                              QMessageBox::Close, this);
        box->setObjectName(QStringLiteral("gettingStartedBox"));
        box->setTextFormat(Qt::RichText);
        box->setWindowModality(Qt::NonModal);
        box->setAttribute(Qt::WA_DeleteOnClose);
    }
    box->show();
    box->raise();
}

HelpBrowser* MainWindow::showDocumentation(const QString& page) {
    if (!helpBrowser_) helpBrowser_ = new HelpBrowser(docsFolder(), this);
    if (!page.isEmpty()) helpBrowser_->showPage(page);
    helpBrowser_->show();
    helpBrowser_->raise();
    return helpBrowser_;
}

void MainWindow::showShortcuts() {
    QDialog* box = findChild<QDialog*>(QStringLiteral("shortcutsBox"));
    if (!box) {
        box = new QDialog(this);
        box->setObjectName(QStringLiteral("shortcutsBox"));
        box->setWindowTitle(tr("Keyboard shortcuts"));
        box->setAttribute(Qt::WA_DeleteOnClose);
        auto* layout = new QVBoxLayout(box);
        const auto rows = shortcutRows(menuBar());
        auto* table = new QTableWidget(int(rows.size()), 2, box);
        table->setObjectName(QStringLiteral("shortcutsTable"));
        table->setHorizontalHeaderLabels({tr("Command"), tr("Keys")});
        table->verticalHeader()->hide();
        table->setEditTriggers(QAbstractItemView::NoEditTriggers);
        table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
        table->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
        for (int i = 0; i < rows.size(); ++i) {
            table->setItem(i, 0, new QTableWidgetItem(rows[i].first));
            table->setItem(i, 1, new QTableWidgetItem(rows[i].second));
        }
        layout->addWidget(table);
        layout->addWidget(new QLabel(
            tr("Plots: drag to pan, the wheel to zoom, double-click to fit all data. Number "
               "fields take the wheel only once clicked."),
            box));
        auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, box);
        connect(buttons, &QDialogButtonBox::rejected, box, &QDialog::reject);
        layout->addWidget(buttons);
        box->resize(520, 480);
    }
    box->show();
    box->raise();
}

int MainWindow::cudaDeviceCount() {
    return static_cast<int>(QDir(QStringLiteral("/proc/driver/nvidia/gpus"))
                                .entryList(QDir::Dirs | QDir::NoDotAndDotDot)
                                .size());
}

void MainWindow::proposeRanks() {
    toolbar_->proposeRanks(int(lathe::config::proposed_world_size(editor_->resolvedConfig())),
                           editor_->parallelLayout().ok());
}

bool MainWindow::startRun() {
    if (run_->isActive()) return false;
    if (const auto& layout = editor_->parallelLayout(); !layout.ok()) {
        QStringList lines;
        for (const auto& p : layout.problems) lines << QString::fromStdString(p);
        QMessageBox::warning(this, tr("The parallel layout cannot run"),
                             tr("On %n rank(s):\n\n%1", nullptr, toolbar_->ranksBox()->value())
                                 .arg(lines.join(QLatin1Char('\n'))));
        return false;
    }
    if (!editor_->isValid()) {
        QStringList lines;
        for (const auto& i : editor_->issues()) lines << QString::fromStdString(i.to_string());
        QMessageBox::warning(
            this, tr("The config has problems"),
            tr("Fix these before starting:\n\n%1").arg(lines.join(QLatin1Char('\n'))));
        return false;
    }
    if (!confirmExistingRun()) return false;
    RunOptions options;
    toolbar_->fillOptions(options);
    options.runsDir = runsRoot_;
    toolbar_->beginRun();
    QString error;
    if (!session_->startNew(editor_->resolvedJson(), options, &error)) {
        toolbar_->startFailed();
        QMessageBox::critical(this, tr("Cannot start"), error);
        return false;
    }
    QSettings().setValue(QStringLiteral("run/ranks"), toolbar_->ranksBox()->value());
    return true;
}

bool MainWindow::confirmExistingRun() {
    const QString name = QString::fromStdString(editor_->resolvedConfig().run_name);
    const QDir root(runsRoot_);
    const QString runDir = root.filePath(name);
    if (name.isEmpty() || !isRunFolder(runDir)) return true;
    // What Start would do: the engine continues a run folder from its newest checkpoint.
    std::optional<CheckpointInfo> newest;
    for (const CheckpointInfo& c : scanCheckpoints(runDir))
        if (c.canResume() && (!newest || c.step > newest->step)) newest = c;
    QString refusal;
    if (newest) {
        QString error;
        const auto plan = ResumePlan::fromCheckpoint(newest->path, &error);
        refusal = plan ? plan->refusal(editor_->resolvedJson()) : error;
    }
    QString fresh;
    for (int k = 2; fresh.isEmpty() || QFileInfo::exists(root.filePath(fresh)); ++k)
        fresh = QStringLiteral("%1-%2").arg(name).arg(k);

    QMessageBox box(QMessageBox::Question, tr("The run %1 exists").arg(name), QString(),
                    QMessageBox::NoButton, this);
    box.setObjectName(QStringLiteral("existingRunBox"));
    QPushButton* keep = nullptr;
    if (!newest) {
        box.setText(tr("A run named %1 is already in %2, without a checkpoint.")
                        .arg(name, QDir::toNativeSeparators(runsRoot_)));
        box.setInformativeText(
            tr("Start would train from scratch into its folder, after its "
               "earlier metrics and logs."));
        keep = box.addButton(tr("Use its folder"), QMessageBox::AcceptRole);
    } else if (refusal.isEmpty()) {
        box.setText(
            tr("A run named %1 is already in %2.").arg(name, QDir::toNativeSeparators(runsRoot_)));
        box.setInformativeText(
            tr("Start continues it from its newest checkpoint, step %1.").arg(newest->step));
        keep = box.addButton(tr("Continue it"), QMessageBox::AcceptRole);
    } else {
        box.setIcon(QMessageBox::Warning);
        box.setText(tr("A run named %1 is already in %2, and this config cannot continue it from "
                       "its newest checkpoint (step %3):")
                        .arg(name, QDir::toNativeSeparators(runsRoot_))
                        .arg(newest->step));
        box.setInformativeText(refusal);  // in full, not behind "Show Details"
    }
    auto* rename = box.addButton(tr("Start as %1").arg(fresh), QMessageBox::ActionRole);
    rename->setObjectName(QStringLiteral("newRunNameButton"));
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(keep ? keep : rename);
    box.exec();
    if (box.clickedButton() == rename) {
        editor_->editField(QStringLiteral("run_name"), fresh.toStdString());
        return editor_->isValid();
    }
    return keep && box.clickedButton() == keep;
}

void MainWindow::onStateChanged(RunController::State state) {
    if (state == RunController::State::Starting) runErrors_.clear();
    const bool active = run_->isActive();
    const bool layoutOk = editor_->parallelLayout().ok();
    // Start is off whenever the window already knows the engine would refuse (issue 45 item 4).
    const QString refusal = editor_->engineRefusal();
    toolbar_->setStartable(editor_->isValid() && layoutOk && refusal.isEmpty(),
                           !editor_->isValid() ? tr("Fix the config's problems first")
                           : !layoutOk         ? editor_->layoutDiagram()->text()
                                       : tr("The engine will refuse this run: %1").arg(refusal));
    editor_->setEnabled(!active);
    checkpointsPanel_->resumeBar()->setEnabled(!active);
    checkpointsPanel_->setRunActive(active);
    if (!active) {
        runsModel_->refresh();
        checkpointsModel_->refresh();
    }
}

void MainWindow::showRunFailed(const QString& summary, const QStringList& lastLines) {
    // The engine's reason in full, in the open (issue 45 item 4: it hid behind "Show Details…" in
    // a narrow box): what it reported as errors, else the error lines of its output.
    QStringList reasons = runErrors_;
    if (reasons.isEmpty())
        for (const QString& line : lastLines)
            if (line.contains(QLatin1String("error"), Qt::CaseInsensitive)) reasons << line;
    reasons.removeDuplicates();
    auto* box = new QDialog(this);
    box->setObjectName(QStringLiteral("runFailedBox"));
    box->setWindowTitle(tr("The run failed"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    auto* layout = new QVBoxLayout(box);
    auto* head = new QHBoxLayout;
    auto* icon = new QLabel(box);
    icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxWarning).pixmap(32, 32));
    head->addWidget(icon, 0, Qt::AlignTop);
    auto* text = new QVBoxLayout;
    auto* title = new QLabel(tr("<b>The engine %1.</b>").arg(summary.toHtmlEscaped()), box);
    text->addWidget(title);
    auto* reason = new QLabel(box);
    reason->setObjectName(QStringLiteral("runFailedReason"));
    reason->setWordWrap(true);
    reason->setTextInteractionFlags(Qt::TextSelectableByMouse);
    reason->setText(reasons.isEmpty() ? tr("It reported no error; its last lines are below.")
                                      : reasons.join(QLatin1Char('\n')));
    text->addWidget(reason);
    head->addLayout(text, 1);
    layout->addLayout(head);
    layout->addWidget(new QLabel(tr("Its last lines (also in the log):"), box));
    auto* output = new QPlainTextEdit(box);
    output->setObjectName(QStringLiteral("runFailedOutput"));
    output->setReadOnly(true);
    output->setLineWrapMode(QPlainTextEdit::NoWrap);
    output->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    output->setPlainText(lastLines.join(QLatin1Char('\n')));
    output->moveCursor(QTextCursor::End);
    layout->addWidget(output, 1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok, box);
    connect(buttons, &QDialogButtonBox::accepted, box, &QDialog::accept);
    layout->addWidget(buttons);
    const QRect room = screen() ? screen()->availableGeometry() : QRect(0, 0, 1366, 768);
    box->resize(QSize(820, 460).boundedTo(room.size() - QSize(40, 60)));
    box->open();
}

void MainWindow::onFinished(int exitCode, const QString& summary, const QStringList& lastLines) {
    const bool ok = run_->state() == RunController::State::Finished;
    statusBar()->showMessage(tr("Engine %1 (exit code %2)").arg(summary).arg(exitCode));
    if (closeAfterRun_) {
        close();
        return;
    }
    if (!ok) showRunFailed(summary, lastLines);
}

void MainWindow::updateTitle() {
    setWindowTitle(tr("%1[*] — Lathe").arg(editor_->documentName()));
    setWindowModified(editor_->isModified());
}

void MainWindow::quitGracefully(const QString& why) {
    quitApplication_ = true;
    if (!run_->isActive()) {
        close();
        return;
    }
    if (closeAfterRun_) {  // asked again while stopping: do not wait any longer
        statusBar()->showMessage(tr("%1 again: killing the engine").arg(why));
        run_->kill();
        return;
    }
    statusBar()->showMessage(
        tr("%1: stopping the engine (final checkpoint), then quitting").arg(why));
    closeAfterRun_ = true;
    if (run_->state() != RunController::State::Stopping) toolbar_->stopRun();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    if (!run_->isActive()) {
        saveLayout();
        event->accept();
        if (quitApplication_) QTimer::singleShot(0, qApp, &QCoreApplication::quit);
        return;
    }
    if (closeAfterRun_) {  // already stopping on the way out
        event->ignore();
        return;
    }
    QMessageBox box(QMessageBox::Question, tr("A run is in progress"),
                    tr("Training is still running. Stop it before quitting?"),
                    QMessageBox::NoButton, this);
    box.setInformativeText(
        tr("Stop finishes the step and saves a final checkpoint; Kill ends "
           "every engine process at once."));
    auto* stopButton = box.addButton(tr("Stop and quit"), QMessageBox::AcceptRole);
    auto* killButton = box.addButton(tr("Kill and quit"), QMessageBox::DestructiveRole);
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(stopButton);
    box.exec();
    if (box.clickedButton() == stopButton) {
        closeAfterRun_ = true;
        if (run_->state() != RunController::State::Stopping) toolbar_->stopRun();
    } else if (box.clickedButton() == killButton) {
        closeAfterRun_ = true;
        run_->kill();
    }
    saveLayout();
    event->ignore();  // closes from onFinished() once the engine is gone
}

void MainWindow::saveLayout() {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState());
    savePanels();
    saveEditorSession();
}

void MainWindow::savePanels() {
    QVariantList panels;
    for (const auto& g : plots_->groups()) panels << g.toVariant();
    QSettings().setValue(QStringLiteral("plots/panels"), panels);
}

void MainWindow::saveEditorSession() {
    QSettings().setValue(QStringLiteral("editor/session"),
                         QString::fromStdString(editor_->sessionState().dump()));
}

void MainWindow::restoreLayout() {
    QSettings s;
    // A saved layout wins over the default one (QWidget::restoreGeometry moves a window that
    // would be off this screen back onto it).
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    if (restoreState(s.value(QStringLiteral("window/state")).toByteArray()))
        pendingDockSizes_.reset();
    // A layout saved on a larger screen (or a second monitor) is cut down to this one.
    if (const QScreen* shownOn = screen()) {
        const QRect available = shownOn->availableGeometry();
        if (!available.contains(geometry())) {
            const QSize size = geometry().size().boundedTo(available.size());
            setGeometry(QStyle::alignedRect(Qt::LeftToRight, Qt::AlignCenter, size, available));
        }
    }
    QVector<MetricGroup> panels;
    for (const QVariant& v : s.value(QStringLiteral("plots/panels")).toList()) {
        MetricGroup g = MetricGroup::fromVariant(v.toMap());
        if (!g.title.isEmpty() && !g.patterns.isEmpty()) panels << g;
    }
    plots_->setGroups(panels);
    // Basic fields for a newcomer; the choice is kept.
    editor_->setAdvanced(s.value(QStringLiteral("editor/advanced"), false).toBool());
    // The form as the last session left it, unsaved edits included.
    const QString session = s.value(QStringLiteral("editor/session")).toString();
    if (!session.isEmpty())
        editor_->restoreSession(Json::parse(session.toStdString(), nullptr, false));
    toolbar_->restoreRanks(s.value(QStringLiteral("run/ranks"), 1).toInt());
}

}  // namespace lathe::ui
