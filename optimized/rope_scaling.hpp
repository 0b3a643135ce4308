// RoPE scaling: scaled tables for the RoPE kernel. Formula: see reference/rope_scaling.hpp.
//
// Contract
//   dtypes:       the tables (inv_freq, attention factor, softmax-scale multiplier) in double,
//                 computed in long double and rounded once, so each is within half an ulp of
//                 double (plus long double's own error, about 2^-63 relative); the rotation is
//                 optimized/rope.hpp's kernel fed through its inv_freq / attention-factor hook,
//                 with its bound kRopeMaxError (the double angle m * theta_i stays accurate to
//                 2^-52 relative)
//   decisions:    band and ramp membership (llama3, yarn) and the LongRoPE switch are decided in
//                 long double; they agree with the exact rule except within about 2^-60 of an
//                 edge, where both sides give the same value (the rules are continuous there)
//   valid range:  that of optimized/rope.hpp (|m| <= 2^28)
//   threading:    tables are built once per call, single-threaded (d/2 values); the rotation
//                 keeps the kernel's bit-identical threading
#pragma once
#include <cstdint>
#include <vector>

#include "optimized/rope.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::optimized {

using reference::RopeScaling;
using reference::RopeScalingType;

struct RopeScaledTablesF64 {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
  double softmax_scale_multiplier = 1.0;
};

/// The scaled tables of a rule (InvalidArgument for unusable parameters).
RopeScaledTablesF64 rope_scaling_tables(const RopeParams& p, const RopeScaling& s);

/// cos/sin cache of one call with the rule's tables (the kernel's rope_cache_init hook).
RopeCache rope_scaling_cache_init(const RopeParams& p, const RopeScaling& s,
                                  span<const std::int64_t> positions);

}  // namespace posenc::optimized
