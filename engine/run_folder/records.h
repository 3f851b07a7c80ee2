// The JSON records of a run folder, each described once with a visit() member as the config is
// (engine/config/reflect.h): the engine writes them, the GUI reads them, from the same list of
// fields.
//
//   status.json     RunStatus      (the engine's run_status callback, rank 0)
//   parent.json     ParentLink     (the GUI's "Resume as new run")
//   history.jsonl   ResumeEvent    one line per resume (the engine's --resume-from)
//                   UnusableCheckpoint   one line per checkpoint set aside as unusable at load
//   step{N}.unusable[K]/unusable.json   UnusableCheckpoint   the same, inside the folder
#pragma once

#include "engine/run_folder/file_io.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace lathe::run_folder {

/// status.json: where a run stands. Rank 0 rewrites it atomically at start, every 10 steps and at
/// the end; the runs list reads it for every run on every refresh.
struct RunStatus {
    static constexpr const char* kRunning = "running";
    static constexpr const char* kFinished = "finished";
    static constexpr const char* kStopped = "stopped";
    static constexpr const char* kFailed = "failed";
    /// What "running" reads as once its process is gone without a final status (SIGKILL, a
    /// crash, a reboot; see effective_state()), and what a run writes when it stopped because the
    /// workbench that controlled it went away.
    static constexpr const char* kInterrupted = "interrupted";

    std::string state;                   ///< running, finished, stopped, failed or interrupted
    std::string reason;                  ///< why it stopped or failed; empty otherwise
    int64_t pid = 0;                     ///< the rank-0 process
    std::string started_at, updated_at;  ///< ISO 8601, UTC
    double elapsed_s = std::numeric_limits<double>::quiet_NaN();
    int64_t step = -1, max_steps = -1, tokens = -1, max_tokens = -1;
    int64_t world_size = 0;
    std::string model;  ///< "64d x 2 layers, vocab 256"
    std::optional<double> last_loss;

    template <class V>
    void visit(V& v) {
        v("state", state);
        v("reason", reason);
        v("pid", pid);
        v("started_at", started_at);
        v("updated_at", updated_at);
        v("elapsed_s", elapsed_s);
        v("step", step);
        v("max_steps", max_steps);
        v("tokens", tokens);
        v("max_tokens", max_tokens);
        v("world_size", world_size);
        v("model", model);
        v("last_loss", last_loss);
    }
};

/// Whether `pid` is a live Lathe process on this machine: signal 0 reaches it and, where /proc
/// exists, its command line names lathe (a recycled pid running another program is not).
bool lathe_process_alive(int64_t pid);
/// `s.state`, except that "running" whose process is gone reads RunStatus::kInterrupted.
std::string effective_state(const RunStatus& s);

/// parent.json: a run started from another run's checkpoint ("Resume as new run").
struct ParentLink {
    std::string parent_run;  ///< the parent's run name
    int64_t parent_step = -1;
    std::string checkpoint;  ///< the checkpoint folder it started from
    std::string parent_dir;  ///< the parent's run folder; empty: a sibling named parent_run

    template <class V>
    void visit(V& v) {
        v("parent_run", parent_run);
        v("parent_step", parent_step);
        v("checkpoint", checkpoint);
        v("parent_dir", parent_dir);
    }
};

/// A config field that differs between two runs of the same run folder.
struct ConfigChangeRecord {
    std::string path, before, after;

    template <class V>
    void visit(V& v) {
        v("path", path);
        v("before", before);
        v("after", after);
    }
};

/// A line of history.jsonl: the run was resumed from `checkpoint` (step `from_step`); the
/// checkpoints after it were set aside under the names in `abandoned`.
struct ResumeEvent {
    static constexpr const char* kEvent = "resumed";
    std::string event = kEvent;
    std::string time;  ///< ISO 8601, UTC
    int64_t from_step = -1;
    std::string checkpoint;
    std::vector<std::string> abandoned;
    std::vector<ConfigChangeRecord> config_changes;

    template <class V>
    void visit(V& v) {
        v("event", event);
        v("time", time);
        v("from_step", from_step);
        v("checkpoint", checkpoint);
        v("abandoned", abandoned);
        v("config_changes", config_changes);
    }
};

/// A checkpoint that could not be loaded (corrupted, interrupted, contradicting its folder) and
/// was set aside as step{N}.unusable[K] instead of being deleted: its tensors may still be worth
/// something to whoever looks.
struct UnusableCheckpoint {
    static constexpr const char* kEvent = "set_aside_unusable";
    std::string event = kEvent;
    std::string time;  ///< ISO 8601, UTC
    int64_t step = -1;
    std::string checkpoint;  ///< where it was (the step{N} folder)
    std::string moved_to;    ///< its folder name now: step{N}.unusable[K]
    std::string reason;      ///< why it could not be loaded, naming the file

    template <class V>
    void visit(V& v) {
        v("event", event);
        v("time", time);
        v("step", step);
        v("checkpoint", checkpoint);
        v("moved_to", moved_to);
        v("reason", reason);
    }
};

/// notes.json: what the user says of a run, from the workbench's Runs dock or `lathe-engine notes`:
/// tags (short words to filter by: "baseline", "lr-sweep") and free-text notes.
struct RunNotes {
    std::vector<std::string> tags;
    std::string notes;

    template <class V>
    void visit(V& v) {
        v("tags", tags);
        v("notes", notes);
    }
};

/// Tags as the user typed them ("baseline, lr sweep,,baseline"): split at commas, trimmed, empty
/// ones and repeats dropped, in order. Throws lathe::Error for a tag with a control character or
/// longer than 64 bytes, naming it.
std::vector<std::string> parse_tags(const std::string& text);

/// Every field, in declaration order.
template <class R>
nlohmann::ordered_json to_json(const R& record);
/// Reads what is there: a field that is absent, null or of the wrong type keeps its default and,
/// when `problems` is given, is noted there as "name: reason". Never throws.
template <class R>
R record_from_json(const nlohmann::json& j, std::vector<std::string>* problems = nullptr);

/// Reads a JSON object file into a record; nullopt with `error` when the file is missing or not a
/// JSON object.
template <class R>
std::optional<R> read_record(const std::string& path, std::string* error = nullptr);
/// Writes a record atomically (temporary file, fsync, rename; see write_file_atomic() for
/// `when_full`). Throws lathe::Error naming the file.
template <class R>
void write_record(const std::string& path, const R& record, WhenFull when_full = WhenFull::fail);

/// The "resumed" lines of history.jsonl, in order; other and unreadable lines are skipped.
std::vector<ResumeEvent> read_resume_events(const std::string& history_path);
/// Appends one line to history.jsonl. Throws lathe::Error naming the file.
void append_history(const std::string& history_path, const nlohmann::ordered_json& line);

/// The current time as ISO 8601 UTC ("2026-12-02T17:14:42Z").
std::string iso_time_now();

}  // namespace lathe::run_folder
