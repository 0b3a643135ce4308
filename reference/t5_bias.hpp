// -----------------------------------------------------------------------------
// T5 bias: bucketed relative position bias, one learned scalar per (bucket, head) (reference)
// -----------------------------------------------------------------------------
// Formula (code indices 0-based; query i at absolute position P = query_offset + i, key j at
// position j; N = num_buckets, D = max_distance, H = n_heads):
//
//   r = j - P                                         relative position: KEY minus QUERY
//   bidirectional (encoder):  N' = floor(N / 2),  offset = N' if r > 0 else 0,  n = |r|
//   causal (decoder):         N' = N,             offset = 0,  n = max(-r, 0)   (future keys,
//                                                 r > 0, collapse to n = 0, i.e. bucket 0)
//   E = floor(N' / 2)                                 "max_exact"
//   bucket(r) = offset + n                                                     if n < E
//             = offset + min(E + trunc(ln(n / E) / ln(D / E) * (N' - E)), N' - 1)   otherwise
//   trunc rounds toward zero (its argument is >= 0 here); ln 0 is never evaluated (n = 0 takes
//   the first branch). Every n >= D lands in the last bucket of its half; the last bucket in
//   fact starts where the formula first reaches N' - 1 (n = 91 bidirectional, 113 causal, for
//   N = 32, D = 128).
//
//   bias(h, i, j) = table[bucket(j - (query_offset + i))][h]      table [N, H], row-major
//   s_ij = q_i . k_j + bias(h, i, j)       NO 1/sqrt(d) scaling (AttentionScale::kNone); the
//   softmax and masks are reference/attention.hpp's; T5 self-attention is unmasked in the
//   encoder (bidirectional) and causal in the decoder.
//   Invariants: buckets are exact integers; bias depends on (i, j) only through
//   query_offset + i - j, so a decode step with query_offset = k equals rows k.. of the full
//   forward.
//
//   Exactness of the truncation: with M = N' - E and n in [E, D), the claim
//   "k <= ln(n/E) / ln(D/E) * M" is equivalent (all terms positive) to the integer inequality
//   n^M * E^k >= D^k * E^M. This file computes x = M ln(n/E) / ln(D/E) in double. Its absolute
//   error is at most about 4 M (E + 1) (1 + ln(D/E)) 2^-53 (the 1/ln(D/E) factor is at most
//   E + 1), below 2^-24 for the allowed params (N <= 4096, D <= 2^30), so trunc(x) is right
//   unless x lies within 2^-20 of an integer k. There the integer inequality (boost cpp_int)
//   decides. Such ties are real: for N = 32, D = 128 bidirectional, n = 16, 32, 64 give
//   x = 2, 4, 6 exactly (double happens to get these right); for N = 9 causal, D = 128,
//   n = 8 gives x = 5 ln 2 / ln 32 = 1 exactly, which double evaluates to 1 - 2^-53 (bucket 4
//   instead of 5).
//
//   Symbols: N = T5BiasParams::num_buckets, D = max_distance, bidirectional, H = n_heads.
//
// Source: C. Raffel, N. Shazeer, A. Roberts, K. Lee, S. Narang, M. Matena, Y. Zhou, W. Li,
//   P. J. Liu, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
//   Transformer", arXiv:1910.10683v4, Sec. 2.1 ("Model": a scalar per relative-position
//   bucket added to the logits, 32 buckets with logarithmically growing ranges up to an offset
//   of 128, shared across layers, a different table per head). The paper gives no formula for
//   the buckets: the function above is that of the released code (tensorflow/mesh
//   transformer_layers.py _relative_position_bucket), see docs/schemes/t5_bias.md.
// Index note: none; positions are 0-based in the paper's code too. The paper speaks of the
//   "offset between the key and query"; the code's sign is r = key - query (memory - context).
// Names elsewhere: HF T5Attention._relative_position_bucket (relative_position, bidirectional,
//   num_buckets, max_distance) and T5Attention.compute_bias (relative_attention_bias, an
//   nn.Embedding [num_buckets, n_heads]; config relative_attention_num_buckets,
//   relative_attention_max_distance); mesh_tensorflow _relative_position_bucket; T5X / flaxformer
//   RelativePositionBiases; candle t5 T5Attention.
// Not modelled: HF's float32 evaluation of ln(n/E) (relative_position.float() / max_exact,
//   torch.log, divided by the Python double ln(D/E)); for the defaults it gives the same buckets
//   for |r| <= 4096 (a test checks this). Not
//   modelled either: sharing the bias across layers, cross-attention (no position bias),
//   HF's position_bias reuse across the stack, and padding masks (reference/attention.hpp).
#pragma once
#include <algorithm>
#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/common/errors.hpp"

namespace posenc::reference {

/// Largest num_buckets and max_distance the exactness argument above covers.
inline constexpr int kT5BiasMaxBuckets = 4096;
inline constexpr std::int64_t kT5BiasMaxDistance = std::int64_t{1} << 30;

/// Configuration shared by reference, optimized, properties and golden code.
struct T5BiasParams {
  int num_buckets = 32;             // N (HF relative_attention_num_buckets)
  std::int64_t max_distance = 128;  // D (HF relative_attention_max_distance)
  bool bidirectional = true;        // true: encoder; false: decoder (causal buckets)
  int n_heads = 1;                  // H, columns of the bias table
};

/// N': buckets per direction (N / 2 when bidirectional, N when causal).
inline int t5_bias_direction_buckets(const T5BiasParams& p) {
  return p.bidirectional ? p.num_buckets / 2 : p.num_buckets;
}

/// E = N' / 2: distances below it get a bucket of their own.
inline int t5_bias_max_exact(const T5BiasParams& p) { return t5_bias_direction_buckets(p) / 2; }

/// Throws InvalidArgument naming `function` unless p satisfies the formula's preconditions.
inline void t5_bias_check(const T5BiasParams& p, const char* function = "t5_bias_check") {
  const int min_buckets = p.bidirectional ? 4 : 2;  // E >= 1: ln(n/E) needs E > 0
  if (p.num_buckets < min_buckets || p.num_buckets > kT5BiasMaxBuckets) {
    throw_invalid(function,
                  std::string("num_buckets must lie in [") + std::to_string(min_buckets) + ", " +
                      std::to_string(kT5BiasMaxBuckets) + "] when " +
                      (p.bidirectional ? "bidirectional" : "causal"),
                  p.num_buckets);
  }
  const int e = t5_bias_max_exact(p);
  if (p.max_distance <= e || p.max_distance > kT5BiasMaxDistance) {
    throw_invalid(function,
                  "max_distance must exceed max_exact = " + std::to_string(e) +
                      " and be at most 2^30 (ln(D/E) > 0)",
                  p.max_distance);
  }
  if (p.n_heads <= 0) throw_invalid(function, "n_heads must be positive", p.n_heads);
}

namespace detail {

/// k <= M ln(n/E) / ln(D/E), decided exactly: n^M * E^k >= D^k * E^M in integers.
inline bool t5_bias_log_reaches(std::uint64_t n, int e, int m, std::int64_t d, int k) {
  using boost::multiprecision::cpp_int;
  using boost::multiprecision::pow;
  return pow(cpp_int(n), static_cast<unsigned>(m)) * pow(cpp_int(e), static_cast<unsigned>(k)) >=
         pow(cpp_int(d), static_cast<unsigned>(k)) * pow(cpp_int(e), static_cast<unsigned>(m));
}

/// trunc(M ln(n/E) / ln(D/E)) for E <= n < D, exactly (see "Exactness of the truncation" above).
inline std::int64_t t5_bias_log_steps(std::uint64_t n, int e, int m, std::int64_t d) {
  const double x =
      m * (std::log(static_cast<double>(n) / e) / std::log(static_cast<double>(d) / e));
  const double k = std::nearbyint(x);
  if (x < 0 || std::fabs(x - k) > 0x1p-20) return static_cast<std::int64_t>(std::trunc(x));
  const int ki = static_cast<int>(k);
  return t5_bias_log_reaches(n, e, m, d, ki) ? ki : ki - 1;
}

}  // namespace detail

/// The bucket of relative position r = key - query, in [0, num_buckets).
inline int t5_bias_bucket(const T5BiasParams& p, std::int64_t r) {
  t5_bias_check(p, "t5_bias_bucket");
  const int nb = t5_bias_direction_buckets(p);
  const std::uint64_t mag =
      r < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(r) : static_cast<std::uint64_t>(r);
  int offset = 0;
  std::uint64_t n = 0;  // the distance the buckets of one direction measure
  if (p.bidirectional) {
    if (r > 0) offset = nb;
    n = mag;
  } else {
    n = r < 0 ? mag : 0;
  }
  const int e = nb / 2, m = nb - e;
  if (n < static_cast<std::uint64_t>(e)) return offset + static_cast<int>(n);
  // n >= D: ln(n/E)/ln(D/E) * M >= M > M - 1, so the min() below picks N' - 1.
  if (n >= static_cast<std::uint64_t>(p.max_distance)) return offset + nb - 1;
  const std::int64_t steps = detail::t5_bias_log_steps(n, e, m, p.max_distance);
  return offset + e + static_cast<int>(std::min<std::int64_t>(steps, m - 1));
}

/// bias(h) for a query at absolute position query_pos and a key at key_pos:
/// table[bucket(key_pos - query_pos) * H + h], table [num_buckets, n_heads] row-major.
template <class Real>
Real t5_bias_value(const T5BiasParams& p, const std::vector<Real>& table, int head,
                   std::int64_t query_pos, std::int64_t key_pos) {
  const int b = t5_bias_bucket(p, key_pos - query_pos);
  if (b < 0 || b >= p.num_buckets) {  // an internal invariant, not a user error
    throw std::logic_error("t5_bias_value: bucket " + std::to_string(b) + " out of range");
  }
  return table[static_cast<std::size_t>(b) * p.n_heads + head];
}

/// Throws InvalidArgument unless table has num_buckets * n_heads entries.
inline void t5_bias_check_table(const T5BiasParams& p, std::size_t table_size,
                                const char* function) {
  t5_bias_check(p, function);
  const std::size_t want = static_cast<std::size_t>(p.num_buckets) * p.n_heads;
  if (table_size != want) {
    throw_invalid(function,
                  "table must have num_buckets * n_heads = " + std::to_string(want) + " entries",
                  table_size);
  }
}

/// The bias hook for reference/attention.hpp: bias(h, i, j) with query i at query_offset + i.
template <class Real>
AttentionHooks<Real> t5_bias_hooks(const T5BiasParams& p, const std::vector<Real>& table,
                                   std::int64_t query_offset) {
  t5_bias_check_table(p, table.size(), "t5_bias_hooks");
  AttentionHooks<Real> hooks;
  hooks.bias = [p, table, query_offset](int h, std::int64_t i, std::int64_t j) {
    return t5_bias_value<Real>(p, table, h, query_offset + i, j);
  };
  return hooks;
}

/// Buckets [Tq, Tk] of a block of queries at query_offset + i against keys 0 .. Tk - 1.
inline std::vector<std::int32_t> t5_bias_bucket_matrix(const T5BiasParams& p, std::int64_t tq,
                                                       std::int64_t tk, std::int64_t query_offset) {
  t5_bias_check(p, "t5_bias_bucket_matrix");
  std::vector<std::int32_t> b(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      b[static_cast<std::size_t>(i * tk + j)] = t5_bias_bucket(p, j - (query_offset + i));
    }
  }
  return b;
}

/// The bias [H, Tq, Tk] (HF compute_bias without the leading batch axis).
template <class Real>
std::vector<Real> t5_bias_matrix(const T5BiasParams& p, const std::vector<Real>& table,
                                 std::int64_t tq, std::int64_t tk, std::int64_t query_offset) {
  const AttentionHooks<Real> hooks = t5_bias_hooks(p, table, query_offset);
  std::vector<Real> out;
  out.reserve(static_cast<std::size_t>(p.n_heads * tq * tk));
  for (int h = 0; h < p.n_heads; ++h) {
    for (std::int64_t i = 0; i < tq; ++i) {
      for (std::int64_t j = 0; j < tk; ++j) out.push_back(hooks.bias(h, i, j));
    }
  }
  return out;
}

/// T5 self-attention params: no score scaling; causal mask iff the buckets are causal.
inline AttentionParams t5_bias_attention_params(AttentionParams ap, const T5BiasParams& p,
                                                const char* function = "t5_bias_attention_params") {
  t5_bias_check(p, function);
  if (ap.n_heads != p.n_heads) {
    throw_invalid(
        function,
        "attention n_heads must equal the bias table's n_heads " + std::to_string(p.n_heads),
        ap.n_heads);
  }
  ap.scale_kind = AttentionScale::kNone;
  ap.causal = !p.bidirectional;
  return ap;
}

/// T5 self-attention with the bias: q [Tq, H, d], k [Tk, H, d], v [Tk, H, dv] -> [Tq, H, dv].
template <class Real>
std::vector<Real> t5_bias_forward(const T5BiasParams& p, const AttentionParams& ap, std::int64_t tq,
                                  std::int64_t tk, const std::vector<Real>& table,
                                  const std::vector<Real>& q, const std::vector<Real>& k,
                                  const std::vector<Real>& v) {
  const AttentionParams pp = t5_bias_attention_params(ap, p, "t5_bias_forward");
  return attention_forward<Real>(pp, AttentionMask{}, tq, tk, q, k, v,
                                 t5_bias_hooks(p, table, pp.query_offset));
}

}  // namespace posenc::reference
