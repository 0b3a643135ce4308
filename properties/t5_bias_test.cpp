// T5 bias properties: the bucket function's structure (exact, monotone, saturating, split by
// sign, causal collapse), the spec's worked tables, HF's float32 formula on the defaults, KV-cache
// decode equivalence, the fused optimized kernel against the oracle, and the golden catalog.
// Formula: see reference/t5_bias.hpp.
#include "optimized/t5_bias.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "golden/cases/pipelines.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/scalar.hpp"
#include "reference/t5_bias.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionParams;
using reference::T5BiasParams;

int bucket(const T5BiasParams& p, std::int64_t r) { return reference::t5_bias_bucket(p, r); }

/// N' and E computed here from the params (independent of the reference's helpers).
int dir_buckets(const T5BiasParams& p) {
  return p.bidirectional ? p.num_buckets / 2 : p.num_buckets;
}
int exact_below(const T5BiasParams& p) { return dir_buckets(p) / 2; }

enum class Direction { kAny, kBidirectional, kCausal };

rc::Gen<T5BiasParams> gen_t5_params(int max_buckets = 160, std::int64_t max_extra_distance = 600,
                                    Direction dir = Direction::kAny) {
  return rc::gen::exec([=] {
    T5BiasParams p;
    p.bidirectional =
        dir == Direction::kAny ? *rc::gen::arbitrary<bool>() : dir == Direction::kBidirectional;
    const int min_buckets = p.bidirectional ? 4 : 2;
    p.num_buckets =
        *rc::gen::oneOf(rc::gen::just(32), rc::gen::inRange(min_buckets, max_buckets + 1));
    const std::int64_t e = exact_below(p);
    p.max_distance =
        *rc::gen::oneOf(rc::gen::just(std::int64_t{std::max<std::int64_t>(128, e + 1)}),
                        rc::gen::just(std::int64_t{e + 1}),
                        rc::gen::inRange<std::int64_t>(e + 1, e + max_extra_distance + 1));
    p.n_heads = *rc::gen::inRange(1, 4);
    RC_CLASSIFY(p.bidirectional, "bidirectional");
    return p;
  });
}

/// Relative positions: near the interesting range, around +-D, and huge.
rc::Gen<std::int64_t> gen_relative(std::int64_t d) {
  return rc::gen::oneOf(
      rc::gen::inRange<std::int64_t>(-3 * d, 3 * d + 1),
      rc::gen::inRange<std::int64_t>(-(std::int64_t{1} << 40), std::int64_t{1} << 40),
      rc::gen::element<std::int64_t>(0, 1, -1, d, -d, d - 1, 1 - d,
                                     std::numeric_limits<std::int64_t>::max(),
                                     std::numeric_limits<std::int64_t>::min()));
}

// ---- reference: the bucket function
// --------------------------------------------------------------

RC_GTEST_PROP(T5BiasReference, BucketsExactBelowMaxExact, ()) {
  const T5BiasParams p = *gen_t5_params();
  const int nb = dir_buckets(p), e = exact_below(p);
  for (int n = 0; n < e; ++n) {
    RC_ASSERT(bucket(p, -n) == n);
    if (p.bidirectional && n > 0) RC_ASSERT(bucket(p, n) == nb + n);
  }
}

RC_GTEST_PROP(T5BiasReference, BucketsMonotoneInDistance, ()) {
  const T5BiasParams p = *gen_t5_params();
  std::vector<int> signs = {-1};
  if (p.bidirectional) signs.push_back(+1);
  const std::int64_t walk = std::min<std::int64_t>(p.max_distance + 3, 3000);
  for (int s : signs) {
    const std::int64_t first = s > 0 ? 1 : 0;  // r = 0 belongs to the lower half
    int prev = bucket(p, s * first);
    for (std::int64_t a = first + 1; a <= walk; ++a) {
      const int b = bucket(p, s * a);
      RC_ASSERT(b >= prev);
      prev = b;
    }
    const std::int64_t x = std::llabs(*gen_relative(p.max_distance) / 2);
    const std::int64_t y = std::llabs(*gen_relative(p.max_distance) / 2);
    const std::int64_t lo = std::max(first, std::min(x, y)), hi = std::max({first, x, y});
    RC_ASSERT(bucket(p, s * lo) <= bucket(p, s * hi));
  }
}

RC_GTEST_PROP(T5BiasReference, BucketsSaturateAtLastBucket, ()) {
  const T5BiasParams p = *gen_t5_params();
  const int nb = dir_buckets(p);
  const std::int64_t n = *rc::gen::oneOf(
      rc::gen::inRange<std::int64_t>(p.max_distance, 4 * p.max_distance + 1),
      rc::gen::inRange<std::int64_t>(p.max_distance, std::numeric_limits<std::int64_t>::max()));
  RC_ASSERT(bucket(p, -n) == nb - 1);
  if (p.bidirectional) RC_ASSERT(bucket(p, n) == 2 * nb - 1);
  for (int k = 0; k < 16; ++k) {
    const int b = bucket(p, *gen_relative(p.max_distance));
    RC_ASSERT(b >= 0);
    RC_ASSERT(b < p.num_buckets);
    RC_ASSERT(b % nb <= nb - 1);
  }
  RC_ASSERT(bucket(p, -(p.max_distance - 1)) <= nb - 1);
}

RC_GTEST_PROP(T5BiasReference, BidirectionalSplitsBySign, ()) {
  const T5BiasParams p = *gen_t5_params(160, 600, Direction::kBidirectional);
  const int nb = dir_buckets(p);
  RC_ASSERT(bucket(p, 0) == 0);
  for (int k = 0; k < 16; ++k) {
    const std::int64_t r = *gen_relative(p.max_distance);
    const int b = bucket(p, r);
    if (r > 0) {
      RC_ASSERT(b >= nb);
      RC_ASSERT(b < 2 * nb);
      RC_ASSERT(b - nb == bucket(p, -r));  // the upper half mirrors the lower
    } else {
      RC_ASSERT(b < nb);
    }
  }
}

RC_GTEST_PROP(T5BiasReference, CausalCollapsesFutureKeys, ()) {
  const T5BiasParams p = *gen_t5_params(80, 600, Direction::kCausal);
  const std::int64_t r = *gen_relative(p.max_distance);
  const std::int64_t future = r == std::numeric_limits<std::int64_t>::min() ? 0 : std::llabs(r);
  RC_ASSERT(bucket(p, future) == 0);
  RC_ASSERT(bucket(p, -1) == 1);
  // Past keys: the lower half of the bidirectional buckets with twice as many buckets.
  T5BiasParams twice = p;
  twice.bidirectional = true;
  twice.num_buckets = 2 * p.num_buckets;
  const std::int64_t past = -std::max<std::int64_t>(1, future);
  RC_ASSERT(bucket(p, past) >= 1);
  RC_ASSERT(bucket(p, past) == bucket(twice, past));
}

RC_GTEST_PROP(T5BiasReference, LogBucketsMatchIntegerThresholds, ()) {
  // An independent integer-only oracle: bucket(-n) = E + max{k < M : n^M E^k >= D^k E^M}.
  T5BiasParams p = *gen_t5_params(64, 600);
  const int nb = dir_buckets(p), e = exact_below(p), m = nb - e;
  if (*rc::gen::arbitrary<bool>()) {  // tie-rich: D = E * b^q, so (n/E)^M = (D/E)^k happens
    const int b = *rc::gen::inRange(2, 6), q = *rc::gen::inRange(1, 6);
    std::int64_t d = e;
    for (int i = 0; i < q; ++i) d *= b;
    p.max_distance = d;
  }
  using boost::multiprecision::cpp_int;
  using boost::multiprecision::pow;
  const auto up = [](std::int64_t x, int y) -> cpp_int {
    return pow(cpp_int(x), static_cast<unsigned>(y));
  };
  const cpp_int em = up(e, m);
  int k = 0;
  const std::int64_t last = std::min<std::int64_t>(p.max_distance - 1, e + 1000);
  for (std::int64_t n = e; n <= last; ++n) {
    const cpp_int nm = up(n, m);
    while (k + 1 <= m - 1 && nm * up(e, k + 1) >= up(p.max_distance, k + 1) * em) ++k;
    RC_ASSERT(bucket(p, -n) == e + k);
  }
}

TEST(T5BiasReferenceSpot, TiesAreDecidedExactly) {
  // N' = 9 (E = 4, M = 5), D = 128: n = 8 gives x = 5 ln 2 / ln 32 = 1 exactly; in double it
  // is 1 - 2^-53, and truncating that gives bucket 4.
  EXPECT_EQ(bucket({9, 128, false, 1}, -8), 5);
  EXPECT_EQ(bucket({9, 128, false, 1}, -7), 4);
  EXPECT_EQ(bucket({18, 128, true, 1}, -8), 5);
  EXPECT_EQ(bucket({18, 128, true, 1}, 8), 14);
  // The T5 defaults' ties (bidirectional n = 16, 32, 64: x = 2, 4, 6).
  for (int n : {16, 32, 64})
    EXPECT_EQ(bucket({32, 128, true, 1}, -n), 8 + 2 * (n == 16 ? 1 : n == 32 ? 2 : 3));
}

struct Range {
  std::int64_t lo, hi;
  int bucket;
};

TEST(T5BiasReferenceSpot, PinsSpecSection12Tables) {
  // The published bucket boundaries, N = 32, D = 128; the open ends extended to +-4096 and beyond.
  std::vector<Range> bidir = {{-4096, -91, 15}, {-90, -64, 14}, {-63, -46, 13}, {-45, -32, 12},
                              {-31, -23, 11},   {-22, -16, 10}, {-15, -12, 9},  {-11, -8, 8},
                              {0, 0, 0},        {8, 11, 24},    {12, 15, 25},   {16, 22, 26},
                              {23, 31, 27},     {32, 45, 28},   {46, 63, 29},   {64, 90, 30},
                              {91, 4096, 31}};
  for (int n = 1; n <= 7; ++n) {
    bidir.push_back({-n, -n, n});
    bidir.push_back({n, n, 16 + n});
  }
  std::vector<Range> causal = {{0, 4096, 0},     {-18, -16, 16}, {-20, -19, 17}, {-23, -21, 18},
                               {-26, -24, 19},   {-30, -27, 20}, {-34, -31, 21}, {-39, -35, 22},
                               {-45, -40, 23},   {-51, -46, 24}, {-58, -52, 25}, {-66, -59, 26},
                               {-76, -67, 27},   {-86, -77, 28}, {-98, -87, 29}, {-112, -99, 30},
                               {-4096, -113, 31}};
  for (int n = 1; n <= 15; ++n) causal.push_back({-n, -n, n});
  for (bool bd : {true, false}) {
    const T5BiasParams p{32, 128, bd, 1};
    std::int64_t covered = 0;
    for (const Range& g : bd ? bidir : causal) {
      for (std::int64_t r = g.lo; r <= g.hi; ++r) {
        ASSERT_EQ(bucket(p, r), g.bucket) << (bd ? "bidirectional" : "causal") << " r = " << r;
        ++covered;
      }
    }
    EXPECT_EQ(covered, 8193) << "the ranges must tile [-4096, 4096]";
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
    EXPECT_EQ(bucket(p, kMin), bd ? 15 : 31);
    EXPECT_EQ(bucket(p, kMin + 1), bd ? 15 : 31);
    EXPECT_EQ(bucket(p, kMax), bd ? 31 : 0);
  }
}

int hf_float32_bucket(std::int64_t r, bool bidirectional, int num_buckets, int max_distance) {
  return golden::pipelines::hf_t5_bucket_f32(r, bidirectional, num_buckets, max_distance);
}

TEST(T5BiasReferenceSpot, Float32FormulaAgreesOnDefaults) {
  for (bool bd : {true, false}) {
    const T5BiasParams p{32, 128, bd, 1};
    for (std::int64_t r = -4096; r <= 4096; ++r) {
      ASSERT_EQ(bucket(p, r), hf_float32_bucket(r, bd, 32, 128))
          << (bd ? "bidirectional" : "causal") << " r = " << r;
    }
  }
}

// ---- reference: attention with the bias --------------------------------------------------------

struct T5Case {
  T5BiasParams tp;
  AttentionParams ap;
  std::int64_t tq = 0, tk = 0;
  std::vector<double> table, q, k, v;
};

std::vector<double> scaled(std::vector<double> x, double s) {
  for (auto& e : x) e *= s;
  return x;
}

rc::Gen<T5Case> gen_t5_case(int max_tokens, int max_dim) {
  return rc::gen::exec([=] {
    T5Case c;
    c.tp = *gen_t5_params(64, 3 * max_tokens);
    c.ap.n_heads = c.ap.n_kv_heads = c.tp.n_heads;
    c.ap.head_dim = *rc::gen::inRange(1, max_dim + 1);
    c.ap.value_dim = *rc::gen::inRange(1, std::min(max_dim, 32) + 1);
    c.tq = *rc::gen::inRange<std::int64_t>(1, max_tokens + 1);
    c.tk = *rc::gen::inRange<std::int64_t>(1, max_tokens + 1);
    c.ap.query_offset = c.tp.bidirectional ? *rc::gen::inRange<std::int64_t>(0, 2 * max_tokens)
                                           : std::max<std::int64_t>(0, c.tk - c.tq);
    const int h = c.tp.n_heads;
    c.table = scaled(*gen_dyadic_vector(c.tp.num_buckets * h, 12), 4.0);
    c.q = scaled(*gen_dyadic_vector(static_cast<int>(c.tq * h * c.ap.head_dim), 12), 0.5);
    c.k = scaled(*gen_dyadic_vector(static_cast<int>(c.tk * h * c.ap.head_dim), 12), 0.5);
    c.v = *gen_dyadic_vector(static_cast<int>(c.tk * h * c.ap.value_dim), 12);
    RC_CLASSIFY(c.ap.query_offset > 0, "query offset");
    return c;
  });
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& x) {
  return std::vector<Real>(x.begin(), x.end());
}

POSENC_TYPED_PROP(T5BiasReference, DecodeWithOffsetEqualsFullForward) {
  T5Case c = *gen_t5_case(20, 8);
  const std::int64_t t = std::max<std::int64_t>(2, c.tk);
  const std::int64_t tq = *rc::gen::inRange<std::int64_t>(1, t);  // the last tq < t tokens
  const int h = c.tp.n_heads, d = c.ap.head_dim, dv = c.ap.value_dim;
  c.q = scaled(*gen_dyadic_vector(static_cast<int>(t * h * d), 12), 0.5);
  c.k = scaled(*gen_dyadic_vector(static_cast<int>(t * h * d), 12), 0.5);
  c.v = *gen_dyadic_vector(static_cast<int>(t * h * dv), 12);
  AttentionParams full = c.ap, step = c.ap;
  full.query_offset = 0;
  step.query_offset = t - tq;
  const auto table = to_real<Real>(c.table);
  const auto k = to_real<Real>(c.k), v = to_real<Real>(c.v);
  const auto all =
      reference::t5_bias_forward<Real>(c.tp, full, t, t, table, to_real<Real>(c.q), k, v);
  const std::vector<double> q_last(c.q.end() - tq * h * d, c.q.end());
  const auto part =
      reference::t5_bias_forward<Real>(c.tp, step, tq, t, table, to_real<Real>(q_last), k, v);
  const std::int64_t w = h * dv;
  const Real tol = Real(64.0 * static_cast<double>(d + t) * eps_of<Real>());
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t x = 0; x < w; ++x) {
      rc_assert_close(part[i * w + x], all[(t - tq + i) * w + x], tol,
                      "query " + std::to_string(t - tq + i) + " element " + std::to_string(x));
    }
  }
}

TEST(T5BiasReferenceSpot, RejectsBadArguments) {
  auto expect_message = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message(
      [] {
        reference::t5_bias_check({2, 128, true, 1});
      },
      "t5_bias_check: num_buckets must lie in [4, 4096] when bidirectional (got 2)");
  expect_message(
      [] {
        reference::t5_bias_check({1, 128, false, 1});
      },
      "num_buckets must lie in [2, 4096] when causal (got 1)");
  expect_message(
      [] {
        reference::t5_bias_check({32, 8, true, 1});
      },
      "max_distance must exceed max_exact = 8 and be at most 2^30 (ln(D/E) > 0) (got 8)");
  expect_message(
      [] {
        reference::t5_bias_check({32, 16, false, 1});
      },
      "max_distance must exceed max_exact = 16");
  expect_message(
      [] {
        reference::t5_bias_check({32, 128, true, 0});
      },
      "n_heads must be positive (got 0)");
  expect_message(
      [] {
        reference::t5_bias_hooks<double>({32, 128, true, 2}, std::vector<double>(63), 0);
      },
      "t5_bias_hooks: table must have num_buckets * n_heads = 64 entries (got 63)");
  expect_message(
      [] {
        AttentionParams ap;
        ap.n_heads = ap.n_kv_heads = 3;
        ap.head_dim = ap.value_dim = 4;
        reference::t5_bias_attention_params(ap, {32, 128, true, 2});
      },
      "attention n_heads must equal the bias table's n_heads 2 (got 3)");
}

// ---- optimized
// ------------------------------------------------------------------------------------

RC_GTEST_PROP(T5BiasOptimized, BucketTableMatchesReference, ()) {
  const T5BiasParams p = *gen_t5_params();
  const std::int64_t tq = *rc::gen::inRange<std::int64_t>(0, 300);
  const std::int64_t tk = *rc::gen::inRange<std::int64_t>(0, 300);
  const std::int64_t qo = *rc::gen::inRange<std::int64_t>(0, 1000);
  const auto t = optimized::t5_bias_bucket_table(p, tq, tk, qo);
  RC_ASSERT(t.bucket.size() == static_cast<std::size_t>(tq && tk ? tq + tk - 1 : 0));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j : {std::int64_t{0}, tk / 2, tk - 1}) {
      if (j < 0 || j >= tk) continue;  // tk = 0: no keys, an empty table
      RC_ASSERT(t.at(j - (qo + i)) == bucket(p, j - (qo + i)));
    }
  }
  for (std::size_t x = 0; x < t.bucket.size(); ++x) {
    RC_ASSERT(t.bucket[x] == bucket(p, t.r_min + static_cast<std::int64_t>(x)));
  }
}

RC_GTEST_PROP(T5BiasOptimized, BiasMatrixMatchesReferenceExactly, ()) {
  const T5Case c = *gen_t5_case(40, 1);
  const std::vector<float> table(c.table.begin(), c.table.end());
  std::vector<float> got(static_cast<std::size_t>(c.tp.n_heads * c.tq * c.tk));
  optimized::t5_bias_matrix(c.tp, table, c.tq, c.tk, c.ap.query_offset, got);
  const auto want = reference::t5_bias_matrix<float>(c.tp, table, c.tq, c.tk, c.ap.query_offset);
  RC_ASSERT(same_bits(got, want));
}

std::vector<float> run_optimized(const T5Case& c) {
  const std::vector<float> table(c.table.begin(), c.table.end());
  const std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()),
      v(c.v.begin(), c.v.end());
  std::vector<float> out(static_cast<std::size_t>(c.tq * c.ap.n_heads * c.ap.value_dim));
  optimized::t5_bias_forward(c.tp, c.ap, c.tq, c.tk, table, q, k, v, out);
  return out;
}

TEST(T5BiasOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const T5Case c = *gen_t5_case(*rc::gen::element(8, 40, 100), 64);
    const auto out = run_optimized(c);
    const AttentionParams pp = reference::t5_bias_attention_params(c.ap, c.tp);
    const auto hooks =
        reference::t5_bias_hooks<mp50>(c.tp, to_real<mp50>(c.table), pp.query_offset);
    const auto q = to_real<mp50>(c.q), k = to_real<mp50>(c.k), v = to_real<mp50>(c.v);
    const int H = pp.n_heads, d = pp.head_dim, dv = pp.value_dim;
    for (int h = 0; h < H; ++h) {
      const auto r =
          reference::attention_head<mp50>(pp, {}, h, reference::attention_slice(q, c.tq, H, d, h),
                                          reference::attention_slice(k, c.tk, H, d, h),
                                          reference::attention_slice(v, c.tk, H, dv, h), hooks);
      for (std::int64_t i = 0; i < c.tq; ++i) {
        std::vector<double> sens(static_cast<std::size_t>(c.tk));  // score scale of (i, j)
        for (std::int64_t j = 0; j < c.tk; ++j) {
          double s = std::fabs(static_cast<double>(hooks.bias(h, i, j)));
          for (int y = 0; y < d; ++y)
            s += std::fabs(c.q[(i * H + h) * d + y] * c.k[(j * H + h) * d + y]);
          sens[j] = s;
        }
        for (int x = 0; x < dv; ++x) {
          const double o = static_cast<double>(r.out(i, x));
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < c.tk; ++j) {
            const double pij = static_cast<double>(r.probs(i, j));
            if (pij == 0) continue;
            const double s = sens[j];
            const double vj = c.v[(j * H + h) * dv + x];
            a += pij * std::fabs(vj);
            b += pij * std::fabs(vj - o) * s;
          }
          const double bound = optimized::kT5BiasMaxError * 0x1p-23 * (a + b);
          const double got = out[(i * H + h) * dv + x];
          const double err = std::fabs(got - o);
          if (bound > 0) worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            RC_FAIL(describe_close("head " + std::to_string(h) + " query " + std::to_string(i) +
                                       " channel " + std::to_string(x),
                                   got, o, bound));
          }
        }
      }
    }
  });
  std::printf("T5BiasOptimized measured max error: %.4f of kT5BiasMaxError\n", worst);
}

RC_GTEST_PROP(T5BiasOptimized, IdenticalBitsForAnyThreadCount, ()) {
  T5Case c = *gen_t5_case(100, 32);
  if (c.tp.n_heads < 2 && c.tq <= optimized::kAttentionQueryTile) {  // at least two tasks
    c.tq += optimized::kAttentionQueryTile;
    c.q = scaled(*gen_dyadic_vector(static_cast<int>(c.tq * c.ap.head_dim), 12), 0.5);
    if (!c.tp.bidirectional) c.ap.query_offset = std::max<std::int64_t>(0, c.tk - c.tq);
  }
  omp_set_num_threads(1);
  const auto one = run_optimized(c);
  for (int t : {2, 3, 5}) {
    omp_set_num_threads(t);
    const auto many = run_optimized(c);
    RC_ASSERT(same_bits(one, many));
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(T5BiasOptimized, RejectsBadArguments) {
  auto expect_message = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<float> table(64, 0.5f);
  expect_message(
      [&] {
        optimized::T5Bias({32, 128, true, 2}, span<const float>(table.data(), 63), 2, 2, 0);
      },
      "T5Bias: table must have num_buckets * n_heads = 64 entries (got 63)");
  expect_message(
      [&] {
        optimized::T5Bias({32, 128, true, 2}, table, 2, 2, -1);
      },
      "query_offset must be >= 0 (got -1)");
  expect_message(
      [&] {
        optimized::t5_bias_bucket_table({32, 0, true, 2}, 2, 2, 0);
      },
      "t5_bias_bucket_range: max_distance must exceed max_exact = 8");
  AttentionParams ap;
  ap.n_heads = ap.n_kv_heads = 2;
  ap.head_dim = ap.value_dim = 4;
  std::vector<float> x(8), out(8);
  expect_message(
      [&] {
        optimized::t5_bias_forward({32, 128, true, 3}, ap, 1, 1, table, x, x, x, out);
      },
      "t5_bias_forward: attention n_heads must equal the bias table's n_heads 3 (got 2)");
}

// ---- golden
// -----------------------------------------------------------------------------------------

// First: it stops at the first stale case, which also ends a generator mutant run quickly.
TEST(T5BiasGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("t5_bias", 9); }
TEST(T5BiasGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("t5_bias"); }
TEST(T5BiasGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught("t5_bias", [](const std::string& id, const std::string& mistake) {
    if (id.find("_invalid_") != std::string::npos) return mistake != "direction-flipped";
    // No query offset in a bucket table or a prefill: the no-offset mistake cannot show there.
    static const std::regex has_offset("_o[1-9][0-9]*_");
    return mistake == "no-offset" && !std::regex_search(id, has_offset);
  });
}
TEST(T5BiasGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("t5_bias", "t5_bias_enc_t5_small_h8_d64_q4_o10_k28_f32.json");
}

TEST(T5BiasGolden, VerifyFailsTheNegativeControlOnlyForAFlippedEngine) {
  expect_negative_controls_fail_only_for("t5_bias", "direction-flipped");
}

TEST(T5BiasGolden, PipelinesPassTheirProfiles) { expect_pipelines_pass_their_profiles("t5_bias", 0.25, {"probs", "out"}); }

}  // namespace
}  // namespace posenc::properties
