// Text data loader (OLMo-core's TextDataLoaderBase / NumpyFSLDataLoader semantics):
// - a global batch of `global_batch_size` tokens = global_batch_size / seq_len instances;
// - each epoch the instance order is a seeded shuffle (seed + epoch); the order is cut into
//   batches, and rank r of the data-parallel group takes positions r, r + world, r + 2*world ...
//   of each batch (strided, as OLMo-core does);
// - batches are prepared on a background thread, `prefetch_batches` ahead;
// - state_dict() records the dataset fingerprint and the position, so a resume continues at
//   exactly the next instance.
#pragma once

#include "engine/data/dataset.h"
#include "engine/stateful/stateful.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

namespace lathe::data {

struct Batch {
    torch::Tensor input_ids;     ///< (rank instances, seq_len) int64
    std::vector<int64_t> index;  ///< dataset instance of each row
    /// (rank instances, seq_len) bool, true where the token is trained on; undefined without
    /// dataset.label_mask_paths.
    torch::Tensor label_mask;
    /// (rank instances, seq_len) int64, each token's document (document_ids) under
    /// dataset.generate_doc_lengths; undefined without.
    torch::Tensor doc_ids;
    /// (rank instances,) bool, false for an instance the repetition filter masks
    /// (dataset.instance_filter_config); undefined without.
    torch::Tensor instance_mask;
    /// A mixture's tokens per source in this rank batch (dataset.mixture); empty without.
    std::vector<int64_t> source_tokens;
};

/// The rows `indices` of `dataset` as one batch: their tokens, label masks (with
/// dataset.label_mask_paths) and each token's document (with dataset.generate_doc_lengths), as
/// training and evaluation both read them. The repetition filter and a mixture's source counts
/// are the data loader's, not part of this.
Batch read_batch(const TokenDataset& dataset, const std::vector<int64_t>& indices);

class DataLoader : public stateful::Stateful {
public:
    DataLoader(std::shared_ptr<TokenDataset> dataset, const config::DataLoaderConfig& cfg,
               int dp_rank, int dp_world);
    ~DataLoader() override;
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    int64_t global_batch_size() const { return global_batch_size_; }
    int64_t rank_batch_size() const { return global_batch_size_ / dp_world_; }
    int64_t instances_per_batch() const { return global_batch_size_ / dataset_->sequence_length(); }
    int64_t total_batches() const { return dataset_->num_instances() / instances_per_batch(); }
    int64_t batches_processed() const { return batches_processed_; }
    int64_t tokens_processed() const { return tokens_processed_; }
    int64_t epoch() const { return epoch_; }
    const TokenDataset& dataset() const { return *dataset_; }

    /// Starts epoch `epoch` at the current position (0 unless a state was loaded).
    void reshuffle(int64_t epoch);
    /// The next batch of this rank, or nullopt when the epoch is exhausted.
    std::optional<Batch> next();
    /// End of epoch: the position goes back to 0.
    void reset();

    /// The global order of instances for `epoch` (exposed for tests).
    std::vector<uint32_t> epoch_order(int64_t epoch) const;
    /// Rank-local batch `b` of the current epoch, computed directly (no prefetch).
    Batch make_batch(int64_t b) const;

    nlohmann::json state_dict() const override;
    /// Throws lathe::Error on a dataset fingerprint mismatch unless ignore_fingerprint_mismatch.
    void load_state_dict(const nlohmann::json& state) override;

private:
    void stop_prefetch();
    void start_prefetch();
    void prefetch_loop(int64_t from);

    std::shared_ptr<TokenDataset> dataset_;
    config::DataLoaderConfig cfg_;
    int dp_rank_, dp_world_;
    int64_t global_batch_size_;
    int64_t batches_processed_ = 0;
    int64_t tokens_processed_ = 0;
    int64_t epoch_ = 1;
    std::vector<uint32_t> order_;

    std::thread worker_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::pair<int64_t, Batch>> ready_;
    std::exception_ptr worker_error_;
    bool stop_ = false;
};

}  // namespace lathe::data
