// Storage dtypes of golden files and their bit-level conversions (no multiprecision here).
//
// bf16 and f16 are carried as uint16_t bit patterns: g++ 12 has no __bf16 type and no
// std::numeric_limits<_Float16>. Decoding is exact. Encoding from
// float/double uses round-to-nearest-even on the bits; the correctly rounded encoding of an
// MPFR value (no double rounding) lives in reference/common/rounding.hpp.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

namespace posenc {

/// The tensor element types of the golden file format (safetensors names in dtype_name()).
enum class DType { kF64, kF32, kBF16, kF16, kI64, kI32 };

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF64: return "F64";
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
  }
  return "?";
}

/// Lower-case name used in case ids and manifests ("f32", "bf16", ...).
constexpr std::string_view dtype_short(DType t) {
  switch (t) {
    case DType::kF64: return "f64";
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
  }
  return "?";
}

constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: return 2;
  }
  return 0;
}

constexpr bool dtype_is_float(DType t) {
  return t == DType::kF64 || t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

/// Machine epsilon 2^(1-p) of a float dtype: the unit of every conditioned bound.
constexpr double dtype_eps(DType t) {
  switch (t) {
    case DType::kF64: return 0x1p-52;
    case DType::kF32: return 0x1p-23;
    case DType::kBF16: return 0x1p-7;
    case DType::kF16: return 0x1p-10;
    default: return 0.0;
  }
}

/// Significand bits p (hidden bit included) and minimum normal exponent of a float dtype.
constexpr int dtype_digits(DType t) {
  switch (t) {
    case DType::kF64: return 53;
    case DType::kF32: return 24;
    case DType::kBF16: return 8;
    case DType::kF16: return 11;
    default: return 0;
  }
}
constexpr int dtype_min_exponent(DType t) {  // exponent e of the smallest normal 2^e
  switch (t) {
    case DType::kF64: return -1022;
    case DType::kF32: case DType::kBF16: return -126;
    case DType::kF16: return -14;
    default: return 0;
  }
}

/// ulp of the dtype at x: 2^(e - p + 1) with 2^e <= |x| < 2^(e+1), clamped at subnormals.
inline double dtype_ulp(DType t, double x) {
  const int p = dtype_digits(t);
  const int emin = dtype_min_exponent(t);
  int e = emin;
  if (x != 0.0 && std::isfinite(x)) e = std::max(std::ilogb(x), emin);
  return std::ldexp(1.0, e - p + 1);
}

inline float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// float -> bf16 bits, round to nearest even; NaN stays NaN (quiet).
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  const std::uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<std::uint16_t>(u >> 16);
}

#ifdef __FLT16_MANT_DIG__
inline double f16_to_double(std::uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<double>(v);
}

/// double -> f16 bits; g++ 12's conversion is correctly rounded, subnormals included.
inline std::uint16_t double_to_f16(double d) {
  const _Float16 v = static_cast<_Float16>(d);
  std::uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}
#else
// Compilers without _Float16 on this target (clang 14 on x86: the fuzz build, fuzz/) convert
// on the bits, with the same results.
inline double f16_to_double(std::uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f && m) {  // NaN: quiet, payload kept (as the hardware conversion does)
    return std::bit_cast<double>((std::uint64_t{h & 0x8000u} << 48) | 0x7ff8000000000000ull |
                                 (std::uint64_t(m) << 42));
  }
  if (e == 0x1f) return sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

/// double -> f16 bits, round to nearest even (the scaling by 2^(10 - exp) is exact).
inline std::uint16_t double_to_f16(double d) {
  const std::uint16_t sign = (std::bit_cast<std::uint64_t>(d) >> 48) & 0x8000u;
  if (std::isnan(d)) {  // quiet, the top payload bits kept
    return sign | 0x7e00u | ((std::bit_cast<std::uint64_t>(d) >> 42) & 0x3ffu);
  }
  const double a = std::fabs(d);
  if (a == 0) return sign;
  if (a >= 65520.0) return sign | 0x7c00u;  // 65504 + half an ulp rounds to infinity
  int e = 0;
  std::frexp(a, &e);
  const int exp = std::max(e - 1, -14);  // subnormals share the exponent -14
  const double r = std::nearbyint(std::ldexp(a, 10 - exp));  // in [0, 2048]
  return sign | static_cast<std::uint16_t>(((exp + 14) << 10) + static_cast<int>(r));
}
#endif

}  // namespace posenc
