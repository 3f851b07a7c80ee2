#include "engine/data/data_loader.h"

#include "engine/data/instance_filter.h"
#include "engine/data/numpy_rng.h"
#include "engine/util/error.h"

#include <numeric>

namespace lathe::data {

DataLoader::DataLoader(std::shared_ptr<TokenDataset> dataset, const config::DataLoaderConfig& cfg,
                       int dp_rank, int dp_world)
    : dataset_(std::move(dataset)),
      cfg_(cfg),
      dp_rank_(dp_rank),
      dp_world_(dp_world),
      global_batch_size_(cfg.global_batch_size) {
    const int64_t seq = dataset_->sequence_length();
    if (global_batch_size_ % seq != 0) {
        throw Error("data_loader.global_batch_size (" + std::to_string(global_batch_size_) +
                    ") must be a multiple of the sequence length (" + std::to_string(seq) + ")");
    }
    if (instances_per_batch() % dp_world_ != 0) {
        throw Error("data_loader.global_batch_size: " + std::to_string(instances_per_batch()) +
                    " instances per batch cannot be split over " + std::to_string(dp_world_) +
                    " ranks");
    }
    if (total_batches() < 1) {
        throw Error("dataset (" + dataset_->description() + ") has " +
                    std::to_string(dataset_->num_instances()) +
                    " instances, fewer than one global batch of " +
                    std::to_string(instances_per_batch()));
    }
}

DataLoader::~DataLoader() {
    stop_prefetch();
}

std::vector<uint32_t> DataLoader::epoch_order(int64_t epoch) const {
    const auto n = static_cast<std::size_t>(dataset_->num_instances());
    if (cfg_.shuffle) {
        // OLMo-core's order (NumpyFSLDataLoader._build_global_indices): numpy's
        // Generator(PCG64(seed + epoch)).shuffle(arange(n, dtype=uint32)), bit for bit.
        return numpy_permutation_u32(static_cast<uint64_t>(cfg_.seed + epoch), n);
    }
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    return order;
}

Batch read_batch(const TokenDataset& dataset, const std::vector<int64_t>& indices) {
    const auto rows = static_cast<int64_t>(indices.size());
    const int64_t seq = dataset.sequence_length();
    Batch batch;
    batch.input_ids = torch::empty({rows, seq}, torch::kInt64);
    int64_t* out = batch.input_ids.data_ptr<int64_t>();
    const bool masked = dataset.has_label_mask();
    if (masked) batch.label_mask = torch::empty({rows, seq}, torch::kBool);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t idx = indices[static_cast<std::size_t>(r)];
        dataset.instance(idx, out + r * seq);
        if (masked) dataset.instance_mask(idx, batch.label_mask.data_ptr<bool>() + r * seq);
    }
    batch.index = indices;
    if (auto eos = dataset.doc_eos_id()) batch.doc_ids = document_ids(batch.input_ids, *eos);
    return batch;
}

Batch DataLoader::make_batch(int64_t b) const {
    const int64_t ipb = instances_per_batch();
    const int64_t rows = ipb / dp_world_;
    const int64_t seq = dataset_->sequence_length();
    std::vector<int64_t> indices;
    indices.reserve(static_cast<std::size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
        indices.push_back(order_[static_cast<std::size_t>(b * ipb + dp_rank_ + r * dp_world_)]);
    Batch batch = read_batch(*dataset_, indices);
    const int64_t* out = batch.input_ids.data_ptr<int64_t>();
    if (const auto& filter = dataset_->instance_filter()) {
        batch.instance_mask = torch::empty({rows}, torch::kBool);
        for (int64_t r = 0; r < rows; ++r)
            batch.instance_mask.data_ptr<bool>()[r] =
                passes_instance_filter(out + r * seq, seq, *filter);
    }
    if (!dataset_->source_names().empty()) {
        batch.source_tokens.assign(dataset_->source_names().size(), 0);
        for (auto idx : batch.index) batch.source_tokens[dataset_->source_of(idx)] += seq;
    }
    return batch;
}

void DataLoader::reshuffle(int64_t epoch) {
    stop_prefetch();
    epoch_ = epoch;
    order_ = epoch_order(epoch);
    start_prefetch();
}

void DataLoader::start_prefetch() {
    stop_ = false;
    ready_.clear();
    worker_error_ = nullptr;
    if (cfg_.prefetch_batches > 0)
        worker_ = std::thread([this, from = batches_processed_] { prefetch_loop(from); });
}

void DataLoader::stop_prefetch() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    ready_.clear();
}

void DataLoader::prefetch_loop(int64_t from) {
    try {
        for (int64_t b = from; b < total_batches(); ++b) {
            Batch batch = make_batch(b);
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] {
                return stop_ || static_cast<int64_t>(ready_.size()) < cfg_.prefetch_batches;
            });
            if (stop_) return;
            ready_.emplace_back(b, std::move(batch));
            cv_.notify_all();
        }
    } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        worker_error_ = std::current_exception();
        cv_.notify_all();
    }
}

std::optional<Batch> DataLoader::next() {
    if (batches_processed_ >= total_batches()) return std::nullopt;
    Batch batch;
    if (cfg_.prefetch_batches > 0) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !ready_.empty() || worker_error_; });
        if (ready_.empty() && worker_error_) std::rethrow_exception(worker_error_);
        auto [b, ready] = std::move(ready_.front());
        ready_.pop_front();
        cv_.notify_all();
        if (b != batches_processed_)
            throw Error("data loader prefetch out of order (internal error)");
        batch = std::move(ready);
    } else {
        batch = make_batch(batches_processed_);
    }
    ++batches_processed_;
    tokens_processed_ += global_batch_size_;
    return batch;
}

void DataLoader::reset() {
    stop_prefetch();
    batches_processed_ = 0;
    tokens_processed_ = 0;
}

nlohmann::json DataLoader::state_dict() const {
    return {{"dataset_fingerprint_version", "lathe-v1"},
            {"dataset_fingerprint", dataset_->fingerprint()},
            {"batches_processed", batches_processed_},
            {"tokens_processed", tokens_processed_},
            {"seed", cfg_.seed},
            {"epoch", epoch_},
            {"dataset_type", "fsl"},
            {"sequence_length", dataset_->sequence_length()}};
}

void DataLoader::load_state_dict(const nlohmann::json& s) {
    try {
        std::string fp = s.at("dataset_fingerprint").get<std::string>();
        if (fp != dataset_->fingerprint() && !cfg_.ignore_fingerprint_mismatch) {
            throw Error("the dataset differs from the checkpoint's (fingerprint " +
                        dataset_->fingerprint() + " vs " + fp +
                        "); set data_loader.ignore_fingerprint_mismatch=true to resume anyway");
        }
        stop_prefetch();
        cfg_.seed = s.at("seed").get<int64_t>();
        epoch_ = s.at("epoch").get<int64_t>();
        tokens_processed_ = s.at("tokens_processed").get<int64_t>();
        // Position by tokens, so a changed batch size resumes at the right token offset.
        batches_processed_ = tokens_processed_ / global_batch_size_;
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("data loader state is malformed: ") + e.what());
    }
}

}  // namespace lathe::data
