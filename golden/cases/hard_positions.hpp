// The hard positions, shared by every scheme whose golden cases sweep positions:
// representability edges of bf16 (256), f16 (2048) and f32 (2^24), powers of two minus one up
// to 2^20 - 1, and positions whose pair-0 angle lies within 1e-6 of a multiple of pi/2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace posenc::golden
