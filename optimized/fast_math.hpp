// Vectorisable elementary functions for the float kernels: branch-free, no library calls, so
// that a `#pragma omp simd` loop that calls them compiles to packed code (glibc's expf, sin and
// cos are calls that stop the loop from vectorising).
//
// Contract
//   exp_f32:     x in float. For -87 <= x <= 88 the result has relative error
//                <= kExpF32MaxError * eps_f32 against exp(x) (measured over a sweep of 2^24
//                points by the properties, tested in properties/attention_test.cpp); for
//                x < -87 (-inf included) it returns 0 (the true value is below 1.7e-38, so the
//                absolute error is below 1.7e-38); for x > 88 it returns exp(88). NaN in gives
//                an unspecified finite value (the kernels never pass NaN: scores are finite
//                or -inf).
//                Method: n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2 in two
//                parts (Cody-Waite, n * C1 exact), exp(r) by its Taylor polynomial of degree
//                7 on |r| <= ln(2)/2 (truncation 5.1e-9 relative, 0.04 eps_f32), times 2^n
//                built in the exponent bits.
//   sincos_f64:  phi in double, |phi| <= kSinCosMaxAngle. sin and cos with absolute error
//                <= 2^-50 (a few ulp of double: the Taylor tails are below 1e-16 and the
//                reduction is exact up to the last product); the caller rounds them to float.
//                Method: k = round(phi * 2/pi), r = phi - k pi/2 with pi/2 in three 24-bit parts
//                and a fourth double (k < 2^29 makes every k * part exact, and the first
//                difference exact), so r carries only the rounding of its last two steps
//                (2^-53 each) plus 2^29 * 2^-125 from the truncated pi/2; then the Taylor
//                polynomials of sin (to r^15) and cos (to r^16) on |r| <= pi/4 and the
//                quadrant k mod 4 from the low bits of the rounding trick.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

namespace posenc::optimized {

/// Relative error bound of exp_f32 on [-87, 88], in eps_f32 (measured: see the contract).
inline constexpr double kExpF32MaxError = 2.0;
/// |phi| up to which sincos_f64 keeps its 2^-50 bound: k = round(phi 2/pi) < 2^29.
inline constexpr double kSinCosMaxAngle = 8.0e8;

inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f;     // ln 2 rounded to 9 bits: n * kC1 is exact
  constexpr float kC2 = -2.12194440e-4f;  // ln 2 - kC1
  constexpr float kRound = 12582912.0f;   // 1.5 * 2^23
  const float xc = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kC1) - n * kC2;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t e = (static_cast<std::int32_t>(n) + 127) << 23;
  const float scale = std::bit_cast<float>(e);
  // Below -87 (and -inf): all bits cleared, +0. A mask, not a branch, so loops stay straight.
  const std::int32_t keep = -static_cast<std::int32_t>(x >= -87.0f);
  return std::bit_cast<float>(std::bit_cast<std::int32_t>(p * scale) & keep);
}

inline void sincos_f64(double phi, double* sin_out, double* cos_out) {
  constexpr double k2OverPi = 0x1.45f306dc9c883p-1;
  constexpr double kP1 = 0x1.921fb4p+0;  // pi/2 = kP1 + kP2 + kP3 + kP4 (+ < 2^-125)
  constexpr double kP2 = 0x1.4442d0p-24;
  constexpr double kP3 = 0x1.846988p-48;
  constexpr double kP4 = 0x1.8cc51701b839ap-72;
  constexpr double kRound = 0x1.8p52;  // 1.5 * 2^52: adding it rounds to an integer
  const double t = phi * k2OverPi + kRound;
  const double k = t - kRound;
  const std::uint64_t q = std::bit_cast<std::uint64_t>(t) & 3u;  // k mod 4
  const double r = ((phi - k * kP1) - k * kP2) - (k * kP3 + k * kP4);
  const double r2 = r * r;
  double s = -1.0 / 1307674368000.0;  // -1/15!
  s = s * r2 + 1.0 / 6227020800.0;    // 1/13!
  s = s * r2 - 1.0 / 39916800.0;
  s = s * r2 + 1.0 / 362880.0;
  s = s * r2 - 1.0 / 5040.0;
  s = s * r2 + 1.0 / 120.0;
  s = s * r2 - 1.0 / 6.0;
  s = r + r * r2 * s;
  double c = 1.0 / 20922789888000.0;  // 1/16!
  c = c * r2 - 1.0 / 87178291200.0;   // 1/14!
  c = c * r2 + 1.0 / 479001600.0;
  c = c * r2 - 1.0 / 3628800.0;
  c = c * r2 + 1.0 / 40320.0;
  c = c * r2 - 1.0 / 720.0;
  c = c * r2 + 1.0 / 24.0;
  c = c * r2 - 0.5;
  c = 1.0 + r2 * c;
  const bool swap = (q & 1u) != 0;
  const double sv = swap ? c : s;
  const double cv = swap ? s : c;
  *sin_out = (q & 2u) != 0 ? -sv : sv;
  *cos_out = ((q + 1u) & 2u) != 0 ? -cv : cv;
}

/// Positions split for the RoPE tables: m = m_hi + m_lo with m_hi a multiple of
/// kRopeLowSpan and 0 <= m_lo < kRopeLowSpan (m_hi = floor(m / 16) * 16).
inline constexpr int kRopeLowSpan = 16;

/// cos(m theta) and sin(m theta) times `factor`, rounded to float, from sincos_f64 of
/// m_hi theta (ch, sh) and of m_lo theta (cl, sl) by the angle-addition formulas in double:
/// absolute error <= 2 * 2^-50 + 3 * 2^-53 < 2^-48 before the factor and the rounding. The RoPE
/// and M-RoPE kernels both call this, so a position gives the same bits in either.
inline void rope_angle_sum(double ch, double sh, double cl, double sl, double factor, float* c,
                           float* s) {
  const double cv = ch * cl - sh * sl;
  const double sv = sh * cl + ch * sl;
  *c = static_cast<float>(factor * cv);
  *s = static_cast<float>(factor * sv);
}

}  // namespace posenc::optimized
