// The run folder's control drop-box (issue 46 item 4): a way to ask a running run for a
// checkpoint or a stop without its control socket, from wherever the run folder is seen (a
// cluster's shared filesystem, a shell on the machine): `lathe-engine control RUN_DIR
// checkpoint|stop` writes a request, and rank 0 acts on it at the next step boundary (the trainer
// agrees on it across ranks).
//
// A request is RUN_DIR/control/request-<time>-<pid>-<n>.json, {"command": "checkpoint" | "stop" |
// "stop_without_checkpoint"}, written atomically (a temporary file, then a rename). The engine
// makes control/ (mode 0700) when the run starts, and honours only a regular file owned by its
// own user; anything else is set aside as .refused-<name> with a warning naming the owner. A
// request older than the run's start is stale (it was meant for an earlier run) and removed.
#pragma once

#include <ctime>
#include <string>
#include <vector>

namespace lathe::run_folder {

inline constexpr const char* kControlDir = "control";

enum class ControlCommand { checkpoint, stop, stop_without_checkpoint };

const char* to_string(ControlCommand c);
/// "checkpoint", "stop" or "stop_without_checkpoint"; false for anything else.
bool parse_control_command(const std::string& text, ControlCommand& out);

/// Writes a request into RUN_DIR/control/ (made if missing) and returns its path. Throws
/// lathe::Error naming the file when it cannot be written.
std::string write_control_request(const std::string& run_dir, ControlCommand command);

struct ControlRequest {
    std::string path;
    ControlCommand command;
};

/// The requests waiting in RUN_DIR/control/, oldest first; each is removed as it is taken.
/// Requests not owned by this process's user, not regular files, unreadable, or of an unknown
/// command are renamed .refused-<name>; those older than `not_before` are removed; each such
/// case adds a line to `problems` naming the file and why.
std::vector<ControlRequest> take_control_requests(const std::string& run_dir,
                                                  std::time_t not_before,
                                                  std::vector<std::string>& problems);

/// Makes RUN_DIR/control/ (0700) if missing; returns its path.
std::string make_control_dir(const std::string& run_dir);

}  // namespace lathe::run_folder
