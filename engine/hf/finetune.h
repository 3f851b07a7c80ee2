// A fine-tuning run of a Hugging Face model folder, as a config document: what `lathe-engine
// train HF_DIR`, `config HF_DIR` and the workbench's File > New run from a Hugging Face model…
// start from. Torch-free.
#pragma once

#include "engine/config/io.h"

#include <string>
#include <vector>

namespace lathe::hf {

/// The config document of a run that fine-tunes the model in `dir` (a folder
/// is_hf_model_folder accepts): the model from its config.json; trainer.load_path = dir; its
/// tokenizer (tokenizer.json, else tokenizer.model) as dataset.tokenizer; numpy token files with
/// dataset.paths left for the user to fill; sequences of min(max_position_embeddings, 1024)
/// tokens; and fine-tuning defaults (lr 2e-5, no weight decay, 10 warm-up steps, one epoch).
/// Throws lathe::Error naming the field for a model Lathe cannot load.
config::Json finetune_document(const std::string& dir);

/// config::load for a spec that may also be a Hugging Face model folder (then
/// finetune_document(spec) plus the overrides); never throws: problems are in Loaded::issues.
config::Loaded load_spec(const std::string& spec, const std::vector<std::string>& overrides = {});

}  // namespace lathe::hf
