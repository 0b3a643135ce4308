// Proportional RoPE float kernel (Gemma 4's global layers). Formula: see
// reference/rope_proportional.hpp.
//
// Contract
//   what:         rope_proportional_cache_init builds an optimized::RopeCache whose h/2 pairs
//                 carry theta_i = base^(-2i/h) / s (i < k, in long double, rounded once to
//                 double) or 0 (i >= k); optimized::rope_apply / rope_apply_qk then rotate with it
//   error metric: the live pairs: the RoPE kernel's bound (kRopeMaxError, optimized/rope.hpp);
//                 the zero pairs: cos = a, sin = 0 exactly, so y = a x (bit-identical copies
//                 for a = 1), in float and in double
//   valid range:  |m| <= kRopeMaxPosition; rotary_dim == head_dim; 0 < p <= 1; s > 0
//   threading:    as rope_cache_init: OpenMP over tokens, results independent of thread count
#pragma once
#include <cstdint>

#include "optimized/rope.hpp"
#include "reference/common/span.hpp"
#include "reference/rope_proportional.hpp"

namespace posenc::optimized {

using reference::RopeProportional;

/// The cos/sin cache of a proportional rule for the given positions (use with rope_apply).
RopeCache rope_proportional_cache_init(const RopeParams& p, const RopeProportional& r,
                                       span<const std::int64_t> positions);

}  // namespace posenc::optimized
