// One clear message of an exception, for the console and the GUI. LibTorch's c10::Error appends a
// C++ backtrace (35 frames on a CUDA out-of-memory error) to what(): that goes to the log file
// only (log::debug). A CUDA out-of-memory error also names the remedies, in order (issue 34).
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace lathe {

/// What the run's memory estimate expected ("expected peak 70.1 GiB per rank: ..."), which an
/// out-of-memory message quotes; set by the training command once it has the config.
inline std::string& memory_note() {
    static std::string note;
    return note;
}
inline void set_memory_note(std::string note) {
    memory_note() = std::move(note);
}

/// What the error says, without LibTorch's backtrace; with the estimate's expected peak and the
/// remedies for out of memory.
inline std::string message_of(const std::exception& e) {
    if (const auto* oom = dynamic_cast<const c10::OutOfMemoryError*>(&e))
        return std::string(oom->what_without_backtrace()) +
               (memory_note().empty() ? std::string()
                                      : "\nThe memory estimate expected: " + memory_note()) +
               "\nRemedies, in order: recompute activations in backward "
               "(train_module.ac_config.mode=full, or selected_blocks), a smaller "
               "train_module.rank_microbatch_size (more micro-batches, same batch), then shard "
               "over more devices (train_module.dp_config.name=fsdp, or "
               "train_module.tp_config.degree)";
    if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
        return c10_error->what_without_backtrace();
    return e.what();
}

/// Whether what() holds more than message_of (a backtrace worth keeping in the log file).
inline bool has_backtrace(const std::exception& e) {
    return dynamic_cast<const c10::Error*>(&e) != nullptr;
}

}  // namespace lathe
