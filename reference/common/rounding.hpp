// Correctly rounded conversion of an oracle value to every stored dtype.
//
// f64, f32 : static_cast; Boost.Multiprecision's MPFR backend converts with mpfr_get_d /
//            mpfr_get_flt in round-to-nearest-even.
// bf16     : round-to-odd into float (mpfr_get_flt toward zero, sticky bit ORed into the last
//            place when inexact), then round-to-nearest-even float -> bf16. 24 >= 8 + 2 bits, so
//            the result equals a single correct rounding. Never "via float": RNE to float then
//            RNE to bf16 double-rounds (47,470 wrong of 200,000 near-tie cases in the probe).
// f16      : the same through double (53 >= 11 + 2).
// Overloads for float and double exist so that reference templates instantiated with plain
// floating types can use the same calls in properties.
#pragma once
#include <bit>
#include <cstdint>

#include <mpfr.h>

#include "reference/common/dtype.hpp"
#include "reference/common/scalar.hpp"

namespace posenc {

namespace detail {
template <unsigned Digits>
using MpfrNumber = boost::multiprecision::number<
    boost::multiprecision::mpfr_float_backend<Digits>, boost::multiprecision::et_off>;

/// Round-to-odd of an MPFR value into float: exact if representable, else the truncated
/// value with its last bit forced to 1.
inline float mpfr_round_to_odd_float(mpfr_srcptr v) {
  if (mpfr_nan_p(v)) return std::numeric_limits<float>::quiet_NaN();
  const float t = mpfr_get_flt(v, MPFR_RNDZ);
  if (mpfr_inf_p(v) || mpfr_cmp_d(v, static_cast<double>(t)) == 0) return t;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(t) | 1u);
}

inline double mpfr_round_to_odd_double(mpfr_srcptr v) {
  if (mpfr_nan_p(v)) return std::numeric_limits<double>::quiet_NaN();
  const double t = mpfr_get_d(v, MPFR_RNDZ);
  if (mpfr_inf_p(v) || mpfr_cmp_d(v, t) == 0) return t;
  return std::bit_cast<double>(std::bit_cast<std::uint64_t>(t) | 1u);
}
}  // namespace detail

inline double round_to_f64(double x) { return x; }
inline float round_to_f32(double x) { return static_cast<float>(x); }
template <unsigned D>
double round_to_f64(const detail::MpfrNumber<D>& x) { return static_cast<double>(x); }
template <unsigned D>
float round_to_f32(const detail::MpfrNumber<D>& x) {
  return static_cast<float>(x);
}

/// bf16 bit pattern of the correctly rounded (nearest-even) value.
template <unsigned D>
std::uint16_t round_to_bf16(const detail::MpfrNumber<D>& x) {
  return float_to_bf16(detail::mpfr_round_to_odd_float(x.backend().data()));
}
/// f16 bit pattern of the correctly rounded (nearest-even) value.
template <unsigned D>
std::uint16_t round_to_f16(const detail::MpfrNumber<D>& x) {
  return double_to_f16(detail::mpfr_round_to_odd_double(x.backend().data()));
}
/// A double is converted through an exact MPFR copy, so it is rounded once as well.
inline std::uint16_t round_to_bf16(double x) {
  mpfr_t t;
  mpfr_init2(t, 53);
  mpfr_set_d(t, x, MPFR_RNDN);
  const std::uint16_t r = float_to_bf16(detail::mpfr_round_to_odd_float(t));
  mpfr_clear(t);
  return r;
}
inline std::uint16_t round_to_f16(double x) { return double_to_f16(x); }

/// Rounds x to dtype t and returns the rounded value as a double (exact for every float dtype).
template <class Real>
double round_to_dtype(const Real& x, DType t) {
  switch (t) {
    case DType::kF64: return round_to_f64(x);
    case DType::kF32: return static_cast<double>(round_to_f32(x));
    case DType::kBF16: return static_cast<double>(bf16_to_float(round_to_bf16(x)));
    case DType::kF16: return f16_to_double(round_to_f16(x));
    default: return round_to_f64(x);
  }
}

}  // namespace posenc
