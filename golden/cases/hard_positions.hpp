// The hard positions, shared by every scheme whose golden cases sweep positions:
// representability edges of bf16 (256), f16 (2048) and f32 (2^24), powers of two minus one up
// to 2^20 - 1, and the two positions below 2^20 whose angle at frequency 1 (pair 0 of plain
// RoPE and of the sinusoids) lies closest to a multiple of pi/2 (2.9e-7 and 2.3e-6 away; a
// case whose pair-0 frequency is not 1 prints its own distance, near_half_pi_why).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/scalar.hpp"

namespace posenc::golden {

struct HardPosition {
  std::int64_t m;
  std::string why;
};

/// Sorted; each entry says why it is hard (manifests print it).
const std::vector<HardPosition>& hard_positions();

/// The `count` positions in [1, limit) closest to a multiple of pi/2, sorted. IEEE double only
/// (remainder is exact), so the choice is the same on every machine.
std::vector<std::int64_t> near_half_pi_positions(std::int64_t limit, int count);

/// Whether m is one of the near-pi/2 hard positions (whose why depends on the pair-0 frequency).
bool is_near_half_pi_position(std::int64_t m);

/// The why of a near-pi/2 position for a case whose pair-0 frequency is `inv_freq0` (exact, as
/// the oracle has it): the real distance of the angle m * inv_freq0 from the nearest multiple
/// of pi/2, in mp50 (e.g. "pair-0 angle 2.9e-07 from a multiple of pi/2 (364913 pi/2)"); for
/// inv_freq0 != 1 it also says where the position was chosen (frequency 1), so a rescaled pair
/// 0 (PI, LongRoPE) states how far it actually is.
std::string near_half_pi_why(std::int64_t m, const mp50& inv_freq0);

}  // namespace posenc::golden
