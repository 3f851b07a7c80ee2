// The control-channel messages between the GUI and rank 0 of the engine (docs/protocol.md).
//
// One JSON object per line, every object carrying {"v": kVersion, "type": ...}. Events go from the
// engine to the GUI, commands from the GUI to the engine. decode_event() and decode_command()
// never throw: anything malformed, oversized, of another version or of an unknown type comes back
// as a DecodeError with the reason, so both sides can log it and carry on.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lathe::protocol {

/// The JSON of the messages: ordered as lathe::config::Json (the same type), without the config.
using Json = nlohmann::ordered_json;

/// Version of the wire format; a line with another "v" is rejected.
inline constexpr int kVersion = 1;
/// Longest accepted line in bytes, without its '\n'.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;
/// Deepest accepted nesting of arrays and objects (the resolved config needs about 5).
inline constexpr int kMaxDepth = 64;

enum class RunState { starting, running, checkpointing, stopping, finished, failed };
enum class ExitReason { finished, stopped, failed };

const char* to_string(RunState s);
const char* to_string(ExitReason r);
std::optional<RunState> run_state_from_string(std::string_view s);
std::optional<ExitReason> exit_reason_from_string(std::string_view s);

// Each message lists its fields once, in visit(): name, member and, for integers, the smallest
// value accepted. The encoder, the decoder (which names the first bad field) and operator== all
// walk that list. `kType` is the wire type.

/// The smallest value an integer field accepts.
struct AtLeast {
    int64_t value;
};

// ---- events: engine -> GUI -------------------------------------------------------------------

/// First event on a connection.
struct Hello {
    static constexpr const char* kType = "hello";
    int64_t protocol_version = kVersion;
    int64_t world_size = 1;
    std::string device;            ///< "cpu", "cuda", ...
    std::string run_dir;           ///< the run folder (checkpoints, metrics, logs)
    Json config = Json::object();  ///< the resolved ExperimentConfig
    template <class V>
    void visit(V& v) {
        v("protocol_version", protocol_version);
        v("world_size", world_size, AtLeast{1});
        v("device", device);
        v("run_dir", run_dir);
        v("config", config);
    }
    bool operator==(const Hello& o) const;
};

/// Metrics of one step, already reduced across ranks. Non-finite values travel as null and come
/// back as NaN.
struct Metrics {
    static constexpr const char* kType = "metrics";
    int64_t step = 0;
    int64_t tokens = 0;                                  ///< tokens seen so far (global)
    double wall_time = 0;                                ///< seconds since the start of training
    std::vector<std::pair<std::string, double>> values;  ///< name -> value, in the sender's order
    template <class V>
    void visit(V& v) {
        v("step", step, AtLeast{0});
        v("tokens", tokens, AtLeast{0});
        v("wall_time", wall_time);
        v("values", values);
    }
    bool operator==(const Metrics& o) const;
};

/// A log record of one rank. level: "debug", "info", "warning" or "error".
struct Log {
    static constexpr const char* kType = "log";
    std::string level = "info";
    int64_t rank = 0;
    std::string message;
    template <class V>
    void visit(V& v) {
        v("level", level);
        v("rank", rank, AtLeast{0});
        v("message", message);
    }
    bool operator==(const Log& o) const;
};

struct Status {
    static constexpr const char* kType = "status";
    RunState state = RunState::starting;
    int64_t step = 0;
    std::optional<int64_t> total_steps;  ///< null when unknown (e.g. a duration in tokens)
    double tokens_per_s = 0;
    std::optional<double> eta_s;  ///< null when unknown
    template <class V>
    void visit(V& v) {
        v("state", state);
        v("step", step, AtLeast{0});
        v("total_steps", total_steps, AtLeast{0});
        v("tokens_per_s", tokens_per_s);
        v("eta_s", eta_s);
    }
    bool operator==(const Status& o) const;
};

/// A checkpoint was written completely (wire type "checkpoint").
struct CheckpointSaved {
    static constexpr const char* kType = "checkpoint";
    int64_t step = 0;
    std::string path;
    double duration_s = 0;
    template <class V>
    void visit(V& v) {
        v("step", step, AtLeast{0});
        v("path", path);
        v("duration_s", duration_s);
    }
    bool operator==(const CheckpointSaved& o) const;
};

/// One prompt's sample: the prompt and the text generated after it (ids joined by spaces when the
/// run's tokens have no text form).
struct SampleText {
    std::string prompt;
    std::string text;
    bool operator==(const SampleText& o) const { return prompt == o.prompt && text == o.text; }
};

/// The sampler callback generated text at `step` (wire type "samples").
struct Samples {
    static constexpr const char* kType = "samples";
    int64_t step = 0;
    std::vector<SampleText> samples;
    template <class V>
    void visit(V& v) {
        v("step", step, AtLeast{0});
        v("samples", samples);
    }
    bool operator==(const Samples& o) const;
};

/// A failure worth showing to the user; usually followed by bye{failed}.
struct ErrorEvent {
    static constexpr const char* kType = "error";
    std::string message;
    template <class V>
    void visit(V& v) {
        v("message", message);
    }
    bool operator==(const ErrorEvent& o) const;
};

/// Last event on a connection.
struct Bye {
    static constexpr const char* kType = "bye";
    ExitReason exit_reason = ExitReason::finished;
    template <class V>
    void visit(V& v) {
        v("exit_reason", exit_reason);
    }
    bool operator==(const Bye& o) const;
};

using Event = std::variant<Hello, Metrics, Log, Status, CheckpointSaved, Samples, ErrorEvent, Bye>;

// ---- commands: GUI -> engine -----------------------------------------------------------------

/// Save a checkpoint at the next step boundary (wire type "checkpoint").
struct SaveCheckpoint {
    static constexpr const char* kType = "checkpoint";
    template <class V>
    void visit(V&) {}
    bool operator==(const SaveCheckpoint&) const { return true; }
};

/// Graceful stop: finish the step, save a final checkpoint unless `checkpoint` is false, exit 0.
/// (`checkpoint` may be left out: true.)
struct Stop {
    static constexpr const char* kType = "stop";
    bool checkpoint = true;
    template <class V>
    void visit(V& v) {
        v("checkpoint", checkpoint);
    }
    bool operator==(const Stop& o) const;
};

using Command = std::variant<SaveCheckpoint, Stop>;

// ---- encoding --------------------------------------------------------------------------------

struct DecodeError {
    std::string reason;
};

using DecodedEvent = std::variant<Event, DecodeError>;
using DecodedCommand = std::variant<Command, DecodeError>;

/// The wire type of a message ("hello", "metrics", ..., "checkpoint", "stop").
const char* type_name(const Event& e);
const char* type_name(const Command& c);

/// One line, '\n'-terminated. Invalid UTF-8 is replaced by U+FFFD; the `message` of log and
/// error events is cut (at a character boundary) so that the line stays within kMaxLineBytes.
std::string encode(const Event& e);
std::string encode(const Command& c);

/// Decodes one line (with or without its '\n'). Never throws.
DecodedEvent decode_event(std::string_view line);
DecodedCommand decode_command(std::string_view line);

}  // namespace lathe::protocol
