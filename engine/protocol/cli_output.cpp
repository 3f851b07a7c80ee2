#include "engine/protocol/cli_output.h"

namespace lathe::protocol {

std::string output_event(const std::string& line) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return {};
    const auto it = j.find("event");
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace lathe::protocol
