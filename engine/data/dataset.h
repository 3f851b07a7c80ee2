// Fixed-sequence-length token datasets (OLMo-core's NumpyFSLDataset idea): every source is a list
// of token files; file f contributes floor(tokens_f / sequence_length) instances, which never cross
// files. Sources: the built-in corpus, UTF-8 text files or folders (bytes as tokens), and raw
// little-endian uint16/uint32 token files, optionally with OLMo-core's label masks beside them (one
// byte per token; 0 keeps the token out of the loss). With document masking, batches carry each
// token's document (document_ids), cut at the EOS token. The repetition filter (OLMo-core's
// InstanceFilterConfig) marks degenerate instances. A mixture of sources (OLMo-core's
// SourceMixtureDataset) takes each source's share from the start of its files.
#pragma once

#include "engine/config/config.h"
#include "engine/util/hash.h"

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace lathe::data {

/// One read-only array of tokens: memory-mapped from a file, or owned.
class TokenArray {
public:
    static std::shared_ptr<TokenArray> owned(std::vector<uint8_t> bytes, std::string name);
    static std::shared_ptr<TokenArray> map_file(const std::string& path, int element_size);
    ~TokenArray();
    TokenArray(const TokenArray&) = delete;
    TokenArray& operator=(const TokenArray&) = delete;

    int64_t size() const { return size_; }
    int element_size() const { return element_size_; }
    const std::string& name() const { return name_; }
    uint64_t byte_size() const {
        return static_cast<uint64_t>(size_) * static_cast<uint64_t>(element_size_);
    }
    /// Copies tokens [offset, offset + n) into out, widened to int64.
    void read(int64_t offset, int64_t n, int64_t* out) const;
    /// The largest token (one pass over the whole array).
    int64_t max_token() const;
    /// The position of the first token >= bound; -1 when there is none.
    int64_t first_at_least(int64_t bound) const;

private:
    TokenArray() = default;
    std::vector<uint8_t> owned_;
    const uint8_t* data_ = nullptr;
    void* map_ = nullptr;
    std::size_t map_size_ = 0;
    int64_t size_ = 0;
    int element_size_ = 1;
    std::string name_;
};

/// One source of a mixture as planned before any instance is drawn (OLMo-core's
/// SourceMixtureDatasetConfig checks): what its files hold and what its ratio asks of them.
struct MixtureSourcePlan {
    std::string name;
    int64_t available_tokens = 0;  ///< in its files
    int64_t needed_tokens = 0;     ///< target_ratio x requested_tokens
    int64_t allowed_tokens = 0;    ///< available x max_source_fraction x max_repetition_ratio
    double repetitions = 0;        ///< needed / (available x max_source_fraction)
    double max_repetition_ratio = 1;
    bool fits() const { return allowed_tokens >= needed_tokens; }
};

class TokenDataset {
public:
    /// Builds the source described by `cfg`. Throws lathe::Error naming the file and the reason
    /// for a missing, empty, unreadable or too-short file.
    ///
    /// Raw numpy token files are checked whole against vocab_size before training: a token past
    /// the vocabulary is named with its file and position (issue 34), instead of stopping the run
    /// at the batch that holds it, at every resume. Each file's largest token is cached in
    /// `range_cache` (a JSON file, by path, size and modification time; none when empty), so a
    /// file is read once, not at every start.
    ///
    /// A mixture (dataset.mixture) is OLMo-core's SourceMixtureDataset: `global_batch_size`
    /// (tokens) rounds it to whole batches.
    static std::shared_ptr<TokenDataset> build(const config::DatasetConfig& cfg, int64_t vocab_size,
                                               const std::string& range_cache = {},
                                               int64_t global_batch_size = 0);

    /// dataset.mixture's sources without building them: each one's files (as build() finds them,
    /// its token range not checked) and what its target_ratio needs of them. Throws lathe::Error
    /// for a missing requested_tokens, path or name, as build() does; a source that needs more
    /// repetition than allowed is reported (fits() false), not refused.
    static std::vector<MixtureSourcePlan> plan_mixture(const config::DatasetConfig& cfg,
                                                       int64_t vocab_size);

    int64_t sequence_length() const { return seq_len_; }
    int64_t num_instances() const { return static_cast<int64_t>(starts_.size()); }
    /// Writes instance i's sequence_length tokens into out.
    void instance(int64_t i, int64_t* out) const;
    /// Whether the tokens have label masks (dataset.label_mask_paths).
    bool has_label_mask() const { return !masks_.empty(); }
    /// Writes instance i's label mask into out: true where the token is trained on.
    void instance_mask(int64_t i, bool* out) const;
    /// Where instance i is read from, for messages: "FILE, tokens A-B" (tokens counted from 0).
    std::string describe_instance(int64_t i) const;
    /// Document masking (dataset.generate_doc_lengths): the token that ends a document; nullopt
    /// when masking is off.
    std::optional<int64_t> doc_eos_id() const { return doc_eos_; }
    /// The repetition filter (dataset.instance_filter_config); nullopt when off.
    const std::optional<config::InstanceFilterConfig>& instance_filter() const {
        return instance_filter_;
    }
    /// A mixture's sources, in order (empty without dataset.mixture); the instances of source s
    /// are [source_end(s - 1), source_end(s)).
    const std::vector<std::string>& source_names() const { return source_names_; }
    /// The source of instance i (0 without a mixture).
    std::size_t source_of(int64_t i) const;
    /// Identifies the data and how it is cut: source, files (name and size), sequence length.
    const std::string& fingerprint() const { return fingerprint_; }
    const std::string& description() const { return description_; }
    int64_t vocab_size() const { return vocab_size_; }
    int64_t total_tokens() const { return total_tokens_; }

    /// The first `n` instances (train) or the last (validation) as a view.
    std::shared_ptr<TokenDataset> slice(int64_t begin, int64_t end, const std::string& label) const;

private:
    // dataset.mixture: the files and instances of OLMo-core's SourceMixtureDataset.
    static void add_mixture(TokenDataset& ds, const config::DatasetConfig& cfg, int64_t vocab_size,
                            int64_t global_batch_size, const std::string& range_cache,
                            std::vector<std::pair<int64_t, std::string>>& manifest_eos,
                            std::ostringstream& fp);
    static void add_label_masks(TokenDataset& ds, const config::DatasetConfig& cfg,
                                std::size_t num_files, std::ostringstream& fp);
    // (token file, element size, dtype, label mask) of each file; the masks of prepared folders.
    static void add_manifest_masks(
        TokenDataset& ds, const config::DatasetConfig& cfg,
        const std::vector<std::tuple<std::string, int, std::string, std::string>>& files,
        std::ostringstream& fp);
    int64_t seq_len_ = 0;
    int64_t vocab_size_ = 0;
    std::optional<int64_t> doc_eos_;
    std::optional<config::InstanceFilterConfig> instance_filter_;
    std::vector<std::string> source_names_;
    std::vector<int64_t> source_end_;  // one past each source's last instance
    int64_t total_tokens_ = 0;
    std::vector<std::shared_ptr<TokenArray>> files_;
    std::vector<std::shared_ptr<TokenArray>> masks_;   // parallel to files_; empty without masks
    std::vector<std::pair<int32_t, int64_t>> starts_;  // (file, token offset) per instance
    std::string fingerprint_;
    std::string description_;
};

/// The train and validation parts of a dataset: the last `validation_fraction` of the instances
/// are held out (at least one when the fraction is positive).
struct DataSplit {
    std::shared_ptr<TokenDataset> train;
    std::shared_ptr<TokenDataset> validation;  ///< null when validation_fraction is 0
};
DataSplit build_split(const config::DatasetConfig& cfg, int64_t vocab_size,
                      const std::string& range_cache = {}, int64_t global_batch_size = 0);

/// The document of every token of `input_ids` (B, T): 0 for the tokens up to and including the
/// first `eos_id`, 1 up to the next, and so on, per row. A document ends with its EOS token, as
/// OLMo-core's get_document_lengths cuts them; equal ids mark the tokens that may attend to each
/// other under document masking.
torch::Tensor document_ids(const torch::Tensor& input_ids, int64_t eos_id);

/// 64-bit FNV-1a, hex; used for fingerprints (engine/util/hash.h).
using lathe::fnv1a_hex;

}  // namespace lathe::data
