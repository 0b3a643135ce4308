// Learned absolute position embedding kernels. Formula: see reference/learned.hpp.
//
// Contract
//   dtypes:       float in / float out (and double in / double out); table, e and h share it
//   error metric: per element of h, with h* the exact sum e + P[row] (the mp50 oracle):
//                   |h - h*| <= kLearnedMaxError * eps * (|e| + |P[row]|)
//                 eps = 2^-23 (float) or 2^-52 (double). The gather is a copy and the one add
//                 is an IEEE add in round-to-nearest-even (no FMA can contract it, no
//                 flush-to-zero is set), so h is the correctly rounded h*: bit-identical to the
//                 oracle rounded once to the kernel type, and within half an ulp of h*, which is
//                 <= eps/2 * |h*| <= eps/2 * (|e| + |P|). An exact cancellation gives +0 exactly.
//                 The gathered rows (learned_lookup) are exact copies.
//   valid range:  0 <= position_offset + positions[t] < max_positions, in int64 without
//                 overflow; anything else is an InvalidArgument naming the token, never a clamp
//   layout:       table [max_positions, d_model]; e, h and rows [tokens, d_model]; row-major
//   aliasing:     h may be e itself (in place); any other overlap of the output with e or with
//                 the table is rejected
//   threading:    OpenMP over tokens (schedule static) once tokens * d_model reaches
//                 kLearnedParallelMinElements (a decode step stays on the calling thread),
//                 `omp simd` over d_model; each element is one add, so the result bits do not
//                 depend on the thread count
//   checks:       sizes, overlap and every row index once at entry; the loops do not throw
#pragma once
#include <cstdint>

#include "reference/common/span.hpp"
#include "reference/learned.hpp"  // LearnedParams: the reference defines the contract

namespace posenc::optimized {

using reference::LearnedParams;

/// Bound of h, in eps * (|e| + |P[row]|): half an ulp, the correctly rounded add.
inline constexpr double kLearnedMaxError = 0.5;
/// Output size (tokens * d_model) from which the kernels fork OpenMP threads: below it a
/// fork/join costs more than the copy and add (128 KiB of float output).
inline constexpr std::int64_t kLearnedParallelMinElements = std::int64_t{1} << 15;

/// h[t] = e[t] + table[position_offset + positions[t]]; h may be e (in place).
void learned_apply(const LearnedParams& p, span<const float> table,
                   span<const std::int64_t> positions, span<const float> e, span<float> h);
void learned_apply(const LearnedParams& p, span<const double> table,
                   span<const std::int64_t> positions, span<const double> e, span<double> h);

/// rows[t] = table[position_offset + positions[t]] (the table stage alone, for engines that
/// gather and add in separate kernels).
void learned_lookup(const LearnedParams& p, span<const float> table,
                    span<const std::int64_t> positions, span<float> rows);
void learned_lookup(const LearnedParams& p, span<const double> table,
                    span<const std::int64_t> positions, span<double> rows);

}  // namespace posenc::optimized
