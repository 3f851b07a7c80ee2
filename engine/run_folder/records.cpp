#include "engine/run_folder/records.h"

#include "engine/run_folder/file_io.h"
#include "engine/util/error.h"
#include "engine/util/record_json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <signal.h>

namespace lathe::run_folder {

template <class R>
nlohmann::ordered_json to_json(const R& record) {
    return record_json::to_json(record);
}

template <class R>
R record_from_json(const nlohmann::json& j, std::vector<std::string>* problems) {
    return record_json::from_json_lenient<R>(j, problems);
}

template <class R>
std::optional<R> read_record(const std::string& path, std::string* error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        if (error) *error = std::strerror(errno);
        return std::nullopt;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        if (error) *error = j.is_discarded() ? "not valid JSON" : "not a JSON object";
        return std::nullopt;
    }
    return record_from_json<R>(j);
}

template <class R>
void write_record(const std::string& path, const R& record, WhenFull when_full) {
    write_file_atomic(path, to_json(record).dump(2) + "\n", when_full);
}

#define LATHE_RUN_FOLDER_RECORD(R)                                                    \
    template nlohmann::ordered_json to_json<R>(const R&);                             \
    template R record_from_json<R>(const nlohmann::json&, std::vector<std::string>*); \
    template std::optional<R> read_record<R>(const std::string&, std::string*);       \
    template void write_record<R>(const std::string&, const R&, WhenFull);
LATHE_RUN_FOLDER_RECORD(RunStatus)
LATHE_RUN_FOLDER_RECORD(ParentLink)
LATHE_RUN_FOLDER_RECORD(ResumeEvent)
LATHE_RUN_FOLDER_RECORD(UnusableCheckpoint)
LATHE_RUN_FOLDER_RECORD(RunNotes)
#undef LATHE_RUN_FOLDER_RECORD

std::vector<std::string> parse_tags(const std::string& text) {
    std::vector<std::string> tags;
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        std::string tag = text.substr(start, comma - start);
        const auto first = tag.find_first_not_of(" \t");
        tag = first == std::string::npos
                  ? std::string()
                  : tag.substr(first, tag.find_last_not_of(" \t") - first + 1);
        start = comma + 1;
        if (tag.empty()) continue;
        if (tag.size() > 64)
            throw Error("tag \"" + tag.substr(0, 64) + "…\" is longer than 64 bytes");
        for (unsigned char c : tag)
            if (c < 0x20 || c == 0x7f) throw Error("tag \"" + tag + "\" has a control character");
        if (std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
    }
    return tags;
}

std::vector<ResumeEvent> read_resume_events(const std::string& history_path) {
    std::vector<ResumeEvent> out;
    std::ifstream in(history_path);
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || j.value("event", "") != ResumeEvent::kEvent)
            continue;
        std::vector<std::string> problems;
        auto e = record_from_json<ResumeEvent>(j, &problems);
        if (e.from_step >= 0) out.push_back(std::move(e));
    }
    return out;
}

void append_history(const std::string& history_path, const nlohmann::ordered_json& line) {
    std::ofstream out(history_path, std::ios::app);
    out << line.dump() << "\n";
    out.flush();
    if (!out) throw Error(history_path + ": cannot append: " + std::strerror(errno));
}

std::string iso_time_now() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

bool lathe_process_alive(int64_t pid) {
    if (pid <= 0) return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
    std::ifstream self("/proc/self/cmdline");
    if (!self) return true;  // no /proc: the signal is all there is to go on
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    if (!cmdline) return false;
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    return text.find("lathe") != std::string::npos;
}

std::string effective_state(const RunStatus& s) {
    if (s.state == RunStatus::kRunning && !lathe_process_alive(s.pid))
        return RunStatus::kInterrupted;
    return s.state;
}

}  // namespace lathe::run_folder
