// Sinusoidal properties: reference invariants (float, double, mp50), the spec's d = 512 values,
// the optimized kernels against the oracle, and the golden catalog.
// Formula: see reference/sinusoidal.hpp.
// Replay a failure: RC_PARAMS="reproduce=..." (printed by RapidCheck) or seed=N.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include "golden/cases/budgets.hpp"
#include "golden/cases/catalog.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/format/format.hpp"
#include "golden/format/prng.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/verify.hpp"
#include "optimized/sinusoidal.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/sinusoidal.hpp"

namespace posenc::properties {
namespace {

using reference::SinusoidalParams;
using reference::SinusoidalVariant;

constexpr std::int64_t kMaxTestPosition = std::int64_t{1} << 20;

/// Random valid params: d_model in [min_d, max_d] (odd and even), either variant, base >= 2.
rc::Gen<SinusoidalParams> gen_sinusoidal_params(int min_d = 1, int max_d = 160) {
  return rc::gen::exec([min_d, max_d] {
    SinusoidalParams p;
    p.d_model = *rc::gen::inRange(min_d, max_d + 1);
    p.variant = *rc::gen::element(SinusoidalVariant::kPaper, SinusoidalVariant::kConcat);
    p.base = *rc::gen::oneOf(
        rc::gen::element(10000.0, 100.0, 500000.0),
        rc::gen::map(rc::gen::inRange(2, 10000001), [](int b) { return static_cast<double>(b); }));
    RC_CLASSIFY(p.variant == SinusoidalVariant::kPaper, "paper");
    RC_CLASSIFY(p.d_model % 2 == 1, "odd d_model");
    return p;
  });
}

/// Positions of either sign, |m| <= 2^20, mostly small or near powers of two.
rc::Gen<std::int64_t> gen_signed_position() {
  return rc::gen::exec([] {
    const std::int64_t m = *gen_position(kMaxTestPosition);
    return *rc::gen::element(1, 1, -1) * m;
  });
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

/// Tolerance for an identity that holds exactly in real arithmetic, evaluated in Real with
/// angles up to `max_angle`: the angle's absolute error is about max_angle * eps.
template <class Real>
Real identity_tol(double max_angle, double scale) {
  return Real(64 * eps_of<Real>() * (1.0 + max_angle) * scale);
}

int expected_n_freq(const SinusoidalParams& p) {
  return p.variant == SinusoidalVariant::kPaper ? (p.d_model + 1) / 2 : p.d_model / 2;
}

// ---- reference properties, typed over float, double and the oracle type ---------------------

POSENC_TYPED_PROP(SinusoidalReference, BoundedByOne) {
  using std::fabs;
  const SinusoidalParams p = *gen_sinusoidal_params();
  const std::int64_t m = *gen_signed_position();
  const auto pe = reference::sinusoidal_row<Real>(p, m);
  RC_ASSERT(pe.size() == static_cast<std::size_t>(p.d_model));
  for (int c = 0; c < p.d_model; ++c) {
    if (!(fabs(pe[c]) <= Real(1))) {
      RC_FAIL("channel " + std::to_string(c) + " at position " + std::to_string(m) + " is " +
              std::to_string(to_double(pe[c])));
    }
  }
}

POSENC_TYPED_PROP(SinusoidalReference, PairsHaveUnitNorm) {
  const SinusoidalParams p = *gen_sinusoidal_params();
  const std::int64_t m = *gen_signed_position();
  const auto pe = reference::sinusoidal_row<Real>(p, m);
  for (int i = 0; i < reference::sinusoidal_n_freq(p); ++i) {
    const int cc = reference::sinusoidal_cos_channel(p, i);
    if (cc < 0) continue;  // the lone sin channel of an odd kPaper d
    const Real s = pe[reference::sinusoidal_sin_channel(p, i)];
    const Real c = pe[cc];
    rc_assert_close<Real>(s * s + c * c, Real(1), Real(8 * eps_of<Real>()),
                          "sin^2 + cos^2 of frequency " + std::to_string(i));
  }
}

POSENC_TYPED_PROP(SinusoidalReference, ZeroPositionIsSinZeroCosOne) {
  const SinusoidalParams p = *gen_sinusoidal_params();
  const auto pe = reference::sinusoidal_row<Real>(p, std::int64_t{0});
  std::vector<Real> want(static_cast<std::size_t>(p.d_model), Real(0));
  for (int i = 0; i < reference::sinusoidal_n_freq(p); ++i) {
    const int cc = reference::sinusoidal_cos_channel(p, i);
    if (cc >= 0) want[cc] = Real(1);
  }
  for (int c = 0; c < p.d_model; ++c) {
    RC_ASSERT(pe[c] == want[c]);
  }
}

POSENC_TYPED_PROP(SinusoidalReference, ShiftIsBlockRotation) {
  using std::cos;
  using std::sin;
  const SinusoidalParams p = *gen_sinusoidal_params();
  const std::int64_t m = *gen_signed_position();
  const std::int64_t delta = *gen_signed_position();
  const auto omega = reference::sinusoidal_inv_freq<Real>(p);
  const auto a = reference::sinusoidal_row(p, omega, m);
  const auto b = reference::sinusoidal_row(p, omega, m + delta);
  // omega <= 1 (base >= 2), so every angle is at most the largest |position| involved.
  const double max_angle = static_cast<double>(std::abs(m) + std::abs(delta) + std::abs(m + delta));
  const Real tol = identity_tol<Real>(max_angle, 2.0);
  if (std::is_same_v<Real, mp50>) {  // the claim: PE(m + delta) = M(delta) PE(m) to ~1e-40
    RC_ASSERT(to_double(tol) < 1e-40);
  }
  for (int i = 0; i < reference::sinusoidal_n_freq(p); ++i) {
    const int cs = reference::sinusoidal_sin_channel(p, i);
    const int cc = reference::sinusoidal_cos_channel(p, i);
    if (cc < 0) continue;  // the lone sin channel of an odd kPaper d: not linear in PE(m)
    const Real w = Real(delta) * omega[i];
    const Real cw = cos(w);
    const Real sw = sin(w);
    rc_assert_close(b[cs], cw * a[cs] + sw * a[cc], tol,
                    "sin channel " + std::to_string(cs) + " of M(delta) PE(m)");
    rc_assert_close(b[cc], -sw * a[cs] + cw * a[cc], tol,
                    "cos channel " + std::to_string(cc) + " of M(delta) PE(m)");
  }
  for (int c = 0; c < p.d_model; ++c) {  // M is the identity on the zero column
    if (reference::sinusoidal_freq_of_channel(p, c) < 0) RC_ASSERT(b[c] == a[c]);
  }
}

POSENC_TYPED_PROP(SinusoidalReference, FrequenciesAreGeometric) {
  using std::fabs;
  using std::log;
  const SinusoidalParams p = *gen_sinusoidal_params(2);
  const auto omega = reference::sinusoidal_inv_freq<Real>(p);
  RC_ASSERT(static_cast<int>(omega.size()) == expected_n_freq(p));
  RC_ASSERT(omega[0] == Real(1));
  // omega_i = r^i with r = base^(-2/d) (kPaper) or base^(-1/max(n-1, 1)) (kConcat), i.e.
  // K ln omega_i = -s i ln base with (K, s) = (d, 2) or (max(n-1, 1), 1).
  const int n = static_cast<int>(omega.size());
  const bool paper = p.variant == SinusoidalVariant::kPaper;
  const int k = paper ? p.d_model : std::max(n - 1, 1);
  const int s = paper ? 2 : 1;
  const Real log_base = log(Real(p.base));
  for (int i = 1; i < n; ++i) {
    const Real lhs = Real(k) * log(omega[i]);
    const Real rhs = -Real(s * i) * log_base;
    rc_assert_close(lhs, rhs, Real(64 * eps_of<Real>() * (1 + to_double(fabs(rhs))) * k),
                    "K * ln(omega_" + std::to_string(i) + ")");
  }
}

POSENC_TYPED_PROP(SinusoidalReference, VariantsDifferAsSpecified) {
  using std::fabs;
  using std::log;
  using std::sin;
  SinusoidalParams pp = *gen_sinusoidal_params(4);
  pp.variant = SinusoidalVariant::kPaper;
  SinusoidalParams pc = pp;
  pc.variant = SinusoidalVariant::kConcat;
  const int d = pp.d_model;
  const auto wp = reference::sinusoidal_inv_freq<Real>(pp);
  const auto wc = reference::sinusoidal_inv_freq<Real>(pc);
  // ceil(d/2) paper frequencies, floor(d/2) concat ones; both start at 1.
  RC_ASSERT(static_cast<int>(wp.size()) == (d + 1) / 2);
  RC_ASSERT(static_cast<int>(wc.size()) == d / 2);
  RC_ASSERT(wp[0] == Real(1));
  RC_ASSERT(wc[0] == Real(1));
  // Exponent denominators d/2 (paper) vs n_c - 1 (concat): 2 (n_c - 1) ln wc_i = d ln wp_i.
  const int nc = d / 2;
  for (int i = 1; i < nc; ++i) {
    const Real lhs = Real(2 * (nc - 1)) * log(wc[i]);
    const Real rhs = Real(d) * log(wp[i]);
    rc_assert_close(lhs, rhs, Real(64 * eps_of<Real>() * (1 + to_double(fabs(rhs))) * d),
                    "2(n_c - 1) ln wc_" + std::to_string(i) + " vs d ln wp_" + std::to_string(i));
  }
  // kConcat ends exactly at 1/base (paper: base^(-2(n_p - 1)/d), above 1/base).
  rc_assert_close<Real>(wc[nc - 1] * Real(pp.base), Real(1), Real(16 * eps_of<Real>()),
                        "last concat frequency * base");
  RC_ASSERT(wp[nc - 1] > wc[nc - 1]);
  // Odd d: concat appends a zero column where the paper has a lone sin channel.
  if (d % 2 == 1) {
    const std::int64_t m = *gen_signed_position();
    const auto rp = reference::sinusoidal_row<Real>(pp, m);
    const auto rc_row = reference::sinusoidal_row<Real>(pc, m);
    RC_ASSERT(rc_row[d - 1] == Real(0));
    rc_assert_close(rp[d - 1], Real(sin(Real(m) * wp.back())), Real(4 * eps_of<Real>()),
                    "paper's lone sin channel");
  }
}

POSENC_TYPED_PROP(SinusoidalReference, ChannelsFollowVariantLayout) {
  using std::cos;
  using std::sin;
  const SinusoidalParams p = *gen_sinusoidal_params();
  const std::int64_t m = *gen_signed_position();
  const auto w = reference::sinusoidal_inv_freq<Real>(p);
  const auto pe = reference::sinusoidal_row(p, w, m);
  const int d = p.d_model;
  const int n = d / 2;
  for (int c = 0; c < d; ++c) {
    Real want = Real(0);
    if (p.variant == SinusoidalVariant::kPaper) {  // 2i: sin, 2i + 1: cos
      const Real phi = Real(m) * w[c / 2];
      want = c % 2 == 0 ? Real(sin(phi)) : Real(cos(phi));
    } else if (c < n) {  // [sin | cos | zero column]
      want = sin(Real(m) * w[c]);
    } else if (c < 2 * n) {
      want = cos(Real(m) * w[c - n]);
    }
    rc_assert_close(pe[c], want, Real(4 * eps_of<Real>()),
                    "channel " + std::to_string(c) + " at position " + std::to_string(m));
  }
}

POSENC_TYPED_PROP(SinusoidalReference, AddIsRowwiseSum) {
  const SinusoidalParams p = *gen_sinusoidal_params();
  const int rows = *rc::gen::inRange(1, 6);
  std::vector<std::int64_t> pos;
  for (int r = 0; r < rows; ++r) pos.push_back(*gen_signed_position());
  const auto e = to_real<Real>(*gen_dyadic_vector(rows * p.d_model));
  std::vector<Real> h(e.size());
  reference::sinusoidal_add<Real>(p, pos, e, h);
  std::vector<Real> in_place = e;
  reference::sinusoidal_add<Real>(p, pos, in_place, in_place);
  for (int r = 0; r < rows; ++r) {
    const auto pe = reference::sinusoidal_row<Real>(p, pos[r]);
    for (int c = 0; c < p.d_model; ++c) {
      const std::size_t j = static_cast<std::size_t>(r * p.d_model + c);
      RC_ASSERT(h[j] == e[j] + pe[c]);
      RC_ASSERT(in_place[j] == h[j]);
    }
  }
}

// ---- reference spot checks -------------------------------------------------------------------

TEST(SinusoidalReferenceSpot, PinsD512Frequencies) {
  // The worked values of docs/schemes/sinusoidal.md, at their printed precision (half a unit in
  // the last digit).
  for (const bool oracle : {false, true}) {
    auto second_and_last = [oracle](SinusoidalVariant v) {
      const SinusoidalParams p{512, v, 10000.0};
      if (oracle) {
        const auto w = reference::sinusoidal_inv_freq<mp50>(p);
        EXPECT_EQ(w.size(), 256u);
        return std::pair{static_cast<double>(w[1]), static_cast<double>(w.back())};
      }
      const auto w = reference::sinusoidal_inv_freq<double>(p);
      EXPECT_EQ(w.size(), 256u);
      return std::pair{w[1], w.back()};
    };
    const auto [p1, plast] = second_and_last(SinusoidalVariant::kPaper);
    const auto [c1, clast] = second_and_last(SinusoidalVariant::kConcat);
    EXPECT_NEAR(p1, 0.964662, 5e-7) << "paper second frequency";
    EXPECT_NEAR(plast, 1.0366e-4, 5e-9) << "paper last frequency";
    EXPECT_NEAR(c1, 0.964526, 5e-7) << "concat second frequency";
    EXPECT_NEAR(clast, 1.0000e-4, 5e-9) << "concat last frequency";
  }
}

TEST(SinusoidalReferenceSpot, MatchesHandComputedValues) {
  auto expect_row = [](const SinusoidalParams& p, std::int64_t m, const std::vector<double>& want) {
    const auto got = reference::sinusoidal_row<double>(p, m);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t c = 0; c < want.size(); ++c) {
      EXPECT_NEAR(got[c], want[c], 4e-16) << reference::sinusoidal_variant_name(p.variant) << " d "
                                          << p.d_model << " channel " << c;
    }
  };
  // d = 4, paper, m = 1: omega = (1, 1/100).
  expect_row({4, SinusoidalVariant::kPaper, 1e4}, 1,
             {0.8414709848078965, 0.5403023058681398, 0.009999833334166664, 0.9999500004166653});
  // d = 5, concat, m = 2: n = 2, omega = (1, 1/base) [denominator max(n - 1, 1) = 1], zero pad.
  expect_row(
      {5, SinusoidalVariant::kConcat, 1e4}, 2,
      {0.9092974268256817, 1.9999999866666667e-4, -0.4161468365471424, 0.99999998000000007, 0.0});
  // d = 3, paper, m = 1: omega = (1, 10^(-8/3)); the last channel is a lone sin.
  expect_row({3, SinusoidalVariant::kPaper, 1e4}, 1,
             {0.8414709848078965, 0.5403023058681398, std::sin(std::pow(10.0, -8.0 / 3.0))});
  // d = 1: paper is sin(m); concat is the zero column alone.
  expect_row({1, SinusoidalVariant::kPaper, 1e4}, 2, {0.9092974268256817});
  expect_row({1, SinusoidalVariant::kConcat, 1e4}, 2, {0.0});
}

TEST(SinusoidalReferenceSpot, RejectsBadArguments) {
  auto expect_message = [](const SinusoidalParams& p, const std::string& needle) {
    try {
      reference::sinusoidal_row<double>(p, 0);
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("sinusoidal_", 0), 0u) << e.what();
    }
  };
  expect_message({0, SinusoidalVariant::kPaper, 1e4}, "d_model must be positive (got 0)");
  expect_message({-3, SinusoidalVariant::kConcat, 1e4}, "d_model must be positive (got -3)");
  expect_message({8, SinusoidalVariant::kPaper, 0.0}, "base must be finite and > 0 (got 0)");
  expect_message({8, SinusoidalVariant::kPaper, -5.0}, "(got -5)");
  expect_message({8, SinusoidalVariant::kConcat, INFINITY}, "base must be finite");
  const SinusoidalParams ok{8, SinusoidalVariant::kPaper, 1e4};
  EXPECT_THROW(reference::sinusoidal_row<double>(ok, std::vector<double>(3, 1.0), 0),
               InvalidArgument);
  const std::vector<std::int64_t> pos = {0, 1};
  std::vector<double> e(15), h(16);
  EXPECT_THROW(reference::sinusoidal_add<double>(ok, pos, e, h), InvalidArgument);
}

TEST(SinusoidalReferenceSpot, OracleAgreesAtTwoPrecisions) {
  rc::detail::checkGTest([] {
    const SinusoidalParams p = *gen_sinusoidal_params();
    const std::int64_t m = *gen_position(std::int64_t{1} << 24);
    const auto y50 = reference::sinusoidal_row<mp50>(p, m);
    const auto y100 = reference::sinusoidal_row<mp100>(p, m);
    // Both are within (1 + |angle|) eps_mp50 of the exact value; omega <= 1 here.
    const mp100 tol = mp100(8 * eps_of<mp50>() * (1.0 + static_cast<double>(m)));
    for (int c = 0; c < p.d_model; ++c) {
      if (round_to_f64(y50[c]) != round_to_f64(y100[c]) || abs(mp100(y50[c]) - y100[c]) > tol) {
        RC_FAIL("channel " + std::to_string(c) + ": mp50 " + y50[c].str(60) + " vs mp100 " +
                y100[c].str(60));
      }
    }
  });
}

// ---- optimized kernels against the oracle ----------------------------------------------------

struct OptCase {
  SinusoidalParams p;
  std::vector<std::int64_t> pos;
  std::vector<double> e;
};

/// Rows in [min_rows, max_rows]; d_model >= min_d.
rc::Gen<OptCase> gen_opt_case(int min_rows = 1, int max_rows = 5, int min_d = 1) {
  return rc::gen::exec([min_rows, max_rows, min_d] {
    OptCase c;
    c.p = *gen_sinusoidal_params(min_d);
    const int rows = *rc::gen::inRange(min_rows, max_rows + 1);
    for (int r = 0; r < rows; ++r) {
      c.pos.push_back(*rc::gen::oneOf(gen_position(kMaxTestPosition),
                                      rc::gen::inRange(-optimized::kSinusoidalMaxPosition,
                                                       optimized::kSinusoidalMaxPosition + 1)));
    }
    // e: dyadic values in (-1, 1), exact in float, from a counter-based PRNG (a RapidCheck
    // container of thousands of elements is slow to generate and to shrink).
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    c.e.resize(static_cast<std::size_t>(rows * c.p.d_model));
    for (std::size_t i = 0; i < c.e.size(); ++i) {
      c.e[i] = std::ldexp(static_cast<double>(golden::prng_int(seed, 1, i, (1 << 24) - 1)), -24);
    }
    return c;
  });
}

TEST(SinusoidalOptimized, MatchesOracleWithinBound) {
  double max_table = 0, max_add = 0, max_inv = 0;
  rc::detail::checkGTest([&] {
    const OptCase c = *gen_opt_case();
    const int d = c.p.d_model;
    // Frequencies: long double pow rounded once to double, so within 1 ulp of double.
    const auto inv = optimized::sinusoidal_inv_freq(c.p);
    const auto inv_ref = reference::sinusoidal_inv_freq<mp50>(c.p);
    RC_ASSERT(inv.size() == inv_ref.size());
    for (std::size_t i = 0; i < inv.size(); ++i) {
      const double err = std::fabs(static_cast<double>(mp50(inv[i]) - inv_ref[i]));
      const double ulp = dtype_ulp(DType::kF64, inv[i]);
      max_inv = std::max(max_inv, err / ulp);
      if (err > ulp) {
        RC_FAIL(describe_close("inv_freq " + std::to_string(i), inv[i],
                               static_cast<double>(inv_ref[i]), ulp));
      }
    }
    const auto pe = optimized::sinusoidal_rows(c.p, c.pos);
    const std::vector<float> e(c.e.begin(), c.e.end());
    std::vector<float> h(e.size());
    optimized::sinusoidal_add(c.p, c.pos, e, h);
    const auto pe_ref = reference::sinusoidal_rows<mp50>(c.p, c.pos);
    std::vector<mp50> h_ref(e.size());
    reference::sinusoidal_add<mp50>(c.p, c.pos, to_real<mp50>(c.e), h_ref);
    for (std::size_t r = 0; r < c.pos.size(); ++r) {
      for (int ch = 0; ch < d; ++ch) {
        const std::size_t j = r * d + ch;
        const std::string where = "row " + std::to_string(r) + " (position " +
                                  std::to_string(c.pos[r]) + ") channel " + std::to_string(ch);
        if (reference::sinusoidal_freq_of_channel(c.p, ch) < 0) {  // the zero column
          RC_ASSERT(pe[j] == 0.0f);
          RC_ASSERT(h[j] == e[j]);
          continue;
        }
        const double bound = optimized::kSinusoidalMaxError * 0x1p-23;
        const double err = std::fabs(static_cast<double>(mp50(pe[j]) - pe_ref[j]));
        max_table = std::max(max_table, err / bound);
        if (err > bound) {
          RC_FAIL(describe_close("pe " + where, pe[j], static_cast<double>(pe_ref[j]), bound));
        }
        const double hbound =
            optimized::kSinusoidalAddMaxError * 0x1p-23 * (1.0 + std::fabs(c.e[j]));
        const double herr = std::fabs(static_cast<double>(mp50(h[j]) - h_ref[j]));
        max_add = std::max(max_add, herr / hbound);
        if (herr > hbound) {
          RC_FAIL(describe_close("h " + where, h[j], static_cast<double>(h_ref[j]), hbound));
        }
      }
    }
  });
  // The measured worst cases, in units of the contract's bounds (the closing note quotes them).
  std::printf(
      "SinusoidalOptimized measured max error: table %.4f of kSinusoidalMaxError, add "
      "%.4f of kSinusoidalAddMaxError, inv_freq %.4f ulp_f64\n",
      max_table, max_add, max_inv);
}

RC_GTEST_PROP(SinusoidalOptimized, IdenticalBitsForAnyThreadCount, ()) {
  // Big enough for a thread team: 16 * 128 >= kSinusoidalParallelMinElements.
  const OptCase c = *gen_opt_case(16, 48, 128);
  RC_ASSERT(static_cast<std::int64_t>(c.e.size()) >= optimized::kSinusoidalParallelMinElements);
  const std::vector<float> e(c.e.begin(), c.e.end());
  rc_assert_same_bits_for_thread_counts([&] {
    const auto pe = optimized::sinusoidal_rows(c.p, c.pos);
    std::vector<float> h(e.size());
    optimized::sinusoidal_add(c.p, c.pos, e, h);
    return std::tuple{pe, h};
  });
}

RC_GTEST_PROP(SinusoidalOptimized, AddEqualsTablePlusE, ()) {
  const OptCase c = *gen_opt_case();
  const std::vector<float> e(c.e.begin(), c.e.end());
  const auto pe = optimized::sinusoidal_rows(c.p, c.pos);
  std::vector<float> h(e.size());
  optimized::sinusoidal_add(c.p, c.pos, e, h);
  for (std::size_t j = 0; j < e.size(); ++j) {
    RC_ASSERT(h[j] == e[j] + pe[j]);
  }
}

RC_GTEST_PROP(SinusoidalOptimized, InPlaceEqualsOutOfPlace, ()) {
  const OptCase c = *gen_opt_case();
  std::vector<float> e(c.e.begin(), c.e.end());
  std::vector<float> h(e.size());
  optimized::sinusoidal_add(c.p, c.pos, e, h);
  optimized::sinusoidal_add(c.p, c.pos, e, e);
  RC_ASSERT(e == h);
}

TEST(SinusoidalOptimized, RejectsBadArguments) {
  const SinusoidalParams p{8, SinusoidalVariant::kConcat, 1e4};
  const std::vector<std::int64_t> pos = {0, 1};
  std::vector<float> e(16), h(16);
  auto expect_message = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find(needle), std::string::npos) << ex.what();
    }
  };
  expect_message(
      [&] {
        optimized::sinusoidal_rows({0, SinusoidalVariant::kPaper, 1e4}, pos);
      },
      "sinusoidal_rows: d_model must be positive (got 0)");
  expect_message(
      [&] {
        optimized::sinusoidal_inv_freq({8, SinusoidalVariant::kPaper, 0.5});
      },
      "sinusoidal_inv_freq: base must be >= 1 (got 0.5)");
  expect_message(
      [&] {
        const std::vector<std::int64_t> far = {0, -optimized::kSinusoidalMaxPosition - 1};
        optimized::sinusoidal_rows(p, far);
      },
      "sinusoidal_rows: positions[1] must satisfy |m| <= 2^28 (got -268435457)");
  expect_message(
      [&] {
        const std::vector<std::int64_t> far = {optimized::kSinusoidalMaxPosition + 1, 0};
        optimized::sinusoidal_add(p, far, e, h);
      },
      "sinusoidal_add: positions[0] must satisfy |m| <= 2^28 (got 268435457)");
  expect_message(
      [&] {
        std::vector<float> pe(15);
        optimized::sinusoidal_rows(p, pos, pe);
      },
      "sinusoidal_rows: pe must have rows * d_model = 16 entries (got 15)");
  expect_message([&] { optimized::sinusoidal_add(p, pos, std::span<const float>(e).first(15), h); },
                 "sinusoidal_add: e must have rows * d_model = 16 entries (got 15)");
  expect_message([&] { optimized::sinusoidal_add(p, pos, e, std::span<float>(h).first(8)); },
                 "h must have rows * d_model = 16 entries (got 8)");
  expect_message(
      [&] {
        std::vector<float> buf(17);
        optimized::sinusoidal_add(p, pos, std::span<const float>(buf).first(16),
                                  std::span<float>(buf).subspan(1, 16));
      },
      "overlap");
}

// ---- golden catalog ----------------------------------------------------------------------------


// First: it stops at the first stale case, which also ends a generator mutant run quickly.
TEST(SinusoidalGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("sinusoidal", 6); }
TEST(SinusoidalGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("sinusoidal"); }

TEST(SinusoidalGolden, EngineMistakesAreCaught) {
  const auto dir = golden::default_data_dir();
  const auto& scheme = golden::scheme_by_slug("sinusoidal");
  for (const auto& row : scheme.cases()) {
    const auto lc = golden::load_case(dir / "sinusoidal" / (row.id + ".json"));
    for (const auto& mistake : scheme.mistakes()) {
      const auto out = scheme.run_engine(lc.spec, lc.golden, {mistake});
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, false});
      EXPECT_EQ(r.status, golden::Verdict::kFail) << row.id << " with mistake " << mistake << "\n"
                                  << golden::format_case_text(r, true);
      // The table itself is flagged, whatever else the engine reports.
      for (const auto& t : r.tensors) {
        if (t.name == "pe") {
          EXPECT_EQ(t.status, golden::Verdict::kFail) << row.id << " with mistake " << mistake;
        }
      }
    }
  }
}

TEST(SinusoidalGolden, PipelinesPassTheirProfiles) { expect_pipelines_pass_their_profiles("sinusoidal", 0.25); }

TEST(SinusoidalGolden, FloatPipelinesFailStrict) {
  expect_float_pipelines_fail_strict("sinusoidal", [](const std::string&, const std::string&) { return true; });
}

/// A float32 sinusoid table with the frequencies computed directly, as numpy / PyTorch write
/// `base ** (-arange(0, d, 2) / d)`: inv_freq_i = powf(fl(base), -(fl(2i) / fl(d))) (concat
/// variant: -(fl(i) / fl(n - 1))), by this libm's powf or (worst_powf) by a faithful powf that
/// always returns the float32 neighbour farther from the exact power; the rest as the fp32
/// pipeline: phi = fl(fl(m) inv_freq), sinf / cosf, h = e + pe in float32; pe and h cast once
/// to the target.
golden::TensorMap powf_form_engine(const golden::LoadedCase& lc, bool worst_powf) {
  const auto& pj = lc.spec.manifest.at("params");
  SinusoidalParams p;
  p.d_model = pj.at("d_model").get<int>();
  p.base = pj.at("base").get<double>();
  p.variant = pj.at("variant").get<std::string>() == "paper" ? SinusoidalVariant::kPaper : SinusoidalVariant::kConcat;
  const int d = p.d_model, n = reference::sinusoidal_n_freq(p);
  const bool paper = p.variant == SinusoidalVariant::kPaper;
  std::vector<float> w(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float e = paper ? static_cast<float>(2 * i) / static_cast<float>(d)
                          : static_cast<float>(i) / static_cast<float>(std::max(n - 1, 1));
    w[i] = std::pow(static_cast<float>(p.base), -e);
    if (worst_powf) {
      const mp50 exact = pow(mp50(static_cast<float>(p.base)), -mp50(e));
      for (float r : golden::budgets::faithful_f32(exact)) {
        if (abs(mp50(r) - exact) > abs(mp50(w[i]) - exact)) w[i] = r;
      }
    }
  }
  const golden::Tensor& tpos = lc.golden.at("positions");
  const DType t = lc.golden.at("e").dtype;
  const std::vector<float> e = golden::tensor_to_f32(lc.golden.at("e"));
  const std::int64_t tn = tpos.numel();
  std::vector<float> pe(e.size(), 0.0f), h(e.size());
  for (std::int64_t r = 0; r < tn; ++r) {
    const float m = static_cast<float>(tpos.get_i64(r));
    for (int i = 0; i < n; ++i) {
      const float phi = m * w[i];
      pe[r * d + reference::sinusoidal_sin_channel(p, i)] = std::sin(phi);
      const int cc = reference::sinusoidal_cos_channel(p, i);
      if (cc >= 0) pe[r * d + cc] = std::cos(phi);
    }
  }
  for (std::size_t j = 0; j < e.size(); ++j) h[j] = e[j] + pe[j];  // float32, cast once below
  golden::TensorMap out;
  out.emplace("inv_freq", golden::tensor_from_f32("inv_freq", {n}, w));
  out.emplace("pe", golden::engine_tensor("pe", t, {tn, d}, pe));
  out.emplace("h", golden::engine_tensor("h", t, {tn, d}, h));
  return out;
}

TEST(SinusoidalGolden, PowfFormPassesFp32) {
  // The fp32 budget enumerates both float32 frequency forms (1/powf or expf, and the direct
  // powf): a direct-powf table passes on every case, with this libm's powf and with the worst
  // faithful one, and the worst element per stage uses at least a quarter of the budget.
  for (const bool worst_powf : {false, true}) {
    std::map<std::string, double> worst;
    for_each_golden_case("sinusoidal", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
      golden::VerifyOptions vo;
      vo.profile = "fp32";
      vo.require_all = true;
      const auto r = golden::verify_case(lc.spec, lc.golden, powf_form_engine(lc, worst_powf), vo);
      EXPECT_EQ(r.status, golden::Verdict::kPass) << (worst_powf ? "worst faithful powf\n" : "libm powf\n")
                                                  << golden::format_case_text(r, true);
      const std::string target(dtype_short(lc.golden.at("e").dtype));
      for (const auto& tr : r.tensors) {
        double& w = worst[tr.name + " (" + target + " cases)"];
        w = std::max(w, tr.max_ratio);
      }
    });
    for (const auto& [name, w] : worst) {
      std::printf("[ tight    ] sinusoidal direct powf (%s), fp32: %-20s worst element at %.3f of its budget\n",
                  worst_powf ? "worst faithful" : "libm", name.c_str(), w);
      EXPECT_GE(w, 0.25) << name;
    }
    EXPECT_EQ(worst.size(), 6u);
  }
}

}  // namespace
}  // namespace posenc::properties
