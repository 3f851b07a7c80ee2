// A run's log files (logs/rank{K}.log, spdlog lines "HH:MM:SS level [rank K] message") into a
// LogModel, for a run opened from disk.
#pragma once

#include <QString>

namespace lathe::ui {

class LogModel;

/// Appends the last `maxLinesPerRank` lines of each rank's log; returns the number of lines.
int loadRunLogs(const QString& runDir, LogModel* model, int maxLinesPerRank = 20000);

}  // namespace lathe::ui
