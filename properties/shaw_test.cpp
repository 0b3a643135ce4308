// Shaw properties: the clipped index (sign key - query, saturation beyond K), the efficient form
// (score bias + value hook) against tensor2tensor's naive form with materialised relations,
// translation invariance, decode equals the matching row of the full forward, the fused
// optimized kernel against the oracle, and the golden catalog. Formula: see reference/shaw.hpp.
#include "optimized/shaw.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "golden/cases/attention_case.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/scalar.hpp"
#include "reference/shaw.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionMask;
using reference::AttentionParams;
using reference::ShawParams;

/// A random Shaw problem with dyadic inputs in [-1, 1] (q scaled by 1/2).
struct ShawCase {
  ShawParams sp;
  AttentionParams ap;
  std::int64_t tq = 0, tk = 0;
  std::vector<double> q, k, v, rel_k, rel_v;
};

/// Tk in [min_t, max_t]; Tq in [1, Tk], at most max_tq when max_tq > 0.
rc::Gen<ShawCase> gen_shaw_case(std::int64_t max_t, int max_d, bool any_offset = false,
                                std::int64_t min_t = 1, std::int64_t max_tq = 0) {
  return rc::gen::exec([=] {
    ShawCase c;
    c.sp.max_relative_position = *rc::gen::oneOf(rc::gen::just(20), rc::gen::inRange(1, 9));
    const int hkv = *rc::gen::inRange(1, 3);
    c.ap.n_kv_heads = hkv;
    c.ap.n_heads = hkv * *rc::gen::inRange(1, 3);
    c.ap.head_dim = *rc::gen::inRange(1, max_d + 1);
    c.ap.value_dim = *rc::gen::inRange(1, max_d + 1);
    c.ap.causal = *rc::gen::arbitrary<bool>();
    c.tk = *rc::gen::inRange<std::int64_t>(min_t, max_t + 1);
    c.tq = *rc::gen::inRange<std::int64_t>(1, (max_tq > 0 ? std::min(c.tk, max_tq) : c.tk) + 1);
    c.ap.query_offset = any_offset && !c.ap.causal ? *rc::gen::inRange<std::int64_t>(0, 3 * max_t)
                                                   : c.tk - c.tq;  // tensor2tensor: last keys
    const int rows = 2 * c.sp.max_relative_position + 1;
    c.q = *gen_dyadic_vector(static_cast<int>(c.tq * c.ap.n_heads * c.ap.head_dim), 12);
    for (double& x : c.q) x *= 0.5;
    c.k = *gen_dyadic_vector(static_cast<int>(c.tk * hkv * c.ap.head_dim), 12);
    c.v = *gen_dyadic_vector(static_cast<int>(c.tk * hkv * c.ap.value_dim), 12);
    c.rel_k = *gen_dyadic_vector(rows * c.ap.head_dim, 12);
    c.rel_v = *gen_dyadic_vector(rows * c.ap.value_dim, 12);
    RC_CLASSIFY(c.ap.causal, "causal");
    return c;
  });
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& x) {
  return std::vector<Real>(x.begin(), x.end());
}

template <class Real>
std::vector<Real> ref_forward(const ShawCase& c, const AttentionMask& m = {}) {
  return reference::shaw_forward<Real>(c.sp, c.ap, m, c.tq, c.tk, to_real<Real>(c.rel_k),
                                       to_real<Real>(c.rel_v), to_real<Real>(c.q),
                                       to_real<Real>(c.k), to_real<Real>(c.v));
}

/// A tolerance for comparing two evaluation orders in Real: inputs are <= 1, scores <= d + d.
template <class Real>
double order_tol(const ShawCase& c) {
  return 64.0 * (c.ap.head_dim + c.ap.value_dim + c.tk) * eps_of<Real>();
}

// ---- reference
// --------------------------------------------------------------------------------

TEST(ShawReferenceSpot, IndexIsClippedKeyMinusQuery) {
  // docs/schemes/shaw.md: r = key - query, clip to [-K, K], + K.
  const ShawParams p{2};
  std::vector<int> got;
  for (int j = 0; j < 10; ++j) got.push_back(reference::shaw_index(p, 5, j));
  EXPECT_EQ(got, (std::vector<int>{0, 0, 0, 0, 1, 2, 3, 4, 4, 4}));
  // Decode: one query at the last of 4 keys sees the distance row (-3, -2, -1, 0).
  EXPECT_EQ(reference::shaw_index_matrix({20}, 1, 4, 3),
            (std::vector<std::int32_t>{17, 18, 19, 20}));
  EXPECT_EQ(reference::shaw_table_rows({20}), 41);
}

TEST(ShawReferenceSpot, RejectsBadArguments) {
  auto expect_message = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message([] { reference::shaw_check({0}); }, "max_relative_position must be > 0 (got 0)");
  expect_message([] { reference::shaw_index({-3}, 0, 1); },
                 "shaw_index: max_relative_position must be > 0 (got -3)");
  AttentionParams ap;
  ap.head_dim = 2;
  ap.value_dim = 3;
  const std::vector<double> q(2), rk(10), rv(15);
  expect_message(
      [&] { reference::shaw_hooks<double>({2}, ap, 1, 1, q, std::vector<double>(9), rv); },
      "shaw_hooks: rel_k must have (2K + 1) * head_dim = 10 entries (got 9)");
  expect_message(
      [&] { reference::shaw_hooks<double>({2}, ap, 1, 1, q, rk, std::vector<double>(14)); },
      "rel_v must have (2K + 1) * value_dim = 15 entries (got 14)");
  expect_message([&] { reference::shaw_hooks<double>({2}, ap, 2, 1, q, rk, rv); },
                 "q must have Tq*H*d elements (got 2)");
}

POSENC_TYPED_PROP(ShawReference, NaiveAndEfficientFormsAgree) {
  // The T x T x d relations of tensor2tensor against the score bias + value hook split.
  const ShawCase c = *gen_shaw_case(12, 6, true);
  const auto fast = ref_forward<Real>(c);
  const auto naive = reference::shaw_forward_naive<Real>(
      c.sp, c.ap, {}, c.tq, c.tk, to_real<Real>(c.rel_k), to_real<Real>(c.rel_v),
      to_real<Real>(c.q), to_real<Real>(c.k), to_real<Real>(c.v));
  RC_ASSERT(fast.size() == naive.size());
  const Real tol = Real(order_tol<Real>(c));
  for (std::size_t x = 0; x < fast.size(); ++x) {
    rc_assert_close<Real>(fast[x], naive[x], tol, "out[" + std::to_string(x) + "]");
  }
}

POSENC_TYPED_PROP(ShawReference, TranslationInvariant) {
  // Shift every position by s: s padded keys in front, queries s further. Same numbers exactly
  // (masked keys get probability 0 and add exact zeros).
  ShawCase c = *gen_shaw_case(10, 5, true);
  const std::int64_t s = *rc::gen::inRange<std::int64_t>(1, 50);
  const auto base = ref_forward<Real>(c);
  ShawCase shifted = c;
  shifted.tk = c.tk + s;
  shifted.ap.query_offset = c.ap.query_offset + s;
  const int hkv = c.ap.n_kv_heads;
  shifted.k.assign(static_cast<std::size_t>(s * hkv * c.ap.head_dim), 0.25);
  shifted.k.insert(shifted.k.end(), c.k.begin(), c.k.end());
  shifted.v.assign(static_cast<std::size_t>(s * hkv * c.ap.value_dim), -0.5);
  shifted.v.insert(shifted.v.end(), c.v.begin(), c.v.end());
  AttentionMask m;
  m.key_padding.assign(static_cast<std::size_t>(shifted.tk), 0);
  std::fill(m.key_padding.begin(), m.key_padding.begin() + s, 1);
  const auto moved = ref_forward<Real>(shifted, m);
  RC_ASSERT(base.size() == moved.size());
  const Real tol = Real(order_tol<Real>(c));  // Eigen may block q k^T differently
  for (std::size_t x = 0; x < base.size(); ++x) {
    rc_assert_close<Real>(moved[x], base[x], tol, "out[" + std::to_string(x) + "]");
  }
}

POSENC_TYPED_PROP(ShawReference, DistancesBeyondKBehaveAlike) {
  // Clipping at K with table T equals clipping at K' > K with T extended by copies of its edge
  // rows: every distance beyond K reads the edge row, nothing else changes. Bit for bit.
  const ShawCase c = *gen_shaw_case(12, 5, true);
  const int k = c.sp.max_relative_position, k2 = k + *rc::gen::inRange(1, 30);
  ShawCase wide = c;
  wide.sp.max_relative_position = k2;
  auto extend = [&](const std::vector<double>& t, int w) {
    std::vector<double> e;
    for (int r = 0; r < 2 * k2 + 1; ++r) {
      const int src = std::clamp(r - k2, -k, k) + k;
      e.insert(e.end(), t.begin() + src * w, t.begin() + (src + 1) * w);
    }
    return e;
  };
  wide.rel_k = extend(c.rel_k, c.ap.head_dim);
  wide.rel_v = extend(c.rel_v, c.ap.value_dim);
  const auto a = ref_forward<Real>(c), b = ref_forward<Real>(wide);
  RC_ASSERT(a == b);
}

POSENC_TYPED_PROP(ShawReference, DecodeEqualsLastRowOfFullForward) {
  // A causal prefill of T tokens, then the last token alone at position T - 1 over T keys.
  ShawCase c = *gen_shaw_case(14, 5);
  c.ap.causal = true;
  c.tq = c.tk;
  c.ap.query_offset = 0;
  const int H = c.ap.n_heads, d = c.ap.head_dim, dv = c.ap.value_dim;
  c.q = *gen_dyadic_vector(static_cast<int>(c.tq * H * d), 12);
  const auto full = ref_forward<Real>(c);
  ShawCase one = c;
  one.tq = 1;
  one.ap.query_offset = c.tk - 1;
  one.q.assign(c.q.end() - H * d, c.q.end());
  const auto last = ref_forward<Real>(one);
  const Real tol = Real(order_tol<Real>(c));
  for (int x = 0; x < H * dv; ++x) {
    rc_assert_close<Real>(last[x], full[(c.tk - 1) * H * dv + x], tol,
                          "out[" + std::to_string(x) + "]");
  }
}

// ---- optimized
// --------------------------------------------------------------------------------

RC_GTEST_PROP(ShawOptimized, IndexTableMatchesReference, ()) {
  const ShawParams p{*rc::gen::inRange(1, 70)};
  const std::int64_t tq = *rc::gen::inRange<std::int64_t>(0, 200);
  const std::int64_t tk = *rc::gen::inRange<std::int64_t>(0, 200);
  const std::int64_t qo = *rc::gen::inRange<std::int64_t>(0, 400);
  std::vector<std::int32_t> got(static_cast<std::size_t>(tq * tk));
  optimized::shaw_index_matrix(p, tq, tk, qo, got);
  RC_ASSERT(got == reference::shaw_index_matrix(p, tq, tk, qo));
}

struct Run {
  std::vector<float> out, probs;
};

Run run_optimized(const ShawCase& c) {
  const std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()),
      v(c.v.begin(), c.v.end()), rk(c.rel_k.begin(), c.rel_k.end()),
      rv(c.rel_v.begin(), c.rel_v.end());
  Run r;
  r.out.resize(static_cast<std::size_t>(c.tq * c.ap.n_heads * c.ap.value_dim));
  r.probs.resize(static_cast<std::size_t>(c.ap.n_heads * c.tq * c.tk));
  optimized::shaw_forward(c.sp, c.ap, {}, c.tq, c.tk, rk, rv, q, k, v, r.out);
  optimized::shaw_probs(c.sp, c.ap, {}, c.tq, c.tk, rk, q, k, r.probs);
  return r;
}

/// The kernel's output (and probabilities, loosely) against the mp50 oracle under the
/// contract's bound (RC_FAIL if not); worst = max err / bound seen.
void expect_within_oracle_bound(const ShawCase& c, double& worst) {
    const auto got = run_optimized(c);
    const int H = c.ap.n_heads, Hkv = c.ap.n_kv_heads, d = c.ap.head_dim, dv = c.ap.value_dim;
    const int g = H / Hkv;
    const auto hooks = reference::shaw_hooks<mp50>(c.sp, c.ap, c.tq, c.tk, to_real<mp50>(c.q),
                                                   to_real<mp50>(c.rel_k), to_real<mp50>(c.rel_v));
    const auto q = to_real<mp50>(c.q), k = to_real<mp50>(c.k), v = to_real<mp50>(c.v);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int h = 0; h < H; ++h) {
      const auto r = reference::attention_head<mp50>(
          c.ap, {}, h, reference::attention_slice(q, c.tq, H, d, h),
          reference::attention_slice(k, c.tk, Hkv, d, h / g),
          reference::attention_slice(v, c.tk, Hkv, dv, h / g), hooks);
      for (std::int64_t i = 0; i < c.tq; ++i) {
        std::vector<double> sens(static_cast<std::size_t>(c.tk));
        std::vector<int> row(static_cast<std::size_t>(c.tk));
        for (std::int64_t j = 0; j < c.tk; ++j) {
          row[j] = reference::shaw_index(c.sp, c.ap.query_offset + i, j);
          double s = 0;
          for (int y = 0; y < d; ++y) {
            const double qy = std::fabs(c.q[(i * H + h) * d + y]);
            s += qy * (std::fabs(c.k[(j * Hkv + h / g) * d + y]) +
                       std::fabs(c.rel_k[row[j] * d + y]));
          }
          sens[j] = scale * s;
          const double p = static_cast<double>(r.probs(i, j));
          const double pg = got.probs[(static_cast<std::size_t>(h) * c.tq + i) * c.tk + j];
          // probs: cond p_ij (1 + S_ij + sum p S), checked loosely here, tightly by golden
          if (!(std::fabs(pg - p) <= 1e-4 * (p + 1e-3))) {
            RC_FAIL(describe_close("probs head " + std::to_string(h), pg, p, 1e-4 * (p + 1e-3)));
          }
        }
        for (int x = 0; x < dv; ++x) {
          const double o = static_cast<double>(r.out(i, x));
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < c.tk; ++j) {
            const double pij = static_cast<double>(r.probs(i, j));
            if (pij == 0) continue;
            const double vj = c.v[(j * Hkv + h / g) * dv + x], av = c.rel_v[row[j] * dv + x];
            a += pij * (std::fabs(vj) + std::fabs(av));
            b += pij * std::fabs(vj + av - o) * sens[j];
          }
          const double bound = optimized::kShawMaxError * 0x1p-23 * (a + b);
          const double out = got.out[(i * H + h) * dv + x];
          const double err = std::fabs(out - o);
          if (bound > 0) worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            RC_FAIL(describe_close("head " + std::to_string(h) + " query " + std::to_string(i) +
                                       " channel " + std::to_string(x),
                                   out, o, bound));
          }
        }
      }
    }
}

TEST(ShawOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const ShawCase c = *gen_shaw_case(*rc::gen::element<std::int64_t>(8, 24, 72), 16, true);
    expect_within_oracle_bound(c, worst);
  });
  std::printf("ShawOptimized measured max error: %.4f of kShawMaxError\n", worst);
}

// Rows longer than two key chunks (kAttentionKeyTile keys each), at most 3 queries: the
// per-slot weights are rescaled with the accumulator across chunks.
TEST(ShawOptimized, MatchesOracleAcrossKeyChunks) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const std::int64_t t = 2 * optimized::kAttentionKeyTile;
    const ShawCase c = *gen_shaw_case(t + 40, 6, true, t + 1, 3);
    expect_within_oracle_bound(c, worst);
  });
  std::printf("ShawOptimized (key chunks) measured max error: %.4f of kShawMaxError\n", worst);
}

RC_GTEST_PROP(ShawOptimized, IdenticalBitsForAnyThreadCount, ()) {
  ShawCase c = *gen_shaw_case(48, 8);
  if (c.ap.n_heads < 2 && c.tq <= optimized::kAttentionQueryTile) {  // at least two tasks
    c.tk += optimized::kAttentionQueryTile;
    c.tq += optimized::kAttentionQueryTile;
    c.ap.query_offset = c.tk - c.tq;
    c.q = *gen_dyadic_vector(static_cast<int>(c.tq * c.ap.n_heads * c.ap.head_dim), 12);
    c.k = *gen_dyadic_vector(static_cast<int>(c.tk * c.ap.n_kv_heads * c.ap.head_dim), 12);
    c.v = *gen_dyadic_vector(static_cast<int>(c.tk * c.ap.n_kv_heads * c.ap.value_dim), 12);
  }
  omp_set_num_threads(1);
  const auto one = run_optimized(c);
  for (int t : {2, 3}) {
    omp_set_num_threads(t);
    const auto many = run_optimized(c);
    RC_ASSERT(same_bits(one.out, many.out));
    RC_ASSERT(same_bits(one.probs, many.probs));
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(ShawOptimized, RejectsBadArguments) {
  auto expect_message = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  AttentionParams ap;
  ap.head_dim = ap.value_dim = 2;
  const std::vector<float> x(2), rk(10);
  std::vector<float> out(2);
  expect_message([&] { optimized::shaw_forward({0}, ap, {}, 1, 1, rk, rk, x, x, x, out); },
                 "max_relative_position must be > 0 (got 0)");
  expect_message(
      [&] {
        optimized::shaw_forward({2}, ap, {}, 1, 1, std::vector<float>(8), rk, x, x, x, out);
      },
      "ShawRelative: rel_k must have (2K + 1) * head_dim = 10 entries (got 8)");
  expect_message([&] { optimized::shaw_index_table({2}, 1, 1, -1); },
                 "shaw_index_table: query_offset must be >= 0 (got -1)");
  expect_message(
      [&] {
        optimized::ShawRelative({2}, ap, 1, 1, x, rk, rk, optimized::ShawIndexTable{0, {7}});
      },
      "ShawRelative: index rows must lie in [0, 2K] (got 7)");
}

// ---- golden
// -----------------------------------------------------------------------------------------

TEST(ShawGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("shaw", 7); }
TEST(ShawGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("shaw"); }
TEST(ShawGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught("shaw", [](const std::string& id, const std::string& mistake) {
    if (id.find("_invalid_") != std::string::npos) return mistake != "sign-flipped";
    // Without a query offset (self-attention over the same tokens) no-offset changes nothing.
    static const std::regex has_offset("_o[1-9][0-9]*_");
    return mistake == "no-offset" && !std::regex_search(id, has_offset);
  });
}
TEST(ShawGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("shaw", "shaw_enc_k20_h2_d32_t48_f32.json");
}
TEST(ShawGolden, VerifyFailsTheNegativeControlOnlyForASignFlippedEngine) {
  expect_negative_controls_fail_only_for("shaw", "sign-flipped");
}
TEST(ShawGolden, OutputConditionCountsBothRelativeTerms) {
  // The generator's condition scale of out must be the contract's, recomputed here from the
  // case's own inputs: A_ic = sum_j p_ij (|v_jc| + |aV_rc|), B_ic = sum_j p_ij |v_jc + aV_rc -
  // o_ic| S_ij with S_ij = scale (sum |q k| + sum |q aK|). A budget without a relative term
  // would be too small for engines that compute it (golden/schemes/shaw/shaw_golden.cpp, "Budgets").
  int n = 0;
  for_each_golden_case("shaw", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (lc.spec.result != "valid") return;
    const auto it = std::find_if(lc.spec.expected.begin(), lc.spec.expected.end(),
                                 [](const golden::TensorSpec& t) { return t.name == "out"; });
    ASSERT_NE(it, lc.spec.expected.end());
    const auto& g = lc.golden;
    const auto q = golden::tensor_to_f64(g.at("q")), k = golden::tensor_to_f64(g.at("k")),
               v = golden::tensor_to_f64(g.at("v")),
               rk = golden::tensor_to_f64(g.at("relations_keys")),
               rv = golden::tensor_to_f64(g.at("relations_values")),
               p = golden::tensor_to_f64(g.at("probs")), o = golden::tensor_to_f64(g.at(it->exact)),
               cond = golden::tensor_to_f64(g.at(it->cond));
    const AttentionParams ap = golden::attention_params_from_manifest(lc.spec.manifest);
    const ShawParams sp{lc.spec.manifest.at("params").at("max_relative_position").get<int>()};
    const std::int64_t tq = g.at("q").shape[0], tk = g.at("k").shape[0];
    const int H = ap.n_heads, Hkv = ap.n_kv_heads, d = ap.head_dim, dv = ap.value_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hkv);
      for (std::int64_t i = 0; i < tq; ++i) {
        std::vector<double> sens(static_cast<std::size_t>(tk));
        for (std::int64_t j = 0; j < tk; ++j) {
          const int r = reference::shaw_index(sp, ap.query_offset + i, j);
          double s = 0;
          for (int y = 0; y < d; ++y) {
            const double qy = std::fabs(q[(i * H + h) * d + y]);
            s += qy * (std::fabs(k[(j * Hkv + hk) * d + y]) + std::fabs(rk[r * d + y]));
          }
          sens[j] = scale * s;
        }
        for (int c = 0; c < dv; ++c) {
          const std::size_t oi = static_cast<std::size_t>((i * H + h) * dv + c);
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < tk; ++j) {
            const int r = reference::shaw_index(sp, ap.query_offset + i, j);
            const double pij = p[(static_cast<std::size_t>(h) * tq + i) * tk + j];
            const double vj = v[(j * Hkv + hk) * dv + c], av = rv[r * dv + c];
            a += pij * (std::fabs(vj) + std::fabs(av));
            b += pij * std::fabs(vj + av - o[oi]) * sens[j];
          }
          // probs read back in the target dtype: agreement to its precision
          ASSERT_NEAR(cond[oi], a + b, 0.02 * (a + b)) << lc.spec.id << " out[" << oi << "]";
        }
      }
    }
    ++n;
  });
  EXPECT_GE(n, 6);
}
TEST(ShawGolden, PipelinesPassTheirProfiles) {
  expect_pipelines_pass_their_profiles("shaw", 0.25, {"probs", "out"});
}

}  // namespace
}  // namespace posenc::properties
