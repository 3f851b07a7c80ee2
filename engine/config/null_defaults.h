// What the engine uses for a field left null, where that is a value it computes from the rest of
// the config (optim.beta2 by optimizer, head_dim from d_model and n_heads, ...). The config editor
// shows it in the unset field ("default: 0.999") instead of a misleading 0; fields missing here say
// what null means in their own description ("null disables", "null keeps model.dtype").
#pragma once

#include "engine/config/config.h"
#include "engine/config/io.h"

#include <map>
#include <string>

namespace lathe::config {

/// Field path (as in the schema) -> the value the engine uses while that field is null.
std::map<std::string, Json> null_field_defaults(const ExperimentConfig& cfg);

/// The short text for an unset field: "default: 0.999" for a value, else the description's own
/// words after "null" ("null disables" -> "unset: disables"), else "unset".
std::string null_placeholder(const std::string& description, const Json* value);

}  // namespace lathe::config
