// RoPE float kernels. Formula: see reference/rope.hpp.
//
// Contract
//   dtypes:       float in / float out (and double in / double out); cos and sin are built from
//                 angles m * theta_i computed in double, rounded once to the kernel's type, with
//                 the attention factor folded in (as ONNX caches and HF's cos*attention_scaling)
//   error metric: per element of a rotated pair (x_a, x_b) at angle phi:
//                   float:  |y - y*| <= kRopeMaxError    * eps_f32 * a * (|x_a| + |x_b|)
//                   double: |y - y*| <= (kRopeMaxErrorF64 + kRopeAngleErrorF64 * |phi|)
//                                       * eps_f64 * a * (|x_a| + |x_b|)
//                 y* is the exact value (the mp50 oracle); tail channels are bit-identical copies
//   valid range:  |m| <= kRopeMaxPosition; even rotary_dim <= head_dim; base > 0
//   layout:       [tokens, heads, head_dim] or [heads, tokens, head_dim], row-major; one position
//                 per token shared by all heads; y may be x itself (in place); partial overlap
//                 is rejected
//   threading:    OpenMP over rows (schedule static), `omp simd` over pairs; every element is
//                 computed by the same instruction sequence whatever the thread count, so the
//                 result bits do not depend on it
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reference/common/span.hpp"
#include "reference/rope.hpp"  // RopeParams, RopeLayout: the reference defines the contract

namespace posenc::optimized {

using reference::RopeLayout;
using reference::RopeParams;

/// Bound of the float kernel, in eps_f32 * a * (|x_a| + |x_b|) (measured: docs/schemes/rope.md).
inline constexpr double kRopeMaxError = 2.0;
/// Constant and angle-proportional parts of the double kernel's bound, in eps_f64 units.
inline constexpr double kRopeMaxErrorF64 = 4.0;
inline constexpr double kRopeAngleErrorF64 = 2.0;
/// Largest |position| the bounds hold for: the double angle's absolute error
/// (about |phi| * 2^-52) stays below 0.1 eps_f32 up to here.
inline constexpr std::int64_t kRopeMaxPosition = std::int64_t{1} << 28;

enum class RopeTensorLayout { kTokensHeadsDim, kHeadsTokensDim };

/// cos/sin tables for a list of token positions: [n_tokens, rotary_dim/2] each, factor folded in.
struct RopeCache {
  int n_pairs = 0;
  std::vector<std::int64_t> positions;
  std::vector<double> inv_freq;  // theta_i in double
  std::vector<float> cos_f32, sin_f32;
  std::vector<double> cos_f64, sin_f64;
};

/// Builds the cache. inv_freq empty = the default base^(-2i/d); else rotary_dim/2 values (the
/// scaling schemes' hook). attention_factor <= 0 means p.attention_factor.
RopeCache rope_cache_init(const RopeParams& p, span<const std::int64_t> positions,
                          span<const double> inv_freq = {}, double attention_factor = 0.0);

/// Shape of one q or k tensor.
struct RopeShape {
  std::int64_t n_tokens = 0;
  int n_heads = 0;
  RopeTensorLayout layout = RopeTensorLayout::kTokensHeadsDim;
};

/// Rotates x (shape s) into y; y may be x (in place).
void rope_apply(const RopeParams& p, const RopeCache& cache, RopeShape s, span<const float> x,
                span<float> y);
void rope_apply(const RopeParams& p, const RopeCache& cache, RopeShape s, span<const double> x,
                span<double> y);

/// q and k in one parallel pass (they share tokens and positions; head counts may differ).
void rope_apply_qk(const RopeParams& p, const RopeCache& cache, RopeShape q_shape,
                   span<const float> q, span<float> q_out, RopeShape k_shape,
                   span<const float> k, span<float> k_out);
void rope_apply_qk(const RopeParams& p, const RopeCache& cache, RopeShape q_shape,
                   span<const double> q, span<double> q_out, RopeShape k_shape,
                   span<const double> k, span<double> k_out);

/// Tokens per block of rope_apply_qk_positions: the cos/sin of a block are built, then used by
/// every head of q and k while they are in L1 (16 tokens x 64 pairs x 2 x 4 bytes = 8 KiB).
inline constexpr int kRopeTokenBlock = 16;
/// The same when q or k is heads-major: each head's rows of a block are one contiguous run, so
/// a longer block gives longer runs between jumps to the next head (64 tokens x 512 bytes =
/// 32 KiB per run; the table, 32 KiB, stays in L2). The bits do not depend on the block.
inline constexpr int kRopeTokenBlockHeadsMajor = 64;
/// rope_apply_qk_positions writes an out-of-place output with streaming (non-temporal) stores
/// when q_out and k_out together hold at least this many bytes (the last-level cache of the
/// machines posenc is measured on, 32 MiB: an output that large leaves the cache before the next
/// kernel reads it anyway) and the kernel can: AVX-512 build, half-split layout with
/// rotary_dim == head_dim and head_dim a multiple of 32, output rows 64-byte aligned. A normal
/// store first reads the line it writes (write-allocate), so streaming moves 2/3 of the bytes.
/// The bits are those of the normal stores (the same products and roundings).
inline constexpr std::size_t kRopeStreamMinBytes = std::size_t{32} << 20;

/// q and k rotated with the cos/sin table built inside the call from the positions, a token
/// block at a time (what engines do: no table in memory between calls).
///   positions:  n_tokens values, |m| <= kRopeMaxPosition
///   inv_freq:   empty = the default base^(-2i/d) (long double pow, rounded once); else
///               rotary_dim/2 finite values in (0, 2] (the scaling schemes' hook)
///   attention_factor <= 0 means p.attention_factor
/// Numerics: m = m_hi + m_lo (m_hi a multiple of 16, 0 <= m_lo < 16); phi_hi = m_hi theta_i
/// and phi_lo = m_lo theta_i in double (each rounded once, as rope_cache_init's m * theta_i
/// is), their sin and cos by sincos_f64 (optimized/fast_math.hpp: absolute error <= 2^-50, vectorised by `omp simd`,
/// where rope_cache_init calls glibc), then cos(phi_hi + phi_lo) and sin(phi_hi + phi_lo) by
/// the angle-addition formulas in double (absolute error <= 2 * 2^-50 + 3 * 2^-53 < 2^-48; the
/// angle roundings add (|phi_hi| + |phi_lo|) 2^-53, as |m theta_i| 2^-53 did for one product),
/// times the factor, rounded once to float. One sincos_f64 row per value of m_hi serves a block
/// of consecutive positions. The table entries are within 0.5 ulp + 2^-48 of the exact values
/// (the cache's: 0.5 ulp + glibc's), so the float contract above holds unchanged:
/// |y - y*| <= kRopeMaxError * eps_f32 * a * (|x_a| + |x_b|). The bits can differ from
/// rope_apply_qk with a cache in the rare element whose cos or sin lies within 2^-48 of a
/// rounding boundary of float.
/// Threading: OpenMP over token blocks (schedule static); each token's table and rows are
/// computed by the same instructions whatever the thread count (identical bits).
void rope_apply_qk_positions(const RopeParams& p, span<const std::int64_t> positions,
                             span<const double> inv_freq, double attention_factor,
                             RopeShape q_shape, span<const float> q, span<float> q_out,
                             RopeShape k_shape, span<const float> k, span<float> k_out);

}  // namespace posenc::optimized
