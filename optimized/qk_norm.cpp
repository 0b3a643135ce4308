// q/k normalization kernel. Formula: see reference/qk_norm.hpp; contract: optimized/qk_norm.hpp.
#include "optimized/qk_norm.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "reference/common/mutant.hpp"
#include "reference/common/errors.hpp"

namespace posenc::optimized {

void qk_norm_apply_rows(const QkNorm& n, int head_dim, span<const float> x, span<const float> w,
                        span<float> y) {
  constexpr const char* fn = "qk_norm_apply_rows";
  reference::qk_norm_check(n, head_dim, fn);
  if (head_dim <= 0 || head_dim > 16384)
    throw_invalid(fn, "head_dim must be in [1, 16384]", head_dim);
  const std::size_t h = static_cast<std::size_t>(head_dim);
  if (x.size() % h != 0 || y.size() != x.size()) {
    throw_invalid(
        fn, "x and y must have the same multiple of head_dim = " + std::to_string(h) + " entries",
        x.size());
  }
  if (n.has_weights() && w.size() != h) {
    throw_invalid(fn, "weights must have head_dim = " + std::to_string(h) + " entries", w.size());
  }
  const std::int64_t rows = static_cast<std::int64_t>(x.size() / h);
  if (n.kind == QkNormKind::kNone) {
    if (x.data() != y.data()) {
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i];
    }
    return;
  }
  const bool float_sum = POSENC_MUTANT("opt_plans_qk_norm_float_sum");
  const double eps = POSENC_MUTANT("opt_plans_qk_norm_eps_dropped") ? 0.0 : n.eps;
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + static_cast<std::size_t>(r) * h;
    float* yr = y.data() + static_cast<std::size_t>(r) * h;
    double sum = 0;
    float fsum = 0;
    const float* sr = POSENC_MUTANT("opt_plans_qk_norm_reads_output") ? yr : xr;
    for (std::size_t c = 0; c < h; ++c) {
      sum += static_cast<double>(sr[c]) * sr[c];
      fsum += sr[c] * sr[c];
    }
    if (float_sum) sum = fsum;
    const double ms = sum / static_cast<double>(h) + eps;
    if (!(ms > 0)) {
      bad = true;
      continue;
    }
    const double s = 1.0 / std::sqrt(ms);
    for (std::size_t c = 0; c < h; ++c) {
      double v = static_cast<double>(xr[c]) * s;
      if (n.has_weights()) v *= n.weight_offset + static_cast<double>(w[c]);
      yr[c] = static_cast<float>(v);
    }
  }
  if (bad) throw_invalid(fn, "mean(x^2) + eps must be > 0 for every row", 0);
}

}  // namespace posenc::optimized
