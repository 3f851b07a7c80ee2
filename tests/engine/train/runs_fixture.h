// What the training-run tests share (test_training, test_checkpointing, test_callbacks,
// test_data_sources, test_run_commands): fast `train tiny` arguments, bench's result line, the
// golden losses' file and a temporary runs folder per test class.
#pragma once

#include "tests/engine_runner.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>
#include <QTemporaryDir>

namespace lathe::testing {

inline const QStringList kFast = {"launch.num_threads=1",
                                  "trainer.callbacks.speed_monitor.device_peak_flops=1e11"};

inline QStringList args(const QString& run, const QStringList& extra) {
    QStringList a = {"train", "tiny", "run_name=" + run};
    a += kFast;
    a += extra;
    return a;
}

// The JSON line that `lathe-engine bench` prints last.
inline QJsonObject bench_result(const QString& output) {
    const auto lines = output.split('\n', Qt::SkipEmptyParts);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        if (it->startsWith('{')) return QJsonDocument::fromJson(it->toUtf8()).object();
    }
    return {};
}

inline QString golden_path() {
    return qEnvironmentVariable("LATHE_SOURCE_DIR") + "/tests/assets/losses/tiny.json";
}

// A temporary folder the test class's runs go into.
class RunsDir {
public:
    QString runs() const { return dir_.path(); }
    QString folder(const QString& run) const { return dir_.path() + "/" + run; }

private:
    QTemporaryDir dir_;
};

}  // namespace lathe::testing
