// T5 bias kernel. Formula: see reference/t5_bias.hpp; contract: optimized/t5_bias.hpp.
//
// Numerics: nothing is computed in floating point here. Buckets are integers from the exact
// reference function (cached per relative position), and the bias is a copy of table values,
// so the only rounding is the attention kernel's. Every relative position r with |r| >=
// max_distance shares the saturated bucket of its direction (the min() of the formula), which
// is what keeps the number of exact bucket evaluations at O(max_distance) for any Tq, Tk.
#include "optimized/t5_bias.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {

T5BiasBucketTable t5_bias_bucket_range(const T5BiasParams& p, std::int64_t r_min,
                                       std::int64_t r_max) {
  reference::t5_bias_check(p, "t5_bias_bucket_range");
  T5BiasBucketTable t;
  t.r_min = r_min;
  if (r_max < r_min) return t;
  const bool sign_flipped = POSENC_MUTANT("opt_t5_sign_flipped");
  const auto bucket = [&](std::int64_t r) {
    const int b = reference::t5_bias_bucket(p, sign_flipped ? -r : r);
    if (b < 0 || b >= p.num_buckets) {  // an internal invariant: T5Bias indexes the table by it
      throw std::logic_error("t5_bias_bucket_range: bucket " + std::to_string(b) +
                             " of r = " + std::to_string(r) + " out of range");
    }
    return static_cast<std::int32_t>(b);
  };
  const std::int64_t d = p.max_distance;
  const std::int32_t below = bucket(-d), above = bucket(d);  // saturated, |r| >= D
  t.bucket.resize(static_cast<std::size_t>(r_max - r_min + 1));
  for (std::int64_t r = r_min; r <= r_max; ++r) {
    const std::int32_t b = r <= -d ? below : r >= d ? above : bucket(r);
    t.bucket[static_cast<std::size_t>(r - r_min)] = b;
  }
  return t;
}

T5BiasBucketTable t5_bias_bucket_table(const T5BiasParams& p, std::int64_t tq, std::int64_t tk,
                                       std::int64_t query_offset) {
  constexpr const char* fn = "t5_bias_bucket_table";
  if (tq < 0) throw_invalid(fn, "query length must be >= 0", tq);
  if (tk < 0) throw_invalid(fn, "key length must be >= 0", tk);
  if (query_offset < 0) throw_invalid(fn, "query_offset must be >= 0", query_offset);
  const std::int64_t r_min = -(query_offset + tq - 1), r_max = tk - 1 - query_offset;
  if (tq == 0 || tk == 0) return t5_bias_bucket_range(p, r_min, r_min - 1);
  return t5_bias_bucket_range(p, r_min, r_max);
}

T5Bias::T5Bias(const T5BiasParams& p, span<const float> table, std::int64_t tq, std::int64_t tk,
               std::int64_t query_offset)
    : tq_(tq), tk_(tk), query_offset_(query_offset) {
  constexpr const char* fn = "T5Bias";
  reference::t5_bias_check(p, fn);
  const std::size_t want = static_cast<std::size_t>(p.num_buckets) * p.n_heads;
  if (table.size() != want && !POSENC_MUTANT("opt_t5_table_size_unchecked")) {
    throw_invalid(fn,
                  "table must have num_buckets * n_heads = " + std::to_string(want) + " entries",
                  table.size());
  }
  if (POSENC_MUTANT("opt_t5_bias_ignores_offset")) query_offset_ = 0;
  buckets_ = t5_bias_bucket_table(p, tq, tk, query_offset_);
  line_ = static_cast<std::int64_t>(buckets_.bucket.size());
  const bool transposed = POSENC_MUTANT("opt_t5_table_transposed");
  lines_.resize(static_cast<std::size_t>(p.n_heads * line_));
  for (int h = 0; h < p.n_heads; ++h) {
    float* line = lines_.data() + h * line_;
    for (std::int64_t x = 0; x < line_; ++x) {
      const std::size_t b = static_cast<std::size_t>(buckets_.bucket[static_cast<std::size_t>(x)]);
      line[x] = transposed ? table[h * static_cast<std::size_t>(p.num_buckets) + b]
                           : table[b * p.n_heads + h];
    }
  }
}

void T5Bias::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const {
  // Row r holds relative positions k0 - (o + q0 + r) .. + nk - 1: one contiguous run of the
  // head's line, in range because q0 + r < Tq and k0 + nk <= Tk.
  const float* line = lines_.data() + head * line_;
  for (int r = 0; r < nq; ++r) {
    const std::int64_t start = k0 - (query_offset_ + q0 + r) - buckets_.r_min;
    std::memcpy(tile + static_cast<std::size_t>(r) * nk, line + start,
                static_cast<std::size_t>(nk) * sizeof(float));
  }
  if (POSENC_MUTANT("opt_t5_thread_dependent")) mutant_nudge(tile, nq * nk, omp_get_thread_num());
}

void t5_bias_matrix(const T5BiasParams& p, span<const float> table, std::int64_t tq,
                    std::int64_t tk, std::int64_t query_offset, span<float> bias) {
  constexpr const char* fn = "t5_bias_matrix";
  reference::t5_bias_check(p, fn);
  const std::size_t want = static_cast<std::size_t>(p.n_heads) * tq * tk;
  if (bias.size() != want) {
    throw_invalid(fn, "bias must have n_heads * Tq * Tk = " + std::to_string(want) + " entries",
                  bias.size());
  }
  const T5Bias b(p, table, tq, tk, query_offset);
  if (tk == 0) return;
  for (int h = 0; h < p.n_heads; ++h) {
    for (std::int64_t i = 0; i < tq; ++i) {
      b.fill(h, i, 1, 0, static_cast<int>(tk), bias.data() + (h * tq + i) * tk);
    }
  }
}

void t5_bias_forward(const T5BiasParams& p, const AttentionParams& ap, std::int64_t tq,
                     std::int64_t tk, span<const float> table, span<const float> q,
                     span<const float> k, span<const float> v, span<float> out) {
  const AttentionParams pp = reference::t5_bias_attention_params(ap, p, "t5_bias_forward");
  reference::attention_check(pp, tq, tk, "t5_bias_forward");
  const T5Bias bias(p, table, tq, tk, pp.query_offset);
  attention_forward(pp, AttentionMask{}, tq, tk, q, k, v, out, &bias);
}

}  // namespace posenc::optimized
