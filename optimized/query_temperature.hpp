// Query temperature float kernel (Llama 4, Mistral). Formula: see reference/query_temperature.hpp.
//
// Contract
//   dtypes:       float in place; tau(m) = 1 + c log1p(n(m)) in double (c the config's
//                 double), rounded once to float, one float multiply per element
//   error metric: |q' - q'*| <= kQueryTemperatureMaxError * eps_f32 * |q'*|, q'* the exact
//                 tau(m) q (the mp50 oracle with c as the exact decimal): two float roundings
//                 (tau, the product: 2 u = eps_f32, u = 2^-24) plus u^2 and the double's own
//                 error (log1p, the product and sum, c's 2^-53: under 8 eps_f64 relative)
//   valid range:  m >= 0 for every position; F (or L0) > 0; c finite, >= 0
//   layout:       q row-major [positions.size(), row], row = q.size() / positions.size()
//                 (heads * head_dim); row r is scaled by tau(positions[r])
//   threading:    OpenMP over rows (schedule static); each element is one multiply, so the
//                 result bits do not depend on the thread count
#pragma once
#include <cstdint>

#include "reference/common/span.hpp"
#include "reference/query_temperature.hpp"

namespace posenc::optimized {

using reference::QueryTemperature;
using reference::QueryTemperatureRule;

/// The bound of query_temperature_apply, in eps_f32 * |q'*| (contract above).
inline constexpr double kQueryTemperatureMaxError = 1.01;

/// tau(m) as the kernel computes it (double, before the rounding to float).
double query_temperature_f64(const QueryTemperature& t, std::int64_t m);

/// Scales the rows of q in place.
void query_temperature_apply(const QueryTemperature& t, span<const std::int64_t> positions,
                             span<float> q);

}  // namespace posenc::optimized
