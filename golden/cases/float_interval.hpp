// F32Interval: every value a float32 computation may produce, as an interval with double
// endpoints. A pipeline written once as a template over its number type runs with T = float
// (the emulation of an engine, golden/cases/pipelines.hpp) and with T = F32Interval (a rigorous
// enclosure of what any engine computing that way may get): the budgets of the scaled RoPE
// tables come from the second, so they follow the pipeline's code, step by step.
//
// Model: + - * / and conversions to float32 are correctly rounded (|fl(x) - x| <= u |x|, u =
// 2^-24); powf, expf, logf are faithful (< 1 ulp, so within 2u |x|), cosf/sinf are not used here.
// Endpoints are computed in double and widened by 2^-50 relative for their own rounding. A
// comparison whose outcome the interval does not decide takes both branches (the hull).
// Subnormals are not modelled (every value here is far above them).
#pragma once
#include <algorithm>
#include <cmath>

namespace posenc::golden {

class F32Interval {
 public:
  static constexpr double kU = 0x1p-24;
  static constexpr double kSlack = 0x1p-50;  // the endpoints' own double rounding

  F32Interval() = default;
  /// A float32 value known exactly (an input, an integer below 2^24).
  static F32Interval exact(double x) { return F32Interval(x, x); }
  /// The float32 conversion of a real x: exact when x is a float32 value, else fl(x) within u.
  static F32Interval rounded(double x) {
    if (static_cast<double>(static_cast<float>(x)) == x) return exact(x);
    return F32Interval(x, x).widen(kU);
  }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  double mid() const { return 0.5 * (lo_ + hi_); }
  /// Largest relative distance of the interval from x (x != 0).
  double rel_error(double x) const {
    return std::max(std::fabs(lo_ - x), std::fabs(hi_ - x)) / std::fabs(x);
  }

  friend F32Interval operator+(F32Interval a, F32Interval b) {
    return F32Interval(a.lo_ + b.lo_, a.hi_ + b.hi_).round();
  }
  friend F32Interval operator-(F32Interval a, F32Interval b) {
    return F32Interval(a.lo_ - b.hi_, a.hi_ - b.lo_).round();
  }
  friend F32Interval operator*(F32Interval a, F32Interval b) {
    const double c[4] = {a.lo_ * b.lo_, a.lo_ * b.hi_, a.hi_ * b.lo_, a.hi_ * b.hi_};
    return F32Interval(*std::min_element(c, c + 4), *std::max_element(c, c + 4)).round();
  }
  friend F32Interval operator/(F32Interval a, F32Interval b) {
    // b must not contain 0 (every divisor here is positive)
    const double c[4] = {a.lo_ / b.lo_, a.lo_ / b.hi_, a.hi_ / b.lo_, a.hi_ / b.hi_};
    return F32Interval(*std::min_element(c, c + 4), *std::max_element(c, c + 4)).round();
  }
  /// The hull of two intervals (a comparison that may go either way).
  friend F32Interval hull(F32Interval a, F32Interval b) {
    return F32Interval(std::min(a.lo_, b.lo_), std::max(a.hi_, b.hi_));
  }

  /// powf(b, e) for b > 0: the exact power's range over the corners, then 1 ulp either way.
  friend F32Interval powf_of(F32Interval b, F32Interval e) {
    const double c[4] = {std::pow(b.lo_, e.lo_), std::pow(b.lo_, e.hi_), std::pow(b.hi_, e.lo_),
                         std::pow(b.hi_, e.hi_)};
    return F32Interval(*std::min_element(c, c + 4), *std::max_element(c, c + 4)).widen(2 * kU);
  }
  friend F32Interval logf_of(F32Interval x) {
    return F32Interval(std::log(x.lo_), std::log(x.hi_)).widen_abs(2 * kU * std::max(std::fabs(std::log(x.lo_)), std::fabs(std::log(x.hi_))));
  }
  /// sqrtf (correctly rounded) of x >= 0.
  friend F32Interval sqrtf_of(F32Interval x) { return F32Interval(std::sqrt(x.lo_), std::sqrt(x.hi_)).round(); }
  friend F32Interval floorf_of(F32Interval x) { return F32Interval(std::floor(x.lo_), std::floor(x.hi_)); }
  friend F32Interval ceilf_of(F32Interval x) { return F32Interval(std::ceil(x.lo_), std::ceil(x.hi_)); }
  friend F32Interval clamp_of(F32Interval x, double lo, double hi) {
    return F32Interval(std::clamp(x.lo_, lo, hi), std::clamp(x.hi_, lo, hi));
  }
  friend F32Interval max_of(F32Interval x, double m) { return F32Interval(std::max(x.lo_, m), std::max(x.hi_, m)); }
  friend F32Interval min_of(F32Interval x, double m) { return F32Interval(std::min(x.lo_, m), std::min(x.hi_, m)); }

  /// Three-valued comparisons with a threshold held in float32 (a float32 tensor against a
  /// Python float compares in float32): 1 certainly, 0 certainly not, -1 undecided.
  friend int less_than(F32Interval x, double t) {
    const double f = static_cast<float>(t);
    return x.hi_ < f ? 1 : (x.lo_ >= f ? 0 : -1);
  }
  friend int greater_than(F32Interval x, double t) {
    const double f = static_cast<float>(t);
    return x.lo_ > f ? 1 : (x.hi_ <= f ? 0 : -1);
  }

 private:
  F32Interval(double lo, double hi) : lo_(lo), hi_(hi) {}
  F32Interval widen(double rel) const {
    const double r = rel + kSlack;
    return F32Interval(lo_ - r * std::fabs(lo_), hi_ + r * std::fabs(hi_));
  }
  F32Interval widen_abs(double a) const { return F32Interval(lo_ - a, hi_ + a).widen(0); }
  F32Interval round() const { return widen(kU); }
  double lo_ = 0, hi_ = 0;
};

// The same operations on plain float, so that a pipeline template runs with either type.
inline float powf_of(float b, float e) { return std::pow(b, e); }
inline float logf_of(float x) { return std::log(x); }
inline float sqrtf_of(float x) { return std::sqrt(x); }
inline float floorf_of(float x) { return std::floor(x); }
inline float ceilf_of(float x) { return std::ceil(x); }
inline float clamp_of(float x, double lo, double hi) {
  return std::clamp(x, static_cast<float>(lo), static_cast<float>(hi));
}
inline float max_of(float x, double m) { return std::max(x, static_cast<float>(m)); }
inline float min_of(float x, double m) { return std::min(x, static_cast<float>(m)); }
inline int less_than(float x, double t) { return x < static_cast<float>(t) ? 1 : 0; }
inline int greater_than(float x, double t) { return x > static_cast<float>(t) ? 1 : 0; }

/// A branch on a three-valued comparison: the taken value, or both (the hull) when undecided.
inline float choose(int cond, float yes, float no) { return cond ? yes : no; }
inline F32Interval choose(int cond, F32Interval yes, F32Interval no) {
  return cond == 1 ? yes : (cond == 0 ? no : hull(yes, no));
}
/// not / and on three-valued conditions.
inline int not3(int c) { return c < 0 ? -1 : 1 - c; }
inline int and3(int a, int b) {
  if (a == 0 || b == 0) return 0;
  if (a == 1 && b == 1) return 1;
  return -1;
}

/// A float32 constant of type T from a real value (the conversion rounds).
template <class T>
T f32_const(double x);
template <>
inline float f32_const<float>(double x) { return static_cast<float>(x); }
template <>
inline F32Interval f32_const<F32Interval>(double x) { return F32Interval::rounded(x); }

}  // namespace posenc::golden
