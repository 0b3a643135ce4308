// T5 relative position bias fused into the tiled attention kernel. Formula: see
// reference/t5_bias.hpp.
//
// Contract
//   dtypes:       float table, q, k, v and output (optimized/attention.hpp computes in float)
//   buckets:      exact (bit-identical int32 to reference::t5_bias_bucket): the reference's exact
//                 bucket function is evaluated once per distinct distance below max_distance
//                 (at most 2 * max_distance + 2 calls per table); every |r| >= max_distance
//                 takes the saturated bucket of its direction
//   bias:         exact: a gather of table values, never rounded
//   error metric: the attention output's, with bias_ij in the score scale:
//                 |o - o*| <= kT5BiasMaxError * eps_f32 * (A_ic + B_ic)   (optimized/attention.hpp)
//   valid range:  any Tq, Tk, query_offset >= 0 with (Tq + Tk) * n_heads floats in memory
//   layout:       table [num_buckets, n_heads] row-major (HF relative_attention_bias.weight);
//                 q [Tq, H, d], k [Tk, H, d], v [Tk, H, dv], out [Tq, H, dv]; bias [H, Tq, Tk]
//   caching:      T5BiasBucketTable is built once per (Tq, Tk, query_offset): one int32 per
//                 relative position that occurs, r in [-(query_offset + Tq - 1),
//                 Tk - 1 - query_offset], Tq + Tk - 1 entries (not Tq * Tk). T5Bias then holds
//                 one float line per head over the same range, and fills a [query tile, key tile]
//                 block with one contiguous copy per query row.
//   threading:    T5Bias::fill is const and thread-safe; bits do not depend on the thread count
#pragma once
#include <cstdint>
#include <vector>

#include "optimized/attention.hpp"
#include "reference/common/span.hpp"
#include "reference/t5_bias.hpp"  // T5BiasParams: the reference defines the contract

namespace posenc::optimized {

using reference::T5BiasParams;

/// Output bound of t5_bias_forward in eps_f32 * (A + B) units: that of attention_forward (the
/// bias adds no rounding: it is a gather of float table values).
inline constexpr double kT5BiasMaxError = kAttentionMaxError;

/// Buckets of the contiguous range of relative positions [r_min, r_min + bucket.size()).
struct T5BiasBucketTable {
  std::int64_t r_min = 0;
  std::vector<std::int32_t> bucket;
  /// Bucket of relative position r (r_min <= r < r_min + size).
  std::int32_t at(std::int64_t r) const { return bucket[static_cast<std::size_t>(r - r_min)]; }
};

/// Buckets of every relative position in [r_min, r_max] (empty when r_max < r_min).
T5BiasBucketTable t5_bias_bucket_range(const T5BiasParams& p, std::int64_t r_min,
                                       std::int64_t r_max);

/// Buckets of every r = j - (query_offset + i) of a [Tq, Tk] block: built once per
/// (Tq, Tk, query_offset).
T5BiasBucketTable t5_bias_bucket_table(const T5BiasParams& p, std::int64_t tq, std::int64_t tk,
                                       std::int64_t query_offset);

/// The T5 bias as an AttentionBias for optimized::attention_forward / attention_probs.
class T5Bias final : public AttentionBias {
 public:
  /// table [num_buckets, n_heads]; queries at query_offset + i (i < Tq), keys 0 .. Tk - 1.
  T5Bias(const T5BiasParams& p, span<const float> table, std::int64_t tq, std::int64_t tk,
         std::int64_t query_offset);
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override;
  const T5BiasBucketTable& buckets() const { return buckets_; }

 private:
  std::int64_t tq_ = 0, tk_ = 0, query_offset_ = 0, line_ = 0;
  T5BiasBucketTable buckets_;
  std::vector<float> lines_;  // [H, line_]: the bias of head h by relative position
};

/// The bias [H, Tq, Tk] (for engines that expose it; the fused kernel never builds it).
void t5_bias_matrix(const T5BiasParams& p, span<const float> table, std::int64_t tq,
                    std::int64_t tk, std::int64_t query_offset, span<float> bias);

/// T5 self-attention (no score scale, causal iff !bidirectional) with the bias fused per tile.
void t5_bias_forward(const T5BiasParams& p, const AttentionParams& ap, std::int64_t tq,
                     std::int64_t tk, span<const float> table, span<const float> q,
                     span<const float> k, span<const float> v, span<float> out);

}  // namespace posenc::optimized
