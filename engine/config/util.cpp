#include "engine/config/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace lathe::config {

namespace detail {
std::vector<std::string> split_enum_names(const char* list) {
    std::vector<std::string> names;
    std::string cur;
    auto flush = [&] {
        while (!cur.empty() && std::isspace(static_cast<unsigned char>(cur.back()))) cur.pop_back();
        // A trailing underscore lets a value avoid a C++ keyword (auto_ is spelled "auto").
        if (!cur.empty() && cur.back() == '_') cur.pop_back();
        if (!cur.empty()) names.push_back(cur);
        cur.clear();
    };
    for (const char* p = list; *p; ++p) {
        if (*p == ',') {
            flush();
        } else if (!(cur.empty() && std::isspace(static_cast<unsigned char>(*p)))) {
            cur += *p;
        }
    }
    flush();
    return names;
}
}  // namespace detail

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
    // No name is near one this long (the distance is at least the difference in length), and
    // comparing a 4 MiB key from a bad file with every name would take seconds.
    if (name.size() > 256) return {};
    std::string best;
    std::size_t best_d = SIZE_MAX;
    for (const auto& c : candidates) {
        std::size_t d = edit_distance(name, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    // Close enough to be a typo: at most a third of the longer name, and at least one character.
    std::size_t limit = std::max<std::size_t>(2, std::max(name.size(), best.size()) / 3);
    return best_d <= limit ? best : std::string();
}

std::optional<Duration> parse_duration(std::string_view text) {
    std::string s(text);
    s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }),
            s.end());
    std::size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                            s[i] == 'e' || s[i] == 'E' || s[i] == '+')) {
        // 'e' may start "epochs": only treat it as an exponent when a digit follows.
        if ((s[i] == 'e' || s[i] == 'E') &&
            !(i + 1 < s.size() &&
              (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '+'))) {
            break;
        }
        ++i;
    }
    if (i == 0) return std::nullopt;
    std::string num = s.substr(0, i), unit = s.substr(i);
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || !std::isfinite(v) || v < 1 || std::floor(v) != v ||
        v > 9.0e18) {
        return std::nullopt;
    }
    Duration d;
    d.value = static_cast<int64_t>(v);
    if (unit == "steps" || unit == "step") {
        d.unit = DurationUnit::steps;
    } else if (unit == "epochs" || unit == "epoch") {
        d.unit = DurationUnit::epochs;
    } else if (unit == "tokens" || unit == "token") {
        d.unit = DurationUnit::tokens;
    } else {
        return std::nullopt;
    }
    return d;
}

std::string Duration::to_string() const {
    return std::to_string(value) + enum_to_string(unit);
}

int64_t ModelConfig::hidden_size() const {
    // Saturates at int64's maximum: casting a double past it is undefined, and the memory
    // estimate refuses a model that large by that figure.
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    auto saturated = [](double x) {
        return x >= 9223372036854775808.0 ? kMax : static_cast<int64_t>(x);
    };
    int64_t h = saturated(8.0 * static_cast<double>(d_model) / 3.0);
    if (hidden_size_multiplier) h = saturated(*hidden_size_multiplier * static_cast<double>(h));
    const int64_t m = std::max<int64_t>(1, hidden_size_multiple_of);
    int64_t rounded = 0;
    if (h > kMax - (m - 1) || __builtin_mul_overflow(m, (h + m - 1) / m, &rounded)) return kMax;
    return rounded;
}

int64_t SlidingWindowConfig::window(int64_t i, int64_t n_layers) const {
    if (pattern.empty()) return -1;
    if (force_full_attention_on_first_layer && i == 0) return -1;
    if (force_full_attention_on_last_layer && i == n_layers - 1) return -1;
    const int64_t k = force_full_attention_on_first_layer ? i - 1 : i;
    const auto n = static_cast<int64_t>(pattern.size());
    return pattern[static_cast<std::size_t>(((k % n) + n) % n)];
}

}  // namespace lathe::config
