#include "engine/checkpoint/hf_convert.h"

#include "engine/chat/template.h"
#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/tensor_file.h"
#include "engine/config/io.h"
#include "engine/hf/family.h"
#include "engine/hf/safetensors.h"
#include "engine/remote/storage.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/run_folder/crc32c.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/tensor_file_header.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace lathe::checkpoint {

using hf::ExportTokens;
using hf::hf_config_json;
using hf::hf_name;
using hf::hf_weight_files;
using hf::is_hf_model_folder;
using hf::lathe_name;
using hf::model_config_from_hf;
using hf::SafetensorsEntry;
using hf::SafetensorsReader;
using hf::SafetensorsWriter;

namespace fs = std::filesystem;

namespace {

torch::ScalarType torch_dtype(const std::string& name, const std::string& where) {
    if (name == "float32" || name == "F32") return torch::kFloat32;
    if (name == "bfloat16" || name == "BF16") return torch::kBFloat16;
    if (name == "float16" || name == "F16") return torch::kFloat16;
    throw Error(where + ": dtype " + name +
                " is not a floating-point weight type (F32, BF16, F16)");
}

std::string safetensors_dtype(torch::ScalarType t) {
    switch (t) {
        case torch::kFloat32:
            return "F32";
        case torch::kBFloat16:
            return "BF16";
        case torch::kFloat16:
            return "F16";
        default:
            throw Error(std::string("no safetensors name for ") + c10::toString(t));
    }
}

std::string shape_text(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// A folder that must not exist yet, or be empty; written as `dir`.partial and renamed when whole.
struct Staging {
    explicit Staging(std::string dir) : final_dir(std::move(dir)), tmp(final_dir + ".partial") {
        std::error_code ec;
        if (fs::exists(final_dir, ec) && !fs::is_empty(final_dir, ec))
            throw Error(final_dir + ": already exists and is not empty; choose a new folder");
        fs::remove_all(tmp, ec);
        fs::create_directories(tmp, ec);
        if (ec) throw Error(tmp + ": cannot create: " + ec.message());
    }
    ~Staging() {
        if (!done) {
            std::error_code ec;
            fs::remove_all(tmp, ec);
        }
    }
    void commit() {
        std::error_code ec;
        fs::remove(final_dir, ec);  // an empty folder the user made
        fs::rename(tmp, final_dir, ec);
        if (ec) throw Error("cannot rename " + tmp + " to " + final_dir + ": " + ec.message());
        done = true;
    }
    std::string final_dir, tmp;
    bool done = false;
};

config::ExperimentConfig checkpoint_config(const std::string& ckpt) {
    const std::string path = run_folder::join(ckpt, run_folder::kConfigFile);
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw Error(ckpt + ": has no " + std::string(run_folder::kConfigFile) +
                    ", so the model's shape is unknown (was it saved with "
                    "trainer.callbacks.config_saver disabled?)");
    // The fields only: a checkpoint's config need not fit this machine (data paths, ranks).
    std::vector<config::Issue> issues;
    const auto doc = config::parse_document(run_folder::read_text_file(path), config::Format::json,
                                            path, issues);
    auto cfg = issues.empty() ? config::from_json(doc, issues) : config::ExperimentConfig{};
    if (!issues.empty()) throw config::ConfigError(issues);
    return cfg;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(
    const config::ModelConfig& m) {
    const int64_t d = m.d_model, hd = m.resolved_head_dim(), q = m.n_heads * hd,
                  kv = m.kv_heads() * hd, h = m.hidden_size();
    std::vector<std::pair<std::string, std::vector<int64_t>>> out;
    out.push_back({"embeddings.weight", {m.vocab_size, d}});
    for (int64_t i = 0; i < m.n_layers; ++i) {
        const std::string p = "blocks." + std::to_string(i) + ".";
        out.push_back({p + "attention.w_q.weight", {q, d}});
        out.push_back({p + "attention.w_k.weight", {kv, d}});
        out.push_back({p + "attention.w_v.weight", {kv, d}});
        if (m.qkv_bias) {
            out.push_back({p + "attention.w_q.bias", {q}});
            out.push_back({p + "attention.w_k.bias", {kv}});
            out.push_back({p + "attention.w_v.bias", {kv}});
        }
        out.push_back({p + "attention.w_out.weight", {d, q}});
        if (m.qk_norm) {
            out.push_back({p + "attention.q_norm.weight", {m.use_head_qk_norm ? hd : q}});
            out.push_back({p + "attention.k_norm.weight", {m.use_head_qk_norm ? hd : kv}});
        }
        out.push_back({p + "attention_norm.weight", {d}});
        out.push_back({p + "feed_forward.w1.weight", {h, d}});
        out.push_back({p + "feed_forward.w3.weight", {h, d}});
        out.push_back({p + "feed_forward.w2.weight", {d, h}});
        out.push_back({p + "feed_forward_norm.weight", {d}});
    }
    out.push_back({"lm_head_norm.weight", {d}});
    if (!m.tie_word_embeddings) out.push_back({"lm_head.weight", {m.vocab_size, d}});
    return out;
}

namespace {

// One tensor to export: its Hugging Face name, where it is in the checkpoint, its size as written.
struct ExportItem {
    std::string hf;
    const run_folder::TensorEntry* entry;
    uint64_t out_bytes;
};

// The model's parameters, found in the checkpoint's tensor file with the shapes its config needs.
std::vector<ExportItem> export_items(const config::ModelConfig& m,
                                     const run_folder::TensorFileHeader& header,
                                     const std::string& tensor_path, torch::ScalarType out_type) {
    std::map<std::string, const run_folder::TensorEntry*> by_name;
    for (const auto& e : header.tensors) by_name[e.name] = &e;
    std::vector<ExportItem> items;
    for (const auto& [name, shape] : parameter_shapes(m)) {
        auto it = by_name.find("model." + name);
        if (it == by_name.end())
            throw Error(tensor_path + ": no tensor 'model." + name + "' for the config's model");
        if (it->second->shape != shape)
            throw Error(tensor_path + ": tensor 'model." + name + "' has shape " +
                        shape_text(it->second->shape) + ", the config's model needs " +
                        shape_text(shape));
        int64_t numel = 1;
        for (auto s : shape) numel *= s;
        items.push_back({*hf_name(name, m), it->second,
                         static_cast<uint64_t>(numel) * c10::elementSize(out_type)});
    }
    return items;
}

// Shards: greedily, in order, each up to max_shard_bytes (a larger tensor gets its own).
std::vector<std::vector<const ExportItem*>> export_shards(const std::vector<ExportItem>& items,
                                                          uint64_t max_shard_bytes) {
    std::vector<std::vector<const ExportItem*>> shards(1);
    uint64_t in_shard = 0;
    for (const auto& it : items) {
        if (!shards.back().empty() && in_shard + it.out_bytes > max_shard_bytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back().push_back(&it);
        in_shard += it.out_bytes;
    }
    return shards;
}

// The safetensors files (and their index when there are several), each tensor read, checked
// against its checksum and converted to out_type.
void write_weights(const std::string& tensor_path, const run_folder::TensorFileHeader& header,
                   const std::vector<std::vector<const ExportItem*>>& shards,
                   torch::ScalarType out_type, const std::string& dir, ExportResult& result) {
    std::ifstream in(tensor_path, std::ios::binary);
    if (!in) throw Error(tensor_path + ": cannot open: " + std::strerror(errno));
    std::vector<char> buffer;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (std::size_t s = 0; s < shards.size(); ++s) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
        const std::string file = shards.size() == 1 ? "model.safetensors" : name;
        std::vector<SafetensorsEntry> layout;
        for (const ExportItem* it : shards[s]) {
            SafetensorsEntry e;
            e.name = it->hf;
            e.dtype = safetensors_dtype(out_type);
            e.shape = it->entry->shape;
            layout.push_back(e);
            weight_map[it->hf] = file;
        }
        SafetensorsWriter writer(run_folder::join(dir, file), layout, {{"format", "pt"}});
        for (const ExportItem* it : shards[s]) {
            const auto& e = *it->entry;
            buffer.resize(e.nbytes);
            in.seekg(static_cast<std::streamoff>(header.data_start + e.offset));
            in.read(buffer.data(), static_cast<std::streamsize>(e.nbytes));
            if (!in) throw Error(tensor_path + ": cannot read tensor '" + e.name + "'");
            if (e.crc32c && run_folder::crc32c(buffer.data(), e.nbytes) != *e.crc32c)
                throw Error(tensor_path + ": corrupted: checksum mismatch in tensor '" + e.name +
                            "'");
            auto src = torch::from_blob(buffer.data(), e.shape,
                                        torch_dtype(e.dtype, tensor_path + ": " + e.name));
            auto out = src.to(out_type).contiguous();
            writer.write(it->hf, out.data_ptr(), it->out_bytes);
            result.weight_bytes += it->out_bytes;
            ++result.tensors;
        }
        writer.finish();
        result.files.push_back(file);
    }
    if (shards.size() > 1) {
        nlohmann::ordered_json index = {{"metadata", {{"total_size", result.weight_bytes}}},
                                        {"weight_map", weight_map}};
        run_folder::write_file_atomic(run_folder::join(dir, "model.safetensors.index.json"),
                                      index.dump(2) + "\n");
        result.files.emplace_back("model.safetensors.index.json");
    }
}

// config.json and generation_config.json.
void write_model_configs(const nlohmann::json& config_json, const std::string& dir,
                         ExportResult& result) {
    run_folder::write_file_atomic(run_folder::join(dir, "config.json"), config_json.dump(2) + "\n");
    nlohmann::json generation = {{"_from_model_config", true},
                                 {"bos_token_id", config_json["bos_token_id"]},
                                 {"eos_token_id", config_json["eos_token_id"]},
                                 {"pad_token_id", nullptr}};
    run_folder::write_file_atomic(run_folder::join(dir, "generation_config.json"),
                                  generation.dump(2) + "\n");
    result.files.emplace_back("config.json");
    result.files.emplace_back("generation_config.json");
}

// The tokenizer file as it is, and the config transformers' AutoTokenizer reads it with:
// tokenizer.json directly, a SentencePiece tokenizer.model through LlamaTokenizer.
void write_tokenizer(const tokenizer::Tokenizer& tok, const std::string& tokenizer_path,
                     int64_t max_positions, const std::string& dir, ExportResult& result) {
    const std::string name = tok.file_name();
    run_folder::write_file_atomic(run_folder::join(dir, name),
                                  run_folder::read_text_file(tokenizer_path));
    nlohmann::json tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                       {"model_max_length", max_positions},
                                       {"clean_up_tokenization_spaces", false}};
    if (name == run_folder::kSentencePieceFile) {
        tokenizer_config["tokenizer_class"] = "LlamaTokenizer";
        tokenizer_config["add_bos_token"] = false;
        tokenizer_config["add_eos_token"] = false;
        tokenizer_config["legacy"] = false;
    }
    // The chat template the run trained with (saved with its checkpoints), so that
    // transformers' apply_chat_template on the export renders what Lathe trained on.
    const auto chat = chat::ChatTemplate::beside_tokenizer(tokenizer_path);
    if (chat) {
        chat->save(dir, tokenizer_config);
        result.files.emplace_back("chat_template.jinja");
    } else {
        run_folder::write_file_atomic(run_folder::join(dir, "tokenizer_config.json"),
                                      tokenizer_config.dump(2) + "\n");
    }
    result.files.push_back(name);
    result.files.emplace_back("tokenizer_config.json");
}

}  // namespace

ExportResult export_checkpoint(const std::string& ckpt, const std::string& out_dir,
                               const ExportOptions& options) {
    if (!checkpoint::Checkpointer::dir_is_checkpoint(ckpt))
        throw Error(ckpt + ": not a complete Lathe checkpoint (no .metadata.json, " +
                    run_folder::train_state_file(0) + " or " + run_folder::kModelTensorFile + ")");
    const auto cfg = checkpoint_config(ckpt);
    const auto& m = cfg.model;
    const torch::ScalarType out_type = torch_dtype(options.dtype, "--dtype");
    if (out_type == torch::kFloat16) throw Error("--dtype: use float32 or bfloat16");
    const bool bytes = cfg.dataset.tokens_are_bytes();
    // The run's tokenizer, saved with the checkpoint (dataset.tokenizer), goes along and gives
    // the special-token ids; byte-level sources have none.
    const std::string tokenizer_path = tokenizer::find_tokenizer_file(ckpt);
    std::unique_ptr<tokenizer::Tokenizer> tok;
    if (!tokenizer_path.empty()) tok = tokenizer::load_tokenizer(tokenizer_path);
    ExportTokens tokens;
    if (tok) {
        tokens.bos = tok->bos_id();
        tokens.eos = tok->eos_id();
    }
    const int64_t max_positions =
        std::max(cfg.dataset.sequence_length, cfg.train_module.max_sequence_length);
    auto config_json = hf_config_json(m, options.dtype, max_positions, tokens);
    // Lathe's own note of how text becomes ids; transformers keeps unknown keys as attributes.
    config_json["lathe"] = {{"tokenizer", tok     ? tok->file_name()
                                          : bytes ? "bytes"
                                                  : "unknown"},
                            {"source_checkpoint", fs::absolute(ckpt).lexically_normal().string()}};

    const std::string tensor_path = run_folder::join(ckpt, run_folder::kModelTensorFile);
    const auto header = run_folder::read_tensor_file_header(tensor_path);
    const auto items = export_items(m, header, tensor_path, out_type);
    Staging staging(out_dir);
    ExportResult result;
    write_weights(tensor_path, header, export_shards(items, options.max_shard_bytes), out_type,
                  staging.tmp, result);
    write_model_configs(config_json, staging.tmp, result);
    if (tok) write_tokenizer(*tok, tokenizer_path, max_positions, staging.tmp, result);
    staging.commit();
    return result;
}

config::ModelConfig model_config_of(const std::string& path) {
    if (is_hf_model_folder(path)) {
        const std::string file = run_folder::join(path, "config.json");
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(run_folder::read_text_file(file));
        } catch (const nlohmann::json::exception& e) {
            throw Error(file + ": not JSON: " + e.what());
        }
        return model_config_from_hf(j, file);
    }
    return checkpoint_config(path).model;
}

std::map<std::string, torch::Tensor> read_hf_weights(
    const std::string& dir, const config::ModelConfig& m,
    const std::map<std::string, std::string>& key_mapping) {
    std::map<std::string, std::vector<int64_t>> want;
    for (auto& [name, shape] : parameter_shapes(m)) want[name] = shape;
    std::map<std::string, std::string> from_file;  // name in the files -> Lathe name
    for (const auto& [lathe, in_file] : key_mapping) {
        if (!want.count(lathe))
            throw Error("load_key_mapping: '" + lathe + "' is not a parameter of the model");
        from_file[in_file] = lathe;
    }
    const auto type = m.dtype == config::DType::bfloat16 ? torch::kBFloat16 : torch::kFloat32;
    std::map<std::string, torch::Tensor> out;
    std::map<std::string, std::string> where;
    for (const auto& file : hf_weight_files(dir)) {
        SafetensorsReader reader(file);
        for (const auto& e : reader.header().tensors) {
            // Buffers some exports carry; the model recomputes them.
            const std::string buffer_suffix = "rotary_emb.inv_freq";
            if (e.name.size() >= buffer_suffix.size() &&
                e.name.compare(e.name.size() - buffer_suffix.size(), buffer_suffix.size(),
                               buffer_suffix) == 0)
                continue;
            // A tied model's LM head is the embedding table; some exports store it twice.
            if (m.tie_word_embeddings &&
                (e.name == "lm_head.weight" || e.name == "lm_head.w_out.weight"))
                continue;
            std::optional<std::string> name;
            if (auto it = from_file.find(e.name); it != from_file.end())
                name = it->second;
            else
                name = lathe_name(e.name, m);
            if (!name || !want.count(*name))
                throw Error(file + ": tensor '" + e.name +
                            "' is not a parameter of this model (an unknown name; "
                            "train_module.load_key_mapping can rename it)");
            if (where.count(*name))
                throw Error(file + ": tensor '" + e.name + "' is '" + *name +
                            "', which is already in " + where[*name]);
            if (e.shape != want[*name])
                throw Error(file + ": tensor '" + e.name + "' has shape " + shape_text(e.shape) +
                            ", the model needs " + shape_text(want[*name]));
            const auto src_type = torch_dtype(e.dtype, file + ": tensor '" + e.name + "'");
            auto t = torch::empty(e.shape, src_type);
            reader.read(e, t.data_ptr());
            out[*name] = t.to(type);
            where[*name] = file;
        }
    }
    std::vector<std::string> missing;
    for (const auto& [name, shape] : want)
        if (!out.count(name)) missing.push_back(name);
    if (!missing.empty()) {
        std::string list;
        for (std::size_t i = 0; i < missing.size() && i < 5; ++i)
            list +=
                (i ? ", " : "") + missing[i] + " (" + hf_name(missing[i], m).value_or("?") + ")";
        if (missing.size() > 5) list += " and " + std::to_string(missing.size() - 5) + " more";
        throw Error(dir + ": missing tensors: " + list);
    }
    return out;
}

std::map<std::string, torch::Tensor> read_checkpoint_weights(const std::string& ckpt,
                                                             const config::ModelConfig& m) {
    const std::string path = run_folder::join(ckpt, run_folder::kModelTensorFile);
    const auto header = run_folder::read_tensor_file_header(path);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
    const auto type = m.dtype == config::DType::bfloat16 ? torch::kBFloat16 : torch::kFloat32;
    std::map<std::string, torch::Tensor> out;
    for (const auto& [name, shape] : parameter_shapes(m)) {
        const run_folder::TensorEntry* e = nullptr;
        for (const auto& t : header.tensors)
            if (t.name == "model." + name) e = &t;
        if (!e) throw Error(path + ": no tensor 'model." + name + "'");
        if (e->shape != shape)
            throw Error(path + ": tensor 'model." + name + "' has shape " + shape_text(e->shape) +
                        ", the model needs " + shape_text(shape));
        auto t = torch::empty(shape, torch_dtype(e->dtype, path + ": " + e->name));
        if (static_cast<uint64_t>(t.numel()) * t.element_size() != e->nbytes)
            throw Error(path + ": tensor '" + e->name + "' size does not match its shape");
        in.seekg(static_cast<std::streamoff>(header.data_start + e->offset));
        in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e->nbytes));
        if (!in) throw Error(path + ": cannot read tensor '" + e->name + "'");
        if (e->crc32c && run_folder::crc32c(t.data_ptr(), e->nbytes) != *e->crc32c)
            throw Error(path + ": corrupted: checksum mismatch in tensor '" + e->name + "'");
        out[name] = t.to(type);
    }
    return out;
}

bool is_hf_model_folder_at(const std::string& path) {
    if (!remote::is_remote_path(path)) return hf::is_hf_model_folder(path);
    const auto storage = remote::storage_for(path);
    return hf::is_hf_model_folder(path,
                                  [&storage](const std::string& f) { return storage->exists(f); });
}

ModelSource::ModelSource(std::string path) : path_(std::move(path)), local_(path_) {
    if (remote::is_remote_path(path_) && is_hf_model_folder_at(path_)) {
        static std::atomic<int> counter{0};
        const std::string temp =
            (fs::temp_directory_path() /
             ("lathe-model-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
        const auto storage = remote::storage_for(path_);
        copy_ = std::make_unique<remote::DownloadedFolder>(*storage, path_, temp);
        local_ = copy_->path();
    }
    hf_ = is_hf_model_folder(local_);
    if (!hf_ && !checkpoint::Checkpointer::dir_is_checkpoint(local_))
        throw Error(path_ +
                    ": neither a complete Lathe checkpoint nor a Hugging Face model folder "
                    "(config.json with model.safetensors or model.safetensors.index.json)");
    try {
        model_ = model_config_of(local_);
    } catch (const std::exception& e) {
        throw Error(copy_ ? copy_->remote_names(e.what()) : std::string(e.what()));
    }
}

ModelSource::~ModelSource() = default;

std::map<std::string, torch::Tensor> ModelSource::weights(
    const config::ModelConfig& as, const std::map<std::string, std::string>& key_mapping) const {
    try {
        return hf_ ? read_hf_weights(local_, as, key_mapping) : read_checkpoint_weights(local_, as);
    } catch (const std::exception& e) {
        if (!copy_) throw;
        throw Error(copy_->remote_names(e.what()));
    }
}

std::string ModelSource::tokenizer_file() const {
    return tokenizer::find_tokenizer_file(local_);
}

void import_hf(const std::string& hf_dir, const std::string& out_ckpt) {
    if (!is_hf_model_folder(hf_dir))
        throw Error(hf_dir +
                    ": not a Hugging Face model folder (config.json with "
                    "model.safetensors or model.safetensors.index.json)");
    const ModelSource source(hf_dir);
    const auto& m = source.model();
    auto weights = source.weights(m);
    config::ExperimentConfig cfg;
    cfg.model = m;
    cfg.run_name = "import";
    Staging staging(out_ckpt);
    fs::create_directories(fs::path(staging.tmp) / "model_and_optim");
    fs::create_directories(fs::path(staging.tmp) / "train");
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& [name, shape] : parameter_shapes(m))
        tensors.emplace_back("model." + name, weights.at(name));
    checkpoint::write_tensor_file(run_folder::join(staging.tmp, run_folder::kModelTensorFile),
                                  tensors);
    run_folder::write_file_atomic(run_folder::join(staging.tmp, run_folder::train_state_file(0)),
                                  nlohmann::json{{"global_step", 0}}.dump() + "\n");
    run_folder::write_file_atomic(run_folder::join(staging.tmp, run_folder::kConfigFile),
                                  config::to_json(cfg).dump(2) + "\n");
    // The folder's tokenizer comes along when Lathe can read it (generate uses it).
    const std::string hf_tokenizer = tokenizer::find_tokenizer_file(hf_dir);
    if (!hf_tokenizer.empty()) {
        try {
            const auto kind = tokenizer::load_tokenizer(hf_tokenizer)->file_name();
            run_folder::write_file_atomic(run_folder::join(staging.tmp, kind),
                                          run_folder::read_text_file(hf_tokenizer));
        } catch (const Error&) {
            // Not a tokenizer Lathe reads (a kind it does not implement): the weights still import.
        }
    }
    nlohmann::json meta = {
        {"ephemeral", false}, {"version", config::version()},
        {"world_size", 1},    {"format", "lathe-checkpoint-v1"},
        {"model_only", true}, {"imported_from", fs::absolute(hf_dir).lexically_normal().string()}};
    run_folder::write_file_atomic(
        run_folder::join(staging.tmp, run_folder::kCheckpointMetadataFile), meta.dump(2) + "\n");
    staging.commit();
}

}  // namespace lathe::checkpoint
