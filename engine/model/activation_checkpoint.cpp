#include "engine/model/activation_checkpoint.h"

#include "engine/util/autocast.h"

#include <torch/csrc/autograd/custom_function.h>

namespace lathe::model {

namespace {

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 BlockImpl* block, int64_t part) {
        ctx->saved_data["block"] = reinterpret_cast<int64_t>(block);
        ctx->saved_data["part"] = part;
        ctx->saved_data["x_grad"] = x.requires_grad();
        const auto type = x.device().type();
        ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(type);
        ctx->saved_data["autocast_dtype"] =
            static_cast<int64_t>(at::autocast::get_autocast_dtype(type));
        ctx->save_for_backward({x});
        torch::NoGradGuard no_grad;
        return block->run_part(static_cast<BlockImpl::Part>(part), x);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad_out) {
        auto* block = reinterpret_cast<BlockImpl*>(ctx->saved_data["block"].toInt());
        const auto part = static_cast<BlockImpl::Part>(ctx->saved_data["part"].toInt());
        const bool x_grad = ctx->saved_data["x_grad"].toBool();
        const auto x = ctx->get_saved_variables()[0];
        torch::Tensor xin = x.detach();
        if (x_grad) xin.requires_grad_(true);
        {
            torch::AutoGradMode enable(true);
            torch::Tensor out;
            {
                // Backward runs outside the train step's autocast scope (on a GPU, on another
                // thread): the recomputation takes the forward's, and only it. The backward below
                // runs without autocast, as the run without checkpointing does.
                AutocastScope autocast(
                    x.device().type(), ctx->saved_data["autocast"].toBool(),
                    static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
                out = block->run_part(part, xin);
            }
            // The parameters' gradients accumulate here, as in the run without checkpointing.
            torch::autograd::backward({out}, {grad_out[0]});
        }
        // x, then the two non-tensor arguments.
        return {x_grad ? xin.grad() : torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor checkpointed(BlockImpl& block, BlockImpl::Part part, const torch::Tensor& x) {
    // Only an input that requires grad gives the function a place in the graph (the parameters
    // are not its inputs); without one, nothing is saved for this block's backward anyway.
    if (!torch::GradMode::is_enabled() || !x.requires_grad()) return block.run_part(part, x);
    return CheckpointFunction::apply(x, &block, static_cast<int64_t>(part));
}

}  // namespace lathe::model
