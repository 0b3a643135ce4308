// Transformer-XL properties: the rel-shift equals direct indexing by distance on every visible
// key (qlen != klen, any memory), segment-by-segment processing with memory equals one pass,
// clamp_len saturates distances, same_length is a window of mem_len keys, the spec's index and
// mems-slicing facts, the fused optimized kernel against the oracle, and the golden catalog.
// Formula: see reference/transformer_xl.hpp.
#include "optimized/transformer_xl.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/scalar.hpp"
#include "reference/transformer_xl.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionParams;
using reference::TransformerXlParams;
using reference::TxlInputs;

std::vector<double> scaled(std::vector<double> x, double s) {
  for (double& v : x) v *= s;
  return x;
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& x) {
  return std::vector<Real>(x.begin(), x.end());
}

template <class Real>
TxlInputs<Real> to_real(const TxlInputs<double>& x) {
  return {to_real<Real>(x.q), to_real<Real>(x.k),      to_real<Real>(x.v),
          to_real<Real>(x.u), to_real<Real>(x.v_bias), to_real<Real>(x.w_r)};
}

TxlInputs<float> to_float(const TxlInputs<double>& x) { return to_real<float>(x); }

struct TxlCase {
  TransformerXlParams tp;
  std::int64_t qlen = 0, klen = 0;
  TxlInputs<double> x;
};

/// Inputs for tokens [0, n_tokens) (q, k, v per token) and the shared weights.
TxlInputs<double> gen_inputs(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen) {
  const int hd = p.n_heads * p.d_head;
  TxlInputs<double> x;
  x.q = scaled(*gen_dyadic_vector(static_cast<int>(qlen * hd), 10), 0.5);
  x.k = scaled(*gen_dyadic_vector(static_cast<int>(klen * hd), 10), 0.5);
  x.v = *gen_dyadic_vector(static_cast<int>(klen * hd), 10);
  x.u = scaled(*gen_dyadic_vector(hd, 10), 0.5);
  x.v_bias = scaled(*gen_dyadic_vector(hd, 10), 0.5);
  x.w_r = scaled(*gen_dyadic_vector(hd * p.d_model, 10), 0.25);
  return x;
}

rc::Gen<TransformerXlParams> gen_params(int max_heads = 3, int max_d = 8, int max_dm = 16,
                                        std::int64_t max_clamp = 24) {
  return rc::gen::exec([=] {
    TransformerXlParams p;
    p.n_heads = *rc::gen::inRange(1, max_heads + 1);
    p.d_head = *rc::gen::inRange(1, max_d + 1);
    p.d_model = 2 * *rc::gen::inRange(1, max_dm / 2 + 1);
    p.clamp_len = *rc::gen::oneOf(rc::gen::just<std::int64_t>(0),
                                  rc::gen::inRange<std::int64_t>(1, max_clamp + 1));
    p.mem_len = *rc::gen::inRange<std::int64_t>(1, 40);
    p.same_length = *rc::gen::arbitrary<bool>();
    return p;
  });
}

/// qlen in [1, max_q], mlen in [0, max_m]: qlen != klen whenever mlen > 0.
rc::Gen<TxlCase> gen_case(std::int64_t max_q = 8, std::int64_t max_m = 12, int max_d = 8) {
  return rc::gen::exec([=] {
    TxlCase c;
    c.tp = *gen_params(3, max_d);
    c.qlen = *rc::gen::inRange<std::int64_t>(1, max_q + 1);
    c.klen = c.qlen + *rc::gen::inRange<std::int64_t>(0, max_m + 1);
    c.x = gen_inputs(c.tp, c.qlen, c.klen);
    RC_CLASSIFY(c.klen > c.qlen, "with memory");
    RC_CLASSIFY(c.tp.clamp_len > 0 && c.klen - 1 > c.tp.clamp_len, "clamp reached");
    return c;
  });
}

// ---- reference -------------------------------------------------------------------------------

POSENC_TYPED_PROP(TransformerXlReference, RelShiftEqualsDirectIndexing) {
  const TxlCase c = *gen_case();
  const TxlInputs<Real> x = to_real<Real>(c.x);
  const auto shifted = reference::txl_scores<Real>(c.tp, x, c.qlen, c.klen, true);
  const auto direct = reference::txl_scores<Real>(c.tp, x, c.qlen, c.klen, false);
  const Real tol = Real(8.0 * (c.tp.d_head + c.tp.d_model) * eps_of<Real>());
  for (std::size_t e = 0; e < shifted.size(); ++e) {
    rc_assert_close(shifted[e], direct[e], tol, "score " + std::to_string(e));
  }
}

TEST(TransformerXlReferenceSpot, RelShiftIsTheBufferTrick) {
  // qlen 2, klen 3: [[a0 a1 a2] [b0 b1 b2]] padded [0 a0 a1 a2 0 b0 b1 b2], first qlen dropped.
  const std::vector<int> raw = {10, 11, 12, 20, 21, 22};
  EXPECT_EQ(reference::txl_rel_shift(raw, 2, 3), (std::vector<int>{11, 12, 0, 20, 21, 22}));
  // Entry (i, j) reads row j + qlen - 1 - i for visible keys (j <= mlen + i, mlen = 1).
  const auto s = reference::txl_rel_shift(raw, 2, 3);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j <= 1 + i; ++j) EXPECT_EQ(s[i * 3 + j], raw[i * 3 + (j + 2 - 1 - i)]);
  }
}

TEST(TransformerXlReferenceSpot, PositionsDescendClampAndMask) {
  TransformerXlParams p{1, 2, 4, 3, 0, false};
  // qlen 2, klen 5 (mlen 3): deltas 3 2 1 0 | 4 3 2 1 0, clamp_len 3, future key masked.
  EXPECT_EQ(reference::txl_position_matrix(p, 2, 5),
            (std::vector<std::int32_t>{3, 2, 1, 0, -1, 3, 3, 2, 1, 0}));
  EXPECT_EQ(reference::txl_table_position(p, 5, 0), 3);  // row 0 holds klen - 1 = 4, clamped
  EXPECT_EQ(reference::txl_table_position(p, 5, 4), 0);
  p.clamp_len = 0;  // no clamp
  EXPECT_EQ(reference::txl_table_position(p, 5, 0), 4);
  p.clamp_len = -1;
  EXPECT_EQ(reference::txl_clamp(p, 1000000), 1000000);
  EXPECT_EQ(reference::txl_distance(3, 1, 0), 4);  // query absolute 4 minus key 0
}

TEST(TransformerXlReferenceSpot, SinusoidHalvesAndFrequencies) {
  const TransformerXlParams p{1, 1, 4, 0, 0, false};
  // omega_0 = 1, omega_1 = 10000^(-2/4) = 0.01; [sin | cos] concatenated.
  const auto r0 = reference::txl_sinusoid<double>(p, 0);
  EXPECT_EQ(r0, (std::vector<double>{0, 0, 1, 1}));
  const auto r = reference::txl_sinusoid<mp50>(p, 1000);
  EXPECT_NEAR(static_cast<double>(r[0]), std::sin(1000.0), 1e-15);
  EXPECT_NEAR(static_cast<double>(r[1]), std::sin(10.0), 1e-15);
  EXPECT_NEAR(static_cast<double>(r[2]), std::cos(1000.0), 1e-15);
  EXPECT_NEAR(static_cast<double>(r[3]), std::cos(10.0), 1e-15);
}

TEST(TransformerXlReferenceSpot, MemsSlicing) {
  // end = mlen + max(0, qlen - ext_len), beg = max(0, end - mem_len).
  EXPECT_EQ(reference::txl_mems_range(150, 0, 150, 16),
            (std::pair<std::int64_t, std::int64_t>{16, 166}));
  EXPECT_EQ(reference::txl_mems_range(4, 2, 0, 8), (std::pair<std::int64_t, std::int64_t>{2, 6}));
  EXPECT_EQ(reference::txl_mems_range(100, 0, 0, 8), (std::pair<std::int64_t, std::int64_t>{0, 8}));
  EXPECT_EQ(reference::txl_mems_range(4, 10, 3, 8), (std::pair<std::int64_t, std::int64_t>{0, 3}));
}

RC_GTEST_PROP(TransformerXlReference, SameLengthIsAWindowOfMemLen, ()) {
  TransformerXlParams p = *gen_params();
  p.same_length = *rc::gen::arbitrary<bool>();
  const std::int64_t qlen = *rc::gen::inRange<std::int64_t>(0, 30);
  const std::int64_t klen = qlen + *rc::gen::inRange<std::int64_t>(0, 60);
  const AttentionParams ap = reference::txl_attention_params(p, qlen, klen);
  for (std::int64_t i = 0; i < qlen; ++i) {
    for (std::int64_t j = 0; j < klen; ++j) {
      RC_ASSERT(reference::txl_visible_literal(p, qlen, klen, i, j) ==
                reference::attention_visible(ap, {}, klen, i, j));
    }
  }
}

POSENC_TYPED_PROP(TransformerXlReference, ClampLenSaturatesDistances) {
  TxlCase c = *gen_case(6, 20);
  c.tp.clamp_len = *rc::gen::inRange<std::int64_t>(1, std::max<std::int64_t>(2, c.klen));
  const TxlInputs<Real> x = to_real<Real>(c.x);
  const std::int64_t mlen = c.klen - c.qlen;
  for (int h = 0; h < c.tp.n_heads; ++h) {
    for (std::int64_t i = 0; i < c.qlen; ++i) {
      for (std::int64_t j = 0; j <= mlen + i; ++j) {
        if (mlen + i - j < c.tp.clamp_len) continue;
        // The key at distance exactly clamp_len reads the same row: bit-identical BD.
        const Real at_clamp = reference::txl_bd_row(
            c.tp, x, h, i, reference::txl_r_head<Real>(c.tp, x.w_r, h, c.tp.clamp_len));
        RC_ASSERT(reference::txl_bd<Real>(c.tp, x, c.qlen, c.klen, h, i, j) == at_clamp);
      }
    }
  }
}

POSENC_TYPED_PROP(TransformerXlReference, SegmentsWithMemoryEqualOnePass) {
  TransformerXlParams p = *gen_params(2, 6, 8);
  p.same_length = false;
  const std::int64_t total = *rc::gen::inRange<std::int64_t>(2, 20);
  p.mem_len = total + *rc::gen::inRange<std::int64_t>(0, 4);  // large enough: nothing evicted
  const TxlInputs<double> all = gen_inputs(p, total, total);
  const TxlInputs<Real> xa = to_real<Real>(all);
  const auto one = reference::txl_forward<Real>(p, total, total, xa);
  const int hd = p.n_heads * p.d_head;
  std::int64_t start = 0, mlen = 0;
  std::vector<Real> mem_k, mem_v;
  while (start < total) {
    const std::int64_t qlen = std::min<std::int64_t>(total - start, *rc::gen::inRange(1, 8));
    TxlInputs<Real> x = xa;
    x.q.assign(xa.q.begin() + start * hd, xa.q.begin() + (start + qlen) * hd);
    x.k = mem_k;
    x.v = mem_v;
    x.k.insert(x.k.end(), xa.k.begin() + start * hd, xa.k.begin() + (start + qlen) * hd);
    x.v.insert(x.v.end(), xa.v.begin() + start * hd, xa.v.begin() + (start + qlen) * hd);
    const auto out = reference::txl_forward<Real>(p, qlen, mlen + qlen, x);
    const Real tol = Real(64.0 * (p.d_head + p.d_model + total) * eps_of<Real>());
    for (std::int64_t e = 0; e < qlen * hd; ++e) {
      rc_assert_close(
          out[e], one[start * hd + e], tol,
          "token " + std::to_string(start + e / hd) + " element " + std::to_string(e % hd));
    }
    const auto [beg, end] = reference::txl_mems_range(p.mem_len, 0, mlen, qlen);
    mem_k.assign(x.k.begin() + beg * hd, x.k.begin() + end * hd);
    mem_v.assign(x.v.begin() + beg * hd, x.v.begin() + end * hd);
    mlen = end - beg;
    start += qlen;
  }
}

TEST(TransformerXlReferenceSpot, RejectsBadArguments) {
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
        reference::txl_check({0, 4, 8, 0, 0, false});
      },
      "txl_check: n_heads must be positive (got 0)");
  expect_message(
      [] {
        reference::txl_check({1, 0, 8, 0, 0, false});
      },
      "txl_check: d_head must be positive (got 0)");
  expect_message(
      [] {
        reference::txl_check({1, 4, 7, 0, 0, false});
      },
      "txl_check: d_model must be positive and even (got 7)");
  expect_message(
      [] {
        reference::txl_check({1, 4, 8, 0, -1, false});
      },
      "txl_check: mem_len must be >= 0 (got -1)");
  expect_message(
      [] {
        reference::txl_check({1, 4, 8, 0, 0, true});
      },
      "same_length needs mem_len > 0");
  expect_message(
      [] {
        reference::txl_attention_params({1, 4, 8, 0, 0, false}, 3, 2);
      },
      "txl_attention_params: klen must be >= qlen (klen = mlen + qlen) (got 2)");
  expect_message([] { reference::txl_mems_range(4, -1, 0, 1); },
                 "txl_mems_range: ext_len must be >= 0 (got -1)");
  TxlInputs<double> x;
  x.q.assign(8, 0.0);
  expect_message(
      [&] {
        reference::txl_forward<double>({1, 4, 8, 0, 0, false}, 2, 2, x);
      },
      "txl_forward: k must have 8 elements (got 0)");
}

// ---- optimized -------------------------------------------------------------------------------

std::vector<float> run_optimized(const TxlCase& c) {
  const TxlInputs<float> x = to_float(c.x);
  std::vector<float> out(static_cast<std::size_t>(c.qlen * c.tp.n_heads * c.tp.d_head));
  optimized::transformer_xl_forward(c.tp, c.qlen, c.klen, x.q, x.k, x.v, x.u, x.v_bias, x.w_r, out);
  return out;
}

/// |r|_c(pos) = sum_m |W_r[c, m] R_m(pos)| for every head channel c (hd = H * d_head), in
/// double: the scale of the float r table's own rounding (optimized/transformer_xl.hpp).
std::vector<double> r_abs_row(const TransformerXlParams& p, const std::vector<double>& w_r,
                              std::int64_t pos) {
  const int hd = p.n_heads * p.d_head, dm = p.d_model, half = dm / 2;
  std::vector<double> rm(static_cast<std::size_t>(dm));
  for (int m = 0; m < half; ++m) {
    const double a = static_cast<double>(pos) * std::pow(10000.0, -2.0 * m / dm);
    rm[m] = std::fabs(std::sin(a));
    rm[half + m] = std::fabs(std::cos(a));
  }
  std::vector<double> out(static_cast<std::size_t>(hd), 0.0);
  for (int c = 0; c < hd; ++c) {
    for (int m = 0; m < dm; ++m) out[c] += std::fabs(w_r[static_cast<std::size_t>(c) * dm + m]) * rm[m];
  }
  return out;
}

TEST(TransformerXlOptimized, MatchesOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    TxlCase c = *rc::gen::exec([] {
      TxlCase c;
      c.tp = *gen_params(2, 16, 32, 40);
      c.qlen = *rc::gen::element<std::int64_t>(1, 7, 33);
      c.klen = c.qlen + *rc::gen::element<std::int64_t>(0, 5, 50);
      c.x = gen_inputs(c.tp, c.qlen, c.klen);
      return c;
    });
    const auto out = run_optimized(c);
    const TransformerXlParams& p = c.tp;
    const AttentionParams ap = reference::txl_attention_params(p, c.qlen, c.klen);
    const TxlInputs<mp50> x = to_real<mp50>(c.x);
    const auto hooks = reference::txl_hooks<mp50>(p, x, c.qlen, c.klen);
    const int H = p.n_heads, d = p.d_head;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::map<std::int64_t, std::vector<double>> r_abs;  // by position
    for (std::int64_t pos = 0; pos < c.klen; ++pos) {
      r_abs[reference::txl_clamp(p, pos)] = r_abs_row(p, c.x.w_r, reference::txl_clamp(p, pos));
    }
    for (int h = 0; h < H; ++h) {
      const auto r = reference::attention_head<mp50>(
          ap, {}, h, reference::attention_slice(x.q, c.qlen, H, d, h),
          reference::attention_slice(x.k, c.klen, H, d, h),
          reference::attention_slice(x.v, c.klen, H, d, h), hooks);
      for (std::int64_t i = 0; i < c.qlen; ++i) {
        std::vector<double> sens(static_cast<std::size_t>(c.klen), 0.0);
        for (std::int64_t j = 0; j < c.klen; ++j) {
          if (r.probs(i, j) == 0) continue;
          double s = 0;
          for (int y = 0; y < d; ++y)
            s += std::fabs(c.x.q[(i * H + h) * d + y] * c.x.k[(j * H + h) * d + y]);
          const double uk = static_cast<double>(reference::txl_uk(p, x, h, j));
          // The BD term is a float dot product of fl(scale (q_i + v)) with the float r table:
          // its scale is sum_c |q_ic + v_c| |r|_c(pos), not |BD| (contract).
          const auto& ra = r_abs.at(reference::txl_clamp(p, c.klen - c.qlen + i - j));
          double bd = 0;
          for (int y = 0; y < d; ++y) {
            bd += std::fabs(c.x.q[(i * H + h) * d + y] + c.x.v_bias[h * d + y]) * ra[h * d + y];
          }
          sens[j] = scale * (s + std::fabs(uk) + bd);
        }
        for (int y = 0; y < d; ++y) {
          const double o = static_cast<double>(r.out(i, y));
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < c.klen; ++j) {
            const double pij = static_cast<double>(r.probs(i, j));
            if (pij == 0) continue;
            const double vj = c.x.v[(j * H + h) * d + y];
            a += pij * std::fabs(vj);
            b += pij * std::fabs(vj - o) * sens[j];
          }
          const double bound = optimized::kTransformerXlMaxError * 0x1p-23 * (a + b);
          const double got = out[(i * H + h) * d + y];
          const double err = std::fabs(got - o);
          if (bound > 0) worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            RC_FAIL(describe_close("head " + std::to_string(h) + " query " + std::to_string(i) +
                                       " channel " + std::to_string(y),
                                   got, o, bound));
          }
        }
      }
    }
  });
  std::printf("TransformerXlOptimized measured max error: %.4f of kTransformerXlMaxError\n", worst);
}

RC_GTEST_PROP(TransformerXlOptimized, PositionsMatchReference, ()) {
  const TxlCase c = *gen_case(10, 30, 4);
  const TxlInputs<float> x = to_float(c.x);
  const optimized::TransformerXlBias b(c.tp, c.qlen, c.klen, x.q, x.k, x.u, x.v_bias, x.w_r);
  const auto want = reference::txl_position_matrix(c.tp, c.qlen, c.klen);
  const AttentionParams ap = reference::txl_attention_params(c.tp, c.qlen, c.klen);
  for (std::int64_t i = 0; i < c.qlen; ++i) {
    for (std::int64_t j = 0; j < c.klen; ++j) {
      if (!reference::attention_visible(ap, {}, c.klen, i, j)) continue;
      RC_ASSERT(b.position(i, j) == want[i * c.klen + j]);
    }
  }
  RC_ASSERT(b.n_positions() ==
            (c.tp.clamp_len > 0 ? std::min(c.klen - 1, c.tp.clamp_len) + 1 : c.klen));
}

RC_GTEST_PROP(TransformerXlOptimized, IdenticalBitsForAnyThreadCount, ()) {
  TxlCase c = *gen_case(4, 24, 8);
  c.qlen += optimized::kAttentionQueryTile;  // at least two query blocks
  c.klen += optimized::kAttentionQueryTile;
  c.x = gen_inputs(c.tp, c.qlen, c.klen);
  omp_set_num_threads(1);
  const auto one = run_optimized(c);
  for (int t : {2, 3, 5}) {
    omp_set_num_threads(t);
    const auto many = run_optimized(c);
    RC_ASSERT(same_bits(one, many));
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(TransformerXlOptimized, RejectsBadArguments) {
  auto expect_message = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const TransformerXlParams p{2, 4, 8, 0, 0, false};
  std::vector<float> q(2 * 8), k(3 * 8), u(8), w(8 * 8), out(3);
  expect_message([&] { optimized::TransformerXlBias(p, 2, 3, q, k, u, u, std::vector<float>(63)); },
                 "TransformerXlBias: r_net must have 64 elements (got 63)");
  expect_message([&] { optimized::TransformerXlBias(p, 2, 3, q, k, std::vector<float>(7), u, w); },
                 "TransformerXlBias: r_w_bias must have 8 elements (got 7)");
  expect_message([&] { optimized::TransformerXlBias(p, 4, 3, q, k, u, u, w); },
                 "TransformerXlBias: klen must be >= qlen");
  expect_message([&] { optimized::transformer_xl_forward(p, 2, 3, q, k, k, u, u, w, out); },
                 "attention_forward: out must have 16 elements (got 3)");
  expect_message([&] { optimized::txl_r_table(p, 2, std::vector<float>(5)); },
                 "txl_r_table: r_net must have H * d_head * d_model elements (got 5)");
}

/// Optimized kernel vs a naive float implementation that materialises the relative terms
/// (BD_raw [H, T, T] through the rel-shift, full score matrix): one run, printed ratio. Run by
/// hand: --gtest_also_run_disabled_tests --gtest_filter=*SpeedVsNaive*.
TEST(TransformerXlOptimized, DISABLED_SpeedVsNaiveAtT2048) {
  TxlCase c;
  c.tp = {4, 64, 256, 1000, 2048, false};
  c.qlen = c.klen = 2048;
  const int H = c.tp.n_heads, d = c.tp.d_head, hd = H * d, dm = c.tp.d_model;
  TxlInputs<float> x;
  auto fill = [](std::size_t n, float s, unsigned seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) {
      seed = seed * 1103515245u + 12345u;
      v[i] = s * (static_cast<float>((seed >> 8) & 0xffff) / 65536.0f - 0.5f);
    }
    return v;
  };
  const std::int64_t T = c.qlen;
  x.q = fill(T * hd, 1, 1);
  x.k = fill(T * hd, 1, 2);
  x.v = fill(T * hd, 1, 3);
  x.u = fill(hd, 1, 4);
  x.v_bias = fill(hd, 1, 5);
  x.w_r = fill(static_cast<std::size_t>(hd) * dm, 0.5, 6);
  std::vector<float> out(T * hd), naive(T * hd);
  const auto t0 = std::chrono::steady_clock::now();
  optimized::transformer_xl_forward(c.tp, T, T, x.q, x.k, x.v, x.u, x.v_bias, x.w_r, out);
  const auto t1 = std::chrono::steady_clock::now();
  {
    // Naive: pos_emb [T, dm] (descending, clamped), r = r_net(pos_emb) [T, hd], BD_raw and AC
    // [H, T, T], rel-shift, softmax, p @ v.
    const std::vector<float> inv = [&] {
      std::vector<float> w(dm / 2);
      for (int k = 0; k < dm / 2; ++k) w[k] = 1.0f / std::pow(10000.0f, 2.0f * k / dm);
      return w;
    }();
    std::vector<float> r(T * hd);
    for (std::int64_t row = 0; row < T; ++row) {
      const float pos = static_cast<float>(std::min<std::int64_t>(T - 1 - row, c.tp.clamp_len));
      std::vector<float> e(dm);
      for (int k = 0; k < dm / 2; ++k) {
        e[k] = std::sin(pos * inv[k]);
        e[dm / 2 + k] = std::cos(pos * inv[k]);
      }
      for (int o = 0; o < hd; ++o) {
        float s = 0;
        for (int m = 0; m < dm; ++m) s += x.w_r[o * dm + m] * e[m];
        r[row * hd + o] = s;
      }
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int h = 0; h < H; ++h) {
      std::vector<float> bd_raw(T * T), sc(T * T);
      for (std::int64_t i = 0; i < T; ++i) {
        for (std::int64_t row = 0; row < T; ++row) {
          float s = 0;
          for (int y = 0; y < d; ++y)
            s += (x.q[(i * H + h) * d + y] + x.v_bias[h * d + y]) * r[row * hd + h * d + y];
          bd_raw[i * T + row] = s;
        }
      }
      const auto bd = reference::txl_rel_shift(bd_raw, T, T);
      for (std::int64_t i = 0; i < T; ++i) {
        float mx = -INFINITY;
        for (std::int64_t j = 0; j < T; ++j) {
          float s = 0;
          for (int y = 0; y < d; ++y)
            s += (x.q[(i * H + h) * d + y] + x.u[h * d + y]) * x.k[(j * H + h) * d + y];
          sc[i * T + j] = j > i ? -INFINITY : (s + bd[i * T + j]) * scale;
          mx = std::max(mx, sc[i * T + j]);
        }
        float sum = 0;
        for (std::int64_t j = 0; j < T; ++j) sum += (sc[i * T + j] = std::exp(sc[i * T + j] - mx));
        for (int y = 0; y < d; ++y) {
          float o = 0;
          for (std::int64_t j = 0; j < T; ++j) o += sc[i * T + j] * x.v[(j * H + h) * d + y];
          naive[(i * H + h) * d + y] = o / sum;
        }
      }
    }
  }
  const auto t2 = std::chrono::steady_clock::now();
  double diff = 0;
  for (std::size_t e = 0; e < out.size(); ++e)
    diff = std::max(diff, static_cast<double>(std::fabs(out[e] - naive[e])));
  const double opt_s = std::chrono::duration<double>(t1 - t0).count();
  const double naive_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf(
      "T=2048 H=4 d_head=64 d_model=256: optimized %.3f s, naive %.3f s, ratio %.1fx, "
      "max |diff| %.3g\n",
      opt_s, naive_s, naive_s / opt_s, diff);
  EXPECT_LT(diff, 1e-3);
}

// ---- golden ----------------------------------------------------------------------------------

TEST(TransformerXlGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("transformer_xl", 5); }
TEST(TransformerXlGolden, OptimizedPassesVerify) {
  expect_optimized_passes_verify("transformer_xl");
}
TEST(TransformerXlGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught(
      "transformer_xl", [](const std::string& id, const std::string& mistake) {
        if (id.find("_invalid_") != std::string::npos) return mistake != "ascending-positions";
        // Only the evaluation-style case has distances past clamp_len; the first segment has
        // no memory to drop.
        if (mistake == "memory-dropped") return id.find("_m0_") != std::string::npos;
        return mistake == "clamp-ignored" && id.find("_m1100_") == std::string::npos;
      });
}
TEST(TransformerXlGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("transformer_xl", "transformer_xl_wt103s_h4_d16_dm64_mem150_m150_q16_clamp1000_f32.json");
}
TEST(TransformerXlGolden, VerifyFailsTheNegativeControlOnlyForAnAscendingEngine) {
  expect_negative_controls_fail_only_for("transformer_xl", "ascending-positions");
}
TEST(TransformerXlGolden, PipelinesPassTheirProfiles) {
  expect_pipelines_pass_their_profiles("transformer_xl", 0.25, {"probs", "out"});
}

}  // namespace
}  // namespace posenc::properties
