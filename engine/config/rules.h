#pragma once
// Rules that involve more than one field and have more than one user: the config's consistency
// check, the data pipeline, the CLI and the workbench's editors ask these functions, so they
// cannot disagree on a tolerance or a message.
#include "engine/config/config.h"

#include <optional>
#include <string>

namespace lathe::config {

/// The sum of a mixture's target_ratio values.
double mixture_ratio_sum(const SourceMixtureConfig& mix);

/// Whether ratios summing to SUM are accepted: numpy's allclose(sum, 1) at its default tolerances
/// (atol 1e-8, rtol 1e-5), as OLMo-core checks a mixture.
bool mixture_ratios_sum_to_one(double sum);

/// What is wrong with a mixture's ratios, or nothing: "the target_ratio values sum to S, not 1
/// (name ratio, ...)", for the path dataset.mixture.sources.
std::optional<std::string> mixture_ratio_problem(const SourceMixtureConfig& mix);

/// What is wrong with a mixture's token count, or nothing, for dataset.mixture.requested_tokens.
std::optional<std::string> mixture_tokens_problem(const SourceMixtureConfig& mix);

}  // namespace lathe::config
