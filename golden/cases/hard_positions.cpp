#include "golden/cases/hard_positions.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace posenc::golden {

std::vector<std::int64_t> near_half_pi_positions(std::int64_t limit, int count) {
  std::vector<std::pair<double, std::int64_t>> best;
  const double half_pi = 1.5707963267948966;
  for (std::int64_t m = 1; m < limit; ++m) {
    const double r = std::fabs(std::remainder(static_cast<double>(m), half_pi));
    if (static_cast<int>(best.size()) < count || r < best.back().first) {
      best.emplace_back(r, m);
      std::sort(best.begin(), best.end());
      if (static_cast<int>(best.size()) > count) best.pop_back();
    }
  }
  std::vector<std::int64_t> out;
  for (const auto& b : best) out.push_back(b.second);
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<HardPosition>& hard_positions() {
  static const std::vector<HardPosition> list = [] {
    std::vector<HardPosition> v = {
        {0, "position 0: every angle is 0 (identity rotation; sin 0, cos 1)"},
        {1, "first step: the angle equals the frequency"},
        {255, "last integer exact in bf16 below 256"},
        {256, "2^8: bf16 integer spacing becomes 2"},
        {257, "not representable in bf16 (rounds to 256 or 258)"},
        {2047, "f16 integer limit - 1"},
        {2048, "2^11: f16 integer spacing becomes 2"},
        {2049, "not representable in f16"},
        {4095, "2^12 - 1 (LLaMA-2 context end)"},
        {8191, "2^13 - 1"},
        {32767, "2^15 - 1"},
        {65535, "2^16 - 1"},
        {131071, "2^17 - 1 (128k context end)"},
        {262143, "2^18 - 1"},
        {1048575, "2^20 - 1"},
        {16777215, "2^24 - 1: last odd integer exact in f32"},
        {16777217, "2^24 + 1: not representable in f32"},
    };
    for (std::int64_t m : near_half_pi_positions(std::int64_t{1} << 20, 2)) {
      v.push_back({m, "pair-0 angle within 1e-6 of a multiple of pi/2"});
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.m < b.m; });
    return v;
  }();
  return list;
}

}  // namespace posenc::golden
