#include "protocol/messages.h"

#include <cmath>
#include <limits>

namespace lathe::protocol {
namespace {

constexpr const char* kRunStates[] = {"starting", "running",  "checkpointing",
                                      "stopping", "finished", "failed"};
constexpr const char* kExitReasons[] = {"finished", "stopped", "failed"};

// Cuts `s` to at most `n` bytes without splitting a UTF-8 sequence.
std::string cut_utf8(const std::string& s, std::size_t n) {
    if (s.size() <= n) return s;
    std::size_t end = n;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
    return s.substr(0, end);
}

std::string dump_line(const Json& j) {
    std::string out = j.dump(-1, ' ', false, Json::error_handler_t::replace);
    out.push_back('\n');
    return out;
}

Json header(const char* type) {
    Json j = Json::object();
    j["v"] = kVersion;
    j["type"] = type;
    return j;
}

Json number_or_null(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

Json to_json(const Event& e) {
    Json j = header(type_name(e));
    if (auto* h = std::get_if<Hello>(&e)) {
        j["protocol_version"] = h->protocol_version;
        j["world_size"] = h->world_size;
        j["device"] = h->device;
        j["run_dir"] = h->run_dir;
        j["config"] = h->config;
    } else if (auto* m = std::get_if<Metrics>(&e)) {
        j["step"] = m->step;
        j["tokens"] = m->tokens;
        j["wall_time"] = number_or_null(m->wall_time);
        Json values = Json::object();
        for (const auto& [name, value] : m->values) values[name] = number_or_null(value);
        j["values"] = std::move(values);
    } else if (auto* l = std::get_if<Log>(&e)) {
        j["level"] = l->level;
        j["rank"] = l->rank;
        j["message"] = l->message;
    } else if (auto* s = std::get_if<Status>(&e)) {
        j["state"] = to_string(s->state);
        j["step"] = s->step;
        j["total_steps"] = s->total_steps ? Json(*s->total_steps) : Json(nullptr);
        j["tokens_per_s"] = number_or_null(s->tokens_per_s);
        j["eta_s"] = s->eta_s ? number_or_null(*s->eta_s) : Json(nullptr);
    } else if (auto* c = std::get_if<CheckpointSaved>(&e)) {
        j["step"] = c->step;
        j["path"] = c->path;
        j["duration_s"] = number_or_null(c->duration_s);
    } else if (auto* err = std::get_if<ErrorEvent>(&e)) {
        j["message"] = err->message;
    } else if (auto* b = std::get_if<Bye>(&e)) {
        j["exit_reason"] = to_string(b->exit_reason);
    }
    return j;
}

// Reads typed fields of one message, remembering the first problem.
class Reader {
public:
    explicit Reader(const Json& j) : j_(j) {}
    const std::string& error() const { return error_; }
    bool ok() const { return error_.empty(); }

    const Json* get(const char* key, bool required) {
        auto it = j_.find(key);
        if (it == j_.end()) {
            if (required) fail(std::string("missing field '") + key + "'");
            return nullptr;
        }
        return &*it;
    }
    int64_t integer(const char* key, int64_t min = std::numeric_limits<int64_t>::min()) {
        const Json* v = get(key, true);
        if (!v) return 0;
        if (!v->is_number_integer()) {
            wrong(key, "an integer");
            return 0;
        }
        if (v->is_number_unsigned() &&
            v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            wrong(key, "an integer in range");
            return 0;
        }
        auto x = v->get<int64_t>();
        if (x < min) fail(std::string("field '") + key + "' is below " + std::to_string(min));
        return x;
    }
    std::optional<int64_t> optional_integer(const char* key, int64_t min) {
        const Json* v = get(key, false);
        if (!v || v->is_null()) return std::nullopt;
        return integer(key, min);
    }
    // Numbers; null stands for a non-finite value.
    double number(const char* key) {
        const Json* v = get(key, true);
        if (!v) return 0;
        if (v->is_null()) return std::numeric_limits<double>::quiet_NaN();
        if (!v->is_number()) {
            wrong(key, "a number");
            return 0;
        }
        return v->get<double>();
    }
    std::optional<double> optional_number(const char* key) {
        const Json* v = get(key, false);
        if (!v || v->is_null()) return std::nullopt;
        return number(key);
    }
    std::string string(const char* key) {
        const Json* v = get(key, true);
        if (!v) return {};
        if (!v->is_string()) {
            wrong(key, "a string");
            return {};
        }
        return v->get<std::string>();
    }
    bool boolean(const char* key, bool fallback) {
        const Json* v = get(key, false);
        if (!v) return fallback;
        if (!v->is_boolean()) {
            wrong(key, "a boolean");
            return fallback;
        }
        return v->get<bool>();
    }
    void fail(std::string why) {
        if (error_.empty()) error_ = std::move(why);
    }

private:
    void wrong(const char* key, const char* what) {
        fail(std::string("field '") + key + "' must be " + what);
    }
    const Json& j_;
    std::string error_;
};

// Rejects nesting deeper than kMaxDepth before the parser sees it.
bool too_deep(std::string_view line) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (char ch : line) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (ch == '\\') {
                escaped = true;
            } else if (ch == '"') {
                in_string = false;
            }
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > kMaxDepth) return true;
        } else if (ch == ']' || ch == '}') {
            --depth;
        }
    }
    return false;
}

// Parses the envelope; on success `type` is the message type.
std::optional<Json> parse_envelope(std::string_view line, std::string& type, std::string& error) {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxLineBytes) {
        error = "line of " + std::to_string(line.size()) + " bytes exceeds the limit of " +
                std::to_string(kMaxLineBytes);
        return std::nullopt;
    }
    if (line.empty()) {
        error = "empty line";
        return std::nullopt;
    }
    if (too_deep(line)) {
        error = "nesting deeper than " + std::to_string(kMaxDepth);
        return std::nullopt;
    }
    Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        error = "malformed JSON";
        return std::nullopt;
    }
    if (!j.is_object()) {
        error = "not a JSON object";
        return std::nullopt;
    }
    auto v = j.find("v");
    if (v == j.end()) {
        error = "missing protocol version 'v'";
        return std::nullopt;
    }
    if (!v->is_number_integer() || v->get<int64_t>() != kVersion) {
        error = "unsupported protocol version " + v->dump() + " (expected " +
                std::to_string(kVersion) + ")";
        return std::nullopt;
    }
    auto t = j.find("type");
    if (t == j.end() || !t->is_string()) {
        error = "missing or non-string 'type'";
        return std::nullopt;
    }
    type = t->get<std::string>();
    return j;
}

std::string quoted_type(const std::string& type) {
    return "'" + (type.size() > 64 ? type.substr(0, 64) + "..." : type) + "'";
}

}  // namespace

const char* to_string(RunState s) { return kRunStates[static_cast<int>(s)]; }
const char* to_string(ExitReason r) { return kExitReasons[static_cast<int>(r)]; }

std::optional<RunState> run_state_from_string(std::string_view s) {
    for (int i = 0; i < 6; ++i) {
        if (s == kRunStates[i]) return static_cast<RunState>(i);
    }
    return std::nullopt;
}

std::optional<ExitReason> exit_reason_from_string(std::string_view s) {
    for (int i = 0; i < 3; ++i) {
        if (s == kExitReasons[i]) return static_cast<ExitReason>(i);
    }
    return std::nullopt;
}

bool Metrics::operator==(const Metrics& o) const {
    auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
    if (step != o.step || tokens != o.tokens || !same(wall_time, o.wall_time)) return false;
    if (values.size() != o.values.size()) return false;
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i].first != o.values[i].first || !same(values[i].second, o.values[i].second))
            return false;
    }
    return true;
}

const char* type_name(const Event& e) {
    constexpr const char* names[] = {"hello",      "metrics", "log", "status",
                                     "checkpoint", "error",   "bye"};
    return names[e.index()];
}

const char* type_name(const Command& c) {
    constexpr const char* names[] = {"checkpoint", "stop"};
    return names[c.index()];
}

std::string encode(const Event& e) {
    std::string line = dump_line(to_json(e));
    if (line.size() <= kMaxLineBytes) return line;
    // Only free text can grow without bound; cut it and say so.
    const std::size_t excess = line.size() - kMaxLineBytes;
    auto cut = [&](std::string msg) {
        const std::string note = " [cut]";
        std::size_t keep = msg.size() > excess + note.size() + 64
                               ? msg.size() - excess - note.size() - 64
                               : 0;
        return cut_utf8(msg, keep) + note;
    };
    if (auto* l = std::get_if<Log>(&e)) {
        Log copy = *l;
        copy.message = cut(copy.message);
        return dump_line(to_json(copy));
    }
    if (auto* err = std::get_if<ErrorEvent>(&e)) {
        return dump_line(to_json(ErrorEvent{cut(err->message)}));
    }
    return line;
}

std::string encode(const Command& c) {
    Json j = header(type_name(c));
    if (auto* s = std::get_if<Stop>(&c)) j["checkpoint"] = s->checkpoint;
    return dump_line(j);
}

DecodedEvent decode_event(std::string_view line) {
    std::string type;
    std::string error;
    std::optional<Json> parsed = parse_envelope(line, type, error);
    if (!parsed) return DecodeError{error};
    Reader r(*parsed);
    Event event;
    if (type == "hello") {
        Hello h;
        h.protocol_version = static_cast<int>(r.integer("protocol_version"));
        if (r.ok() && h.protocol_version != kVersion)
            r.fail("hello announces protocol version " + std::to_string(h.protocol_version));
        h.world_size = r.integer("world_size", 1);
        h.device = r.string("device");
        h.run_dir = r.string("run_dir");
        if (const Json* c = r.get("config", true)) {
            if (!c->is_object()) r.fail("field 'config' must be an object");
            h.config = *c;
        }
        event = std::move(h);
    } else if (type == "metrics") {
        Metrics m;
        m.step = r.integer("step", 0);
        m.tokens = r.integer("tokens", 0);
        m.wall_time = r.number("wall_time");
        if (const Json* v = r.get("values", true)) {
            if (!v->is_object()) {
                r.fail("field 'values' must be an object");
            } else {
                m.values.reserve(v->size());
                for (auto it = v->begin(); it != v->end(); ++it) {
                    if (it.value().is_null()) {
                        m.values.emplace_back(it.key(), std::numeric_limits<double>::quiet_NaN());
                    } else if (it.value().is_number()) {
                        m.values.emplace_back(it.key(), it.value().get<double>());
                    } else {
                        r.fail("metric '" + it.key() + "' is not a number");
                        break;
                    }
                }
            }
        }
        event = std::move(m);
    } else if (type == "log") {
        Log l;
        l.level = r.string("level");
        l.rank = r.integer("rank", 0);
        l.message = r.string("message");
        event = std::move(l);
    } else if (type == "status") {
        Status s;
        std::string state = r.string("state");
        if (r.ok()) {
            if (auto st = run_state_from_string(state)) {
                s.state = *st;
            } else {
                r.fail("unknown state " + quoted_type(state));
            }
        }
        s.step = r.integer("step", 0);
        s.total_steps = r.optional_integer("total_steps", 0);
        s.tokens_per_s = r.number("tokens_per_s");
        s.eta_s = r.optional_number("eta_s");
        event = s;
    } else if (type == "checkpoint") {
        CheckpointSaved c;
        c.step = r.integer("step", 0);
        c.path = r.string("path");
        c.duration_s = r.number("duration_s");
        event = std::move(c);
    } else if (type == "error") {
        event = ErrorEvent{r.string("message")};
    } else if (type == "bye") {
        std::string reason = r.string("exit_reason");
        Bye b;
        if (r.ok()) {
            if (auto er = exit_reason_from_string(reason)) {
                b.exit_reason = *er;
            } else {
                r.fail("unknown exit_reason " + quoted_type(reason));
            }
        }
        event = b;
    } else {
        return DecodeError{"unknown event type " + quoted_type(type)};
    }
    if (!r.ok()) return DecodeError{type + ": " + r.error()};
    return event;
}

DecodedCommand decode_command(std::string_view line) {
    std::string type;
    std::string error;
    std::optional<Json> parsed = parse_envelope(line, type, error);
    if (!parsed) return DecodeError{error};
    Reader r(*parsed);
    Command command;
    if (type == "checkpoint") {
        command = SaveCheckpoint{};
    } else if (type == "stop") {
        command = Stop{r.boolean("checkpoint", true)};
    } else {
        return DecodeError{"unknown command type " + quoted_type(type)};
    }
    if (!r.ok()) return DecodeError{type + ": " + r.error()};
    return command;
}

}  // namespace lathe::protocol
