// Model-plan pieces in the attention core: Llama 4's chunked attention mask and
// GPT-OSS's learned sinks. Reference properties over float, double and mp50; the tiled kernel
// and attention_probs against the mp50 oracle. Formula: reference/attention.hpp.
#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "optimized/attention.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "reference/attention.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionMask;
using reference::AttentionParams;
using reference::AttentionScale;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Case {
  AttentionParams p;
  std::int64_t tq = 0, tk = 0;
  std::vector<double> q, k, v;
};

/// Queries at the end of the keys (query_offset = Tk - Tq), causal unless `any_causal`;
/// `chunked` draws a chunk size, `sinks` a sink logit per head (sometimes -inf).
rc::Gen<Case> gen_case(int max_tokens, bool chunked, bool sinks, bool any_causal = false) {
  return rc::gen::exec([=] {
    Case c;
    c.p.n_kv_heads = *rc::gen::inRange(1, 3);
    c.p.n_heads = c.p.n_kv_heads * *rc::gen::inRange(1, 3);
    c.p.head_dim = *rc::gen::inRange(1, 33);
    c.p.value_dim = *rc::gen::inRange(1, 17);
    c.tk = *rc::gen::inRange<std::int64_t>(1, max_tokens + 1);
    c.tq = *rc::gen::inRange<std::int64_t>(1, c.tk + 1);
    c.p.causal = any_causal ? *rc::gen::arbitrary<bool>() : true;
    c.p.query_offset = c.tk - c.tq;
    if (chunked)
      c.p.chunk = *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(1, 9),
                                  rc::gen::inRange<std::int64_t>(1, max_tokens + 2));
    if (sinks) {
      c.p.sinks = *rc::gen::container<std::vector<double>>(
          static_cast<std::size_t>(c.p.n_heads),
          rc::gen::oneOf(rc::gen::map(gen_dyadic(8), [](double x) { return 8 * x; }),
                         rc::gen::just(kNegInf)));
    }
    c.q = *gen_dyadic_vector(static_cast<int>(c.tq * c.p.n_heads * c.p.head_dim), 12);
    c.k = *gen_dyadic_vector(static_cast<int>(c.tk * c.p.n_kv_heads * c.p.head_dim), 12);
    c.v = *gen_dyadic_vector(static_cast<int>(c.tk * c.p.n_kv_heads * c.p.value_dim), 12);
    for (auto& x : c.q) x *= 2;
    for (auto& x : c.k) x *= 2;
    RC_CLASSIFY(c.p.chunk > 0 && c.p.chunk < c.tk, "chunks cut the keys");
    return c;
  });
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

/// Head h of the reference on case c (optionally with other params and hooks).
template <class Real>
reference::AttentionHeadResult<Real> head(const Case& c, const AttentionParams& p, int h,
                                          const reference::AttentionHooks<Real>& hooks = {},
                                          const AttentionMask& m = {}) {
  const int g = p.n_heads / p.n_kv_heads;
  return reference::attention_head<Real>(
      p, m, h, reference::attention_slice(to_real<Real>(c.q), c.tq, p.n_heads, p.head_dim, h),
      reference::attention_slice(to_real<Real>(c.k), c.tk, p.n_kv_heads, p.head_dim, h / g),
      reference::attention_slice(to_real<Real>(c.v), c.tk, p.n_kv_heads, p.value_dim, h / g),
      hooks);
}

// ---- chunked attention -------------------------------------------------------------------------

// The chunk mask is chunk-local causal: key j is visible to the query at position m exactly
// when m - (m mod C) <= j <= m.
POSENC_TYPED_PROP(ChunkedAttentionReference, IsChunkLocalCausal) {
  const Case c = *gen_case(40, true, false);
  const auto r = head<Real>(c, c.p, 0);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    const std::int64_t m = c.p.query_offset + i;
    for (std::int64_t j = 0; j < c.tk; ++j) {
      RC_ASSERT((r.visible[i * c.tk + j] != 0) == (m - m % c.p.chunk <= j && j <= m));
    }
  }
}

// A chunk at least as long as the sequence is causal attention, bit for bit; with any chunk, the
// rows of the first chunk are causal attention's rows, bit for bit.
POSENC_TYPED_PROP(ChunkedAttentionReference, EqualsCausalWithinTheFirstChunk) {
  Case c = *gen_case(40, true, false);
  AttentionParams causal = c.p;
  causal.chunk = 0;
  if (*rc::gen::arbitrary<bool>()) c.p.chunk = c.tk + *rc::gen::inRange<std::int64_t>(0, 5);
  const auto a = head<Real>(c, c.p, 0), b = head<Real>(c, causal, 0);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    if (c.p.query_offset + i >= c.p.chunk) continue;
    for (std::int64_t j = 0; j < c.tk; ++j) RC_ASSERT(a.probs(i, j) == b.probs(i, j));
    for (int x = 0; x < c.p.value_dim; ++x) RC_ASSERT(a.out(i, x) == b.out(i, x));
  }
}

// Each row's probabilities sum to 1 (the query always sees itself), and its output is causal
// attention over its own chunk's keys alone (the keys cut out and the positions restarted).
POSENC_TYPED_PROP(ChunkedAttentionReference, RowIsCausalAttentionOverItsChunk) {
  const Case c = *gen_case(40, true, false);
  const auto r = head<Real>(c, c.p, 0);
  const std::int64_t i = *rc::gen::inRange<std::int64_t>(0, c.tq);
  const std::int64_t m = c.p.query_offset + i, start = m - m % c.p.chunk;
  Real sum = 0;
  for (std::int64_t j = 0; j < c.tk; ++j) sum += r.probs(i, j);
  rc_assert_close(sum, Real(1), Real(8 * c.tk * eps_of<Real>()), "row sum");
  Case alone = c;  // one query at position m - start over keys [start, m]
  AttentionParams p = c.p;
  p.n_heads = p.n_kv_heads = 1;
  p.chunk = 0;
  p.query_offset = m - start;
  alone.tq = 1;
  alone.tk = m - start + 1;
  alone.q.assign(c.q.begin() + i * c.p.n_heads * c.p.head_dim,
                 c.q.begin() + i * c.p.n_heads * c.p.head_dim + c.p.head_dim);
  alone.k.clear();
  alone.v.clear();
  for (std::int64_t j = start; j <= m; ++j) {
    const auto kb = c.k.begin() + j * c.p.n_kv_heads * c.p.head_dim;
    const auto vb = c.v.begin() + j * c.p.n_kv_heads * c.p.value_dim;
    alone.k.insert(alone.k.end(), kb, kb + c.p.head_dim);  // head 0 reads kv head 0
    alone.v.insert(alone.v.end(), vb, vb + c.p.value_dim);
  }
  const auto a = head<Real>(alone, p, 0);
  for (int x = 0; x < c.p.value_dim; ++x) {
    rc_assert_close(r.out(i, x), a.out(0, x), Real(16 * c.tk * eps_of<Real>()),
                    "out channel " + std::to_string(x));
  }
}

// ---- sinks
// ---------------------------------------------------------------------------------------

// A sink is a key with a zero key vector, a zero value and the sink logit as its score, visible
// to every query: attention with the sink equals attention over one more such key (a bias hook
// gives it its logit), the extra key's probability left out.
POSENC_TYPED_PROP(SinkAttentionReference, SinkIsAnExtraZeroValueKey) {
  Case c = *gen_case(24, *rc::gen::arbitrary<bool>(), true, true);
  const int h = *rc::gen::inRange(0, c.p.n_heads);
  const double sink = c.p.sinks[static_cast<std::size_t>(h)];
  const auto a = head<Real>(c, c.p, h);
  Case ext = c;  // key Tk: zero k, zero v; causal and chunks become an explicit mask
  AttentionParams p = c.p;
  p.sinks.clear();
  p.causal = false;
  p.chunk = 0;
  ext.tk = c.tk + 1;
  ext.k.resize(static_cast<std::size_t>(ext.tk * p.n_kv_heads * p.head_dim), 0.0);
  ext.v.resize(static_cast<std::size_t>(ext.tk * p.n_kv_heads * p.value_dim), 0.0);
  AttentionMask m;
  m.allowed.assign(static_cast<std::size_t>(c.tq * ext.tk), 1);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j) m.allowed[i * ext.tk + j] = a.visible[i * c.tk + j];
    m.allowed[i * ext.tk + c.tk] = sink != kNegInf;
  }
  reference::AttentionHooks<Real> hooks;
  const std::int64_t tk = c.tk;
  hooks.bias = [&](int, std::int64_t, std::int64_t j) {
    return j == tk && sink != kNegInf ? Real(sink) : Real(0);
  };
  const auto b = head<Real>(ext, p, h, hooks, m);
  const Real tol = Real(16 * (c.tk + 2) * eps_of<Real>());
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j)
      rc_assert_close(a.probs(i, j), b.probs(i, j), tol,
                      "p(" + std::to_string(i) + "," + std::to_string(j) + ")");
    for (int x = 0; x < p.value_dim; ++x) rc_assert_close(a.out(i, x), b.out(i, x), tol, "out");
  }
}

// sum_j p_ij + exp(s - M) / Z = 1; the row sum is below 1 by a visible amount when the sink's
// mass is; a fully masked row (chunk, padding) gives all its mass to the sink.
POSENC_TYPED_PROP(SinkAttentionReference, SinkMassCompletesTheRow) {
  const Case c = *gen_case(24, *rc::gen::arbitrary<bool>(), true, true);
  const int h = *rc::gen::inRange(0, c.p.n_heads);
  const auto r = head<Real>(c, c.p, h);
  const Real sink = Real(c.p.sinks[static_cast<std::size_t>(h)]);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    std::vector<Real> s(static_cast<std::size_t>(c.tk));
    std::vector<bool> vis(static_cast<std::size_t>(c.tk));
    Real sum = 0;
    for (std::int64_t j = 0; j < c.tk; ++j) {
      s[j] = r.scores(i, j);
      vis[j] = r.visible[i * c.tk + j] != 0;
      sum += r.probs(i, j);
    }
    const Real mass = reference::attention_sink_mass(s, vis, sink);
    rc_assert_close(sum + mass, Real(1), Real(8 * (c.tk + 1) * eps_of<Real>()),
                    "row sum + sink mass");
    if (to_double(mass) > 1e-3) RC_ASSERT(sum < Real(1));
  }
}

// A sink of -inf is plain softmax bit for bit; a very negative one is plain softmax to rounding.
POSENC_TYPED_PROP(SinkAttentionReference, MinusInfinitySinkIsPlainSoftmax) {
  Case c = *gen_case(24, *rc::gen::arbitrary<bool>(), false, true);
  AttentionParams off = c.p, low = c.p;
  off.sinks.assign(static_cast<std::size_t>(c.p.n_heads), kNegInf);
  low.sinks.assign(static_cast<std::size_t>(c.p.n_heads), -1000.0);
  const auto a = head<Real>(c, c.p, 0), b = head<Real>(c, off, 0), d = head<Real>(c, low, 0);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (int x = 0; x < c.p.value_dim; ++x) {
      RC_ASSERT(a.out(i, x) == b.out(i, x));
      rc_assert_close(d.out(i, x), a.out(i, x), Real(16 * (c.tk + 1) * eps_of<Real>()),
                      "out with sink -1000");
    }
  }
}

// Adding one constant to every logit and to the sink changes no probability.
POSENC_TYPED_PROP(SinkAttentionReference, ShiftOfLogitsAndSinkChangesNothing) {
  Case c = *gen_case(24, *rc::gen::arbitrary<bool>(), true, true);
  const double shift = *rc::gen::element(-9.5, 0.25, 6.0);
  AttentionParams moved = c.p;
  for (double& s : moved.sinks) s += shift;  // -inf stays -inf
  reference::AttentionHooks<Real> hooks;
  hooks.bias = [&](int, std::int64_t, std::int64_t) { return Real(shift); };
  const int h = *rc::gen::inRange(0, c.p.n_heads);
  const auto a = head<Real>(c, c.p, h), b = head<Real>(c, moved, h, hooks);
  for (std::int64_t i = 0; i < c.tq; ++i) {
    for (std::int64_t j = 0; j < c.tk; ++j) {
      rc_assert_close(b.probs(i, j), a.probs(i, j),
                      Real(64 * eps_of<Real>() * (1 + std::fabs(shift))), "p");
    }
  }
}

TEST(PlansAttentionReferenceSpot, FullyMaskedRowWithSinkAndBadArguments) {
  AttentionParams p{1, 1, 4, 3};
  p.sinks = {0.5};
  AttentionMask m;
  m.key_padding = {1, 1};
  const std::vector<double> q(4, 1.0), k(8, 1.0), v(6, 1.0);
  for (double x : reference::attention_forward<double>(p, m, 1, 2, q, k, v)) EXPECT_EQ(x, 0.0);
  std::vector<float> o(3, 7.0f);
  const std::vector<float> qf(4, 1.0f), kf(8, 1.0f), vf(6, 1.0f);
  optimized::attention_forward(p, m, 1, 2, qf, kf, vf, o);
  for (float x : o) EXPECT_EQ(x, 0.0f);
  auto expect_message = [&](AttentionParams bad, const std::string& needle) {
    try {
      reference::attention_forward<double>(bad, {}, 1, 1, q, std::vector<double>(4),
                                           std::vector<double>(3));
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    std::vector<float> out(3);
    EXPECT_THROW(optimized::attention_forward(bad, {}, 1, 1, qf, std::vector<float>(4),
                                              std::vector<float>(3), out),
                 InvalidArgument);
  };
  AttentionParams bad{1, 1, 4, 3};
  bad.chunk = -8;
  expect_message(bad, "attention_forward: chunk must be >= 0 (got -8)");
  bad.chunk = 0;
  bad.sinks = {0.0, 1.0};
  expect_message(bad, "attention_forward: sinks must have n_heads = 1 entries (got 2)");
  bad.sinks = {std::numeric_limits<double>::infinity()};
  expect_message(bad, "sinks must be finite or -inf (got inf)");
  bad.sinks = {std::nan("")};
  expect_message(bad, "sinks must be finite or -inf");
}

// ---- optimized
// -----------------------------------------------------------------------------------

std::vector<float> run_optimized(const Case& c) {
  const std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end()),
      v(c.v.begin(), c.v.end());
  std::vector<float> out(static_cast<std::size_t>(c.tq * c.p.n_heads * c.p.value_dim));
  optimized::attention_forward(c.p, {}, c.tq, c.tk, q, k, v, out);
  return out;
}

/// Longer rows and many queries (several key chunks and query blocks of the tiled kernel).
rc::Gen<Case> gen_long_case() {
  return rc::gen::exec([] {
    Case c = *gen_case(*rc::gen::element(8, 40, 600), true, *rc::gen::arbitrary<bool>(), true);
    if (*rc::gen::inRange(0, 3) == 0) c.p.chunk = *rc::gen::element<std::int64_t>(64, 256, 300);
    if (c.tk > 100 && c.tq > 70) {  // long rows, at most two query blocks: the oracle's cost
      c.tq = *rc::gen::inRange<std::int64_t>(60, 71);
      c.q.resize(static_cast<std::size_t>(c.tq * c.p.n_heads * c.p.head_dim));
      c.p.query_offset = c.tk - c.tq;
    }
    return c;
  });
}

// The kernel against the mp50 oracle under the contract's bound (A + B of optimized/attention.hpp).
TEST(PlansAttentionOptimized, ChunksAndSinksMatchOracleWithinBound) {
  double worst = 0;
  rc::detail::checkGTest([&] {
    const Case c = *gen_long_case();
    const auto out = run_optimized(c);
    const int g = c.p.n_heads / c.p.n_kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.p.head_dim));
    for (int h : {0, c.p.n_heads - 1}) {  // the first and the last head
      const auto r = head<mp50>(c, c.p, h);
      for (std::int64_t i = 0; i < c.tq; ++i) {
        for (int x = 0; x < c.p.value_dim; ++x) {
          const double o = static_cast<double>(r.out(i, x));
          double a = 0, b = 0;
          for (std::int64_t j = 0; j < c.tk; ++j) {
            const double pij = static_cast<double>(r.probs(i, j));
            if (pij == 0) continue;
            double s = 0;
            for (int y = 0; y < c.p.head_dim; ++y) {
              s += std::fabs(c.q[(i * c.p.n_heads + h) * c.p.head_dim + y] *
                             c.k[(j * c.p.n_kv_heads + h / g) * c.p.head_dim + y]);
            }
            const double vj = c.v[(j * c.p.n_kv_heads + h / g) * c.p.value_dim + x];
            a += pij * std::fabs(vj);
            b += pij * std::fabs(vj - o) * s * scale;
          }
          const double bound = optimized::kAttentionMaxError * 0x1p-23 * (a + b);
          const double err = std::fabs(out[(i * c.p.n_heads + h) * c.p.value_dim + x] - o);
          if (bound > 0) worst = std::max(worst, err / bound);
          if (!(err <= bound)) {
            RC_FAIL(describe_close("head " + std::to_string(h) + " query " + std::to_string(i),
                                   out[(i * c.p.n_heads + h) * c.p.value_dim + x], o, bound));
          }
        }
      }
    }
  });
  std::printf("PlansAttentionOptimized measured max error: %.4f of kAttentionMaxError\n", worst);
}

RC_GTEST_PROP(PlansAttentionOptimized, ProbabilitiesMatchOracle, ()) {
  const Case c = *gen_case(60, true, true, true);
  const std::vector<float> q(c.q.begin(), c.q.end()), k(c.k.begin(), c.k.end());
  std::vector<float> probs(static_cast<std::size_t>(c.p.n_heads * c.tq * c.tk));
  optimized::attention_probs(c.p, {}, c.tq, c.tk, q, k, probs);
  for (int h = 0; h < c.p.n_heads; ++h) {
    const auto r = head<double>(c, c.p, h);
    for (std::int64_t i = 0; i < c.tq; ++i) {
      for (std::int64_t j = 0; j < c.tk; ++j) {
        const double want = r.probs(i, j);
        // |dp| <= p (|ds| + sum p |ds|); scores here are below 25 in magnitude.
        RC_ASSERT(std::fabs(probs[(h * c.tq + i) * c.tk + j] - want) <=
                  1e-4 * (want + 1e-30) + 1e-30);
      }
    }
  }
}

RC_GTEST_PROP(PlansAttentionOptimized, IdenticalBitsForAnyThreadCount, ()) {
  const Case c = *gen_long_case();
  rc_assert_same_bits_for_thread_counts([&] { return run_optimized(c); });
}

}  // namespace
}  // namespace posenc::properties
