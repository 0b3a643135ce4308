// Model-plan piece: q/k normalization (Llama 4's L2 norm after RoPE, Gemma 3's (1 + w) and
// Qwen3's / Gemma 4's w RMSNorm before it). Reference properties over float, double and mp50;
// the float kernel against the mp50 oracle and against an independent float32 RMSNorm written
// here the way HF computes it. Formula: reference/qk_norm.hpp.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "optimized/qk_norm.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "reference/common/scalar.hpp"
#include "reference/qk_norm.hpp"
#include "reference/rope.hpp"

namespace posenc::properties {
namespace {

using reference::QkNorm;
using reference::QkNormKind;
using reference::QkNormPosition;

template <class Real>
std::vector<Real> to_real(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

template <class F>
void expect_invalid(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected: " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

/// A norm of every kind, eps from the configs (1e-5 Llama 4, 1e-6 Gemma / Qwen3) or 0.
rc::Gen<QkNorm> gen_norm() {
  return rc::gen::exec([] {
    QkNorm n;
    n.kind = *rc::gen::element(QkNormKind::kRms, QkNormKind::kRmsUnit, QkNormKind::kL2);
    n.position = *rc::gen::element(QkNormPosition::kBeforeRope, QkNormPosition::kAfterRope);
    n.eps = *rc::gen::element(1e-5, 1e-6, 0.0);
    n.weight_offset = *rc::gen::element(0.0, 1.0);
    RC_CLASSIFY(n.kind == QkNormKind::kRms, "weighted");
    return n;
  });
}

/// A head vector that is never all zero, magnitudes from 2^-12 to 1 (so eps matters).
rc::Gen<std::vector<double>> gen_head(int h) {
  return rc::gen::exec([h] {
    std::vector<double> x = *gen_dyadic_vector(h, 20);
    const int shift = *rc::gen::element(0, 4, 12);
    for (double& v : x) v = std::ldexp(v, -shift);
    x[0] = std::ldexp(0.75, -shift);
    return x;
  });
}

/// Weights w with o + w in [1/2, 3/2] (exact in float).
std::vector<double> gen_weights(int h, double offset) {
  std::vector<double> w = *rc::gen::container<std::vector<double>>(
      static_cast<std::size_t>(h),
      rc::gen::map(rc::gen::inRange(-128, 129), [](int k) { return std::ldexp(k, -8); }));
  for (double& v : w) v += 1.0 - offset;
  return w;
}

// Without eps the unweighted norm is scale-free and its output has mean square 1; with eps,
// mean(y^2) = mean(x^2) / (mean(x^2) + eps) exactly.
POSENC_TYPED_PROP(QkNormReference, UnweightedOutputHasTheMeanSquareOfItsDefinition) {
  QkNorm n = *gen_norm();
  RC_PRE(n.kind != QkNormKind::kRms);
  const int h = 2 * *rc::gen::inRange(1, 65);
  const auto x = to_real<Real>(*gen_head(h));
  const auto y = reference::qk_norm_apply<Real>(n, x, {});
  Real sx = 0, sy = 0;
  for (int c = 0; c < h; ++c) {
    sx += x[c] * x[c];
    sy += y[c] * y[c];
  }
  const double ms_x = static_cast<double>(sx) / h, ms_y = static_cast<double>(sy) / h;
  const double want = ms_x / (ms_x + n.eps);
  const double e = static_cast<double>(std::numeric_limits<Real>::epsilon());
  RC_ASSERT(std::fabs(ms_y - want) <= 4 * h * std::max(e, 0x1p-52) * want);
  if (n.eps == 0.0) {  // scaling by a power of two is exact at every step
    std::vector<Real> x2 = x;
    for (auto& v : x2) v *= Real(8);
    RC_ASSERT(reference::qk_norm_apply<Real>(n, x2, {}) == y);
  }
}

// Llama 4's "L2" norm is the unweighted RMS norm, bit for bit (it divides by the RMS, not by the
// Euclidean length); Gemma's (1 + w) form is the plain form with weights 1 + w.
POSENC_TYPED_PROP(QkNormReference, KindsAreOneFormula) {
  QkNorm n = *gen_norm();
  const int h = 2 * *rc::gen::inRange(1, 65);
  const auto x = to_real<Real>(*gen_head(h));
  QkNorm l2 = n, unit = n;
  l2.kind = QkNormKind::kL2;
  unit.kind = QkNormKind::kRmsUnit;
  RC_ASSERT(reference::qk_norm_apply<Real>(l2, x, {}) ==
            reference::qk_norm_apply<Real>(unit, x, {}));
  const auto wd = gen_weights(h, 1.0);
  QkNorm gemma = n, plain = n;
  gemma.kind = plain.kind = QkNormKind::kRms;
  gemma.weight_offset = 1.0;
  plain.weight_offset = 0.0;
  std::vector<double> w1 = wd;
  for (double& v : w1) v += 1.0;
  RC_ASSERT(reference::qk_norm_apply<Real>(gemma, x, to_real<Real>(wd)) ==
            reference::qk_norm_apply<Real>(plain, x, to_real<Real>(w1)));
}

// A rotation keeps every pair's norm, so the unweighted norm commutes with full RoPE (before or
// after gives the same values up to the type's rounding); weights that differ within a pair
// break it (Gemma 3's position matters, Llama 4's does not).
POSENC_TYPED_PROP(QkNormReference, UnweightedNormCommutesWithRopeWeightedDoesNot) {
  reference::RopeParams p;
  p.head_dim = p.rotary_dim = 2 * *rc::gen::inRange(2, 33);
  p.base = *rc::gen::element(10000.0, 500000.0);
  p.layout =
      *rc::gen::element(reference::RopeLayout::kHalfSplit, reference::RopeLayout::kInterleaved);
  const std::int64_t m = *rc::gen::inRange<std::int64_t>(1, 65);  // |sin(m)| > 0.017
  const auto x = to_real<Real>(*gen_head(p.head_dim));
  QkNorm n;
  n.kind = QkNormKind::kL2;
  n.eps = *rc::gen::element(1e-5, 0.0);
  const auto a = reference::rope_apply(p, m, reference::qk_norm_apply<Real>(n, x, {}));
  const auto b = reference::qk_norm_apply<Real>(n, reference::rope_apply(p, m, x), {});
  const double tol = 64 * static_cast<double>(std::numeric_limits<Real>::epsilon());
  for (int c = 0; c < p.head_dim; ++c)
    RC_ASSERT(std::fabs(static_cast<double>(a[c] - b[c])) <= tol * 4);
  n.kind = QkNormKind::kRms;
  n.weight_offset = 0.0;
  std::vector<double> wd(static_cast<std::size_t>(p.head_dim), 1.0);
  wd[reference::rope_pair_b(p, 0)] = 0.5;  // pair 0's channels weighted 1 and 1/2
  const auto w = to_real<Real>(wd);
  const auto c1 = reference::rope_apply(p, m, reference::qk_norm_apply<Real>(n, x, w));
  const auto c2 = reference::qk_norm_apply<Real>(n, reference::rope_apply(p, m, x), w);
  // channel b of pair 0: x_a sin + x_b cos / 2 against (x_a sin + x_b cos) / 2, x_a = x_0 != 0
  const int cb = reference::rope_pair_b(p, 0);
  RC_ASSERT(std::fabs(static_cast<double>(c1[cb] - c2[cb])) > tol * 8);
}

TEST(QkNormReferenceSpot, HandValuesAndBadArguments) {
  QkNorm n;
  n.kind = QkNormKind::kRmsUnit;
  n.eps = 0.0;
  // x = (3, 4): mean square 12.5, r = 1 / sqrt(12.5)
  const auto y = reference::qk_norm_apply<double>(n, {3.0, 4.0}, {});
  EXPECT_DOUBLE_EQ(y[0], 3.0 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(y[1], 4.0 / std::sqrt(12.5));
  n.kind = QkNormKind::kRms;
  n.weight_offset = 1.0;
  const auto z = reference::qk_norm_apply<double>(n, {3.0, 4.0}, {0.5, -0.5});
  EXPECT_DOUBLE_EQ(z[0], 1.5 * 3.0 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(z[1], 0.5 * 4.0 / std::sqrt(12.5));
  expect_invalid(
      [&] {
        reference::qk_norm_apply<double>(n, {3.0, 4.0}, {1.0});
      },
      "qk_norm_apply: weights must have head_dim = 2 entries (got 1)");
  n.eps = -1e-6;
  expect_invalid(
      [&] {
        reference::qk_norm_apply<double>(n, {3.0, 4.0}, {0, 0});
      },
      "eps (rms_norm_eps) must be finite and >= 0");
  n.eps = 1e-6;
  n.weight_offset = 2.0;
  expect_invalid(
      [&] {
        reference::qk_norm_apply<double>(n, {3.0, 4.0}, {0, 0});
      },
      "weight_offset must be 0 (w) or 1 (Gemma's 1 + w)");
  n.kind = QkNormKind::kL2;
  n.eps = 0.0;
  expect_invalid(
      [&] {
        reference::qk_norm_apply<double>(n, {0.0, 0.0}, {});
      },
      "qk_norm_scale: mean(x^2) + eps must be > 0");
  std::vector<float> x(6), out(6);
  n.eps = 1e-5;
  expect_invalid([&] { optimized::qk_norm_apply_rows(n, 4, x, {}, out); },
                 "qk_norm_apply_rows: x and y must have the same multiple of head_dim = 4");
  n.kind = QkNormKind::kRms;
  n.weight_offset = 0;
  expect_invalid([&] { optimized::qk_norm_apply_rows(n, 3, x, {}, out); },
                 "qk_norm_apply_rows: weights must have head_dim = 3 entries (got 0)");
}

/// HF's float32 RMSNorm, written independently of posenc's engine: x * 1/sqrt(mean(x^2) + eps)
/// with every step in float32, then * (o + w).
std::vector<float> hf_float32_norm(const QkNorm& n, int h, const std::vector<float>& x,
                                   const std::vector<float>& w) {
  std::vector<float> y(x.size());
  for (std::size_t off = 0; off < x.size(); off += static_cast<std::size_t>(h)) {
    float sum = 0.0f;
    for (int c = 0; c < h; ++c) sum += x[off + c] * x[off + c];
    const float ms = sum / static_cast<float>(h) + static_cast<float>(n.eps);
    const float r = 1.0f / std::sqrt(ms);
    for (int c = 0; c < h; ++c) {
      y[off + c] = x[off + c] * r;
      if (n.has_weights()) y[off + c] *= static_cast<float>(n.weight_offset) + w[c];
    }
  }
  return y;
}

// The kernel is within kQkNormMaxError of the mp50 oracle (the bound is used, not loose); an
// HF-style float32 norm is within the float32 budget the plan profiles give the norm (h / 4 + 4
// eps_f32 relative: docs/profiles.md, "Model plans") and farther than the kernel's bound.
TEST(QkNormOptimized, MatchesOracleWithinBound) {
  double worst = 0, worst_hf = 0;
  rc::detail::checkGTest([&] {
    const QkNorm n = *gen_norm();
    const int h = *rc::gen::element(2, 8, 64, 128, 256);
    const int rows = *rc::gen::inRange(1, 6);
    std::vector<double> xd;
    for (int r = 0; r < rows; ++r) {
      const auto row = *gen_head(h);
      xd.insert(xd.end(), row.begin(), row.end());
    }
    const std::vector<double> wd =
        n.kind == QkNormKind::kRms ? gen_weights(h, n.weight_offset) : std::vector<double>{};
    const std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end());
    std::vector<float> y(x.size());
    optimized::qk_norm_apply_rows(n, h, x, w, y);
    const std::vector<float> hf = hf_float32_norm(n, h, x, w);
    for (int r = 0; r < rows; ++r) {
      const std::vector<mp50> row(xd.begin() + r * h, xd.begin() + (r + 1) * h);
      const auto want = reference::qk_norm_apply<mp50>(n, row, to_real<mp50>(wd));
      for (int c = 0; c < h; ++c) {
        const double wv = static_cast<double>(want[c]);
        const double bound = optimized::kQkNormMaxError * 0x1p-23 * std::fabs(wv);
        const double err = std::fabs(static_cast<double>(mp50(y[r * h + c]) - want[c]));
        const double err_hf = std::fabs(static_cast<double>(mp50(hf[r * h + c]) - want[c]));
        if (bound > 0) {
          worst = std::max(worst, err / bound);
          worst_hf = std::max(worst_hf, err_hf / (bound / optimized::kQkNormMaxError));
        }
        if (!(err <= bound))
          RC_FAIL(describe_close("row " + std::to_string(r), y[r * h + c], wv, bound));
        RC_ASSERT(err_hf <= (h / 4.0 + 4.0) * 0x1p-23 * std::fabs(wv));
      }
    }
  });
  std::printf(
      "QkNormOptimized measured max error: %.4f of kQkNormMaxError; HF float32 %.2f "
      "eps_f32\n",
      worst, worst_hf);
  EXPECT_GT(worst, 0.25);
  EXPECT_GT(worst_hf, optimized::kQkNormMaxError);
}

TEST(QkNormOptimized, InPlaceEqualsOutOfPlaceForAnyThreadCount) {
  QkNorm n;
  n.kind = QkNormKind::kRms;
  n.weight_offset = 1.0;
  n.eps = 1e-6;
  std::vector<float> x(64 * 37), w(64);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(static_cast<float>(i % 97) - 48.f, -5);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::ldexp(static_cast<float>(i % 7) - 3.f, -3);
  std::vector<float> y(x.size()), z = x;
  optimized::qk_norm_apply_rows(n, 64, x, w, y);
  optimized::qk_norm_apply_rows(n, 64, z, w, z);
  EXPECT_TRUE(y == z);
}

}  // namespace
}  // namespace posenc::properties
