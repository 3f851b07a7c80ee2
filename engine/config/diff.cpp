#include "engine/config/diff.h"

#include <unordered_map>
#include <unordered_set>

namespace lathe::config {

namespace {

void flatten(const Json& j, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& out) {
    if (j.is_object() && !j.empty()) {
        for (auto it = j.begin(); it != j.end(); ++it)
            flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
        return;
    }
    out.emplace_back(path, j.dump());
}

bool starts_with(const std::string& s, const char* prefix) {
    return s.rfind(prefix, 0) == 0;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> flatten_document(const Json& doc) {
    std::vector<std::pair<std::string, std::string>> out;
    flatten(doc, {}, out);
    return out;
}

ResumeChangeKind resume_change_kind(const std::string& path) {
    if (starts_with(path, "model.") || path == "dataset.sequence_length" ||
        path == "train_module.max_sequence_length")
        return ResumeChangeKind::Unsafe;
    if (path == "run_name" || path == "trainer.save_folder" || starts_with(path, "trainer.load_") ||
        starts_with(path, "trainer.remote.") || path == "trainer.hard_stop" ||
        starts_with(path, "launch."))
        return ResumeChangeKind::Ignored;
    return ResumeChangeKind::Changed;
}

std::vector<ConfigDifference> diff_documents(const Json& before, const Json& after) {
    const auto fa = flatten_document(before), fb = flatten_document(after);
    std::unordered_map<std::string, std::string> in_after(fb.begin(), fb.end());
    std::unordered_set<std::string> seen;
    std::vector<ConfigDifference> out;
    auto add = [&](const std::string& path, const std::string& a, const std::string& b) {
        out.push_back({path, a, b, resume_change_kind(path)});
    };
    for (const auto& [path, value] : fa) {
        seen.insert(path);
        const auto it = in_after.find(path);
        const std::string other = it == in_after.end() ? kAbsent : it->second;
        if (other != value) add(path, value, other);
    }
    for (const auto& [path, value] : fb)
        if (!seen.count(path)) add(path, kAbsent, value);
    return out;
}

std::string resume_refusal(const std::string& checkpoint,
                           const std::vector<ConfigDifference>& changes) {
    std::string lines;
    for (const auto& c : changes)
        if (c.kind == ResumeChangeKind::Unsafe)
            lines += "\n  " + c.path + ": " + c.before + " -> " + c.after;
    if (lines.empty()) return {};
    return "cannot resume " + checkpoint + " with a different model or sequence length:" + lines;
}

}  // namespace lathe::config
