// The language-model loss over a whole vocabulary as one autograd function: the sum of
// cross-entropies and, if asked, the sum of squared log-sum-exps (the z-loss before its
// multiplier), from fp32 or low-precision logits. It computes what F::cross_entropy(reduction=sum) and
// logsumexp(...).pow(2) compute, with far less memory traffic: forward keeps only each row's
// log-sum-exp (a row block at a time, in cache) and never writes log-probabilities; backward
// writes the gradient into the logits' own storage. On a 50k vocabulary the logits of one
// micro-batch are hundreds of megabytes, and the plain path writes and reads four tensors that
// size (log-probabilities, their gradient, the logits' gradient), each freshly allocated.
#pragma once

#include <torch/torch.h>

namespace lathe::model {

struct CrossEntropySums {
    torch::Tensor ce;  ///< sum over the rows whose label is not ignore_index of lse - logit[label]
    torch::Tensor z;   ///< sum over the same rows of lse^2; undefined unless with_z
};

/// `logits` is [rows, vocab] fp32, bf16 or fp16 (the arithmetic is fp32 either way, a block of rows
/// widened at a time; the gradient is the fp32 one rounded to the logits' dtype) and is consumed: backward overwrites its storage with the
/// gradient, so nothing else may use it afterwards (the LM head's output is saved by no other
/// autograd node). `labels` is [rows] int64.
CrossEntropySums fused_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels,
                                     int64_t ignore_index, bool with_z);

}  // namespace lathe::model
