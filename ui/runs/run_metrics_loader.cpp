#include "ui/runs/run_metrics_loader.h"

#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/sinks/jsonl_reader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QTimer>

#include <cmath>
#include <stdexcept>

namespace lathe::ui {
namespace {

QString metricsPath(const QString& runDir) {
    return QDir(runDir).filePath(QString::fromLatin1(run_folder::kMetricsJsonlFile));
}

lathe::protocol::Metrics toMetrics(const lathe::sinks::MetricRecord& r, double wallOrigin) {
    lathe::protocol::Metrics m;
    m.step = r.step;
    m.tokens = r.tokens;
    m.wall_time = std::isfinite(wallOrigin) ? r.wall_time - wallOrigin : r.wall_time;
    m.values = r.values;
    return m;
}

}  // namespace

RunMetricsLoader::RunMetricsLoader(MetricStore* store, QObject* parent)
    : QObject(parent), store_(store) {
    timer_ = new QTimer(this);
    timer_->setInterval(kDefaultFollowMs);
    connect(timer_, &QTimer::timeout, this, &RunMetricsLoader::poll);
    watcher_ = new QFileSystemWatcher(this);
    connect(watcher_, &QFileSystemWatcher::fileChanged, this, [this] { poll(); });
}

QVector<qint64> RunMetricsLoader::readResumeSteps(const QString& runDir) {
    QVector<qint64> out;
    for (const auto& e : run_folder::read_resume_events(
             run_folder::join(runDir.toStdString(), run_folder::kHistoryFile)))
        out.append(e.from_step);
    return out;
}

std::optional<double> RunMetricsLoader::cutFor(double step, Branching& b, bool fallback) {
    for (int i = b.used; i < b.resumeSteps.size(); ++i) {
        const double from = static_cast<double>(b.resumeSteps[i]);
        if (from < step && from < lastStep_) {
            b.used = i + 1;  // earlier entries were resumes that abandoned nothing
            ++resumesApplied_;
            return from;
        }
    }
    if (!fallback) return std::nullopt;
    b.used = static_cast<int>(b.resumeSteps.size());
    return step - 1;
}

void RunMetricsLoader::ingest(const lathe::sinks::MetricRecord& r, Branching& b, double maxStep) {
    const double step = static_cast<double>(r.step);
    if (step > maxStep) return;
    if (!std::isfinite(wallOrigin_)) wallOrigin_ = r.wall_time;
    // A step that goes back is a resume. The same step again is a resume only if history.jsonl
    // says so; otherwise it is a second line of that step (other metrics) and merges.
    if (step <= lastStep_) {
        if (const auto cut = cutFor(step, b, step < lastStep_)) {
            store_->abandonAfter(*cut);
            lastStep_ = *cut;
        }
    }
    store_->append(toMetrics(r, wallOrigin_));
    lastStep_ = std::max(lastStep_, step);
}

void RunMetricsLoader::loadParents(const QString& runDir, int depth) {
    if (depth >= kMaxParentDepth) return;
    const auto p = run_folder::read_record<run_folder::ParentLink>(
        run_folder::join(runDir.toStdString(), run_folder::kParentFile));
    if (!p) return;
    const qint64 parentStep = p->parent_step;
    QString parentDir = QString::fromStdString(p->parent_dir);
    if (parentDir.isEmpty()) {
        const QString name = QString::fromStdString(p->parent_run);
        if (name.isEmpty()) return;
        parentDir = QFileInfo(runDir).dir().filePath(name);  // a sibling in the same runs root
    }
    if (parentStep < 0 || !QFileInfo(parentDir).isDir()) return;
    loadParents(parentDir, depth + 1);
    Branching b;
    b.resumeSteps = readResumeSteps(parentDir);
    try {
        for (const auto& r : lathe::sinks::read_jsonl_metrics(metricsPath(parentDir).toStdString()))
            ingest(r, b, static_cast<double>(parentStep));
    } catch (const std::exception&) {
        // A parent whose metrics are gone: the child's own curve still shows.
    }
    // (The parent's lines after the step this run started from belong to the parent only.)
}

bool RunMetricsLoader::open(const QString& runDir, QString* error) {
    close();
    store_->clear();
    runDir_ = QFileInfo(runDir).absoluteFilePath();
    offset_ = 0;
    own_ = Branching{};
    historySize_ = -1;
    lastStep_ = -std::numeric_limits<double>::infinity();
    wallOrigin_ = std::numeric_limits<double>::quiet_NaN();
    bad_ = 0;
    resumesApplied_ = 0;
    loadParents(runDir_, 0);
    const QString path = metricsPath(runDir_);
    if (QFileInfo::exists(path)) {
        QFile probe(path);
        if (!probe.open(QIODevice::ReadOnly)) {
            if (error) *error = tr("cannot read %1: %2").arg(path, probe.errorString());
            return false;
        }
    }
    poll();
    return true;
}

void RunMetricsLoader::close() {
    setFollowing(false);
    runDir_.clear();
}

int RunMetricsLoader::poll() {
    if (runDir_.isEmpty()) return 0;
    const QString path = metricsPath(runDir_);
    if (!QFileInfo::exists(path)) return 0;
    // history.jsonl gains a line at each resume: re-read it when it grew.
    const qint64 hsize =
        QFileInfo(QDir(runDir_).filePath(QString::fromLatin1(run_folder::kHistoryFile))).size();
    if (hsize != historySize_) {
        historySize_ = hsize;
        const int used = own_.used;
        own_.resumeSteps = readResumeSteps(runDir_);
        own_.used = std::min(used, static_cast<int>(own_.resumeSteps.size()));
    }
    lathe::sinks::JsonlChunk chunk;
    try {
        chunk = lathe::sinks::read_jsonl_metrics_from(path.toStdString(), offset_);
    } catch (const std::exception&) {
        return 0;
    }
    if (chunk.restarted) {  // the file was rewritten: start over
        const QString dir = runDir_;
        const bool follow = following_;
        open(dir);
        setFollowing(follow);
        return 0;
    }
    offset_ = chunk.next_offset;
    bad_ += static_cast<int>(chunk.bad_lines);
    for (const auto& r : chunk.records) ingest(r, own_, std::numeric_limits<double>::infinity());
    if (following_ && watcher_->files().isEmpty()) watcher_->addPath(path);
    if (!chunk.records.empty()) Q_EMIT updated(static_cast<int>(chunk.records.size()));
    return static_cast<int>(chunk.records.size());
}

void RunMetricsLoader::setFollowing(bool on) {
    following_ = on;
    if (on) {
        timer_->start();
        const QString path = metricsPath(runDir_);
        if (!runDir_.isEmpty() && QFileInfo::exists(path) && watcher_->files().isEmpty())
            watcher_->addPath(path);
    } else {
        timer_->stop();
        if (!watcher_->files().isEmpty()) watcher_->removePaths(watcher_->files());
    }
}

void RunMetricsLoader::setFollowInterval(int ms) {
    timer_->setInterval(ms);
}

}  // namespace lathe::ui
