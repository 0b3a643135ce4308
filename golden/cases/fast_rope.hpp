// The fast RoPE table oracle: a cos(m w_i) and a sin(m w_i) for many positions m, correctly
// rounded to a target dtype and to double, bit-identical to the mp50 oracle's rounding
// (rope_kit.hpp, rope_oracle: a * cos(mp50(m) * w), both mp50) at about 20x its speed. The level-2 sweeps
// (`posenc generate --level 2`) compute their tables with it.
//
// Contract. Given the mp50 frequencies w_i and the mp50 attention factor a (exactly as the mp50
// oracle holds them), eval(m, i) returns, for 0 <= m < 2^29, the value y = a cos(m w_i) (and
// a sin) rounded to nearest-even in the target dtype and in double, equal to round(mp50 value).
//
// Method (Ziv's strategy: evaluate fast with a proven error bound, round when the error
// interval holds no rounding boundary, else recompute in mp50):
//  1. Angle reduction, once per pair: R_i = frac(w_i / 2 pi) in 128-bit fixed point (computed
//     in mp100 from w_i, truncated: |R_i - frac(w_i/2pi)| < 2^-128 turns). Per position the
//     turn count m R_i mod 1 is ONE wrapping 128-bit multiplication, exact in fixed point: the
//     reduction is shared across positions (no per-position mp work) and its error is
//     m 2^-128 < 2^-99 turns for m < 2^29.
//  2. The top 11 bits pick a table entry k (cos, sin of 2 pi k / 2048 in double-double, from
//     mp50: relative error <= 2^-106 each); the remaining g < 2^-11 turns becomes
//     x = 2 pi g in double-double, |x| < 0.0031 (conversion error < 2^-116 turns, 2 pi in
//     double-double to 2^-107).
//  3. cos x, sin x by Taylor series: the leading terms in double-double, the tail
//     (x^5/120 - x^7/5040 + x^9/9!, y^3/720 - ...) in double: its value is < 2.3e-15 and its
//     relative error a few 2^-53, so < 2^-98 absolute; truncation after x^9 (x^10) < 2^-117.
//  4. The angle addition cos(A + x) = C_k cos x - S_k sin x and the product by a (double-double
//     of the mp50 a, relative 2^-106): about a dozen double-double operations, each of relative
//     error < 2^-103 (Dekker's products without FMA: fp-contract is off for this file).
//  5. The mp50 oracle's own distance to a cos(m w_i) exactly: the mp50 angle rounding
//     |m w| 2^-166 <= 2^-127 (m < 2^29, w <= 1000 as every rule's w_i is), and two mp50
//     roundings of the result: < 2^-126 a.
// Sum: 2 pi 2^-99 (reduction) + 2^-98 (tail) + 16 2^-103 (operations) + smaller terms
// < 2^-95 a; the bound used is E = 2^-88 max(a, 1) (128x margin). The value is rounded when
// [y - 2E, y + 2E] holds no midpoint of the target dtype nor of double (the factor 2 covers the
// rounding of the distance itself); otherwise, and for a zero or subnormal result (sin at
// m = 0), it is recomputed in mp50. With E = 2^-88, the double check fails with probability
// about 2^-34 per value: the fallback runs for m = 0 and almost never else (fallbacks() counts).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "reference/common/dtype.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::golden {

/// A double-double value hi + lo, |lo| <= ulp(hi) / 2.
struct DD {
  double hi = 0, lo = 0;
};

class FastRopeTables {
 public:
  /// w: the mp50 frequencies (each in (0, 1000]); a: the mp50 attention factor (> 0).
  FastRopeTables(const std::vector<mp50>& w, const mp50& a);

  /// One table value: rounded to the target dtype (as a double, exact) and to double.
  struct Value {
    double target = 0, exact = 0;
  };
  /// a cos(m w_i) and a sin(m w_i), 0 <= m < 2^29 (InvalidArgument otherwise).
  void eval(std::int64_t m, int i, DType t, Value* c, Value* s) const;
  /// The double-double approximation itself, before any rounding (tests, bench).
  void approx(std::int64_t m, int i, DD* c, DD* s) const;
  /// The error bound E of approx (absolute).
  double error_bound() const { return err_; }
  /// How many values were recomputed in mp50 so far.
  std::uint64_t fallbacks() const { return fallbacks_; }
  /// The pair count.
  int pairs() const { return static_cast<int>(turns_.size()); }
  /// m w_i in double (the angle, within one ulp; pipeline budgets read it).
  double angle(std::int64_t m, int i) const;

 private:
  Value round_or_fallback(const DD& v, std::int64_t m, int i, bool is_sin, DType t) const;
  std::vector<unsigned __int128> turns_;  // frac(w_i / 2 pi) * 2^128, truncated
  std::vector<DD> w_dd_;
  std::vector<mp50> w_;
  mp50 a_;
  DD a_dd_;
  double err_ = 0;
  mutable std::atomic<std::uint64_t> fallbacks_{0};  // eval may run on several threads
};

/// Correct rounding of a double-double v whose true value lies within e of it, to dtype t
/// (f32, bf16, f16) and to double: true and *r when every real in [v - 2e, v + 2e] rounds to
/// the same value in both; false when the interval may hold a rounding boundary, or v is 0,
/// subnormal in double, or not finite.
bool dd_round_if_safe(const DD& v, double e, DType t, double* target, double* exact);

}  // namespace posenc::golden
