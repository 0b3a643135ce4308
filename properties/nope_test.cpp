// NoPE properties: without a mask attention is permutation-equivariant; the causal mask alone
// carries order. Formula: see reference/nope.hpp.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "optimized/nope.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/scalar.hpp"
#include "reference/nope.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionParams;

struct NopeCase {
  AttentionParams p;
  std::int64_t t = 0;
  std::vector<double> q, k, v;
};

rc::Gen<NopeCase> gen_nope_case(int max_tokens) {
  return rc::gen::exec([=] {
    NopeCase c;
    c.p.n_kv_heads = *rc::gen::inRange(1, 3);
    c.p.n_heads = c.p.n_kv_heads * *rc::gen::inRange(1, 3);
    c.p.head_dim = *rc::gen::inRange(2, 33);
    c.p.value_dim = *rc::gen::inRange(1, 17);
    c.t = *rc::gen::inRange<std::int64_t>(2, max_tokens + 1);
    c.q = *gen_dyadic_vector(static_cast<int>(c.t * c.p.n_heads * c.p.head_dim), 12);
    c.k = *gen_dyadic_vector(static_cast<int>(c.t * c.p.n_kv_heads * c.p.head_dim), 12);
    c.v = *gen_dyadic_vector(static_cast<int>(c.t * c.p.n_kv_heads * c.p.value_dim), 12);
    return c;
  });
}

/// Token t of the result is token perm[t] of x (x is [T, width]).
std::vector<double> permute_tokens(const std::vector<double>& x, const std::vector<std::int64_t>& perm,
                                   std::int64_t width) {
  std::vector<double> y(x.size());
  for (std::size_t t = 0; t < perm.size(); ++t) {
    std::copy_n(x.begin() + perm[t] * width, width, y.begin() + static_cast<std::int64_t>(t) * width);
  }
  return y;
}

template <class Real>
std::vector<Real> run(const NopeCase& c, const std::vector<double>& q, const std::vector<double>& k,
                      const std::vector<double>& v, bool causal) {
  return reference::nope_forward<Real>(c.p, c.t, c.t, std::vector<Real>(q.begin(), q.end()),
                                       std::vector<Real>(k.begin(), k.end()),
                                       std::vector<Real>(v.begin(), v.end()), causal);
}

POSENC_TYPED_PROP(NopeReference, PermutationEquivariantWithoutMask) {
  const NopeCase c = *gen_nope_case(12);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(c.t));
  std::iota(perm.begin(), perm.end(), 0);
  const auto keys = *rc::gen::container<std::vector<int>>(perm.size(), rc::gen::arbitrary<int>());
  std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t a, std::int64_t b) { return keys[a] < keys[b]; });
  const auto out = run<Real>(c, c.q, c.k, c.v, false);
  const auto outp = run<Real>(c, permute_tokens(c.q, perm, c.p.n_heads * c.p.head_dim),
                              permute_tokens(c.k, perm, c.p.n_kv_heads * c.p.head_dim),
                              permute_tokens(c.v, perm, c.p.n_kv_heads * c.p.value_dim), false);
  const std::int64_t w = c.p.n_heads * c.p.value_dim;
  for (std::int64_t t = 0; t < c.t; ++t) {
    for (std::int64_t x = 0; x < w; ++x) {
      rc_assert_close(outp[t * w + x], out[perm[t] * w + x], Real(64 * c.t * eps_of<Real>()),
                      "token " + std::to_string(t));
    }
  }
}

POSENC_TYPED_PROP(NopeReference, CausalFirstOutputIsFirstValue) {
  const NopeCase c = *gen_nope_case(12);
  const auto out = run<Real>(c, c.q, c.k, c.v, true);
  const int group = c.p.n_heads / c.p.n_kv_heads;
  for (int h = 0; h < c.p.n_heads; ++h) {
    for (int x = 0; x < c.p.value_dim; ++x) {
      RC_ASSERT(out[h * c.p.value_dim + x] == Real(c.v[(h / group) * c.p.value_dim + x]));
    }
  }
}

POSENC_TYPED_PROP(NopeReference, ReorderingTokensChangesOutputs) {
  NopeCase c = *gen_nope_case(12);
  // Distinct values per token: a prefix average then differs from any single token's value.
  const std::int64_t wv = c.p.n_kv_heads * c.p.value_dim;
  for (std::size_t i = 0; i < c.v.size(); ++i) c.v[i] += 0.5 * static_cast<double>(i / wv + 1);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(c.t));
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  const auto out = run<Real>(c, c.q, c.k, c.v, true);
  const auto outp = run<Real>(c, permute_tokens(c.q, perm, c.p.n_heads * c.p.head_dim),
                              permute_tokens(c.k, perm, c.p.n_kv_heads * c.p.head_dim),
                              permute_tokens(c.v, perm, c.p.n_kv_heads * c.p.value_dim), true);
  const std::int64_t w = c.p.n_heads * c.p.value_dim;
  Real max_diff = 0;
  for (std::int64_t t = 0; t < c.t; ++t) {
    for (std::int64_t x = 0; x < w; ++x) {
      using std::fabs;
      max_diff = std::max(max_diff, Real(fabs(outp[t * w + x] - out[perm[t] * w + x])));
    }
  }
  RC_ASSERT(max_diff > Real(1e-3));
}

TEST(NopeOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const NopeCase c = *gen_nope_case(80);
    std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()), v(c.v.begin(), c.v.end());
    std::vector<float> out(static_cast<std::size_t>(c.t * c.p.n_heads * c.p.value_dim));
    optimized::nope_forward(c.p, c.t, c.t, q, k, v, out);
    const auto want = run<mp50>(c, c.q, c.k, c.v, true);
    // Output scale: a value-range bound (values in [-1, 1]) times the contract's constant, plus the
    // score term; for these inputs (|q|,|k| <= 1, d <= 32) the score scale is below sqrt(d).
    const double bound = optimized::kAttentionMaxError * 0x1p-23 * (1.0 + 2.0 * std::sqrt(c.p.head_dim));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double err = std::fabs(out[i] - static_cast<double>(want[i]));
      worst = std::max(worst, err / bound);
      if (err > bound) RC_FAIL(describe_close("element " + std::to_string(i), out[i], static_cast<double>(want[i]), bound));
    }
  });
  std::printf("NopeOptimized measured max error: %.4f of its bound\n", worst);
}

// First: it stops at the first stale case, which also ends a generator mutant run quickly.
TEST(NopeGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("nope", 4); }
TEST(NopeGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("nope"); }
TEST(NopeGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught("nope", [](const std::string&, const std::string&) { return false; });
}

TEST(NopeGolden, PipelinesPassTheirProfiles) { expect_pipelines_pass_their_profiles("nope", 0.25, {"probs", "out"}); }

}  // namespace
}  // namespace posenc::properties
