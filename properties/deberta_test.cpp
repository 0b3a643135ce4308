// DeBERTa properties: the log buckets (exact below m, odd, monotone, integer thresholds, the
// spec's worked values, HF's float32 formula searched against the exact one), the p2c index,
// pos_att_type parsing, translation invariance of c2p / p2c, the fused optimized kernel against
// the oracle, and the golden catalog. Formula: see reference/deberta.hpp.
#include "optimized/deberta.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <boost/multiprecision/cpp_int.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "golden/cases/attention_case.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/deberta.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionParams;
using reference::DebertaParams;

std::int64_t bucket(std::int64_t r, int b = 256, std::int64_t m = 512) {
  return reference::deberta_log_bucket(r, b, m);
}

/// Bucket params: small and the v3 preset; M > m + 1.
rc::Gen<std::pair<int, std::int64_t>> gen_bucket_params(int max_buckets = 80) {
  return rc::gen::exec([=] {
    const int b = *rc::gen::oneOf(rc::gen::just(256), rc::gen::inRange(2, max_buckets + 1));
    const std::int64_t mid = b / 2;
    const std::int64_t m =
        *rc::gen::oneOf(rc::gen::just(std::int64_t{std::max<std::int64_t>(512, mid + 2)}),
                        rc::gen::just(mid + 2), rc::gen::inRange<std::int64_t>(mid + 2, mid + 700));
    return std::make_pair(b, m);
  });
}

rc::Gen<std::int64_t> gen_relative(std::int64_t m) {
  return rc::gen::oneOf(
      rc::gen::inRange<std::int64_t>(-3 * m, 3 * m + 1),
      rc::gen::inRange<std::int64_t>(-(std::int64_t{1} << 30), std::int64_t{1} << 30),
      rc::gen::element<std::int64_t>(0, 1, -1, m, -m, m - 1, 1 - m));
}

// ---- reference: buckets -------------------------------------------------------------------------

RC_GTEST_PROP(DebertaReference, SmallDistancesStayExact, ()) {
  const auto [b, m] = *gen_bucket_params();
  const std::int64_t mid = b / 2;
  const std::int64_t r = *rc::gen::inRange<std::int64_t>(-mid, mid + 1);
  RC_ASSERT(bucket(r, b, m) == r);
}

RC_GTEST_PROP(DebertaReference, BucketsAreOdd, ()) {
  const auto [b, m] = *gen_bucket_params();
  const std::int64_t r = *gen_relative(m);
  RC_ASSERT(bucket(-r, b, m) == -bucket(r, b, m));
}

RC_GTEST_PROP(DebertaReference, BucketsMonotoneInR, ()) {
  const auto [b, m] = *gen_bucket_params();
  const std::int64_t r = *gen_relative(m);
  const std::int64_t s = r + *rc::gen::inRange<std::int64_t>(0, 40);
  RC_ASSERT(bucket(r, b, m) <= bucket(s, b, m));
}

RC_GTEST_PROP(DebertaReference, LogBucketsMatchIntegerThresholds, ()) {
  // For a = |r| > m: bucket = m + n with n the least integer such that
  // (M-1)^n m^(m-1) >= a^(m-1) m^n (ceil of x, x > 0), checked for n and n - 1.
  const auto [b, m] = *gen_bucket_params(40);
  const std::int64_t mid = b / 2;
  const std::int64_t a = *rc::gen::inRange<std::int64_t>(mid + 1, 3 * m);
  const std::int64_t n = bucket(a, b, m) - mid;
  using boost::multiprecision::cpp_int;
  using boost::multiprecision::pow;
  const auto holds = [&](std::int64_t k) {
    return pow(cpp_int(m - 1), static_cast<unsigned>(k)) *
               pow(cpp_int(mid), static_cast<unsigned>(mid - 1)) >=
           pow(cpp_int(a), static_cast<unsigned>(mid - 1)) *
               pow(cpp_int(mid), static_cast<unsigned>(k));
  };
  RC_ASSERT(n >= 0);
  RC_ASSERT(holds(n));
  if (n >= 1) RC_ASSERT(!holds(n - 1));
}

TEST(DebertaReferenceSpot, PinsSpecSection12Buckets) {
  // The published worked values (docs/schemes/deberta.md), bucket 256 / max_position 512:
  // r -> bucket (index).
  const std::vector<std::array<std::int64_t, 3>> pinned = {
      {0, 0, 256},      {127, 127, 383},   {128, 128, 384}, {129, 129, 385},
      {130, 130, 386},  {200, 169, 425},   {255, 192, 448}, {300, 207, 463},
      {400, 233, 489},  {511, 255, 511},   {512, 256, 511}, {600, 270, 511},
      {1000, 317, 511}, {-129, -129, 127}, {-511, -255, 1}, {-1000, -317, 0}};
  DebertaParams p;
  for (const auto& [r, b, c] : pinned) {
    EXPECT_EQ(bucket(r), b) << "r = " << r;
    EXPECT_EQ(reference::deberta_c2p_index(p, r, 0), c) << "r = " << r;
    EXPECT_EQ(reference::deberta_p2c_index(p, r, 0), c) << "r = " << r;
  }
}

TEST(DebertaReferenceSpot, EndpointTieIsDecidedExactly) {
  // |r| = M - 1 gives x = m - 1 exactly; the exact decision keeps it (bucket 2m - 1).
  for (const auto& [b, m] :
       std::vector<std::pair<int, std::int64_t>>{{256, 512}, {16, 64}, {64, 100}}) {
    EXPECT_EQ(bucket(m - 1, b, m), b - 1) << b << " / " << m;
    EXPECT_EQ(bucket(m, b, m), b) << b << " / " << m;
  }
}

TEST(DebertaReferenceSpot, Float32FormulaSearch) {
  // HF's float32 buckets against the exact ones for every r in [-4096, 4096]: identical for
  // the v3 preset; for every preset the differing r of smallest |r| is
  // printed (docs/schemes/deberta.md records them).
  struct Preset {
    int b;
    std::int64_t m;
    bool must_agree;
  };
  for (const Preset& ps : std::vector<Preset>{{256, 512, true},
                                              {512, 1024, false},
                                              {128, 512, false},
                                              {64, 256, false},
                                              {32, 128, false},
                                              {256, 1024, false},
                                              {512, 512, false}}) {
    std::int64_t first = 0, count = 0;
    // POSENC_DEBERTA_WIDE=1: search |r| <= 2^20 instead (a one-off measurement, ~1 s).
    const std::int64_t range = std::getenv("POSENC_DEBERTA_WIDE") ? (1 << 20) : 4096;
    for (std::int64_t r = -range; r <= range; ++r) {
      if (reference::deberta_log_bucket_f32(r, ps.b, ps.m) != bucket(r, ps.b, ps.m)) {
        if (count++ == 0 || std::llabs(r) < std::llabs(first)) first = r;
      }
    }
    std::printf("deberta float32 vs exact buckets, %d / %lld, |r| <= %lld: %lld differ", ps.b,
                static_cast<long long>(ps.m), static_cast<long long>(range),
                static_cast<long long>(count));
    if (count) std::printf(", smallest |r| at r = %lld", static_cast<long long>(first));
    std::printf("\n");
    if (ps.must_agree && range == 4096) {
      EXPECT_EQ(count, 0) << ps.b << " / " << ps.m;
    }
  }
}

TEST(DebertaReferenceSpot, P2cUsesTheC2pIndexNotThePapers) {
  DebertaParams p;
  for (std::int64_t i : {0, 5, 300}) {
    for (std::int64_t j : {0, 7, 260, 511}) {
      EXPECT_EQ(reference::deberta_p2c_index(p, i, j), reference::deberta_c2p_index(p, i, j));
    }
  }
  // (i, j) = (5, 0): delta 5 -> row 261; the paper's delta(j, i) = -5 would read row 251.
  EXPECT_EQ(reference::deberta_c2p_index(p, 5, 0), 261);
  EXPECT_EQ(reference::deberta_index_of(p, -bucket(5)), 251);
}

TEST(DebertaReferenceSpot, ParsesPosAttType) {
  const auto t = reference::deberta_parse_pos_att_type("p2c|c2p");
  EXPECT_TRUE(t.c2p && t.p2c);
  const auto u = reference::deberta_parse_pos_att_type(" C2P | p2p ");
  EXPECT_TRUE(u.c2p);
  EXPECT_FALSE(u.p2c);
  const auto e = reference::deberta_parse_pos_att_type("");
  EXPECT_FALSE(e.c2p || e.p2c);
  EXPECT_THROW(reference::deberta_parse_pos_att_type("c2p|c2c"), InvalidArgument);
  EXPECT_THROW(reference::deberta_parse_pos_att_type("c2p||p2c"), InvalidArgument);
  try {
    reference::deberta_parse_pos_att_type("c2p|pc2");
    ADD_FAILURE() << "no throw";
  } catch (const InvalidArgument& ex) {
    EXPECT_NE(std::string(ex.what()).find("'pc2'"), std::string::npos) << ex.what();
  }
}

TEST(DebertaReferenceSpot, ResolvesSpanAndScale) {
  EXPECT_EQ(reference::deberta_resolve_max_relative_positions(-1, 512), 512);
  EXPECT_EQ(reference::deberta_resolve_max_relative_positions(0, 512), 512);
  EXPECT_EQ(reference::deberta_resolve_max_relative_positions(384, 512), 384);
  DebertaParams p;
  EXPECT_EQ(reference::deberta_att_span(p), 256);
  EXPECT_EQ(reference::deberta_scale_factor(p), 3);
  p.position_buckets = 0;
  EXPECT_EQ(reference::deberta_att_span(p), 512);
  p.p2c = false;
  EXPECT_EQ(reference::deberta_scale_factor(p), 2);
  const mp50 s = reference::deberta_scale<mp50>(p);
  EXPECT_LT(static_cast<double>(abs(s * s * 128 - 1)), 1e-45);
}

TEST(DebertaReferenceSpot, RejectsBadArguments) {
  auto expect_message = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no throw, expected: " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message([] { bucket(3, 1, 512); }, "position_buckets must lie in [2, 4096]");
  expect_message([] { bucket(3, 256, 129); }, "max_relative_positions must exceed");
  expect_message([] { bucket(3, 8192, 1 << 20); }, "position_buckets must lie in [2, 4096]");
  expect_message(
      [] {
        DebertaParams p;
        p.max_relative_positions = -1;
        reference::deberta_check(p);
      },
      "max_relative_positions must be >= 1");
  expect_message(
      [] {
        DebertaParams p;
        p.head_dim = 0;
        reference::deberta_check(p);
      },
      "head_dim must be positive");
  expect_message(
      [] {
        DebertaParams p;
        p.share_att_key = false;
        reference::DebertaWeights<double> w;
        w.hidden = 4;
        w.rel_embeddings.assign(512 * 4, 0.0);
        w.key_w.assign(64 * 4, 0.0);
        w.key_b.assign(64, 0.0);
        reference::deberta_check_weights(p, w, "t");
      },
      "pos_key_proj weight");
}

// ---- reference: c2p / p2c
// ------------------------------------------------------------------------

struct SmallCase {
  DebertaParams p;
  std::int64_t hidden = 8, tq = 0, tk = 0, offset = 0;
  std::vector<double> q, k, v;
  reference::DebertaWeights<double> w;
};

std::vector<double> dyadic(std::mt19937_64& g, std::size_t n, double range, int bits = 10) {
  std::uniform_int_distribution<int> u(-(1 << bits), 1 << bits);
  std::vector<double> x(n);
  for (auto& y : x) y = range * std::ldexp(u(g), -bits);
  return x;
}

SmallCase make_case(std::uint64_t seed, int max_t = 40, int max_heads = 2) {
  std::mt19937_64 g(seed);
  SmallCase c;
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  c.p.position_buckets = pick(0, 3) == 0 ? 0 : 2 * pick(2, 8);
  c.p.max_relative_positions = pick(c.p.position_buckets / 2 + 2, 40);
  const int kind = pick(0, 2);
  c.p.c2p = kind != 2;
  c.p.p2c = kind != 1;
  c.p.share_att_key = pick(0, 1) == 1;
  c.p.n_heads = pick(1, max_heads);
  c.p.head_dim = 4 * pick(1, 8);
  c.hidden = pick(2, 12);
  c.tq = pick(1, max_t);
  c.tk = pick(1, max_t + 20);
  c.offset = pick(0, 30);
  const std::size_t hd = static_cast<std::size_t>(c.p.n_heads * c.p.head_dim);
  c.q = dyadic(g, c.tq * hd, 1.0);
  c.k = dyadic(g, c.tk * hd, 1.0);
  c.v = dyadic(g, c.tk * hd, 1.0);
  const std::size_t k2 = static_cast<std::size_t>(2 * reference::deberta_att_span(c.p));
  c.w.hidden = c.hidden;
  c.w.rel_embeddings = dyadic(g, k2 * c.hidden, 1.0);
  c.w.key_w = dyadic(g, hd * c.hidden, 0.5);
  c.w.key_b = dyadic(g, hd, 0.5);
  c.w.query_w = dyadic(g, hd * c.hidden, 0.5);
  c.w.query_b = dyadic(g, hd, 0.5);
  c.w.pos_key_w = dyadic(g, hd * c.hidden, 0.5);
  c.w.pos_key_b = dyadic(g, hd, 0.5);
  c.w.pos_query_w = dyadic(g, hd * c.hidden, 0.5);
  c.w.pos_query_b = dyadic(g, hd, 0.5);
  return c;
}

template <class Real>
reference::DebertaWeights<Real> weights_as(const reference::DebertaWeights<double>& w) {
  reference::DebertaWeights<Real> r;
  r.hidden = w.hidden;
  const auto cv = [](const std::vector<double>& x) {
    return std::vector<Real>(x.begin(), x.end());
  };
  r.rel_embeddings = cv(w.rel_embeddings);
  r.key_w = cv(w.key_w);
  r.key_b = cv(w.key_b);
  r.query_w = cv(w.query_w);
  r.query_b = cv(w.query_b);
  r.pos_key_w = cv(w.pos_key_w);
  r.pos_key_b = cv(w.pos_key_b);
  r.pos_query_w = cv(w.pos_query_w);
  r.pos_query_b = cv(w.pos_query_b);
  return r;
}

POSENC_TYPED_PROP(DebertaReference, RelativeTermsAreTranslationInvariant) {
  // Shifting every position by s (queries and keys) changes neither c2p nor p2c: the key rows
  // are moved s places later and the queries s places later via query_offset.
  const SmallCase c = make_case(*rc::gen::arbitrary<std::uint64_t>(), 12);
  const std::int64_t s = *rc::gen::inRange<std::int64_t>(1, 400);
  const auto w = weights_as<Real>(c.w);
  const auto l = reference::deberta_position_layers(c.p, w);
  const std::vector<Real> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end());
  std::vector<Real> ks(static_cast<std::size_t>(s) * c.p.n_heads * c.p.head_dim, Real(0));
  ks.insert(ks.end(), k.begin(), k.end());
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j) {
      for (int h = 0; h < c.p.n_heads; ++h) {
        const Real a = reference::deberta_relative_term(c.p, l, q, k, h, i, j, c.offset);
        const Real b = reference::deberta_relative_term(c.p, l, q, ks, h, i, j + s, c.offset + s);
        RC_ASSERT(a == b);
      }
    }
  }
}

POSENC_TYPED_PROP(DebertaReference, ForwardEqualsAttentionWithTheBiasHook) {
  // deberta_forward (one scale in Real) against reference/attention.hpp with the relative term
  // as a bias hook and the given (double) scale: the same within float rounding of the scale.
  const SmallCase c = make_case(*rc::gen::arbitrary<std::uint64_t>(), 10);
  const auto w = weights_as<Real>(c.w);
  const std::vector<Real> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()),
      v(c.v.begin(), c.v.end());
  AttentionParams ap;
  ap.query_offset = c.offset;
  const auto out = reference::deberta_forward<Real>(c.p, ap, {}, c.tq, c.tk, w, q, k, v);
  const AttentionParams pp = reference::deberta_attention_params(ap, c.p);
  const auto l = reference::deberta_position_layers(c.p, w);
  const auto alt = reference::attention_forward<Real>(
      pp, {}, c.tq, c.tk, q, k, v, reference::deberta_hooks(c.p, l, q, k, c.offset));
  RC_ASSERT(out.size() == alt.size());
  const double tol = std::is_same_v<Real, float> ? 1e-4 : 1e-12;
  for (std::size_t x = 0; x < out.size(); ++x) {
    RC_ASSERT(std::fabs(static_cast<double>(out[x] - alt[x])) <= tol);
  }
}

TEST(DebertaReferenceSpot, HfGatherAndTransposeGiveTheC2pIndexForP2c) {
  // HF's p2c, op by op on a square block: p2c_att = K Qr^T [T, 2k]; r_pos[a][b] = bucket(a - b)
  // (key x key); G[a][b] = p2c_att[a][clamp(-r_pos[a][b] + k)]; the term of (query i, key j) is
  // G^T[i][j] = G[j][i]. It equals the reference's p2c term, which reads row clamp(rel_ij + k).
  SmallCase c = make_case(11, 30);
  c.p.position_buckets = 8;
  c.p.max_relative_positions = 12;
  c.p.c2p = false;
  c.p.p2c = true;
  c.offset = 0;
  c.tq = c.tk = 30;
  const std::size_t hd = static_cast<std::size_t>(c.p.n_heads * c.p.head_dim);
  std::mt19937_64 g(12);
  c.q = dyadic(g, c.tq * hd, 1.0);
  c.k = dyadic(g, c.tk * hd, 1.0);
  c.w.rel_embeddings = dyadic(g, 2 * 8 * c.hidden, 1.0);
  const auto l = reference::deberta_position_layers(c.p, c.w);
  const std::int64_t span = reference::deberta_att_span(c.p), T = c.tk;
  const int H = c.p.n_heads, d = c.p.head_dim;
  int far = 0;
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        const std::int64_t a = j, b = i;  // G[j][i]
        const std::int64_t r_pos = reference::deberta_relative_position(c.p, a, b);
        const std::int64_t col = std::clamp<std::int64_t>(-r_pos + span, 0, 2 * span - 1);
        double hf = 0;
        for (int z = 0; z < d; ++z) hf += c.k[(a * H + h) * d + z] * l.qr[(col * H + h) * d + z];
        const double ref = reference::deberta_relative_term<double>(c.p, l, c.q, c.k, h, i, j, 0);
        ASSERT_EQ(hf, ref) << "query " << i << " key " << j;
        far += std::llabs(i - j) > 4;  // log buckets (m = 4) are exercised
      }
    }
  }
  EXPECT_GT(far, 0);
  EXPECT_TRUE(reference::deberta_hf_runs_shape(c.p, 30, 30));
  EXPECT_FALSE(reference::deberta_hf_runs_shape(c.p, 8, 30));
  c.p.p2c = false;
  c.p.c2p = true;
  EXPECT_TRUE(reference::deberta_hf_runs_shape(c.p, 8, 30));
}

// ---- optimized
// -----------------------------------------------------------------------------------

std::vector<float> f32(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

std::vector<float> run_optimized(const SmallCase& c) {
  AttentionParams ap;
  ap.query_offset = c.offset;
  const auto w = weights_as<float>(c.w);
  std::vector<float> out(static_cast<std::size_t>(c.tq * c.p.n_heads * c.p.head_dim));
  optimized::deberta_forward(c.p, ap, {}, c.tq, c.tk, w, f32(c.q), f32(c.k), f32(c.v), out);
  return out;
}

RC_GTEST_PROP(DebertaOptimized, IndexTablesMatchReference, ()) {
  const SmallCase c = make_case(*rc::gen::arbitrary<std::uint64_t>());
  const auto l = optimized::deberta_position_layers(c.p, weights_as<float>(c.w));
  const auto q = f32(c.q), k = f32(c.k);
  const optimized::DebertaBias b(c.p, l, q, k, c.tq, c.tk, c.offset);
  const auto rel = reference::deberta_relative_matrix(c.p, c.tq, c.tk, c.offset);
  const auto idx = reference::deberta_index_matrix(c.p, c.tq, c.tk, c.offset);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j) {
      RC_ASSERT(b.relative(i, j) == rel[i * c.tk + j]);
      RC_ASSERT(b.c2p_index(i, j) == idx[i * c.tk + j]);
      RC_ASSERT(b.p2c_index(i, j) == idx[i * c.tk + j]);
    }
  }
}

TEST(DebertaOptimized, MatchesOracleWithinBound) {
  // 8 seeded random configurations (buckets or none, c2p / p2c / both, shared or separate
  // keys, 1-2 heads, offsets): |o - o*| <= kDebertaMaxError eps_f32 (A + B), S as the contract.
  double worst = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const SmallCase c = make_case(seed * 7919);
    const auto out = run_optimized(c);
    AttentionParams ap;
    ap.query_offset = c.offset;
    const auto w50 = weights_as<mp50>(c.w);
    const std::vector<mp50> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()),
        v(c.v.begin(), c.v.end());
    const auto ref = reference::deberta_forward<mp50>(c.p, ap, {}, c.tq, c.tk, w50, q, k, v);
    const auto l50 = reference::deberta_position_layers(c.p, w50);
    const auto absl = reference::deberta_abs_layers(c.p, c.w);
    std::vector<double> qa(c.q), ka(c.k);
    for (double& x : qa) x = std::fabs(x);
    for (double& x : ka) x = std::fabs(x);
    const int H = c.p.n_heads, d = c.p.head_dim;
    const mp50 scale = reference::deberta_scale<mp50>(c.p);
    const double sc = static_cast<double>(scale);
    for (int h = 0; h < H; ++h) {
      for (std::int64_t i = 0; i < c.tq; ++i) {
        std::vector<double> sens(static_cast<std::size_t>(c.tk)), pr(sens.size());
        std::vector<mp50> s(sens.size());
        for (std::int64_t j = 0; j < c.tk; ++j) {
          mp50 dot = 0;
          double a = 0;
          for (int y = 0; y < d; ++y) {
            dot += q[(i * H + h) * d + y] * k[(j * H + h) * d + y];
            a += std::fabs(c.q[(i * H + h) * d + y] * c.k[(j * H + h) * d + y]);
          }
          s[j] =
              (dot + reference::deberta_relative_term(c.p, l50, q, k, h, i, j, c.offset)) * scale;
          sens[j] = a * sc +
                    reference::deberta_relative_sensitivity(c.p, absl, qa, ka, h, i, j, c.offset);
        }
        const auto p = reference::attention_softmax(s, std::vector<bool>(s.size(), true));
        for (int x = 0; x < d; ++x) {
          const double o = static_cast<double>(ref[(i * H + h) * d + x]);
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < c.tk; ++j) {
            const double pij = static_cast<double>(p[j]);
            const double vj = c.v[(j * H + h) * d + x];
            a += pij * std::fabs(vj);
            b += pij * std::fabs(vj - o) * sens[j];
          }
          const double bound = optimized::kDebertaMaxError * 0x1p-23 * (a + b);
          const double err = std::fabs(out[(i * H + h) * d + x] - o);
          if (bound > 0) worst = std::max(worst, err / bound);
          ASSERT_LE(err, bound) << "seed " << seed << " head " << h << " query " << i << " channel "
                                << x;
        }
      }
    }
  }
  std::printf("DebertaOptimized measured max error: %.4f of kDebertaMaxError\n", worst);
}

RC_GTEST_PROP(DebertaOptimized, IdenticalBitsForAnyThreadCount, ()) {
  SmallCase c = make_case(*rc::gen::arbitrary<std::uint64_t>(), 70);
  omp_set_num_threads(1);
  const auto one = run_optimized(c);
  for (int t : {2, 3, 5}) {
    omp_set_num_threads(t);
    const auto many = run_optimized(c);
    RC_ASSERT(same_bits(one, many));
  }
  omp_set_num_threads(omp_get_num_procs());
}

// With fewer threads than heads deberta_forward builds P2C per thread, one head at a time in the
// thread's scratch, rebuilt when the thread's tasks reach another head (they straddle heads
// here: up to 5 heads, 3 query blocks, 1-3 threads): the bits of the per-call tables.
RC_GTEST_PROP(DebertaOptimized, PerThreadP2cMatchesPerCallTables, ()) {
  SmallCase c = make_case(*rc::gen::arbitrary<std::uint64_t>(), 150, 5);
  c.p.p2c = true;
  const auto w = weights_as<float>(c.w);
  const auto layers = optimized::deberta_position_layers(c.p, w);
  const auto q = f32(c.q), k = f32(c.k), v = f32(c.v);
  AttentionParams ap;
  ap.query_offset = c.offset;
  const AttentionParams pp = reference::deberta_attention_params(ap, c.p);
  const optimized::DebertaBias per_call(c.p, layers, q, k, c.tq, c.tk, c.offset, false);
  const optimized::DebertaBias per_thread(c.p, layers, q, k, c.tq, c.tk, c.offset, true);
  auto run = [&](const optimized::DebertaBias& b) {
    std::vector<float> out(static_cast<std::size_t>(c.tq * c.p.n_heads * c.p.head_dim));
    optimized::attention_forward(pp, {}, c.tq, c.tk, q, k, v, out, &b);
    return out;
  };
  // A standalone fill() of all rows at once (more than one 64-row block) agrees too.
  const std::size_t n = static_cast<std::size_t>(c.tq * c.tk);
  for (int h = 0; h < c.p.n_heads; ++h) {
    std::vector<float> a(n), b(n);
    per_call.fill(h, 0, static_cast<int>(c.tq), 0, static_cast<int>(c.tk), a.data());
    per_thread.fill(h, 0, static_cast<int>(c.tq), 0, static_cast<int>(c.tk), b.data());
    RC_ASSERT(same_bits(a, b));
  }
  omp_set_num_threads(1);
  const auto want = run(per_call);
  for (int t : {1, 2, 3}) {
    omp_set_num_threads(t);
    RC_ASSERT(same_bits(want, run(per_thread)));
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(DebertaOptimized, RejectsBadArguments) {
  const SmallCase c = make_case(5);
  const auto w = weights_as<float>(c.w);
  const auto l = optimized::deberta_position_layers(c.p, w);
  const auto q = f32(c.q), k = f32(c.k);
  EXPECT_THROW(optimized::DebertaBias(c.p, l, std::span<const float>(q.data(), q.size() - 1), k,
                                      c.tq, c.tk, 0),
               InvalidArgument);
  EXPECT_THROW(optimized::DebertaBias(c.p, l, q, k, c.tq, c.tk, -1), InvalidArgument);
  auto bad = w;
  bad.rel_embeddings.pop_back();
  EXPECT_THROW(optimized::deberta_position_layers(c.p, bad), InvalidArgument);
  DebertaParams p = c.p;
  p.position_buckets = 2;
  p.max_relative_positions = 2;  // M - 1 <= m
  EXPECT_THROW(optimized::deberta_position_layers(p, w), InvalidArgument);
}

TEST(DebertaOptimized, SpeedAgainstNaiveAtT2048) {
  // Not a pass/fail test of speed: prints the ratio of a naive float implementation that
  // materialises the T x T relative terms (gathered rows, T x T x d work twice) to the fused
  // kernel, at T = 2048, one head of 64, v3 buckets. Enabled with POSENC_DEBERTA_SPEED=1.
  if (!std::getenv("POSENC_DEBERTA_SPEED")) GTEST_SKIP() << "set POSENC_DEBERTA_SPEED=1";
  const std::int64_t T = 2048;
  DebertaParams p;
  std::mt19937_64 g(3);
  const int d = 64, hidden = 64;
  auto rnd = [&](std::size_t n) { return f32(dyadic(g, n, 0.5)); };
  optimized::DebertaWeightsF32 w;
  w.hidden = hidden;
  w.rel_embeddings = rnd(512 * hidden);
  w.key_w = rnd(64 * hidden);
  w.key_b = rnd(64);
  w.query_w = rnd(64 * hidden);
  w.query_b = rnd(64);
  const auto q = rnd(T * d), k = rnd(T * d), v = rnd(T * d);
  std::vector<float> out(T * d), naive(T * d);
  AttentionParams ap;
  const auto t0 = std::chrono::steady_clock::now();
  optimized::deberta_forward(p, ap, {}, T, T, w, q, k, v, out);
  const auto t1 = std::chrono::steady_clock::now();
  // Naive: Kr, Qr, then the full [T, T] score matrix with per-element gathered dot products.
  const auto l = optimized::deberta_position_layers(p, w);
  const float scale = 1.0f / std::sqrt(192.0f);
  std::vector<float> s(static_cast<std::size_t>(T * T));
  for (std::int64_t i = 0; i < T; ++i) {
    for (std::int64_t j = 0; j < T; ++j) {
      const std::int64_t c = reference::deberta_c2p_index(p, i, j);
      float a = 0, b = 0, e = 0;
      for (int z = 0; z < d; ++z) {
        a += q[i * d + z] * k[j * d + z];
        b += q[i * d + z] * l.kr[c * d + z];
        e += k[j * d + z] * l.qr[c * d + z];
      }
      s[i * T + j] = (a + b + e) * scale;
    }
  }
  for (std::int64_t i = 0; i < T; ++i) {
    float mx = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j < T; ++j) mx = std::max(mx, s[i * T + j]);
    for (std::int64_t j = 0; j < T; ++j) sum += (s[i * T + j] = std::exp(s[i * T + j] - mx));
    for (int z = 0; z < d; ++z) {
      float acc = 0;
      for (std::int64_t j = 0; j < T; ++j) acc += s[i * T + j] * v[j * d + z];
      naive[i * d + z] = acc / sum;
    }
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double fused = std::chrono::duration<double>(t1 - t0).count();
  const double slow = std::chrono::duration<double>(t2 - t1).count();
  double diff = 0;
  for (std::size_t x = 0; x < out.size(); ++x)
    diff = std::max(diff, double(std::fabs(out[x] - naive[x])));
  std::printf("deberta T=2048: fused %.3f s, naive %.3f s, ratio %.1f, max diff %.2e\n", fused,
              slow, slow / fused, diff);
  EXPECT_LT(diff, 1e-3);
}

// ---- golden
// ----------------------------------------------------------------------------------------

TEST(DebertaGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("deberta", 6); }
TEST(DebertaGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("deberta"); }
TEST(DebertaGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught("deberta", [](const std::string& id, const std::string& mistake) {
    // The negative control: only the p2c-literal engine reproduces its expected values.
    if (id.find("_invalid_") != std::string::npos) return mistake != "p2c-literal-index";
    // The bucket table has no scores: only the sign shows there.
    if (id.find("_buckets_") != std::string::npos) return mistake != "sign-flipped";
    // Shared keys: ignoring share_att_key changes nothing.
    if (mistake == "share-att-key-ignored") return id.find("_sep_keys_") == std::string::npos;
    // No p2c term: its index cannot show.
    if (mistake == "p2c-literal-index") return id.find("_c2p_only_") != std::string::npos;
    return false;
  });
}

TEST(DebertaGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("deberta", "deberta_v3_base_h1_d64_q16_o200_k400_f32.json");
}

TEST(DebertaGolden, VerifyFailsTheNegativeControlOnlyForALiteralP2cEngine) {
  expect_negative_controls_fail_only_for("deberta", "p2c-literal-index");
}

/// The DeBERTa weights a committed case stores (relative embeddings, shared key/query
/// projections), read through `get(name)`; the separate position projections stay to the caller.
template <class Real, class Get>
reference::DebertaWeights<Real> weights_of(const nlohmann::json& m, const Get& get) {
  reference::DebertaWeights<Real> w;
  w.hidden = m.at("hidden").get<std::int64_t>();
  w.rel_embeddings = get("rel_embeddings");
  w.key_w = get("key_proj_weight");
  w.key_b = get("key_proj_bias");
  w.query_w = get("query_proj_weight");
  w.query_b = get("query_proj_bias");
  return w;
}

TEST(DebertaGolden, ProbsConditionCountsTheRelativeTerm) {
  // The probs condition scale of the v3 f32 case, recomputed here from its inputs: cond_ij =
  // p_ij (1 + S_ij + sum_k p_ik S_ik), S_ij = scale sum |q k| + 1.5 S^rel_ij (the generator's
  // contract). A generator that drops the relative term under-states every budget.
  int n = 0;
  for_each_golden_case("deberta", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (lc.spec.id != "deberta_v3_base_h1_d64_q16_o200_k400_f32") return;
    ++n;
    const auto& m = lc.spec.manifest.at("params");
    DebertaParams p;
    p.n_heads = m.at("n_heads").get<int>();
    p.head_dim = m.at("head_dim").get<int>();
    const std::int64_t tq = m.at("tq").get<std::int64_t>(), tk = m.at("tk").get<std::int64_t>();
    const std::int64_t o = m.at("query_offset").get<std::int64_t>();
    const auto get = [&](const std::string& name) {
      const auto f = golden::tensor_to_f32(lc.golden.at(name));
      return std::vector<double>(f.begin(), f.end());
    };
    const auto w = weights_of<double>(m, get);
    const auto absl = reference::deberta_abs_layers(p, w);
    auto qa = get("q"), ka = get("k");
    const auto q = qa, k = ka;
    for (double& x : qa) x = std::fabs(x);
    for (double& x : ka) x = std::fabs(x);
    const auto probs = get("probs.exact"), cond = get("probs.cond");
    const double scale = 1.0 / std::sqrt(192.0);
    const int d = p.head_dim;
    for (std::int64_t i = 0; i < tq; i += 5) {
      std::vector<double> S(static_cast<std::size_t>(tk));
      double mean = 0;
      for (std::int64_t j = 0; j < tk; ++j) {
        double a = 0;
        for (int z = 0; z < d; ++z) a += std::fabs(q[i * d + z] * k[j * d + z]);
        S[j] =
            a * scale + 1.5 * reference::deberta_relative_sensitivity(p, absl, qa, ka, 0, i, j, o);
        mean += probs[i * tk + j] * S[j];
      }
      for (std::int64_t j = 0; j < tk; j += 37) {
        const double want = probs[i * tk + j] * (1 + S[j] + mean);
        EXPECT_NEAR(cond[i * tk + j], want, 1e-5 * want) << "query " << i << " key " << j;
      }
    }
  });
  EXPECT_EQ(n, 1);
}

// The f64 companions of probs and out are the oracle's values correctly rounded to double
// (docs/file-format.md): rows of every committed attention case recomputed here at mp100 by
// the reference formula (content and relative term both scaled by 1/sqrt(d sf) in mp100, not
// by the double params.scale), bit for bit.
TEST(DebertaGolden, ProbsAndOutCompanionsAreCorrectlyRounded) {
  int cases = 0;
  for_each_golden_case("deberta", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (!lc.golden.count("q")) return;  // the bucket table
    ++cases;
    const auto& m = lc.spec.manifest.at("params");
    DebertaParams p;
    const auto types =
        reference::deberta_parse_pos_att_type(m.at("pos_att_type").get<std::string>());
    p.c2p = types.c2p;
    p.p2c = types.p2c;
    p.share_att_key = m.at("share_att_key").get<bool>();
    p.position_buckets = m.at("position_buckets").get<int>();
    p.max_relative_positions = m.at("max_relative_positions").get<std::int64_t>();
    p.n_heads = m.at("n_heads").get<int>();
    p.head_dim = m.at("head_dim").get<int>();
    const AttentionParams ap = golden::attention_params_from_manifest(lc.spec.manifest);
    const std::int64_t tq = m.at("tq").get<std::int64_t>(), tk = m.at("tk").get<std::int64_t>();
    const bool literal = lc.spec.manifest.at("result") == "invalid";  // the p2c-literal control
    const auto get = [&](const std::string& name) {
      std::vector<mp100> v;
      if (!lc.golden.count(name)) return v;
      const golden::Tensor& t = lc.golden.at(name);
      for (std::int64_t x = 0; x < t.numel(); ++x) v.emplace_back(t.get_f64(x));
      return v;
    };
    auto w = weights_of<mp100>(m, get);
    w.pos_key_w = get("pos_key_proj_weight");
    w.pos_key_b = get("pos_key_proj_bias");
    w.pos_query_w = get("pos_query_proj_weight");
    w.pos_query_b = get("pos_query_proj_bias");
    const auto layers = reference::deberta_position_layers(p, w);
    const auto q = get("q"), k = get("k"), v = get("v");
    reference::AttentionMask mask;
    if (lc.golden.count("key_padding")) {
      for (const auto& x : get("key_padding")) mask.key_padding.push_back(x != 0);
    }
    const mp100 scale = reference::deberta_scale<mp100>(p);
    const int H = p.n_heads, d = p.head_dim, dv = ap.value_dim;
    const golden::Tensor &probs = lc.golden.at("probs.exact"), &out = lc.golden.at("out.exact");
    int wrong = 0;
    for (int h = 0; h < H; ++h) {
      for (std::int64_t i : {std::int64_t{0}, tq / 2, tq - 1}) {
        std::vector<mp100> sc(static_cast<std::size_t>(tk));
        std::vector<bool> vis(sc.size());
        for (std::int64_t j = 0; j < tk; ++j) {
          mp100 c2c = 0;
          for (int x = 0; x < d; ++x) c2c += q[(i * H + h) * d + x] * k[(j * H + h) * d + x];
          sc[j] = (c2c + reference::deberta_relative_term<mp100>(p, layers, q, k, h, i, j,
                                                                 ap.query_offset, literal)) *
                  scale;
          vis[j] = reference::attention_visible(ap, mask, tk, i, j);
        }
        const auto pr = reference::attention_softmax(sc, vis);
        for (std::int64_t j = 0; j < tk; ++j) {
          const double got = probs.get_f64((h * tq + i) * tk + j), want = round_to_f64(pr[j]);
          if (got != want && wrong++ < 3) {
            ADD_FAILURE() << lc.spec.id << " probs.exact[" << h << ", " << i << ", " << j
                          << "] = " << got << ", mp100 rounds to " << want;
          }
        }
        for (int c = 0; c < dv; ++c) {
          mp100 o = 0;
          for (std::int64_t j = 0; j < tk; ++j) o += pr[j] * v[(j * H + h) * dv + c];
          const double got = out.get_f64((i * H + h) * dv + c), want = round_to_f64(o);
          if (got != want && wrong++ < 3) {
            ADD_FAILURE() << lc.spec.id << " out.exact[" << i << ", " << h << ", " << c
                          << "] = " << got << ", mp100 rounds to " << want;
          }
        }
      }
    }
    EXPECT_EQ(wrong, 0) << lc.spec.id << ": companions not correctly rounded";
  });
  EXPECT_EQ(cases, 5);
}

TEST(DebertaGolden, PipelinesPassTheirProfiles) {
  expect_pipelines_pass_their_profiles("deberta", 0.25, {"probs", "out"});
}

}  // namespace
}  // namespace posenc::properties
