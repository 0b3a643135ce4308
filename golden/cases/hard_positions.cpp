#include "golden/cases/hard_positions.hpp"

#include <algorithm>
#include <boost/math/constants/constants.hpp>
#include <cmath>
#include <cstdio>
#include <utility>

namespace posenc::golden {

namespace {

constexpr std::int64_t kHalfPiLimit = std::int64_t{1} << 20;
constexpr int kHalfPiCount = 2;

struct HalfPiDistance {
  double distance;  // |x - k pi/2|
  std::int64_t k;
};

HalfPiDistance half_pi_distance(const mp50& x) {
  const mp50 half_pi = boost::math::constants::half_pi<mp50>();
  const mp50 k = round(x / half_pi);
  return {static_cast<double>(abs(x - k * half_pi)), static_cast<std::int64_t>(k)};
}

std::string g2(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2g", x);
  return b;
}

std::string fixed(const mp50& x) {
  char b[48];
  std::snprintf(b, sizeof b, "%.6f", static_cast<double>(x));
  return b;
}

}  // namespace

bool is_near_half_pi_position(std::int64_t m) {
  static const std::vector<std::int64_t> v = near_half_pi_positions(kHalfPiLimit, kHalfPiCount);
  return std::find(v.begin(), v.end(), m) != v.end();
}

std::string near_half_pi_why(std::int64_t m, const mp50& inv_freq0) {
  const HalfPiDistance at1 = half_pi_distance(mp50(m));
  const std::string unit =
      g2(at1.distance) + " from a multiple of pi/2 (" + std::to_string(at1.k) + " pi/2)";
  if (inv_freq0 == mp50(1)) return "pair-0 angle " + unit;
  const HalfPiDistance here = half_pi_distance(mp50(m) * inv_freq0);
  return "pair-0 angle m * inv_freq_0 = " + fixed(mp50(m) * inv_freq0) +
         " (inv_freq_0 = " + g2(static_cast<double>(inv_freq0)) + ") is " + g2(here.distance) +
         " from a multiple of pi/2 (" + std::to_string(here.k) +
         " pi/2); chosen at frequency 1, where the angle is " + unit;
}

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
    for (std::int64_t m : near_half_pi_positions(kHalfPiLimit, kHalfPiCount)) {
      v.push_back({m, near_half_pi_why(m, mp50(1))});
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.m < b.m; });
    return v;
  }();
  return list;
}

}  // namespace posenc::golden
