#include "engine/protocol/messages.h"

#include "engine/util/json_scan.h"

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

Json number_or_null(double x) {
    return std::isfinite(x) ? Json(x) : Json(nullptr);
}

// Writes the fields of a message, in visit() order.
struct Writer {
    Json& j;
    void operator()(const char* key, int64_t x, AtLeast = {0}) { j[key] = x; }
    void operator()(const char* key, double x) { j[key] = number_or_null(x); }
    void operator()(const char* key, bool x) { j[key] = x; }
    void operator()(const char* key, const std::string& x) { j[key] = x; }
    void operator()(const char* key, const Json& x) { j[key] = x; }
    void operator()(const char* key, RunState x) { j[key] = to_string(x); }
    void operator()(const char* key, ExitReason x) { j[key] = to_string(x); }
    void operator()(const char* key, const std::optional<int64_t>& x, AtLeast = {0}) {
        j[key] = x ? Json(*x) : Json(nullptr);
    }
    void operator()(const char* key, const std::optional<double>& x) {
        j[key] = x ? number_or_null(*x) : Json(nullptr);
    }
    void operator()(const char* key, const std::vector<SampleText>& x) {
        Json a = Json::array();
        for (const auto& s : x) {
            Json o = Json::object();
            o["prompt"] = s.prompt;
            o["text"] = s.text;
            a.push_back(std::move(o));
        }
        j[key] = std::move(a);
    }
    void operator()(const char* key, const std::vector<std::pair<std::string, double>>& x) {
        Json values = Json::object();
        for (const auto& [name, value] : x) values[name] = number_or_null(value);
        j[key] = std::move(values);
    }
};

// The fields of a message as JSON (no envelope): what is encoded and what operator== compares.
template <class M>
Json fields(const M& m) {
    Json j = Json::object();
    Writer w{j};
    const_cast<M&>(m).visit(w);  // visit() only reads here
    return j;
}

template <class M>
Json to_json(const M& m) {
    Json j = header(M::kType);
    Writer w{j};
    const_cast<M&>(m).visit(w);  // visit() only reads here
    return j;
}

Json to_json(const Event& e) {
    return std::visit([](const auto& m) { return to_json(m); }, e);
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

// Reads the fields of a message, in visit() order, into the message; the first problem is kept.
struct FieldReader {
    Reader& r;
    void operator()(const char* key, int64_t& x,
                    AtLeast min = {std::numeric_limits<int64_t>::min()}) {
        x = r.integer(key, min.value);
    }
    void operator()(const char* key, double& x) { x = r.number(key); }
    void operator()(const char* key, bool& x) { x = r.boolean(key, x); }
    void operator()(const char* key, std::string& x) { x = r.string(key); }
    void operator()(const char* key, Json& x) {
        if (const Json* c = r.get(key, true)) {
            if (!c->is_object()) r.fail(std::string("field '") + key + "' must be an object");
            x = *c;
        }
    }
    template <class E>
    void named(const char* key, E& x, std::optional<E> (*from)(std::string_view)) {
        const std::string text = r.string(key);
        if (!r.ok()) return;
        if (auto e = from(text)) {
            x = *e;
        } else {
            r.fail(std::string("unknown ") + key + " " + quoted(text));
        }
    }
    void operator()(const char* key, RunState& x) { named(key, x, run_state_from_string); }
    void operator()(const char* key, ExitReason& x) { named(key, x, exit_reason_from_string); }
    void operator()(const char* key, std::optional<int64_t>& x, AtLeast min) {
        x = r.optional_integer(key, min.value);
    }
    void operator()(const char* key, std::optional<double>& x) { x = r.optional_number(key); }
    void operator()(const char* key, std::vector<SampleText>& x) {
        const Json* v = r.get(key, true);
        if (!v) return;
        if (!v->is_array()) {
            r.fail(std::string("field '") + key + "' must be an array");
            return;
        }
        for (std::size_t i = 0; i < v->size(); ++i) {
            const Json& e = (*v)[i];
            if (!e.is_object() || !e.contains("prompt") || !e["prompt"].is_string() ||
                !e.contains("text") || !e["text"].is_string()) {
                r.fail(std::string(key) + "[" + std::to_string(i) +
                       "] must be an object with string fields 'prompt' and 'text'");
                return;
            }
            x.push_back({e["prompt"].get<std::string>(), e["text"].get<std::string>()});
        }
    }
    void operator()(const char* key, std::vector<std::pair<std::string, double>>& x) {
        const Json* v = r.get(key, true);
        if (!v) return;
        if (!v->is_object()) {
            r.fail(std::string("field '") + key + "' must be an object");
            return;
        }
        x.reserve(v->size());
        for (auto it = v->begin(); it != v->end(); ++it) {
            if (it.value().is_null()) {
                x.emplace_back(it.key(), std::numeric_limits<double>::quiet_NaN());
            } else if (it.value().is_number()) {
                x.emplace_back(it.key(), it.value().get<double>());
            } else {
                r.fail("metric '" + it.key() + "' is not a number");
                return;
            }
        }
    }
    static std::string quoted(const std::string& s) {
        return "'" + (s.size() > 64 ? s.substr(0, 64) + "..." : s) + "'";
    }
};

// Decodes the message of wire type `type` among the alternatives of `Variant` (events or
// commands); nullopt when no alternative has that type.
template <class Variant, std::size_t I = 0>
std::optional<std::variant<Variant, DecodeError>> decode_as(const std::string& type,
                                                            const Json& j) {
    if constexpr (I == std::variant_size_v<Variant>) {
        return std::nullopt;
    } else {
        using M = std::variant_alternative_t<I, Variant>;
        if (type != M::kType) return decode_as<Variant, I + 1>(type, j);
        Reader r(j);
        FieldReader fr{r};
        M m;
        m.visit(fr);
        if constexpr (std::is_same_v<M, Hello>) {
            if (r.ok() && m.protocol_version != kVersion)
                r.fail("hello announces protocol version " + std::to_string(m.protocol_version));
        }
        if (!r.ok()) return DecodeError{type + ": " + r.error()};
        return Variant{std::move(m)};
    }
}

// Rejects nesting deeper than kMaxDepth before the parser sees it.
bool too_deep(std::string_view line) {
    return util::first_too_deep(line, kMaxDepth) < line.size();
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

}  // namespace

const char* to_string(RunState s) {
    return kRunStates[static_cast<int>(s)];
}
const char* to_string(ExitReason r) {
    return kExitReasons[static_cast<int>(r)];
}

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

// Equal when every field is; a NaN equals a NaN (both travel as null).
#define LATHE_FIELDWISE_EQUAL(M)           \
    bool M::operator==(const M& o) const { \
        return fields(*this) == fields(o); \
    }
LATHE_FIELDWISE_EQUAL(Hello)
LATHE_FIELDWISE_EQUAL(Metrics)
LATHE_FIELDWISE_EQUAL(Log)
LATHE_FIELDWISE_EQUAL(Status)
LATHE_FIELDWISE_EQUAL(CheckpointSaved)
LATHE_FIELDWISE_EQUAL(Samples)
LATHE_FIELDWISE_EQUAL(ErrorEvent)
LATHE_FIELDWISE_EQUAL(Bye)
LATHE_FIELDWISE_EQUAL(Stop)
#undef LATHE_FIELDWISE_EQUAL

const char* type_name(const Event& e) {
    return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kType; }, e);
}

const char* type_name(const Command& c) {
    return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kType; }, c);
}

std::string encode(const Event& e) {
    std::string line = dump_line(to_json(e));
    if (line.size() <= kMaxLineBytes) return line;
    // Only free text can grow without bound; cut it and say so.
    const std::size_t excess = line.size() - kMaxLineBytes;
    auto cut = [&](const std::string& msg) {
        const std::string note = " [cut]";
        std::size_t keep =
            msg.size() > excess + note.size() + 64 ? msg.size() - excess - note.size() - 64 : 0;
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
    if (auto* smp = std::get_if<Samples>(&e)) {
        // Each sample gets an equal share, allowing for JSON's worst-case escaping (6 bytes a byte).
        Samples copy = *smp;
        const std::size_t share = kMaxLineBytes / 8 / std::max<std::size_t>(1, copy.samples.size());
        for (auto& x : copy.samples) {
            if (x.prompt.size() > share / 4) x.prompt = cut_utf8(x.prompt, share / 4) + " [cut]";
            if (x.text.size() > share / 2) x.text = cut_utf8(x.text, share / 2) + " [cut]";
        }
        return dump_line(to_json(copy));
    }
    return line;
}

std::string encode(const Command& c) {
    return dump_line(std::visit([](const auto& m) { return to_json(m); }, c));
}

DecodedEvent decode_event(std::string_view line) {
    std::string type;
    std::string error;
    std::optional<Json> parsed = parse_envelope(line, type, error);
    if (!parsed) return DecodeError{error};
    if (auto decoded = decode_as<Event>(type, *parsed)) return *decoded;
    return DecodeError{"unknown event type " + FieldReader::quoted(type)};
}

DecodedCommand decode_command(std::string_view line) {
    std::string type;
    std::string error;
    std::optional<Json> parsed = parse_envelope(line, type, error);
    if (!parsed) return DecodeError{error};
    if (auto decoded = decode_as<Command>(type, *parsed)) return *decoded;
    return DecodeError{"unknown command type " + FieldReader::quoted(type)};
}

}  // namespace lathe::protocol
