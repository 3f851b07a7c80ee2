// RunInfo: what a run folder says about its run (status.json, parent.json), read cheaply enough to
// do for every run on every refresh. A run whose status says "running" while its process is gone,
// or that has not been updated for a long time, crashed: it is reported as Interrupted.
#pragma once

#include <QDateTime>
#include <QString>

#include <functional>
#include <limits>

namespace lathe::ui {

enum class RunState { Unknown, Running, Finished, Stopped, Failed, Interrupted };

struct RunInfo {
    QString name;  ///< the folder's name
    QString path;  ///< absolute path of the run folder
    RunState state = RunState::Unknown;
    QString reason;  ///< the engine's reason, or why the run counts as interrupted
    qint64 pid = 0;
    QDateTime startedAt, updatedAt;  ///< UTC
    double elapsedS = std::numeric_limits<double>::quiet_NaN();
    qint64 step = -1, maxSteps = -1, tokens = -1, maxTokens = -1;
    int worldSize = 0;
    QString model;  ///< "64d x 2 layers, vocab 256"
    double lastLoss = std::numeric_limits<double>::quiet_NaN();
    QStringList tags;  ///< from notes.json (the user's)
    QString notes;
    QString parentRun;  ///< from parent.json ("Resume as new run"); empty otherwise
    qint64 parentStep = -1;
    bool hasConfig = false;
    bool hasMetrics = false;

    bool operator==(const RunInfo& o) const;
    bool operator!=(const RunInfo& o) const { return !(*this == o); }
};

/// Whether `pid` is a live process on this machine that looks like a Lathe engine (its command
/// line mentions "lathe"); without /proc, whether it exists at all.
bool processAlive(qint64 pid);

/// The runs root as the engine resolves it without --runs-dir: $LATHE_RUNS_DIR, else
/// $XDG_DATA_HOME/lathe/runs, else ~/.local/share/lathe/runs.
QString defaultRunsRoot();

QString runStateName(RunState state);

/// The file `name` (a run_folder::k*File constant) of the run folder `runDir`.
QString runFile(const QString& runDir, const char* name);

/// Whether `dir` looks like a run folder (status.json, config.json or metrics.jsonl).
bool isRunFolder(const QString& dir);

struct RunInfoOptions {
    /// A "running" run whose status and metrics have not changed for this long is interrupted.
    int staleAfterS = 3600;
    std::function<bool(qint64)> alive = processAlive;
    QDateTime now;  ///< invalid: the current time
};

/// Reads the run folder `dir`. A missing or unreadable status.json gives state Unknown (the
/// reason says why); never throws.
RunInfo readRunInfo(const QString& dir, const RunInfoOptions& options = {});

/// Writes the run's notes.json (tags as typed: "baseline, lr sweep"; run_folder::parse_tags) as
/// `lathe-engine notes` does; false with `error` naming the file or the bad tag.
bool writeRunNotes(const QString& runDir, const QString& tags, const QString& notes,
                   QString* error = nullptr);

}  // namespace lathe::ui
