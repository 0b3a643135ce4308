// q/k normalization float kernel. Formula: see reference/qk_norm.hpp.
//
// Contract
//   dtypes:       float in, float out; the sum of squares, the mean, eps, 1/sqrt and the
//                 products in double, one rounding to float per element
//   error metric: |y - y*| <= kQkNormMaxError * eps_f32 * |y*|, y* the exact normalized value
//                 (the mp50 oracle with eps as the config's decimal): the rounding to float
//                 (u = eps_f32 / 2) plus the double's own error (at most (h + 6) eps_f64
//                 relative for h <= 16384: under 2e-4 eps_f32)
//   valid range:  1 <= head_dim <= 16384; eps finite, >= 0; mean(x^2) + eps > 0 for every row
//   layout:       x and y row-major [rows, head_dim], each row one head vector; x and y may
//                 alias (in place); w [head_dim] for kind rms, else ignored
//   threading:    OpenMP over rows (schedule static); each row is computed alone in a fixed
//                 order, so the result bits do not depend on the thread count
#pragma once
#include "reference/common/span.hpp"
#include "reference/qk_norm.hpp"

namespace posenc::optimized {

using reference::QkNorm;
using reference::QkNormKind;
using reference::QkNormPosition;

/// The bound of qk_norm_apply_rows, in eps_f32 * |y*| (contract above).
inline constexpr double kQkNormMaxError = 0.51;

/// Normalizes each head_dim row of x into y (kNone copies).
void qk_norm_apply_rows(const QkNorm& n, int head_dim, span<const float> x, span<const float> w,
                        span<float> y);

}  // namespace posenc::optimized
