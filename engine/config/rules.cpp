#include "engine/config/rules.h"

#include <cmath>

namespace lathe::config {

double mixture_ratio_sum(const SourceMixtureConfig& mix) {
    double sum = 0;
    for (const auto& src : mix.sources) sum += src.target_ratio;
    return sum;
}

bool mixture_ratios_sum_to_one(double sum) {
    constexpr double kAtol = 1e-8, kRtol = 1e-5;  // numpy.allclose's defaults
    return std::abs(sum - 1.0) <= kAtol + kRtol * 1.0;
}

std::optional<std::string> mixture_ratio_problem(const SourceMixtureConfig& mix) {
    const double sum = mixture_ratio_sum(mix);
    if (mixture_ratios_sum_to_one(sum)) return std::nullopt;
    std::string ratios;
    for (const auto& src : mix.sources)
        ratios +=
            (ratios.empty() ? "" : ", ") + src.source_name + " " + std::to_string(src.target_ratio);
    return "the target_ratio values sum to " + std::to_string(sum) + ", not 1 (" + ratios + ")";
}

std::optional<std::string> mixture_tokens_problem(const SourceMixtureConfig& mix) {
    if (mix.requested_tokens) return std::nullopt;
    return std::string("a mixture needs the tokens it holds (its sources' ratios divide them)");
}

}  // namespace lathe::config
