// Attention core properties: softmax invariants and masks in float, double and mp50; the tiled
// optimized kernel against the oracle; the golden catalog. Formula: see reference/attention.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include "optimized/attention.hpp"
#include "optimized/fast_math.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/attention.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionMask;
using reference::AttentionParams;
using reference::AttentionScale;

struct AttnCase {
  AttentionParams p;
  std::int64_t tq = 0, tk = 0;
  AttentionMask mask;
  std::vector<double> q, k, v;
  double bias_scale = 0;  // 0 = no bias; else bias(h, i, j) = bias_scale * hash-ish value
};

/// A deterministic bias that is a function of (head, i, j) only, exact in float.
double case_bias(const AttnCase& c, int h, std::int64_t i, std::int64_t j) {
  if (c.bias_scale == 0) return 0.0;
  const std::int64_t v = ((h + 3) * 7919 + (i + 1) * 104729 + (j + 5) * 1299709) % 2001 - 1000;
  return c.bias_scale * std::ldexp(static_cast<double>(v), -10);
}

/// keys > 0 fixes Tk (else 1 .. max_tokens); one_head: H = Hkv = 1, head_dim <= 16.
rc::Gen<AttnCase> gen_attn_case(int max_tokens, bool allow_masks = true, std::int64_t keys = 0,
                                bool one_head = false) {
  return rc::gen::exec([=] {
    AttnCase c;
    c.p.n_kv_heads = one_head ? 1 : *rc::gen::inRange(1, 3);
    c.p.n_heads = c.p.n_kv_heads * (one_head ? 1 : *rc::gen::inRange(1, 3));
    c.p.head_dim = *rc::gen::inRange(1, one_head ? 17 : 65);
    c.p.value_dim = *rc::gen::inRange(1, 33);
    c.p.scale_kind = *rc::gen::element(AttentionScale::kInvSqrtHeadDim, AttentionScale::kNone,
                                       AttentionScale::kGiven);
    c.p.scale = 0.125;
    c.tq = *rc::gen::inRange<std::int64_t>(1, max_tokens + 1);
    c.tk = keys > 0 ? keys : *rc::gen::inRange<std::int64_t>(1, max_tokens + 1);
    if (allow_masks) {
      c.p.causal = *rc::gen::arbitrary<bool>();
      c.p.query_offset = c.p.causal ? std::max<std::int64_t>(0, c.tk - c.tq) : 0;
      if (*rc::gen::inRange(0, 4) == 0) c.p.window = *rc::gen::inRange<std::int64_t>(1, 40);
      if (*rc::gen::inRange(0, 4) == 0) {
        c.mask.key_padding = *rc::gen::container<std::vector<std::uint8_t>>(
            static_cast<std::size_t>(c.tk), rc::gen::element<std::uint8_t>(0, 0, 0, 1));
      }
    }
    const double range = c.p.scale_kind == AttentionScale::kNone ? 0.5 : 2.0;
    auto vec = [&](std::int64_t n, double r) {
      auto x = *gen_dyadic_vector(static_cast<int>(n), 12);
      for (auto& e : x) e *= r;
      return x;
    };
    c.q = vec(c.tq * c.p.n_heads * c.p.head_dim, range);
    c.k = vec(c.tk * c.p.n_kv_heads * c.p.head_dim, range);
    c.v = vec(c.tk * c.p.n_kv_heads * c.p.value_dim, 1.0);
    c.bias_scale = *rc::gen::element(0.0, 0.0, 1.0, 8.0);
    RC_CLASSIFY(c.p.causal, "causal");
    RC_CLASSIFY(c.p.window > 0, "window");
    RC_CLASSIFY(!c.mask.key_padding.empty(), "padding");
    RC_CLASSIFY(c.bias_scale > 0, "bias");
    return c;
  });
}

template <class Real>
reference::AttentionHooks<Real> hooks_of(const AttnCase& c) {
  reference::AttentionHooks<Real> h;
  if (c.bias_scale != 0) h.bias = [&c](int hh, std::int64_t i, std::int64_t j) { return Real(case_bias(c, hh, i, j)); };
  return h;
}

template <class Real>
reference::AttentionHeadResult<Real> head0(const AttnCase& c, const reference::AttentionHooks<Real>& hooks) {
  const std::vector<Real> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()), v(c.v.begin(), c.v.end());
  return reference::attention_head<Real>(
      c.p, c.mask, 0, reference::attention_slice(q, c.tq, c.p.n_heads, c.p.head_dim, 0),
      reference::attention_slice(k, c.tk, c.p.n_kv_heads, c.p.head_dim, 0),
      reference::attention_slice(v, c.tk, c.p.n_kv_heads, c.p.value_dim, 0), hooks);
}

// ---- reference ---------------------------------------------------------------------------------

POSENC_TYPED_PROP(AttentionReference, SoftmaxRowsSumToOne) {
  AttnCase c = *gen_attn_case(24);
  c.bias_scale = *rc::gen::element(0.0, 64.0, 256.0);  // large logits: exp must not overflow
  const auto r = head0<Real>(c, hooks_of<Real>(c));
  for (std::int64_t i = 0; i < c.tq; ++i) {
    Real sum = 0;
    bool any = false;
    for (std::int64_t j = 0; j < c.tk; ++j) {
      sum += r.probs(i, j);
      any |= r.visible[i * c.tk + j] != 0;
      if (!r.visible[i * c.tk + j]) RC_ASSERT(r.probs(i, j) == Real(0));
    }
    rc_assert_close(sum, Real(any ? 1 : 0), Real(8 * c.tk * eps_of<Real>()), "row " + std::to_string(i) + " sum");
  }
}

POSENC_TYPED_PROP(AttentionReference, RowConstantLeavesProbabilitiesUnchanged) {
  const AttnCase c = *gen_attn_case(24);
  const double shift = *rc::gen::element(-3.0, 0.5, 7.25);
  const auto base = hooks_of<Real>(c);
  reference::AttentionHooks<Real> shifted;
  shifted.bias = [&](int h, std::int64_t i, std::int64_t j) {
    return (base.bias ? base.bias(h, i, j) : Real(0)) + Real(shift * static_cast<double>(i + 1));
  };
  const auto a = head0<Real>(c, base), b = head0<Real>(c, shifted);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j) {
      rc_assert_close(b.probs(i, j), a.probs(i, j), Real(64 * eps_of<Real>() * (1 + std::fabs(shift) * (i + 1))),
                      "p(" + std::to_string(i) + "," + std::to_string(j) + ")");
    }
  }
}

POSENC_TYPED_PROP(AttentionReference, CausalOutputIgnoresLaterKeys) {
  AttnCase c = *gen_attn_case(20, false);
  c.p.causal = true;
  c.tk = c.tq;
  c.k.resize(static_cast<std::size_t>(c.tk * c.p.n_kv_heads * c.p.head_dim));
  c.v.resize(static_cast<std::size_t>(c.tk * c.p.n_kv_heads * c.p.value_dim));
  const std::int64_t i = *rc::gen::inRange<std::int64_t>(0, c.tq);
  AttnCase changed = c;  // rewrite every key and value after position i
  for (std::int64_t j = i + 1; j < c.tk; ++j) {
    for (int x = 0; x < c.p.n_kv_heads * c.p.head_dim; ++x) changed.k[j * c.p.n_kv_heads * c.p.head_dim + x] += 0.5;
    for (int x = 0; x < c.p.n_kv_heads * c.p.value_dim; ++x) changed.v[j * c.p.n_kv_heads * c.p.value_dim + x] -= 0.25;
  }
  const auto a = head0<Real>(c, {}), b = head0<Real>(changed, {});
  for (int x = 0; x < c.p.value_dim; ++x) RC_ASSERT(a.out(i, x) == b.out(i, x));
}

TEST(AttentionReferenceSpot, FullyMaskedRowIsZeroNotNan) {
  AttentionParams p{1, 1, 4, 3, AttentionScale::kInvSqrtHeadDim, 1.0, false, 0, 0};
  AttentionMask m;
  m.key_padding = {1, 1};
  const std::vector<double> q(4, 1.0), k(8, 1.0), v(6, 1.0);
  const auto out = reference::attention_forward<double>(p, m, 1, 2, q, k, v);
  for (double x : out) EXPECT_EQ(x, 0.0);
  std::vector<float> o(3, 7.0f);
  const std::vector<float> qf(4, 1.0f), kf(8, 1.0f), vf(6, 1.0f);
  optimized::attention_forward(p, m, 1, 2, qf, kf, vf, o);
  for (float x : o) EXPECT_EQ(x, 0.0f);
}

TEST(AttentionReferenceSpot, RejectsBadArguments) {
  auto expect_message = [](AttentionParams p, const std::string& needle) {
    try {
      reference::attention_forward<double>(p, {}, 1, 1, std::vector<double>(4), std::vector<double>(4),
                                           std::vector<double>(4));
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message({3, 2, 4, 4}, "attention_forward: n_kv_heads must divide n_heads 3 (got 2)");
  expect_message({1, 1, 0, 4}, "head_dim must be positive (got 0)");
  expect_message({1, 1, 4, 4, AttentionScale::kInvSqrtHeadDim, 1.0, true, -1, 0}, "window must be >= 0 (got -1)");
  expect_message({1, 1, 4, 4, AttentionScale::kGiven, -2.0}, "scale must be finite and > 0 (got -2)");
  expect_message({1, 1, 4, 4, AttentionScale::kInvSqrtHeadDim, 1.0, true, 0, -3}, "query_offset must be >= 0 (got -3)");
  std::vector<float> out(4);
  EXPECT_THROW(optimized::attention_forward({1, 1, 4, 4}, {}, 1, 1, std::vector<float>(3), std::vector<float>(4),
                                            std::vector<float>(4), out),
               InvalidArgument);
}

// ---- optimized ---------------------------------------------------------------------------------

class CaseBias : public optimized::AttentionBias {
 public:
  explicit CaseBias(const AttnCase& c) : c_(c) {}
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override {
    for (int r = 0; r < nq; ++r) {
      for (int x = 0; x < nk; ++x) tile[r * nk + x] = static_cast<float>(case_bias(c_, head, q0 + r, k0 + x));
    }
  }

 private:
  const AttnCase& c_;
};

std::vector<float> run_optimized(const AttnCase& c) {
  const std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()), v(c.v.begin(), c.v.end());
  std::vector<float> out(static_cast<std::size_t>(c.tq * c.p.n_heads * c.p.value_dim));
  const CaseBias bias(c);
  optimized::attention_forward(c.p, c.mask, c.tq, c.tk, q, k, v, out, c.bias_scale != 0 ? &bias : nullptr);
  return out;
}

/// The kernel's output against the mp50 oracle under the contract's bound (RC_FAIL if not);
/// worst = max err / bound seen.
void expect_within_oracle_bound(const AttnCase& c, double& worst) {
    const auto out = run_optimized(c);
    const auto hooks = hooks_of<mp50>(c);
    const std::vector<mp50> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()), v(c.v.begin(), c.v.end());
    const int group = c.p.n_heads / c.p.n_kv_heads;
    const double scale = static_cast<double>(reference::attention_scale<mp50>(c.p));
    for (int h = 0; h < c.p.n_heads; ++h) {
      const auto r = reference::attention_head<mp50>(
          c.p, c.mask, h, reference::attention_slice(q, c.tq, c.p.n_heads, c.p.head_dim, h),
          reference::attention_slice(k, c.tk, c.p.n_kv_heads, c.p.head_dim, h / group),
          reference::attention_slice(v, c.tk, c.p.n_kv_heads, c.p.value_dim, h / group), hooks);
      for (std::int64_t i = 0; i < c.tq; ++i) {
        for (int x = 0; x < c.p.value_dim; ++x) {
          const double o = static_cast<double>(r.out(i, x));
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < c.tk; ++j) {
            const double pij = static_cast<double>(r.probs(i, j));
            if (pij == 0) continue;
            double s = 0;
            for (int y = 0; y < c.p.head_dim; ++y) {
              s += std::fabs(c.q[(i * c.p.n_heads + h) * c.p.head_dim + y] * c.k[(j * c.p.n_kv_heads + h / group) * c.p.head_dim + y]);
            }
            s = s * scale + std::fabs(case_bias(c, h, i, j));
            const double vj = c.v[(j * c.p.n_kv_heads + h / group) * c.p.value_dim + x];
            a += pij * std::fabs(vj);
            b += pij * std::fabs(vj - o) * s;
          }
          const double bound = optimized::kAttentionMaxError * 0x1p-23 * (a + b);
          const double got = out[(i * c.p.n_heads + h) * c.p.value_dim + x];
          const double err = std::fabs(got - o);
          if (bound > 0) worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            RC_FAIL(describe_close("head " + std::to_string(h) + " query " + std::to_string(i) + " channel " +
                                       std::to_string(x),
                                   got, o, bound));
          }
        }
      }
    }
}

TEST(AttentionOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const AttnCase c = *gen_attn_case(*rc::gen::element(8, 40, 140));
    expect_within_oracle_bound(c, worst);
  });
  std::printf("AttentionOptimized measured max error: %.4f of kAttentionMaxError\n", worst);
}

// Rows longer than two key chunks (kAttentionKeyTile keys each), few queries, one head: the
// online softmax must rescale the accumulator when a later chunk raises the row maximum.
TEST(AttentionOptimized, MatchesOracleAcrossKeyChunks) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const std::int64_t tk = 2 * optimized::kAttentionKeyTile + *rc::gen::inRange(1, 80);
    const AttnCase c = *gen_attn_case(4, true, tk, true);
    expect_within_oracle_bound(c, worst);
  });
  std::printf("AttentionOptimized (key chunks) measured max error: %.4f of kAttentionMaxError\n",
              worst);
}

RC_GTEST_PROP(AttentionOptimized, IdenticalBitsForAnyThreadCount, ()) {
  const AttnCase c = *gen_attn_case(100);
  omp_set_num_threads(1);
  const auto one = run_optimized(c);
  for (int t : {2, 3, 5}) {
    omp_set_num_threads(t);
    const auto many = run_optimized(c);
    RC_ASSERT(same_bits(one, many));
  }
  omp_set_num_threads(omp_get_num_procs());
}

RC_GTEST_PROP(AttentionOptimized, ProbabilitiesMatchOracle, ()) {
  const AttnCase c = *gen_attn_case(40);
  const std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end());
  std::vector<float> probs(static_cast<std::size_t>(c.p.n_heads * c.tq * c.tk));
  const CaseBias bias(c);
  optimized::attention_probs(c.p, c.mask, c.tq, c.tk, q, k, probs, c.bias_scale != 0 ? &bias : nullptr);
  const auto r = head0<double>(c, hooks_of<double>(c));
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j) {
      const double want = r.probs(i, j);
      // |dp| <= p (|ds| + sum p |ds|); scores here are below 300 in magnitude.
      RC_ASSERT(std::fabs(probs[i * c.tk + j] - want) <= 1e-4 * (want + 1e-30) + 1e-30);
    }
  }
}

// ---- golden --------------------------------------------------------------------------------------

// First: it stops at the first stale case, which also ends a generator mutant run quickly.
// exp_f32 (optimized/fast_math.hpp), the kernel's exponential: relative error against exp in
// double over 2^22 evenly spaced points of [-87, 88] and the powers of two, and 0 below -87.
TEST(AttentionOptimized, FastExpWithinItsBound) {
  double worst = 0, worst_x = 0;
  auto check = [&](float x) {
    const double want = std::exp(static_cast<double>(x));
    const double err = std::fabs(static_cast<double>(optimized::exp_f32(x)) - want) / want / 0x1p-23;
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  };
  constexpr int kN = 1 << 22;
  for (int i = 0; i <= kN; ++i) check(-87.0f + 175.0f * static_cast<float>(i) / kN);
  for (int e = -30; e <= 6; ++e) {
    check(std::ldexp(1.0f, e));
    check(-std::ldexp(1.0f, e));
  }
  std::printf("exp_f32 max relative error %.3f eps_f32 (at x = %.6g), bound %.1f\n", worst, worst_x,
              optimized::kExpF32MaxError);
  EXPECT_LE(worst, optimized::kExpF32MaxError) << "at x = " << worst_x;
  EXPECT_EQ(optimized::exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(optimized::exp_f32(-87.5f), 0.0f);
  EXPECT_EQ(optimized::exp_f32(0.0f), 1.0f);
}

TEST(AttentionGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("attention", 8); }
TEST(AttentionGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("attention"); }
TEST(AttentionGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught("attention", [](const std::string&, const std::string&) { return false; });
}

TEST(AttentionGolden, PipelinesPassTheirProfiles) { expect_pipelines_pass_their_profiles("attention", 0.25, {"probs", "out"}); }

}  // namespace
}  // namespace posenc::properties
