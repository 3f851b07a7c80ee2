#include "ui/runs/run_comparison.h"

#include "ui/plots/metric_store.h"
#include "ui/runs/config_diff.h"
#include "ui/runs/run_info.h"
#include "ui/runs/run_metrics_loader.h"

#include "engine/run_folder/layout.h"

#include <QFileInfo>

namespace lathe::ui {
namespace {

// Tableau 10, as the live plots.
const QColor kRunColors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b),
                             QColor(0xe1, 0x57, 0x59), QColor(0x76, 0xb7, 0xb2),
                             QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                             QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7),
                             QColor(0x9c, 0x75, 0x5f), QColor(0xba, 0xb0, 0xac)};

}  // namespace

RunComparison::RunComparison(QObject* parent) : QObject(parent) {}

void RunComparison::setRuns(const QStringList& runDirs) {
    for (auto& r : runs_) delete r.store;
    runs_.clear();
    errors_.clear();
    for (const QString& dir : runDirs) {
        Run r;
        r.dir = QFileInfo(dir).absoluteFilePath();
        r.name = QFileInfo(dir).fileName();
        r.store = new MetricStore(this);
        r.store->setSmoothingWeight(weight_);
        RunMetricsLoader loader(r.store);
        QString error;
        if (!loader.open(r.dir, &error)) errors_ << QStringLiteral("%1: %2").arg(r.name, error);
        runs_.append(r);
    }
    Q_EMIT runsChanged();
}

QColor RunComparison::color(int i) const {
    return kRunColors[i % std::size(kRunColors)];
}

lathe::config::Json RunComparison::config(int i) const {
    lathe::config::Json j;
    readJsonFile(runFile(runs_.at(i).dir, run_folder::kConfigFile), j);
    return j;
}

QStringList RunComparison::metricNames() const {
    QStringList out;
    for (const auto& r : runs_)
        for (const QString& n : r.store->metricNames())
            if (!out.contains(n)) out << n;
    return out;
}

void RunComparison::setSmoothingWeight(double weight) {
    weight_ = weight;
    for (auto& r : runs_) r.store->setSmoothingWeight(weight);
    if (!runs_.isEmpty()) weight_ = runs_.front().store->smoothingWeight();
    Q_EMIT smoothingChanged();
}

}  // namespace lathe::ui
