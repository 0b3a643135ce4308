// Shared pieces of the profiles' error analyses (docs/profiles.md): the float32 steps that
// several schemes' pipelines have in common. Each scheme's generator combines them in a
// contract block next to the code that writes its budgets (golden/schemes/<slug>/).
//
// Model of a float32 pipeline step, u = 2^-24 (unit roundoff of float32):
//   +, -, *, / and conversions are correctly rounded: |fl(x) - x| <= u |x|
//   powf, expf, cosf, sinf are faithful (error < 1 ulp): glibc's powf is within 0.82 ulp, its
//   sinf/cosf within about 0.6 ulp; CUDA's sinf/cosf within 2 ulp, so tables allow 2 ulp for
//   the trigonometric functions.
// Where a pipeline computes a value from a few float32 constants (inv_freq = 1/powf(base, e),
// theta_scale = powf(base, -2/d), ALiBi base^k), the bound is not a formula with slack: it
// enumerates the result of every faithful powf (the two float32 neighbours of the exact power)
// and takes the worst relative error against the exact value.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/common/dtype.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::golden::budgets {

/// Unit roundoff of float32.
inline constexpr double kU32 = 0x1p-24;

/// eps_f32 / eps_t: a float32 error counted in units of the target dtype's eps.
inline double f32_in(DType t) { return dtype_eps(DType::kF32) / dtype_eps(t); }

/// Half an ulp when a float32 value is cast to a narrower target dtype t, else 0 (in eps_t).
inline double cast_to(DType t) { return t == DType::kF32 || t == DType::kF64 ? 0.0 : 0.5; }

/// |fl32(p) - p| / |p| of a position converted to float32 (0 for |p| <= 2^24).
inline double position_rel_error_f32(std::int64_t p) {
  if (p == 0) return 0.0;
  const double f = static_cast<double>(static_cast<float>(p));
  return std::fabs(f - static_cast<double>(p)) / std::fabs(static_cast<double>(p));
}

/// The float32 values a faithful function may return for the exact value x > 0: x itself when
/// representable, else its two neighbours.
inline std::vector<float> faithful_f32(const mp50& x) {
  const float n = round_to_f32(x);
  if (mp50(n) == x) return {n};
  if (mp50(n) < x) return {n, std::nextafter(n, INFINITY)};
  return {std::nextafter(n, 0.0f), n};
}

/// Worst relative error, over every faithful powf, of HF's float32 inverse frequency
///   inv_freq[i] = 1 / powf(fl(base), fl(2i) / fl(d))   (float32 division and reciprocal)
/// against the exact base^(-2i/d). The exponent's own rounding (d not a power of two) is
/// included exactly: the exponent a float32 pipeline uses is computed here the same way.
inline double hf_inv_freq_rel_error(double base, int d, int i) {
  using std::pow;
  const float b = static_cast<float>(base);
  const float e = static_cast<float>(2 * i) / static_cast<float>(d);
  const mp50 exact = pow(mp50(base), -mp50(2 * i) / mp50(d));
  double worst = 0;
  for (float r : faithful_f32(pow(mp50(b), mp50(e)))) {
    const float y = 1.0f / r;
    worst = std::max(worst, static_cast<double>(abs(mp50(y) / exact - 1)));
  }
  return worst;
}

/// Worst relative error, over every faithful powf, of ggml's theta_scale = powf(fl(base),
/// -2.0f / d) against the exact base^(-2/d).
inline double ggml_theta_scale_rel_error(double base, int d) {
  using std::pow;
  const float b = static_cast<float>(base);
  const float e = -2.0f / static_cast<float>(d);
  const mp50 exact = pow(mp50(base), mp50(-2) / mp50(d));
  double worst = 0;
  for (float r : faithful_f32(pow(mp50(b), mp50(e)))) {
    worst = std::max(worst, static_cast<double>(abs(mp50(r) / exact - 1)));
  }
  return worst;
}

/// Relative error bound of the recurrence theta_i = fl(theta_{i-1} * ts), theta_0 = fl(p):
///   (1 + rho_p) (1 + delta_ts)^i (1 + u)^i - 1
/// with rho_p the position's conversion error and delta_ts theta_scale's.
inline double recurrence_rel_error(double rho_p, double delta_ts, int i) {
  return std::expm1(std::log1p(rho_p) + i * (std::log1p(delta_ts) + std::log1p(kU32)));
}

/// Relative error bound of one float32 product of a converted position and a float32 value
/// with relative error delta: (1 + rho_p)(1 + delta)(1 + u) - 1.
inline double product_rel_error(double rho_p, double delta) {
  return std::expm1(std::log1p(rho_p) + std::log1p(delta) + std::log1p(kU32));
}


/// Relative error of the product of two values each rounded once to dtype t before it is taken
/// (llama.cpp's 16-bit KV cache: k stored in t, q converted to t for the dot product):
///   |fl_t(x) fl_t(y) - x y| = |x y| |(1 + d1)(1 + d2) - 1| <= (2 u_t + u_t^2) |x y|,
/// u_t = eps_t / 2 (round to nearest); in units of eps_t that is 1 + eps_t / 4. The product of
/// two 16-bit values is exact in float32 (at most 22 significant bits), so the float32
/// accumulation adds only its own gamma_h term. 0 for float32 and wider (nothing is rounded).
inline double stored_product_rel_error(DType t) {
  if (t == DType::kF32 || t == DType::kF64) return 0.0;
  const double ut = dtype_eps(t) / 2;
  return 2 * ut + ut * ut;
}

/// The absolute part of that rounding: below the smallest normal of t the rounding error is
/// up to half the subnormal spacing eta_t, not u_t |x|, so |fl_t(x) - x| <= u_t |x| + eta_t / 2
/// for every x, and a product moves by at most eta_t / 2 (|x| + |y|) more (first order):
/// 2^-25 for f16, 2^-134 for bf16, 0 for float32 and wider.
inline double stored_rounding_abs_floor(DType t) {
  if (t == DType::kF32 || t == DType::kF64) return 0.0;
  return dtype_ulp(t, 0.0) / 2;
}

/// Worst relative error, over every faithful expf, of the tensor2tensor / fairseq float32
/// frequency exp(fl(fl(i) * -fl(ln(base) / (n - 1)))) (the increment computed in double, cast to
/// float32) against the exact base^(-i/(n-1)).
inline double t2t_inv_freq_rel_error(double base, int n, int i) {
  using std::exp;
  using std::pow;
  const float delta = static_cast<float>(std::log(base) / std::max(n - 1, 1));
  const float x = static_cast<float>(i) * -delta;
  const mp50 exact = pow(mp50(base), -mp50(i) / mp50(std::max(n - 1, 1)));
  double worst = 0;
  for (float r : faithful_f32(exp(mp50(x)))) {
    worst = std::max(worst, static_cast<double>(abs(mp50(r) / exact - 1)));
  }
  return worst;
}

/// Worst relative error, over every faithful powf, of a float32 frequency computed directly
///   powf(fl(base), -(fl(num) / fl(den)))   (numpy / PyTorch `base ** (-arange(0, d, 2) / d)`)
/// against the exact base^(-num/den): one faithful rounding of the power itself (up to 1 ulp,
/// 2u relative), where 1/powf(base, num/den) rounds a faithful power and its reciprocal.
inline double powf_inv_freq_rel_error(double base, int num, int den) {
  using std::pow;
  const float b = static_cast<float>(base);
  const float e = static_cast<float>(num) / static_cast<float>(den);
  const mp50 exact = pow(mp50(base), -mp50(num) / mp50(den));
  double worst = 0;
  for (float r : faithful_f32(pow(mp50(b), -mp50(e)))) {
    worst = std::max(worst, static_cast<double>(abs(mp50(r) / exact - 1)));
  }
  return worst;
}

/// Largest power of two <= n (n >= 1).
inline int power_of_two_floor(int n) {
  int c = 1;
  while (2 * c <= n) c *= 2;
  return c;
}

/// Worst relative error of an ALiBi slope computed as a float32 base raised to the integer
/// power k, against the exact 2^(-x k / c): the base is fl32(2^(-x/c)) from double (BLOOM) or a
/// faithful powf(2, fl32(-x / c)) (ggml), so every faithful float32 value of 2^(-x/c) and of
/// 2^fl32(-x/c) is tried, then every faithful powf(base, k).
inline double alibi_power_rel_error(int x, int c, int k) {
  using std::pow;
  const mp50 base = pow(mp50(2), mp50(-x) / mp50(c));
  const mp50 exact = pow(base, k);
  std::vector<float> bases = faithful_f32(base);
  for (float b : faithful_f32(pow(mp50(2), mp50(-static_cast<float>(x) / static_cast<float>(c))))) {
    if (std::find(bases.begin(), bases.end(), b) == bases.end()) bases.push_back(b);
  }
  double worst = 0;
  for (float b : bases) {
    for (float r : faithful_f32(pow(mp50(b), k))) {
      worst = std::max(worst, static_cast<double>(abs(mp50(r) / exact - 1)));
    }
  }
  return worst;
}

/// Worst relative error of an ALiBi slope computed as a float32 base raised to an integer
/// power: BLOOM (base = fl32(2^(-8/c)) from double, torch.pow(base, k)) and ggml (m0 =
/// powf(2, -8/c), powf(m0, h + 1); m1 = powf(2, -4/c) for the extra heads), over every
/// faithful powf and either float32 neighbour of the base. c = 2^floor(log2 n).
inline double alibi_slope_rel_error_powers(int n, int h) {
  const int c = power_of_two_floor(n);
  return h < c ? alibi_power_rel_error(8, c, h + 1) : alibi_power_rel_error(4, c, 2 * (h - c) + 1);
}

/// The same pipelines following the naive rule 2^(-8 (h+1) / n) for every n (the negative
/// control of mlx #343): the power rule with c = n, k = h + 1.
inline double alibi_naive_slope_rel_error_powers(int n, int h) { return alibi_power_rel_error(8, n, h + 1); }

/// MPT's pipeline following the naive rule: 1 / powf(2, fl32(fl32(h + 1) * fl32(8 / n))) (the
/// float32 arange times the Python double 8/n), over every faithful powf, against the exact
/// 2^(-8 (h+1) / n): the exponent's two roundings count when n is not a power of two.
inline double alibi_naive_slope_rel_error_mpt(int n, int h) {
  using std::pow;
  const float e = static_cast<float>(h + 1) * static_cast<float>(8.0 / n);
  const mp50 exact = pow(mp50(2), -mp50(8 * (h + 1)) / mp50(n));
  double worst = 0;
  for (float r : faithful_f32(pow(mp50(2), mp50(e)))) {
    const float y = 1.0f / r;
    worst = std::max(worst, static_cast<double>(abs(mp50(y) / exact - 1)));
  }
  return worst;
}

/// Worst relative error of MPT's float32 slope 1 / powf(2, k * (8 / P)), P = 2^ceil(log2 n),
/// over every faithful powf (the exponent is exact: 8/P is a power of two).
inline double alibi_slope_rel_error_mpt(int n, int h) {
  using std::pow;
  const int c = power_of_two_floor(n);
  // slope = 2^(-x): x = 8(h+1)/c for h < c, else 4(2(h-c)+1)/c
  const mp50 x = h < c ? mp50(8 * (h + 1)) / c : mp50(4 * (2 * (h - c) + 1)) / c;
  const mp50 exact = pow(mp50(2), -x);
  double worst = 0;
  for (float r : faithful_f32(pow(mp50(2), x))) {
    const float y = 1.0f / r;
    worst = std::max(worst, static_cast<double>(abs(mp50(y) / exact - 1)));
  }
  return worst;
}

}  // namespace posenc::golden::budgets
