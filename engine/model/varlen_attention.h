// Document masking's attention without a (T, T) mask (issue 32): causal attention within each
// document of a packed batch, the documents laid end to end over the flattened tokens. On CUDA it
// is flash attention over variable-length sequences (ATen's _flash_attention_forward and
// _flash_attention_backward with cumulative lengths, as OLMo-core's intra-document masking uses
// flash-attn's varlen functions); on the CPU, SDPA over each document in turn, its reference.
#pragma once

#include <torch/torch.h>

namespace lathe::model {

/// q (total, H, D), k and v (total, H_kv, D) with H a multiple of H_kv (grouped-query heads), the
/// documents' cumulative lengths cu_seqlens (documents + 1, int32, from 0 to total; on q's
/// device) and the longest document `max_len`: each token attends to its own document's tokens
/// up to itself, scaled by 1/sqrt(D). Returns (total, H, D); differentiable in q, k and v.
torch::Tensor varlen_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                               int64_t max_len);

/// Whether varlen_attention's flash route takes q: CUDA, bf16 or fp16, D a multiple of 8 up to
/// 256. Elsewhere document masking keeps the mask route (a CPU run, fp32).
bool varlen_attention_fits(const torch::Tensor& q);

}  // namespace lathe::model
