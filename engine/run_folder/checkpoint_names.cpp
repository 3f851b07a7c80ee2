#include "engine/run_folder/checkpoint_names.h"

#include <cctype>

namespace lathe::run_folder {

namespace {

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

}  // namespace

std::string train_state_file(int rank) {
    return "train/rank" + std::to_string(rank) + ".json";
}

std::string checkpoint_folder_name(int64_t step) {
    return "step" + std::to_string(step);
}

std::string temporary_folder(const std::string& checkpoint_dir) {
    return checkpoint_dir + "-tmp";
}

std::optional<CheckpointName> parse_checkpoint_name(std::string_view name) {
    constexpr std::string_view kPrefix = "step", kTmp = "-tmp", kAbandoned = ".abandoned";
    if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    name.remove_prefix(kPrefix.size());
    std::size_t digits = 0;
    while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
    // At most 18 digits, so the step fits an int64_t.
    if (digits == 0 || digits > 18) return std::nullopt;
    CheckpointName out;
    out.step = std::stoll(std::string(name.substr(0, digits)));
    const std::string_view rest = name.substr(digits);
    if (rest.empty()) {
        out.kind = CheckpointName::Kind::Saved;
    } else if (rest == kTmp) {
        out.kind = CheckpointName::Kind::Temporary;
    } else if (rest.substr(0, kAbandoned.size()) == kAbandoned &&
               (rest.size() == kAbandoned.size() || all_digits(rest.substr(kAbandoned.size())))) {
        out.kind = CheckpointName::Kind::Abandoned;
    } else {
        return std::nullopt;
    }
    return out;
}

std::string abandoned_path(const std::string& checkpoint_dir,
                           const std::function<bool(const std::string&)>& exists) {
    std::string to = checkpoint_dir + ".abandoned";
    for (int i = 1; exists(to); ++i) to = checkpoint_dir + ".abandoned" + std::to_string(i);
    return to;
}

}  // namespace lathe::run_folder
