// Sinusoidal float kernels. Formula: see reference/sinusoidal.hpp.
//
// Contract
//   dtypes:       positions int64; the table, e and h float. omega_i in long double rounded once
//                 to double, angles m * omega_i and their sin/cos in double, each table value
//                 rounded once to float; h = e + PE is one float addition per element
//   error metric: absolute, per element (every PE value lies in [-1, 1]), against the exact
//                 value y* (the mp50 oracle):
//                   table:  |PE - PE*| <= kSinusoidalMaxError    * eps_f32
//                   add:    |h - h*|   <= kSinusoidalAddMaxError * eps_f32 * (1 + |e|)
//                 the zero column of an odd kConcat d_model is exactly 0, so there h == e
//   valid range:  |m| <= kSinusoidalMaxPosition; d_model >= 1; 1 <= base < inf (so every
//                 omega_i <= 1 and |m * omega_i| <= |m|)
//   layout:       row-major [positions.size(), d_model]; h may be e itself (in place); partial
//                 overlap of e and h is rejected
//   threading:    OpenMP over rows (schedule static) once a call has at least
//                 kSinusoidalParallelMinElements elements (below that a thread team costs more
//                 than it saves), `omp simd` over a row's angles and sums; every row is computed
//                 by one thread with the same instruction sequence, so the result bits do not
//                 depend on the thread count
#pragma once
#include <cstdint>
#include <vector>

#include "reference/common/span.hpp"
#include "reference/sinusoidal.hpp"  // SinusoidalParams, SinusoidalVariant: the reference's

namespace posenc::optimized {

using reference::SinusoidalParams;
using reference::SinusoidalVariant;

/// Bound of the table, in eps_f32 (absolute). Derived in sinusoidal.cpp (0.77 at |m| = 2^28);
/// measured: docs/schemes/sinusoidal.md.
inline constexpr double kSinusoidalMaxError = 1.0;
/// Bound of h = e + PE, in eps_f32 * (1 + |e|): the table's error plus half an ulp of h.
inline constexpr double kSinusoidalAddMaxError = 1.5;
/// Largest |position| the bounds hold for: the double angle's absolute error (about
/// |m| * 2^-52) stays below eps_f32 / 2 up to here.
inline constexpr std::int64_t kSinusoidalMaxPosition = std::int64_t{1} << 28;
/// Smallest rows * d_model that runs on a thread team (about 40 us of sin/cos in double).
inline constexpr std::int64_t kSinusoidalParallelMinElements = 2048;

/// omega_i in double (long double pow, rounded once); n = reference::sinusoidal_n_freq(p).
std::vector<double> sinusoidal_inv_freq(const SinusoidalParams& p);

/// The PE table for a list of positions into pe, [positions.size(), d_model].
void sinusoidal_rows(const SinusoidalParams& p, span<const std::int64_t> positions, span<float> pe);
/// The same, returned.
std::vector<float> sinusoidal_rows(const SinusoidalParams& p, span<const std::int64_t> positions);

/// h = e + PE(positions[r]) row by row, [positions.size(), d_model]; h may be e (in place).
/// Bit-identical to adding the float table of sinusoidal_rows to e.
void sinusoidal_add(const SinusoidalParams& p, span<const std::int64_t> positions,
                    span<const float> e, span<float> h);

}  // namespace posenc::optimized
