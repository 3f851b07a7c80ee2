// Moving models between Lathe checkpoints and Hugging Face folders (hf/family.h: Olmo2, Olmo3,
// Llama, Qwen2, Qwen3; and OLMo-core-named safetensors). Both directions go tensor by tensor, so memory stays near the
// largest tensor, not the model.
#pragma once

#include "engine/config/config.h"

#include "engine/util/size.h"

#include <torch/torch.h>

#include <memory>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lathe::remote {
class DownloadedFolder;
}

namespace lathe::checkpoint {

struct ExportOptions {
    std::string dtype = "float32";                ///< "float32" or "bfloat16"
    uint64_t max_shard_bytes = 5'000'000'000ULL;  ///< Hugging Face's default, "5GB"
};

struct ExportResult {
    std::vector<std::string> files;  ///< every file written, relative to the output folder
    uint64_t weight_bytes = 0;
    int64_t tensors = 0;
};

using lathe::parse_size;  // engine/util/size.h

/// Writes the complete Lathe checkpoint `ckpt` as a Hugging Face folder of its family
/// `out_dir`: config.json, generation_config.json, model.safetensors (or shards plus
/// model.safetensors.index.json past `max_shard_bytes`). Refuses an incomplete checkpoint, one
/// without its config.json, and an existing non-empty `out_dir`. Nothing is left in `out_dir` when
/// it fails.
ExportResult export_checkpoint(const std::string& ckpt, const std::string& out_dir,
                               const ExportOptions& options);

/// The model config recorded with the weights at `path`: a Hugging Face folder's config.json, or a
/// Lathe checkpoint's config.json.
config::ModelConfig model_config_of(const std::string& path);

/// hf::is_hf_model_folder for `path` here or in a bucket (s3://, http(s)://), asking its storage.
bool is_hf_model_folder_at(const std::string& path);

/// A model to start from or to generate with, resolved once from its path: a complete Lathe
/// checkpoint, or a Hugging Face model folder of any family (hf/family.h), here or in a bucket
/// (fetched into a temporary folder that goes with the source). Whatever the source, it yields
/// the model config, the weights and the tokenizer file; trainer.load_path=HF_DIR, `import` and
/// `generate` read models through it.
class ModelSource {
public:
    /// Throws lathe::Error naming what `path` is not (or what its config.json cannot be).
    explicit ModelSource(std::string path);
    ~ModelSource();
    ModelSource(const ModelSource&) = delete;
    ModelSource& operator=(const ModelSource&) = delete;
    /// Where the files are read: `path`, or the local copy of a remote folder.
    bool is_hf() const { return hf_; }
    const std::string& path() const { return path_; }
    const std::string& local_path() const { return local_; }
    const config::ModelConfig& model() const { return model_; }
    /// The weights by Lathe name, converted to `as`'s dtype and checked against its shapes.
    /// `key_mapping` (Lathe name -> name in the files; train_module.load_key_mapping) applies to
    /// a Hugging Face folder; a checkpoint's names are Lathe's.
    std::map<std::string, torch::Tensor> weights(
        const config::ModelConfig& as,
        const std::map<std::string, std::string>& key_mapping = {}) const;
    /// The tokenizer file kept with the weights (tokenizer.json, else tokenizer.model); "" when
    /// there is none.
    std::string tokenizer_file() const;

private:
    std::string path_, local_;
    bool hf_ = false;
    config::ModelConfig model_;
    std::unique_ptr<remote::DownloadedFolder> copy_;
};

/// Reads the weights of the Hugging Face folder `dir` (sharded or not; fp32, bf16 or fp16) under
/// Lathe's parameter names (without "model."), converted to `m`'s dtype. Names may also be
/// OLMo-core's. `key_mapping` maps a Lathe parameter name to the name it has in the files (for
/// renamed parameters, as OLMo-core's load_key_mapping). Every tensor is checked before any is
/// returned: an unknown or missing name, a shape that does not fit `m`, a damaged file each throw
/// lathe::Error naming the file and the tensor.
std::map<std::string, torch::Tensor> read_hf_weights(
    const std::string& dir, const config::ModelConfig& m,
    const std::map<std::string, std::string>& key_mapping = {});

/// The model's parameters of the complete Lathe checkpoint `ckpt` (its optimizer state is not
/// read), by Lathe name, converted to `m`'s dtype; each checked against its CRC-32C.
std::map<std::string, torch::Tensor> read_checkpoint_weights(const std::string& ckpt,
                                                             const config::ModelConfig& m);

/// `lathe-engine import`: a model-only Lathe checkpoint (step 0, .metadata.json "model_only") in
/// `out_ckpt` from the Hugging Face folder `hf_dir`, with a config.json whose model section is the
/// folder's. A run that loads it starts its trainer and optimizer fresh.
void import_hf(const std::string& hf_dir, const std::string& out_ckpt);

/// The parameter shapes of the model `m`, by Lathe name, in Hugging Face's order.
std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(
    const config::ModelConfig& m);

}  // namespace lathe::checkpoint
