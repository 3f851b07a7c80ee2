// For GUI tests that drive the real engine: a tiny config with overrides, and waiting for a run.
#pragma once

#include "engine/config/io.h"
#include "ui/control/run_controller.h"

#include <QElapsedTimer>
#include <QtTest>

#include <string>
#include <vector>

namespace lathe::testing {

/// The `tiny` preset with `overrides` (key=value), then `extra`, as the JSON the GUI starts.
inline lathe::config::Json tinyConfig(std::vector<std::string> overrides,
                                      const std::vector<std::string>& extra = {}) {
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    auto loaded = lathe::config::load("tiny", overrides);
    if (!loaded.ok()) qFatal("bad test config");
    return lathe::config::to_json(loaded.config);
}

/// Waits (processing events) until `run` is no longer active; false after `ms`.
inline bool waitDone(lathe::ui::RunController& run, int ms = 180000) {
    QElapsedTimer t;
    t.start();
    while (run.isActive() && t.elapsed() < ms) QTest::qWait(50);
    return !run.isActive();
}

}  // namespace lathe::testing
