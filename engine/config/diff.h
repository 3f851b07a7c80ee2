// Differences between two config documents, and which of them a resume may carry: one definition
// for the engine (--resume-from) and the GUI (the resume bar, the runs comparison), so both refuse
// the same changes in the same words.
#pragma once

#include "engine/config/io.h"

#include <string>
#include <utility>
#include <vector>

namespace lathe::config {

/// The text of a value that one of the two documents does not have.
inline constexpr const char* kAbsent = "(absent)";

/// What a changed field means for resuming from a checkpoint.
enum class ResumeChangeKind {
    Unsafe,   ///< the checkpoint cannot be loaded with it: the model's shape, the sequence length
    Changed,  ///< a change of the run (learning rate, duration ...), noted in history.jsonl
    Ignored,  ///< where the run lives or how it is started (run_name, save_folder, launch.* ...)
};

struct ConfigDifference {
    std::string path;    ///< dotted: "train_module.optim.lr"
    std::string before;  ///< compact JSON text, or kAbsent
    std::string after;
    ResumeChangeKind kind = ResumeChangeKind::Changed;
    bool operator==(const ConfigDifference& o) const {
        return path == o.path && before == o.before && after == o.after && kind == o.kind;
    }
};

/// Leaf values by dotted path, in document order; arrays and empty objects are leaves (compact
/// JSON text).
std::vector<std::pair<std::string, std::string>> flatten_document(const Json& doc);
/// The fields whose values differ, in `before`'s order, then the paths only `after` has, each
/// classified by resume_change_kind().
std::vector<ConfigDifference> diff_documents(const Json& before, const Json& after);
ResumeChangeKind resume_change_kind(const std::string& path);

/// Empty when `changes` allow resuming from `checkpoint`; otherwise the refusal, one unsafe change
/// a line: "cannot resume CKPT with a different model or sequence length:\n  PATH: A -> B".
std::string resume_refusal(const std::string& checkpoint,
                           const std::vector<ConfigDifference>& changes);

}  // namespace lathe::config
