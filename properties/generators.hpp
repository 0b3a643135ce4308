// Shared RapidCheck generators. Float inputs are dyadic (integer * 2^-k), so they are exact in
// every Real type under test; RapidCheck's own float generators are mostly huge or non-finite,
// so they are never used for inputs.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include <rapidcheck.h>

namespace posenc::properties {

/// m * 2^-bits with |m| <= 2^bits: values in [-1, 1], exact in float when bits <= 24.
inline rc::Gen<double> gen_dyadic(int bits = 20) {
  const std::int64_t lim = std::int64_t{1} << bits;
  return rc::gen::map(rc::gen::inRange<std::int64_t>(-lim, lim + 1),
                      [bits](std::int64_t m) { return std::ldexp(static_cast<double>(m), -bits); });
}

/// A vector of n dyadic values.
inline rc::Gen<std::vector<double>> gen_dyadic_vector(int n, int bits = 20) {
  return rc::gen::container<std::vector<double>>(static_cast<std::size_t>(n), gen_dyadic(bits));
}

/// Positions: mostly small, often near powers of two, sometimes up to max.
inline rc::Gen<std::int64_t> gen_position(std::int64_t max) {
  return rc::gen::oneOf(
      rc::gen::inRange<std::int64_t>(0, 4096),
      rc::gen::inRange<std::int64_t>(0, max + 1),
      rc::gen::map(rc::gen::inRange(0, 63), [max](int e) {
        const std::int64_t p = std::int64_t{1} << std::min(e, 62);
        return std::min(p - 1, max);
      }));
}

}  // namespace posenc::properties
