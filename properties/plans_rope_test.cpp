// Model-plan pieces on the rotation side: proportional RoPE (Gemma 4), the Llama 4 and
// Mistral query temperatures, MLA decoupled RoPE (DeepSeek-V3, Kimi K2). Reference properties
// over float, double and mp50; the float kernels against the mp50 oracle. Formulas:
// reference/rope_proportional.hpp, reference/query_temperature.hpp, reference/mla.hpp.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "optimized/mla.hpp"
#include "optimized/query_temperature.hpp"
#include "optimized/rope.hpp"
#include "optimized/rope_proportional.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "reference/common/scalar.hpp"
#include "reference/mla.hpp"
#include "reference/query_temperature.hpp"
#include "reference/rope.hpp"
#include "reference/rope_proportional.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::properties {
namespace {

using reference::MlaParams;
using reference::QueryTemperature;
using reference::QueryTemperatureRule;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeProportional;

template <class Real>
std::vector<Real> to_real(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

template <class Real>
Real dot(const std::vector<Real>& a, const std::vector<Real>& b) {
  Real s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double abs_dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i]) * std::fabs(b[i]);
  return s;
}

/// Expects InvalidArgument whose message contains `needle` from f().
template <class F>
void expect_invalid(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected: " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---- proportional RoPE -----------------------------------------------------------------------

struct PropCase {
  RopeParams p;
  RopeProportional r;
};

/// A head of 2 .. 128 pairs laid out over the whole head; p from Gemma 4's 0.25, halves and
/// arbitrary fractions; s = 1 unless `scaled`.
rc::Gen<PropCase> gen_prop_case(bool scaled = false) {
  return rc::gen::exec([scaled] {
    PropCase c;
    c.p.head_dim = 2 * *rc::gen::inRange(2, 129);
    c.p.rotary_dim = c.p.head_dim;
    c.p.base = *rc::gen::element(10000.0, 1000000.0, 500000.0);
    c.p.layout =
        *rc::gen::element(RopeLayout::kHalfSplit, RopeLayout::kHalfSplit, RopeLayout::kInterleaved);
    c.r.proportion =
        *rc::gen::oneOf(rc::gen::element(0.25, 0.5, 1.0),
                        rc::gen::map(rc::gen::inRange(1, 65), [](int n) { return n / 64.0; }));
    c.r.factor = scaled ? *rc::gen::element(1.0, 2.0, 8.0, 0.5) : 1.0;
    RC_CLASSIFY(c.r.proportion == 1.0, "p = 1");
    return c;
  });
}

POSENC_TYPED_PROP(ProportionalRopeReference, ProportionOneIsPlainRope) {
  PropCase c = *gen_prop_case();
  c.r.proportion = 1.0;
  const std::int64_t m = *gen_position(1 << 16);
  const auto x = to_real<Real>(*gen_dyadic_vector(c.p.head_dim));
  const auto y = reference::rope_proportional_apply(c.p, c.r, m, x);
  const auto want = reference::rope_apply(c.p, m, x);
  for (int ch = 0; ch < c.p.head_dim; ++ch) RC_ASSERT(y[ch] == want[ch]);
}

// The live pairs rotate exactly as plain RoPE over the whole head (theta_i = base^(-2i/h), not
// base^(-2i/2k) as partial rotary would); the others pass through unchanged, in place.
POSENC_TYPED_PROP(ProportionalRopeReference, LivePairsArePlainRopeAndTheRestPassThrough) {
  const PropCase c = *gen_prop_case();
  const std::int64_t m = *gen_position(1 << 16);
  const auto x = to_real<Real>(*gen_dyadic_vector(c.p.head_dim));
  const auto y = reference::rope_proportional_apply(c.p, c.r, m, x);
  const auto plain = reference::rope_apply(c.p, m, x);
  const int k = reference::rope_proportional_live_pairs(c.p, c.r);
  RC_ASSERT(k == static_cast<int>(std::floor(c.r.proportion * c.p.head_dim / 2)));
  for (int ch = 0; ch < c.p.head_dim; ++ch) {
    const bool live = reference::rope_pair_of_channel(c.p, ch) < k;
    RC_ASSERT(y[ch] == (live ? plain[ch] : x[ch]));
  }
}

// Proportional RoPE is not partial rotary: with k < h/2 live pairs, pair 0 is (0, h/2), not
// (0, k), so channel 0 mixes in x[h/2] instead of x[k].
POSENC_TYPED_PROP(ProportionalRopeReference, DiffersFromPartialRotary) {
  PropCase c = *gen_prop_case();
  c.p.layout = RopeLayout::kHalfSplit;
  const int k = reference::rope_proportional_live_pairs(c.p, c.r);
  RC_PRE(k >= 1 && 2 * k < c.p.head_dim);
  const std::int64_t m = *rc::gen::inRange<std::int64_t>(1, 4096);
  const auto xd = *gen_dyadic_vector(c.p.head_dim, 12);
  RC_PRE(xd[k] != xd[c.p.head_dim / 2]);
  const auto x = to_real<Real>(xd);
  RopeParams partial = c.p;
  partial.rotary_dim = 2 * k;
  const auto y = reference::rope_proportional_apply(c.p, c.r, m, x);
  const auto z = reference::rope_apply(partial, m, x);
  RC_ASSERT(y[0] != z[0]);
}

POSENC_TYPED_PROP(ProportionalRopeReference, ScoreDependsOnlyOnOffset) {
  const PropCase c = *gen_prop_case(true);
  const std::int64_t m = *gen_position(1 << 12), n = *gen_position(1 << 12),
                     t = *gen_position(1 << 12);
  const auto qd = *gen_dyadic_vector(c.p.head_dim), kd = *gen_dyadic_vector(c.p.head_dim);
  const auto q = to_real<Real>(qd), k = to_real<Real>(kd);
  const auto tab = reference::rope_proportional_tables<Real>(c.p, c.r);
  const Real s1 = dot(reference::rope_apply(c.p, tab, m, q), reference::rope_apply(c.p, tab, n, k));
  const Real s2 =
      dot(reference::rope_apply(c.p, tab, m + t, q), reference::rope_apply(c.p, tab, n + t, k));
  const double angle = static_cast<double>(std::max(m, n) + t) * 4 / c.r.factor;
  rc_assert_close(s2, s1, Real(64 * eps_of<Real>() * (1 + angle) * (abs_dot(qd, kd) + 1e-30)),
                  "q.k at (m+t, n+t) vs (m, n)");
}

TEST(ProportionalRopeReferenceSpot, GemmaFourLivePairsAndBadArguments) {
  const RopeParams g4{512, 512, 1e6, RopeLayout::kHalfSplit, 1.0};
  EXPECT_EQ(reference::rope_proportional_live_pairs(g4, {0.25, 1.0}), 64);
  const auto t = reference::rope_proportional_tables<double>(g4, {0.25, 1.0});
  EXPECT_GT(t.inv_freq[63], 0.0);
  EXPECT_EQ(t.inv_freq[64], 0.0);
  EXPECT_EQ(t.inv_freq[63], std::pow(1e6, -126.0 / 512));  // exponent over h = 512, not 128
  expect_invalid(
      [] {
        reference::rope_proportional_tables<double>({8, 4, 1e4}, {0.5, 1.0});
      },
      "rope_proportional_tables: rotary_dim must equal head_dim 8");
  expect_invalid(
      [] {
        reference::rope_proportional_tables<double>({8, 8, 1e4}, {0.0, 1.0});
      },
      "proportion (partial_rotary_factor) must be in (0, 1] (got 0)");
  expect_invalid(
      [] {
        reference::rope_proportional_tables<double>({8, 8, 1e4}, {1.5, 1.0});
      },
      "must be in (0, 1] (got 1.5)");
  expect_invalid(
      [] {
        reference::rope_proportional_tables<double>({8, 8, 1e4}, {0.5, -2.0});
      },
      "factor must be finite and > 0 (got -2)");
  const std::vector<std::int64_t> pos{0, 1};
  expect_invalid(
      [&] {
        optimized::rope_proportional_cache_init({8, 8, 1e4}, {0.5, NAN}, pos);
      },
      "rope_proportional_cache_init: factor must be finite and > 0");
}

TEST(ProportionalRopeOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const PropCase c = *gen_prop_case(true);
    const int heads = *rc::gen::inRange(1, 4);
    const auto pos = *rc::gen::container<std::vector<std::int64_t>>(
        static_cast<std::size_t>(*rc::gen::inRange(1, 9)),
        gen_position(optimized::kRopeMaxPosition));
    const auto cache = optimized::rope_proportional_cache_init(c.p, c.r, pos);
    const int h = c.p.head_dim;
    const std::int64_t tokens = static_cast<std::int64_t>(pos.size());
    const auto xd = *gen_dyadic_vector(static_cast<int>(tokens * heads * h));
    std::vector<float> x(xd.begin(), xd.end()), y(x.size());
    optimized::rope_apply(c.p, cache, {tokens, heads}, x, y);
    const auto tab = reference::rope_proportional_tables<mp50>(c.p, c.r);
    const int k = reference::rope_proportional_live_pairs(c.p, c.r);
    for (std::int64_t row = 0; row < tokens * heads; ++row) {
      const std::vector<double> xr(xd.begin() + row * h, xd.begin() + (row + 1) * h);
      const auto want = reference::rope_apply(c.p, tab, pos[row / heads], to_real<mp50>(xr));
      for (int ch = 0; ch < h; ++ch) {
        const int i = reference::rope_pair_of_channel(c.p, ch);
        const double got = y[row * h + ch];
        if (i >= k) {  // the zero pairs: bit-identical copies
          RC_ASSERT(got == xr[ch]);
          continue;
        }
        const double cond = std::fabs(xr[reference::rope_pair_a(c.p, i)]) +
                            std::fabs(xr[reference::rope_pair_b(c.p, i)]);
        const double bound = optimized::kRopeMaxError * 0x1p-23 * cond;
        const double err = std::fabs(static_cast<double>(mp50(got) - want[ch]));
        if (bound > 0) worst = std::max(worst, err / bound);
        if (!(err <= bound))
          RC_FAIL(describe_close("row " + std::to_string(row) + " channel " + std::to_string(ch),
                                 got, static_cast<double>(want[ch]), bound));
      }
    }
  });
  std::printf("ProportionalRopeOptimized measured max error: %.4f of kRopeMaxError\n", worst);
}

// ---- query temperature -----------------------------------------------------------------------

rc::Gen<QueryTemperature> gen_temperature() {
  return rc::gen::exec([] {
    QueryTemperature t;
    t.rule = *rc::gen::element(QueryTemperatureRule::kLlama4, QueryTemperatureRule::kMistral);
    t.length = *rc::gen::oneOf(rc::gen::element<std::int64_t>(8192, 16384, 4096, 1, 2),
                               rc::gen::inRange<std::int64_t>(1, 100000));
    t.coefficient = *rc::gen::element(0.1, 0.05, 0.2, 1.0, 0.375);
    RC_CLASSIFY(t.rule == QueryTemperatureRule::kLlama4, "llama4");
    return t;
  });
}

/// The first position where tau steps to its k-th value: k F - 1 (Llama 4), k L0 (Mistral).
std::int64_t boundary(const QueryTemperature& t, std::int64_t k) {
  return t.rule == QueryTemperatureRule::kLlama4 ? k * t.length - 1 : k * t.length;
}

POSENC_TYPED_PROP(QueryTemperatureReference, OneBelowTheFirstBoundary) {
  const QueryTemperature t = *gen_temperature();
  const std::int64_t b = boundary(t, 1);
  RC_PRE(b > 0);
  const std::int64_t m = *rc::gen::inRange<std::int64_t>(0, b);
  RC_ASSERT(reference::query_temperature<Real>(t, m) == Real(1));
  RC_ASSERT(reference::query_temperature<Real>(t, b) > Real(1));
}

// Constant on [b_k, b_{k+1}), a step up exactly at b_k, and the step's value 1 + c ln(1 + k).
POSENC_TYPED_PROP(QueryTemperatureReference, PiecewiseConstantWithStepsAtTheBoundaries) {
  using std::log;
  const QueryTemperature t = *gen_temperature();
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(1, 2000);
  const std::int64_t b = boundary(t, k), next = boundary(t, k + 1);
  const std::int64_t inside = *rc::gen::inRange<std::int64_t>(b, next);
  const Real at = reference::query_temperature<Real>(t, b);
  RC_ASSERT(reference::query_temperature<Real>(t, inside) == at);
  RC_ASSERT(reference::query_temperature<Real>(t, next - 1) == at);
  if (b > 0)
    RC_ASSERT(reference::query_temperature<Real>(t, b - 1) < at);  // Llama 4, F = 1: b_1 = 0
  const Real want = Real(1) + reference::config_decimal<Real>(t.coefficient) * log(Real(k + 1));
  RC_ASSERT(at == want);
}

// Llama 4 counts m + 1 tokens, Mistral m: the Llama 4 rule at m is the Mistral rule at m + 1.
POSENC_TYPED_PROP(QueryTemperatureReference, LlamaFourAtMIsMistralAtMPlusOne) {
  QueryTemperature l = *gen_temperature();
  l.rule = QueryTemperatureRule::kLlama4;
  QueryTemperature m = l;
  m.rule = QueryTemperatureRule::kMistral;
  const std::int64_t p = *gen_position(std::int64_t{1} << 40);
  RC_ASSERT(reference::query_temperature<Real>(l, p) ==
            reference::query_temperature<Real>(m, p + 1));
}

TEST(QueryTemperatureReferenceSpot, CoefficientIsTheExactDecimal) {
  const mp100 tol = mp100(std::numeric_limits<mp50>::epsilon()) * 4;
  EXPECT_EQ(reference::config_decimal<mp50>(0.1), mp50(1) / mp50(10));
  EXPECT_EQ(reference::config_decimal<mp50>(0.375), mp50(0.375));
  EXPECT_EQ(reference::config_decimal<mp50>(1e-30), mp50(1e-30));  // out of range: the double
  const QueryTemperature l4{QueryTemperatureRule::kLlama4, 8192, 0.1};
  for (std::int64_t m : {8191, 16383, 1 << 20, (1 << 23) - 1}) {
    const mp100 want = mp100(1) + mp100("0.1") * log(mp100((m + 1) / 8192 + 1));
    const mp50 got = reference::query_temperature<mp50>(l4, m);
    EXPECT_LE(abs(mp100(got) - want), tol * want) << "position " << m;
  }
  // Llama 4 Scout at its 10M context: 1 + 0.1 ln(1221) = 1.7107...
  EXPECT_NEAR(static_cast<double>(reference::query_temperature<mp50>(l4, 10'000'000)), 1.7107425,
              1e-6);
  expect_invalid(
      [] {
        reference::query_temperature<double>({QueryTemperatureRule::kLlama4, 0, 0.1}, 1);
      },
      "query_temperature_steps: floor_scale must be > 0 (got 0)");
  expect_invalid(
      [] {
        reference::query_temperature<double>({QueryTemperatureRule::kMistral, 16384, NAN}, 1);
      },
      "llama_4_scaling_beta must be finite and >= 0");
  expect_invalid([] { reference::query_temperature<double>({}, -1); },
                 "position must be >= 0 (got -1)");
  std::vector<float> q(6);
  const std::vector<std::int64_t> pos{3, -2};
  expect_invalid([&] { optimized::query_temperature_apply({}, pos, q); },
                 "query_temperature_apply: positions[1] must be >= 0 (got -2)");
  const std::vector<std::int64_t> pos3{1, 2, 3, 4};
  expect_invalid([&] { optimized::query_temperature_apply({}, pos3, q); },
                 "q must have a multiple of 4 entries (got 6)");
}

TEST(QueryTemperatureOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const QueryTemperature t = *gen_temperature();
    const auto pos = *rc::gen::container<std::vector<std::int64_t>>(
        static_cast<std::size_t>(*rc::gen::inRange(1, 20)),
        rc::gen::oneOf(gen_position(std::int64_t{1} << 40),
                       rc::gen::map(rc::gen::inRange<std::int64_t>(1, 50),
                                    [&t](std::int64_t k) { return boundary(t, k); })));
    const int row = *rc::gen::inRange(1, 40);
    const auto qd = *gen_dyadic_vector(static_cast<int>(pos.size()) * row);
    std::vector<float> q(qd.begin(), qd.end());
    optimized::query_temperature_apply(t, pos, q);
    for (std::size_t r = 0; r < pos.size(); ++r) {
      const mp50 tau = reference::query_temperature<mp50>(t, pos[r]);
      for (int c = 0; c < row; ++c) {
        const mp50 want = tau * mp50(qd[r * row + c]);
        const double err = static_cast<double>(abs(mp50(q[r * row + c]) - want));
        const double bound =
            optimized::kQueryTemperatureMaxError * 0x1p-23 * static_cast<double>(abs(want));
        if (bound > 0) worst = std::max(worst, err / bound);
        if (!(err <= bound))
          RC_FAIL(describe_close("position " + std::to_string(pos[r]), q[r * row + c],
                                 static_cast<double>(want), bound));
      }
    }
  });
  std::printf("QueryTemperatureOptimized measured max error: %.4f of kQueryTemperatureMaxError\n",
              worst);
}

// ---- MLA decoupled RoPE ----------------------------------------------------------------------

rc::Gen<MlaParams> gen_mla_params() {
  return rc::gen::exec([] {
    MlaParams p;
    p.n_heads = *rc::gen::inRange(1, 4);
    p.nope_dim = *rc::gen::element(0, 1, 8, 16, 128);
    p.rope_dim = 2 * *rc::gen::inRange(1, 33);
    p.base = *rc::gen::element(10000.0, 50000.0);
    p.interleaved_checkpoint = *rc::gen::arbitrary<bool>();
    RC_CLASSIFY(p.interleaved_checkpoint, "interleaved checkpoint");
    return p;
  });
}

POSENC_TYPED_PROP(MlaReference, PermutationRoundTrips) {
  const int n = 2 * *rc::gen::inRange(1, 65);
  const auto x = to_real<Real>(*gen_dyadic_vector(n));
  RC_ASSERT(reference::mla_interleave(reference::mla_deinterleave(x)) == x);
  RC_ASSERT(reference::mla_deinterleave(reference::mla_interleave(x)) == x);
  const auto y = reference::mla_deinterleave(x);
  for (int i = 0; i < n / 2; ++i) RC_ASSERT(y[i] == x[2 * i] && y[n / 2 + i] == x[2 * i + 1]);
}

// HF's way (de-interleave, rotate half-split) is DeepSeek's interleaved rotation, permuted.
POSENC_TYPED_PROP(MlaReference, HalfSplitOfPermutedIsPermutedInterleaved) {
  MlaParams p = *gen_mla_params();
  p.interleaved_checkpoint = true;
  const std::int64_t m = *gen_position(1 << 20);
  const auto x = to_real<Real>(*gen_dyadic_vector(p.rope_dim));
  const RopeParams inter{p.rope_dim, p.rope_dim, p.base, RopeLayout::kInterleaved};
  const auto t = reference::rope_tables<Real>(inter);
  const auto hf = reference::mla_rope_apply(p, t, m, x);
  const auto ds = reference::mla_deinterleave(reference::rope_apply(inter, t, m, x));
  for (int c = 0; c < p.rope_dim; ++c) RC_ASSERT(hf[c] == ds[c]);
}

// score = sigma (nope part + rope part), the rope part computed with DeepSeek's interleaved
// rotation on the unpermuted vectors (or half-split when the checkpoint is not interleaved),
// with the one k_pe head shared by every query head; and the rope part depends on m - n only.
POSENC_TYPED_PROP(MlaReference, ScoreIsNopePartPlusRopePart) {
  const MlaParams p = *gen_mla_params();
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim;
  const std::vector<std::int64_t> qpos{*gen_position(4096), *gen_position(4096)};
  const std::vector<std::int64_t> kpos{*gen_position(4096), *gen_position(4096),
                                       *gen_position(4096)};
  const auto qd = *gen_dyadic_vector(2 * H * (dn + dr)), knd = *gen_dyadic_vector(3 * H * dn),
             kpd = *gen_dyadic_vector(3 * dr);
  const Real mult = Real(*rc::gen::element(1.0, 1.5));
  const auto t = reference::rope_tables<Real>(reference::mla_rope_params(p));
  const auto s = reference::mla_scores(p, t, mult, qpos, kpos, to_real<Real>(qd),
                                       to_real<Real>(knd), to_real<Real>(kpd));
  const Real sigma = reference::mla_softmax_scale(p, mult);
  const RopeParams own{
      dr, dr, p.base, p.interleaved_checkpoint ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit};
  for (int h = 0; h < H; ++h) {
    for (std::size_t i = 0; i < 2; ++i) {
      for (std::size_t j = 0; j < 3; ++j) {
        const auto qb = qd.begin() + (i * H + h) * (dn + dr);
        const std::vector<double> qn(qb, qb + dn), qr(qb + dn, qb + dn + dr);
        const std::vector<double> kn(knd.begin() + (j * H + h) * dn,
                                     knd.begin() + (j * H + h + 1) * dn);
        const std::vector<double> kr(kpd.begin() + j * dr, kpd.begin() + (j + 1) * dr);
        const Real nope = dot(to_real<Real>(qn), to_real<Real>(kn));
        const Real rope = dot(reference::rope_apply(own, qpos[i], to_real<Real>(qr)),
                              reference::rope_apply(own, kpos[j], to_real<Real>(kr)));
        const Real shifted = dot(reference::rope_apply(own, qpos[i] + 977, to_real<Real>(qr)),
                                 reference::rope_apply(own, kpos[j] + 977, to_real<Real>(kr)));
        const double mag = abs_dot(qn, kn) + abs_dot(qr, kr) + 1e-30;
        const Real tol = Real(64 * eps_of<Real>() * 8192 * mag);
        rc_assert_close(s[(h * 2 + i) * 3 + j], sigma * (nope + rope), Real(to_double(sigma)) * tol,
                        "score");
        rc_assert_close(shifted, rope, tol, "rope part shifted by 977");
      }
    }
  }
}

// DeepSeek-V3 (YaRN x40, L0 4096, mscale = mscale_all_dim = 1): the softmax scale is
// mscale(40, 1)^2 / sqrt(192) with mscale = 0.1 ln 40 + 1 (the exact decimal 0.1); dropping the
// factor (transformers #47435) changes every score by 1.874x.
TEST(MlaReferenceSpot, DeepSeekV3SoftmaxFactorIsMscaleSquared) {
  reference::RopeScaling s;
  s.type = reference::RopeScalingType::kYarn;
  s.factor = 40;
  s.original_max_position = 4096;
  s.mscale = s.mscale_all_dim = 1.0;
  s.mla = true;
  const MlaParams p{128, 128, 64, 10000.0, true};
  const auto t = reference::rope_scaling_tables<mp50>(reference::mla_rope_params(p), s);
  const mp100 m = mp100("0.1") * log(mp100(40)) + 1;
  const mp100 want = m * m / sqrt(mp100(192));
  const mp50 got = reference::mla_softmax_scale(p, t.softmax_scale_multiplier);
  EXPECT_LE(abs(mp100(got) - want), 8 * mp100(std::numeric_limits<mp50>::epsilon()) * want);
  EXPECT_EQ(t.tables.attention_factor, mp50(1));  // mscale / mscale_all_dim
  EXPECT_NEAR(static_cast<double>(t.softmax_scale_multiplier), 1.873854, 1e-6);
  expect_invalid(
      [] {
        reference::mla_rope_params({1, 128, 63});
      },
      "mla_rope_params: qk_rope_head_dim must be positive and even (got 63)");
  expect_invalid(
      [] {
        reference::mla_rope_params({1, -1, 64});
      },
      "qk_nope_head_dim must be >= 0 (got -1)");
  expect_invalid([&] { reference::mla_rope_apply(p, t.tables, 0, std::vector<mp50>(62)); },
                 "mla_rope_apply: x_pe must have qk_rope_head_dim = 64 entries (got 62)");
  expect_invalid([] { reference::mla_deinterleave(std::vector<double>(3)); },
                 "mla_deinterleave: x must have an even size (got 3)");
}

TEST(MlaOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const MlaParams p = *gen_mla_params();
    const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim, dq = dn + dr;
    const auto pos = *rc::gen::container<std::vector<std::int64_t>>(
        static_cast<std::size_t>(*rc::gen::inRange(1, 6)), gen_position(1 << 20));
    const std::int64_t T = static_cast<std::int64_t>(pos.size());
    const auto qd = *gen_dyadic_vector(static_cast<int>(T * H * dq)),
               kd = *gen_dyadic_vector(static_cast<int>(T * dr));
    std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end());
    const RopeParams rp = reference::mla_rope_params(p);
    optimized::mla_rope_apply(p, optimized::rope_cache_init(rp, pos), q, k);
    const auto t = reference::rope_tables<mp50>(rp);
    auto check = [&](const double* in, const float* out, std::int64_t m, const std::string& what) {
      const std::vector<double> x(in, in + dr);
      const auto want = reference::mla_rope_apply(p, t, m, to_real<mp50>(x));
      const auto px = p.interleaved_checkpoint ? reference::mla_deinterleave(x) : x;
      for (int c = 0; c < dr; ++c) {
        const int i = c % (dr / 2);
        const double bound =
            optimized::kRopeMaxError * 0x1p-23 * (std::fabs(px[i]) + std::fabs(px[i + dr / 2]));
        const double err = static_cast<double>(abs(mp50(out[c]) - want[c]));
        if (bound > 0) worst = std::max(worst, err / bound);
        if (!(err <= bound))
          RC_FAIL(describe_close(what + " channel " + std::to_string(c), out[c],
                                 static_cast<double>(want[c]), bound));
      }
    };
    for (std::int64_t tt = 0; tt < T; ++tt) {
      for (int h = 0; h < H; ++h) {
        const std::int64_t o = (tt * H + h) * dq;
        for (int c = 0; c < dn; ++c)
          RC_ASSERT(q[o + c] == static_cast<float>(qd[o + c]));  // nope untouched
        check(qd.data() + o + dn, q.data() + o + dn, pos[tt], "q head " + std::to_string(h));
      }
      check(kd.data() + tt * dr, k.data() + tt * dr, pos[tt], "k_pe");
    }
    // The assembled keys: each head's nope part next to the one shared rotated k_pe.
    const auto knd = *gen_dyadic_vector(static_cast<int>(T * H * dn));
    const std::vector<float> kn(knd.begin(), knd.end());
    std::vector<float> keys(static_cast<std::size_t>(T * H * dq));
    optimized::mla_assemble_keys(p, T, kn, k, keys);
    for (std::int64_t tt = 0; tt < T; ++tt) {
      for (int h = 0; h < H; ++h) {
        for (int c = 0; c < dq; ++c) {
          const float want = c < dn ? kn[(tt * H + h) * dn + c] : k[tt * dr + c - dn];
          RC_ASSERT(keys[(tt * H + h) * dq + c] == want);
        }
      }
    }
  });
  std::printf("MlaOptimized measured max error: %.4f of kRopeMaxError\n", worst);
}

}  // namespace
}  // namespace posenc::properties
