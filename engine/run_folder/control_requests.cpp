#include "engine/run_folder/control_requests.h"

#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace lathe::run_folder {

namespace fs = std::filesystem;

const char* to_string(ControlCommand c) {
    switch (c) {
        case ControlCommand::checkpoint:
            return "checkpoint";
        case ControlCommand::stop:
            return "stop";
        case ControlCommand::stop_without_checkpoint:
            return "stop_without_checkpoint";
    }
    return "?";
}

bool parse_control_command(const std::string& text, ControlCommand& out) {
    for (auto c : {ControlCommand::checkpoint, ControlCommand::stop,
                   ControlCommand::stop_without_checkpoint}) {
        if (text == to_string(c)) {
            out = c;
            return true;
        }
    }
    return false;
}

std::string make_control_dir(const std::string& run_dir) {
    std::string dir = join(run_dir, kControlDir);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(dir + ": cannot make the control folder: " + std::strerror(errno));
    return dir;
}

std::string write_control_request(const std::string& run_dir, ControlCommand command) {
    const std::string dir = make_control_dir(run_dir);
    static std::atomic<int> counter{0};
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::string name =
        "request-" +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + "-" +
        std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json";
    std::string path = join(dir, name);
    write_file_atomic(path, nlohmann::json{{"command", to_string(command)}}.dump() + "\n");
    return path;
}

std::vector<ControlRequest> take_control_requests(const std::string& run_dir,
                                                  std::time_t not_before,
                                                  std::vector<std::string>& problems) {
    std::vector<ControlRequest> out;
    const std::string dir = join(run_dir, kControlDir);
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("request-", 0) == 0 && name.size() > 5 &&
            name.compare(name.size() - 5, 5, ".json") == 0)
            names.push_back(name);
    }
    std::sort(names.begin(), names.end());  // the name starts with the time: oldest first
    for (const std::string& name : names) {
        const std::string path = join(dir, name);
        auto refuse = [&](const std::string& why) {
            problems.push_back(path + ": " + why + "; set aside as .refused-" + name);
            std::rename(path.c_str(), join(dir, ".refused-" + name).c_str());
        };
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) continue;  // taken meanwhile
        if (!S_ISREG(st.st_mode)) {
            refuse("not a regular file");
            continue;
        }
        if (st.st_uid != ::geteuid()) {
            refuse("owned by user " + std::to_string(st.st_uid) + ", not the run's user (" +
                   std::to_string(::geteuid()) + ")");
            continue;
        }
        if (st.st_mtime < not_before) {
            problems.push_back(path + ": written before this run started; removed");
            std::remove(path.c_str());
            continue;
        }
        ControlCommand command{};
        try {
            const auto j = nlohmann::json::parse(read_text_file(path));
            if (!j.is_object() || !j.contains("command") || !j["command"].is_string() ||
                !parse_control_command(j["command"].get<std::string>(), command)) {
                refuse(
                    "not {\"command\": \"checkpoint\" | \"stop\" | \"stop_without_checkpoint\"}");
                continue;
            }
        } catch (const std::exception& e) {
            refuse(std::string("unreadable: ") + e.what());
            continue;
        }
        std::remove(path.c_str());
        out.push_back({path, command});
    }
    return out;
}

}  // namespace lathe::run_folder
