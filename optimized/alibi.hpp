// ALiBi float kernels: slopes and the bias fused into the tiled attention kernel.
// Formula: see reference/alibi.hpp.
//
// Contract
//   slopes:       float, the correctly rounded value of 2^(-x) for every head count (computed
//                 in long double and rounded once; a test compares all of 1..256 heads)
//   bias:         slope * (distance), one float rounding of an exact integer distance
//                 (|distance| < 2^24), computed per attention tile: no Tq x Tk bias matrix
//   error metric: the output bound of optimized/attention.hpp (kAttentionMaxError, with the
//                 |bias| term in the score scale)
//   layout, masks, threading: those of optimized::attention_forward
#pragma once
#include <cstdint>
#include <vector>

#include "optimized/attention.hpp"
#include "reference/alibi.hpp"

namespace posenc::optimized {

using reference::AlibiForm;
using reference::AlibiParams;

/// Slopes in float, correctly rounded.
std::vector<float> alibi_slopes(const AlibiParams& p);

/// Per-tile ALiBi bias for attention_forward.
class AlibiBias : public AttentionBias {
 public:
  AlibiBias(const AlibiParams& a, const AttentionParams& p, std::int64_t tk);
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override;

 private:
  AlibiForm form_;
  std::vector<float> slopes_;
  std::int64_t query_offset_, tk_;
};

/// Attention with the ALiBi bias fused (a.n_heads must equal p.n_heads).
void alibi_attention_forward(const AlibiParams& a, const AttentionParams& p,
                             const AttentionMask& m, std::int64_t tq, std::int64_t tk,
                             span<const float> q, span<const float> k, span<const float> v,
                             span<float> out);

}  // namespace posenc::optimized
