// Learned absolute position embedding properties: reference invariants (float, double, mp50),
// the optimized kernels against the oracle, and the golden catalog.
// Formula: see reference/learned.hpp. Replay a failure: RC_PARAMS="reproduce=..." or seed=N.
#include "optimized/learned.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/format/format.hpp"
#include "golden/format/prng.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/verify.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/learned.hpp"

namespace posenc::properties {
namespace {

using reference::LearnedParams;

/// Small tables: up to 64 rows of up to 16 channels; the offset is a row of the table.
rc::Gen<LearnedParams> gen_learned_params() {
  return rc::gen::exec([] {
    LearnedParams p;
    p.max_positions = *rc::gen::inRange<std::int64_t>(1, 65);
    p.d_model = *rc::gen::inRange(1, 17);
    p.position_offset = *rc::gen::oneOf(rc::gen::just<std::int64_t>(0),
                                        rc::gen::inRange<std::int64_t>(0, p.max_positions));
    RC_CLASSIFY(p.position_offset != 0, "offset");
    return p;
  });
}

/// A table row, often the first or the last one.
rc::Gen<std::int64_t> gen_row(const LearnedParams& p) {
  return rc::gen::oneOf(rc::gen::inRange<std::int64_t>(0, p.max_positions),
                        rc::gen::element<std::int64_t>(0, p.max_positions - 1));
}

/// n positions whose rows (offset + position) lie in the table; negative when offset > row.
std::vector<std::int64_t> gen_valid_positions(const LearnedParams& p, int n) {
  std::vector<std::int64_t> pos;
  for (int t = 0; t < n; ++t) pos.push_back(*gen_row(p) - p.position_offset);
  return pos;
}

/// A row outside the table: below 0 or at/after max_positions.
rc::Gen<std::int64_t> gen_bad_row(const LearnedParams& p) {
  return rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-1000, 0),
                        rc::gen::inRange<std::int64_t>(p.max_positions, p.max_positions + 1000),
                        rc::gen::just(std::int64_t{p.max_positions}));
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

std::size_t dsz(const LearnedParams& p) { return static_cast<std::size_t>(p.d_model); }

// ---- reference properties, typed over float, double and the oracle type ---------------------

POSENC_TYPED_PROP(LearnedReference, DecodeWithOffsetEqualsFullForward) {
  LearnedParams p = *gen_learned_params();
  const std::int64_t n =
      *rc::gen::inRange<std::int64_t>(1, std::min<std::int64_t>(p.max_positions, 12) + 1);
  const std::int64_t o0 = *rc::gen::inRange<std::int64_t>(0, p.max_positions - n + 1);
  const std::size_t d = dsz(p);
  const auto table =
      to_real<Real>(*gen_dyadic_vector(static_cast<int>(p.max_positions * p.d_model)));
  const auto e = to_real<Real>(*gen_dyadic_vector(static_cast<int>(n * p.d_model)));
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < n; ++t) all[t] = t;
  p.position_offset = o0;
  const auto full = reference::learned_apply<Real>(p, table, all, e);
  for (std::int64_t k = 0; k <= n; ++k) {
    // Prefill of k tokens, then the rest as a decode window with a cache of k tokens.
    LearnedParams pre = p, dec = p;
    dec.position_offset = o0 + k;
    const std::vector<std::int64_t> pos_pre(all.begin(), all.begin() + k);
    const std::vector<std::int64_t> pos_dec(all.begin(), all.begin() + (n - k));
    const std::vector<Real> e_pre(e.begin(), e.begin() + k * d), e_dec(e.begin() + k * d, e.end());
    auto h = reference::learned_apply<Real>(pre, table, pos_pre, e_pre);
    const auto h_dec = reference::learned_apply<Real>(dec, table, pos_dec, e_dec);
    h.insert(h.end(), h_dec.begin(), h_dec.end());
    RC_ASSERT(h.size() == full.size());
    for (std::size_t j = 0; j < h.size(); ++j) {
      if (!(h[j] == full[j])) {
        RC_FAIL("split at k = " + std::to_string(k) + " (offset " + std::to_string(o0) +
                "), token " + std::to_string(j / d) + " channel " + std::to_string(j % d) +
                " differs from the full forward");
      }
    }
  }
}

POSENC_TYPED_PROP(LearnedReference, ZeroEmbeddingReturnsTableRow) {
  const LearnedParams p = *gen_learned_params();
  const int n = *rc::gen::inRange(1, 9);
  const std::size_t d = dsz(p);
  const auto table =
      to_real<Real>(*gen_dyadic_vector(static_cast<int>(p.max_positions * p.d_model)));
  const auto pos = gen_valid_positions(p, n);
  const std::vector<Real> zero(n * d, Real(0));
  const auto h = reference::learned_apply<Real>(p, table, pos, zero);
  const auto rows = reference::learned_lookup<Real>(p, table, pos);
  for (int t = 0; t < n; ++t) {
    const std::size_t r = static_cast<std::size_t>(p.position_offset + pos[t]);
    for (std::size_t c = 0; c < d; ++c) {
      RC_ASSERT(h[t * d + c] == table[r * d + c]);
      RC_ASSERT(rows[t * d + c] == table[r * d + c]);
    }
  }
}

POSENC_TYPED_PROP(LearnedReference, OffsetEqualsShiftedPositions) {
  LearnedParams p = *gen_learned_params();
  const int n = *rc::gen::inRange(1, 9);
  const auto table =
      to_real<Real>(*gen_dyadic_vector(static_cast<int>(p.max_positions * p.d_model)));
  const auto e = to_real<Real>(*gen_dyadic_vector(static_cast<int>(n * p.d_model)));
  const auto pos = gen_valid_positions(p, n);
  const auto with_offset = reference::learned_apply<Real>(p, table, pos, e);
  std::vector<std::int64_t> shifted(pos);
  for (auto& m : shifted) m += p.position_offset;
  p.position_offset = 0;
  RC_ASSERT(reference::learned_apply<Real>(p, table, shifted, e) == with_offset);
}

/// e + P is exact in Real whenever it fits: e = i * 2^-20, P = j * 2^-(20 + s) with
/// |i|, |j| <= 2^20 need at most 22 + s bits. Exactness is checked without computing e + P
/// again: h - e == P and h - P == e hold only for the exact sum.
POSENC_TYPED_PROP(LearnedReference, AddIsExactForDyadicInputs) {
  LearnedParams p = *gen_learned_params();
  const int s = *rc::gen::inRange(0, std::numeric_limits<Real>::digits - 22 + 1);
  const int n = *rc::gen::inRange(1, 5);
  std::vector<double> tab = *gen_dyadic_vector(static_cast<int>(p.max_positions * p.d_model));
  for (auto& v : tab) v = std::ldexp(v, -s);
  const auto table = to_real<Real>(tab);
  const auto e = to_real<Real>(*gen_dyadic_vector(static_cast<int>(n * p.d_model)));
  const auto pos = gen_valid_positions(p, n);
  const auto h = reference::learned_apply<Real>(p, table, pos, e);
  const std::size_t d = dsz(p);
  for (int t = 0; t < n; ++t) {
    const std::size_t r = static_cast<std::size_t>(p.position_offset + pos[t]);
    for (std::size_t c = 0; c < d; ++c) {
      const Real& hv = h[t * d + c];
      const Real& ev = e[t * d + c];
      const Real& pv = table[r * d + c];
      if (!(hv - ev == pv) || !(hv - pv == ev)) {
        RC_FAIL(describe_close("token " + std::to_string(t) + " channel " + std::to_string(c) +
                                   " (P scaled by 2^-" + std::to_string(s) + "): h - e vs P",
                               to_double(Real(hv - ev)), to_double(pv), 0.0));
      }
    }
  }
}

POSENC_TYPED_PROP(LearnedReference, RejectsPositionsOutsideTable) {
  const LearnedParams p = *gen_learned_params();
  const int n = *rc::gen::inRange(1, 6);
  const auto table = to_real<Real>(std::vector<double>(p.max_positions * p.d_model, 0.25));
  const auto e = to_real<Real>(std::vector<double>(n * p.d_model, 0.5));
  auto pos = gen_valid_positions(p, n);
  const int bad = *rc::gen::inRange(0, n);
  const std::int64_t row = *gen_bad_row(p);
  pos[bad] = row - p.position_offset;
  const std::string want = "learned_apply: row position_offset + positions[" + std::to_string(bad) +
                           "] must lie in [0, max_positions = " + std::to_string(p.max_positions) +
                           ") (got " + std::to_string(row) + ")";
  // Every other row is valid, so the message names the bad token.
  std::string got = "no exception";
  try {
    reference::learned_apply<Real>(p, table, pos, e);
  } catch (const InvalidArgument& ex) {
    got = ex.what();
  }
  RC_ASSERT(got == want);
  std::string got_lookup = "no exception";
  try {
    reference::learned_lookup<Real>(p, table, pos);
  } catch (const InvalidArgument& ex) {
    got_lookup = ex.what();
  }
  RC_ASSERT(got_lookup.rfind("learned_lookup: row position_offset + positions[", 0) == 0);
}

// ---- reference spot checks -------------------------------------------------------------------

TEST(LearnedReferenceSpot, MatchesHandComputedValues) {
  // 4 rows x 2 channels, offset 1: positions {0, 2, -1} read rows {1, 3, 0}.
  const LearnedParams p{4, 2, 1};
  const std::vector<double> table = {0.5, -1.0, 0.25, 2.0, 1.0, 1.0, -0.5, 0.125};
  const std::vector<std::int64_t> pos = {0, 2, -1};
  const std::vector<double> e = {1.0, 1.0, 0.5, 0.5, 0.0, -2.0};
  EXPECT_EQ(reference::learned_lookup<double>(p, table, pos),
            (std::vector<double>{0.25, 2.0, -0.5, 0.125, 0.5, -1.0}));
  EXPECT_EQ(reference::learned_apply<double>(p, table, pos, e),
            (std::vector<double>{1.25, 3.0, 0.0, 0.625, 0.5, -3.0}));
  const std::vector<std::int64_t> last = {2};  // row 3, the last valid one
  EXPECT_EQ(reference::learned_lookup<double>(p, table, last), (std::vector<double>{-0.5, 0.125}));
}

TEST(LearnedReferenceSpot, RejectsBadArguments) {
  auto expect_message = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<double> t8(8, 0.0), e2(2, 0.0);
  const std::vector<std::int64_t> p0 = {0};
  expect_message(
      [&] {
        reference::learned_apply<double>({0, 2, 0}, {}, p0, e2);
      },
      "learned_apply: max_positions must be positive (got 0)");
  expect_message(
      [&] {
        reference::learned_apply<double>({4, 0, 0}, {}, p0, {});
      },
      "learned_apply: d_model must be positive (got 0)");
  expect_message(
      [&] {
        reference::learned_apply<double>({4, 2, 0}, std::vector<double>(7), p0, e2);
      },
      "learned_apply: table must have max_positions * d_model = 8 entries (got 7)");
  expect_message(
      [&] {
        reference::learned_apply<double>({4, 2, 0}, t8, p0, std::vector<double>(3));
      },
      "learned_apply: e must have tokens * d_model = 2 entries (got 3)");
  const std::vector<std::int64_t> huge = {std::numeric_limits<std::int64_t>::max()};
  expect_message(
      [&] {
        reference::learned_lookup<double>({4, 2, 1}, t8, huge);
      },
      "learned_lookup: position_offset 1 + positions[0] overflows int64");
  const std::vector<std::int64_t> four = {4};
  expect_message(
      [&] {
        reference::learned_lookup<double>({4, 2, 0}, t8, four);
      },
      "learned_lookup: row position_offset + positions[0] must lie in [0, "
      "max_positions = 4) (got 4)");
}

// ---- optimized kernels against the oracle ----------------------------------------------------

struct OptCase {
  LearnedParams p;
  std::vector<std::int64_t> pos;
  std::vector<double> table, e;
  int table_scale = 0;  // P = dyadic * 2^-table_scale, so that most sums must round
};

rc::Gen<OptCase> gen_opt_case() {
  return rc::gen::exec([] {
    OptCase c;
    c.p = *gen_learned_params();
    const int n = *rc::gen::inRange(0, 9);
    c.pos = gen_valid_positions(c.p, n);
    c.table_scale = *rc::gen::inRange(0, 41);
    c.table = *gen_dyadic_vector(static_cast<int>(c.p.max_positions * c.p.d_model), 24);
    for (auto& v : c.table) v = std::ldexp(v, -c.table_scale);
    c.e = *gen_dyadic_vector(n * c.p.d_model, 24);
    return c;
  });
}

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

/// Checks h (kernel type T) against the mp50 oracle: within the contract's bound and, as the
/// contract claims, equal to the oracle rounded once to T. Gathered rows must be exact.
template <class T>
void check_against_oracle(const OptCase& c, const std::vector<T>& rows, const std::vector<T>& h,
                          double* max_ratio) {
  const auto tab = to_real<mp50>(c.table);
  const auto want_rows = reference::learned_lookup<mp50>(c.p, tab, c.pos);
  const auto want = reference::learned_apply<mp50>(c.p, tab, c.pos, to_real<mp50>(c.e));
  const double eps = std::is_same_v<T, float> ? 0x1p-23 : 0x1p-52;
  for (std::size_t j = 0; j < h.size(); ++j) {
    const std::string where = "token " + std::to_string(j / dsz(c.p)) + " (position " +
                              std::to_string(c.pos[j / dsz(c.p)]) + ", offset " +
                              std::to_string(c.p.position_offset) + ") channel " +
                              std::to_string(j % dsz(c.p));
    if (!(mp50(rows[j]) == want_rows[j])) {
      RC_FAIL(where + ": gathered row " + std::to_string(rows[j]) + " is not the table value " +
              want_rows[j].str(20));
    }
    const double cond =
        std::fabs(static_cast<double>(c.e[j])) + std::fabs(static_cast<double>(want_rows[j]));
    const double bound = optimized::kLearnedMaxError * eps * cond;
    const double err = std::fabs(static_cast<double>(mp50(h[j]) - want[j]));
    if (bound > 0) *max_ratio = std::max(*max_ratio, err / bound);
    if (err > bound) {
      RC_FAIL(
          describe_close(where, static_cast<double>(h[j]), static_cast<double>(want[j]), bound));
    }
    const T rounded = std::is_same_v<T, float> ? static_cast<T>(round_to_f32(want[j]))
                                               : static_cast<T>(round_to_f64(want[j]));
    if (std::memcmp(&rounded, &h[j], sizeof(T)) != 0) {
      RC_FAIL(where + ": h is not the correctly rounded sum");
    }
  }
}

TEST(LearnedOptimized, MatchesOracleWithinBound) {
  double max_f32 = 0, max_f64 = 0;
  rc::detail::checkGTest([&] {
    const OptCase c = *gen_opt_case();
    const auto tf = cast<float>(c.table), ef = cast<float>(c.e);
    std::vector<float> rf(ef.size()), hf(ef.size());
    optimized::learned_lookup(c.p, tf, c.pos, rf);
    optimized::learned_apply(c.p, tf, c.pos, ef, hf);
    check_against_oracle<float>(c, rf, hf, &max_f32);
    std::vector<double> rd(c.e.size()), hd(c.e.size());
    optimized::learned_lookup(c.p, c.table, c.pos, rd);
    optimized::learned_apply(c.p, c.table, c.pos, c.e, hd);
    check_against_oracle<double>(c, rd, hd, &max_f64);
  });
  // The measured worst case, in units of the contract's bound (the closing note quotes it).
  std::printf("LearnedOptimized measured max error: float %.4f of kLearnedMaxError, double %.4f\n",
              max_f32, max_f64);
}

RC_GTEST_PROP(LearnedOptimized, DecodeWithOffsetEqualsFullForward, ()) {
  LearnedParams p = *gen_learned_params();
  const std::int64_t n =
      *rc::gen::inRange<std::int64_t>(1, std::min<std::int64_t>(p.max_positions, 12) + 1);
  p.position_offset = *rc::gen::inRange<std::int64_t>(0, p.max_positions - n + 1);
  const std::size_t d = dsz(p);
  const auto table =
      cast<float>(*gen_dyadic_vector(static_cast<int>(p.max_positions * p.d_model), 24));
  const auto e = cast<float>(*gen_dyadic_vector(static_cast<int>(n * p.d_model), 24));
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < n; ++t) all[t] = t;
  std::vector<float> full(e.size());
  optimized::learned_apply(p, table, all, e, full);
  for (std::int64_t k = 0; k <= n; ++k) {
    LearnedParams dec = p;
    dec.position_offset = p.position_offset + k;
    std::vector<float> h(e.size());
    optimized::learned_apply(p, table, std::span(all).first(k), std::span(e).first(k * d),
                             std::span(h).first(k * d));
    optimized::learned_apply(dec, table, std::span(all).first(n - k), std::span(e).subspan(k * d),
                             std::span(h).subspan(k * d));
    RC_ASSERT(same_bits(h, full));
  }
}

/// Sizes above the kernel's parallel threshold, filled from the counter PRNG (RapidCheck's
/// element-wise generators would dominate the run time at this size).
RC_GTEST_PROP(LearnedOptimized, IdenticalBitsForAnyThreadCount, ()) {
  LearnedParams p;
  p.max_positions = *rc::gen::inRange<std::int64_t>(1, 65);
  p.d_model = *rc::gen::inRange(64, 257);
  p.position_offset = *rc::gen::inRange<std::int64_t>(0, p.max_positions);
  const std::int64_t min_tokens = optimized::kLearnedParallelMinElements / p.d_model + 1;
  const int n = static_cast<int>(min_tokens + *rc::gen::inRange(0, 16));
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  std::vector<float> table(static_cast<std::size_t>(p.max_positions * p.d_model)), e(n * dsz(p));
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i] = std::ldexp(static_cast<float>(golden::prng_int(seed, 1, i, (1 << 24) - 1)), -30);
  }
  for (std::size_t i = 0; i < e.size(); ++i) {
    e[i] = std::ldexp(static_cast<float>(golden::prng_int(seed, 2, i, (1 << 24) - 1)), -24);
  }
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
  for (int t = 0; t < n; ++t) {
    const std::int64_t row =
        golden::prng_value(seed, 3, t) % static_cast<std::uint64_t>(p.max_positions);
    pos[t] = row - p.position_offset;
  }
  std::vector<float> ref(e.size()), ref_rows(e.size());
  omp_set_num_threads(1);
  optimized::learned_apply(p, table, pos, e, ref);
  optimized::learned_lookup(p, table, pos, ref_rows);
  // One team size per run (each run forks twice): cheap enough on a loaded 2-core machine.
  const int threads = *rc::gen::element(2, 3, 7);
  RC_TAG(threads);
  omp_set_num_threads(threads);
  std::vector<float> h(e.size()), rows(e.size());
  optimized::learned_apply(p, table, pos, e, h);
  optimized::learned_lookup(p, table, pos, rows);
  omp_set_num_threads(omp_get_num_procs());
  RC_ASSERT(same_bits(h, ref));
  RC_ASSERT(same_bits(rows, ref_rows));
}

RC_GTEST_PROP(LearnedOptimized, InPlaceEqualsOutOfPlace, ()) {
  const OptCase c = *gen_opt_case();
  const auto tf = cast<float>(c.table);
  auto ef = cast<float>(c.e);
  std::vector<float> out(ef.size());
  optimized::learned_apply(c.p, tf, c.pos, ef, out);
  optimized::learned_apply(c.p, tf, c.pos, ef, ef);
  RC_ASSERT(same_bits(ef, out));
}

RC_GTEST_PROP(LearnedOptimized, RejectsPositionsOutsideTable, ()) {
  const LearnedParams p = *gen_learned_params();
  const int n = *rc::gen::inRange(1, 6);
  const std::vector<float> table(p.max_positions * p.d_model, 0.25f), e(n * p.d_model, 0.5f);
  std::vector<float> h(e.size());
  auto pos = gen_valid_positions(p, n);
  const int bad = *rc::gen::inRange(0, n);
  const std::int64_t row = *gen_bad_row(p);
  pos[bad] = row - p.position_offset;
  const std::string want = "row position_offset + positions[" + std::to_string(bad) +
                           "] must lie in [0, max_positions = " + std::to_string(p.max_positions) +
                           ") (got " + std::to_string(row) + ")";
  for (const char* fn : {"learned_apply", "learned_lookup"}) {
    std::string got = "no exception";
    try {
      if (std::string(fn) == "learned_apply") {
        optimized::learned_apply(p, table, pos, e, h);
      } else {
        optimized::learned_lookup(p, table, pos, h);
      }
    } catch (const InvalidArgument& ex) {
      got = ex.what();
    }
    RC_ASSERT(got == std::string(fn) + ": " + want);
  }
}

TEST(LearnedOptimized, RejectsBadArguments) {
  const LearnedParams p{4, 2, 0};
  const std::vector<float> table(8, 1.0f);
  const std::vector<std::int64_t> pos = {0, 3};
  std::vector<float> e(4, 0.5f), h(4);
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
        optimized::learned_apply({4, 0, 0}, std::span<const float>{}, pos, std::span<const float>{},
                                 std::span<float>{});
      },
      "learned_apply: d_model must be positive (got 0)");
  expect_message([&] { optimized::learned_apply(p, std::span(table).first(7), pos, e, h); },
                 "learned_apply: table must have max_positions * d_model = 8 entries (got 7)");
  expect_message([&] { optimized::learned_apply(p, table, pos, std::span(e).first(3), h); },
                 "learned_apply: e must have tokens * d_model = 4 entries (got 3)");
  expect_message([&] { optimized::learned_lookup(p, table, pos, std::span(h).first(2)); },
                 "learned_lookup: rows must have tokens * d_model = 4 entries (got 2)");
  expect_message(
      [&] {
        std::vector<float> buf(5, 0.5f);
        optimized::learned_apply(p, table, pos, std::span<const float>(buf).first(4),
                                 std::span<float>(buf).subspan(1, 4));
      },
      "learned_apply: h and e overlap without being identical (got partial overlap)");
  expect_message(
      [&] {
        std::vector<float> buf(12, 0.5f);
        optimized::learned_apply(p, std::span<const float>(buf).first(8), pos,
                                 std::span<const float>(e), std::span<float>(buf).subspan(6, 4));
      },
      "learned_apply: h overlaps the table");
  expect_message(
      [&] {
        std::vector<float> buf(8, 0.5f);
        optimized::learned_lookup(p, std::span<const float>(buf), pos,
                                  std::span<float>(buf).first(4));
      },
      "learned_lookup: rows overlaps the table");
  expect_message(
      [&] {
        const std::vector<std::int64_t> huge = {0, std::numeric_limits<std::int64_t>::max()};
        optimized::learned_apply({4, 2, 1}, table, huge, e, h);
      },
      "learned_apply: position_offset 1 + positions[1] overflows int64");
}

// ---- golden catalog ----------------------------------------------------------------------------


// First: it stops at the first stale case, which also ends a generator mutant run quickly.
TEST(LearnedGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("learned", 6); }
TEST(LearnedGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("learned"); }

TEST(LearnedGolden, EngineMistakesAreCaught) {
  const auto dir = golden::default_data_dir();
  const auto& learned = golden::scheme_by_slug("learned");
  bool saw_offset_case = false;
  for (const auto& row : learned.cases()) {
    const auto lc = golden::load_case(dir / "learned" / (row.id + ".json"));
    const bool has_offset =
        lc.spec.manifest.at("params").at("position_offset").get<std::int64_t>() != 0;
    saw_offset_case |= has_offset;
    for (const auto& mistake : learned.mistakes()) {
      const auto out = learned.run_engine(lc.spec, lc.golden, {mistake});
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, true});
      if (mistake == "ignore-offset" && !has_offset) {
        // Dropping a zero offset changes nothing: only the decode cases can expose it.
        EXPECT_EQ(r.status, golden::Verdict::kPass) << golden::format_case_text(r, true);
      } else {
        EXPECT_EQ(r.status, golden::Verdict::kFail) << row.id << " with mistake " << mistake;
        for (const auto& t : r.tensors) {
          if (t.name == "h" && t.status == golden::Verdict::kFail) {
            EXPECT_NE(t.worst.where.find("(position "), std::string::npos) << t.worst.where;
          }
          if (mistake == "double-add") {  // a right lookup with a wrong sum: only h fails
            EXPECT_EQ(t.status, t.name == "h" ? golden::Verdict::kFail : golden::Verdict::kPass) << row.id << " " << t.name;
          }
        }
      }
    }
  }
  EXPECT_TRUE(saw_offset_case) << "no golden case exercises a nonzero position_offset";
}

TEST(LearnedGolden, PipelinesPassTheirProfiles) { expect_pipelines_pass_their_profiles("learned", 0.25); }

}  // namespace
}  // namespace posenc::properties
