#include "engine/train/data_parallel.h"

#include "engine/util/error.h"

namespace lathe::train {

DistributedDataParallel::DistributedDataParallel(std::vector<torch::Tensor> params,
                                                 const dist::Group& group,
                                                 const config::DataParallelConfig& cfg)
    : params_(std::move(params)),
      group_(group),
      reduce_dtype_(cfg.reduce_dtype == config::DType::bfloat16 ? torch::kBFloat16
                                                                : torch::kFloat32) {
    // Buckets follow the reverse of registration order: roughly the order gradients arrive in.
    const int64_t cap_bytes = static_cast<int64_t>(cfg.bucket_cap_mb * 1024 * 1024);
    bucket_of_.resize(params_.size());
    got_grad_.assign(params_.size(), false);
    Bucket cur;
    int64_t cur_bytes = 0, cur_numel = 0;
    auto close = [&] {
        if (cur.params.empty()) return;
        cur.flat = torch::zeros(
            {cur_numel}, torch::TensorOptions().dtype(reduce_dtype_).device(params_[0].device()));
        buckets_.push_back(std::move(cur));
        cur = Bucket();
        cur_bytes = cur_numel = 0;
    };
    for (std::size_t k = params_.size(); k-- > 0;) {
        const auto& p = params_[k];
        bucket_of_[k] = buckets_.size();
        cur.params.push_back(k);
        cur.offsets.push_back(cur_numel);
        cur_numel += p.numel();
        cur_bytes += p.numel() * static_cast<int64_t>(c10::elementSize(reduce_dtype_));
        if (cur_bytes >= cap_bytes) close();
    }
    close();
    for (std::size_t k = 0; k < params_.size(); ++k) {
        params_[k].register_hook([this, k](const torch::Tensor& grad) { on_grad(k, grad); });
    }
}

std::string DistributedDataParallel::describe() const {
    return "DDP over " + std::to_string(group_.size()) + " ranks, " +
           std::to_string(buckets_.size()) + " bucket(s)";
}

void DistributedDataParallel::before_backward(bool last) {
    sync_ = last;
    if (last) {
        std::fill(got_grad_.begin(), got_grad_.end(), false);
        for (auto& b : buckets_) {
            b.ready = 0;
            b.launched = false;
            b.work.reset();
        }
        next_launch_ = 0;
    }
}

void DistributedDataParallel::on_grad(std::size_t k, const torch::Tensor& grad) {
    if (!sync_ || got_grad_[k]) return;
    got_grad_[k] = true;
    auto& b = buckets_[bucket_of_[k]];
    std::size_t pos = 0;
    while (b.params[pos] != k) ++pos;
    auto slot = b.flat.narrow(0, b.offsets[pos], params_[k].numel());
    // The gradient of the whole step: what earlier micro-batches accumulated plus this one.
    torch::NoGradGuard no_grad;
    const auto& acc = params_[k].grad();
    if (acc.defined()) {
        slot.copy_((acc + grad).reshape({-1}));
    } else {
        slot.copy_(grad.reshape({-1}));
    }
    if (++b.ready == b.params.size()) launch_ready_buckets();
}

void DistributedDataParallel::launch(Bucket& b) {
    b.launched = true;
    b.work = group_.all_reduce_async(b.flat, dist::ReduceOp::sum);
}

void DistributedDataParallel::launch_ready_buckets() {
    while (next_launch_ < buckets_.size() &&
           buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
        launch(buckets_[next_launch_++]);
    }
}

void DistributedDataParallel::finish_backward() {
    torch::NoGradGuard no_grad;
    // Parameters that received no gradient this step still take part, with their local value.
    for (auto& b : buckets_) {
        for (std::size_t i = 0; i < b.params.size(); ++i) {
            std::size_t k = b.params[i];
            if (got_grad_[k]) continue;
            got_grad_[k] = true;
            auto slot = b.flat.narrow(0, b.offsets[i], params_[k].numel());
            const auto& g = params_[k].grad();
            if (g.defined()) {
                slot.copy_(g.reshape({-1}));
            } else {
                slot.zero_();
            }
            ++b.ready;
        }
    }
    launch_ready_buckets();
    if (next_launch_ != buckets_.size())
        throw Error("DDP: not every gradient bucket was launched (internal error)");
    const double inv = 1.0 / static_cast<double>(group_.size());
    for (auto& b : buckets_) {
        if (b.work) b.work->wait();
        b.flat.mul_(inv);
        for (std::size_t i = 0; i < b.params.size(); ++i) {
            auto& p = params_[b.params[i]];
            auto reduced = b.flat.narrow(0, b.offsets[i], p.numel()).view_as(p).to(p.scalar_type());
            if (p.grad().defined()) {
                p.mutable_grad().copy_(reduced);
            } else {
                p.mutable_grad() = reduced.clone();
            }
        }
    }
    sync_ = false;
}

}  // namespace lathe::train
