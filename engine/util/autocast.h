// AutocastScope: autocast on for one device type while in scope (LibTorch has no C++ guard that
// takes a dtype); the previous state comes back on exit.
#pragma once

#include <ATen/autocast_mode.h>

namespace lathe {

class AutocastScope {
public:
    /// Sets autocast for `type` to `enabled` with `dtype` (nesting counted, cache cleared on the
    /// outermost exit, as torch.autocast does).
    AutocastScope(c10::DeviceType type, bool enabled, at::ScalarType dtype) : type_(type) {
        prev_enabled_ = at::autocast::is_autocast_enabled(type_);
        prev_dtype_ = at::autocast::get_autocast_dtype(type_);
        at::autocast::set_autocast_enabled(type_, enabled);
        at::autocast::set_autocast_dtype(type_, dtype);
        at::autocast::increment_nesting();
    }
    ~AutocastScope() {
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        at::autocast::set_autocast_enabled(type_, prev_enabled_);
        at::autocast::set_autocast_dtype(type_, prev_dtype_);
    }
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

private:
    c10::DeviceType type_;
    bool prev_enabled_ = false;
    at::ScalarType prev_dtype_ = at::kFloat;
};

}  // namespace lathe
