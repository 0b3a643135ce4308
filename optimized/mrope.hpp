// M-RoPE float kernel. Formula and maps: see reference/mrope.hpp.
//
// Contract
//   dtypes:       float in / float out; theta_i = base^(-2 k(i) / D(i)) in long double rounded
//                 once to double (for k = i, D = rotary_dim: the RoPE kernel's bits), the
//                 position p = p_{s(i)} split as p_hi + p_lo (p_hi a multiple of 16), sin and
//                 cos of p_hi theta_i and p_lo theta_i by sincos_f64 (optimized/fast_math.hpp,
//                 absolute error <= 2^-50), the angle-addition formulas in double (< 2^-48 in
//                 all), times the attention factor, rounded once to float: the table of
//                 optimized/rope.hpp's rope_apply_qk_positions, with the position of each
//                 pair's stream
//   error metric: per element of a rotated pair (x_a, x_b):
//                   |y - y*| <= kMropeMaxError * eps_f32 * a * (|x_a| + |x_b|)
//                 y* the exact value (the mp50 oracle); tail channels are bit-identical copies
//   valid range:  |p_s| <= kMropeMaxPosition on every stream; theta_i <= 2 (base >= 1 always
//                 gives <= 1), so |phi| <= 2^29 < kSinCosMaxAngle
//   layout:       q and k as RopeShape ([tokens, heads, head_dim] or heads-major); positions
//                 [map.n_streams, n_tokens] row-major int64 (stream s of token t at
//                 s * n_tokens + t), shared by all heads; y may be x itself (in place); partial
//                 overlap is rejected
//   threading:    OpenMP over blocks of kMropeTokenBlock tokens (schedule static); each token's
//                 table and rows are computed by the same instructions whatever the thread count,
//                 so the result bits do not depend on it
//   text tokens:  all streams equal to m give the bits of rope_apply_qk_positions at m
#pragma once
#include <cstdint>

#include "optimized/rope.hpp"
#include "reference/common/span.hpp"
#include "reference/mrope.hpp"  // MropeMap: the reference defines the contract

namespace posenc::optimized {

using reference::MropeMap;

/// Bound of the float kernel, in eps_f32 * a * (|x_a| + |x_b|) (the RoPE kernel's: the same
/// table numerics and rotation; measured by MropeOptimized.MatchesOracleWithinBound).
inline constexpr double kMropeMaxError = kRopeMaxError;
/// Largest |position| of any stream the bound holds for.
inline constexpr std::int64_t kMropeMaxPosition = kRopeMaxPosition;
/// Tokens per table block (as kRopeTokenBlock; the bits do not depend on it).
inline constexpr int kMropeTokenBlock = 16;

/// q and k rotated with the table built inside the call from the [n_streams, n_tokens]
/// positions; attention_factor <= 0 means p.attention_factor. k may be empty (k_shape.n_heads
/// = 0). Throws InvalidArgument naming the argument on a bad shape, map or position.
void mrope_apply_qk_positions(const RopeParams& p, const MropeMap& map,
                              span<const std::int64_t> positions, double attention_factor,
                              RopeShape q_shape, span<const float> q, span<float> q_out,
                              RopeShape k_shape, span<const float> k, span<float> k_out);

}  // namespace posenc::optimized
