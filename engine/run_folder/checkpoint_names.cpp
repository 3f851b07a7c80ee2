#include "engine/run_folder/checkpoint_names.h"

#include <cctype>

namespace lathe::run_folder {

namespace {

constexpr std::string_view kAbandoned = ".abandoned", kUnusable = ".unusable";

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// `rest` is `suffix` followed by nothing or by digits.
bool is_set_aside(std::string_view rest, std::string_view suffix) {
    return rest.substr(0, suffix.size()) == suffix &&
           (rest.size() == suffix.size() || all_digits(rest.substr(suffix.size())));
}

std::string first_free(const std::string& checkpoint_dir, std::string_view suffix,
                       const std::function<bool(const std::string&)>& exists) {
    std::string to = checkpoint_dir + std::string(suffix);
    for (int i = 1; exists(to); ++i) to = checkpoint_dir + std::string(suffix) + std::to_string(i);
    return to;
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
    constexpr std::string_view kPrefix = "step", kTmp = "-tmp";
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
    } else if (is_set_aside(rest, kAbandoned)) {
        out.kind = CheckpointName::Kind::Abandoned;
    } else if (is_set_aside(rest, kUnusable)) {
        out.kind = CheckpointName::Kind::Unusable;
    } else {
        return std::nullopt;
    }
    return out;
}

std::string abandoned_path(const std::string& checkpoint_dir,
                           const std::function<bool(const std::string&)>& exists) {
    return first_free(checkpoint_dir, kAbandoned, exists);
}

std::string unusable_path(const std::string& checkpoint_dir,
                          const std::function<bool(const std::string&)>& exists) {
    return first_free(checkpoint_dir, kUnusable, exists);
}

}  // namespace lathe::run_folder
