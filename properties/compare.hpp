// Numerical comparison helpers for properties: every failure message prints decimal and
// hexfloat values, the distance, and the distance in units of the tolerance.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck.h>

#include "reference/common/scalar.hpp"

namespace posenc::properties {

template <class Real>
double to_double(const Real& x) {
  return static_cast<double>(x);
}

/// Machine epsilon of Real as a double (mp50: about 2^-166, still a normal double).
template <class Real>
double eps_of() {
  return static_cast<double>(std::numeric_limits<Real>::epsilon());
}

/// True if a and b hold the same bits (the same sizes; empty vectors compare equal without
/// handing memcmp their null data pointers, which is undefined behaviour).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// True if every element of a and b holds the same bits as its partner (a result made of several
/// vectors, e.g. the rotated q and k).
template <class... T>
bool same_bits(const std::tuple<T...>& a, const std::tuple<T...>& b) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return (same_bits(std::get<I>(a), std::get<I>(b)) && ...);
  }(std::index_sequence_for<T...>{});
}

/// Identical bits for any thread count: runs `run()` with one OpenMP thread, then with each
/// count of `counts`, and RC_ASSERTs that each result (a vector or a tuple of vectors) has the
/// bits of the first. The thread count goes back to the number of processors afterwards, also
/// when an assertion fails.
template <class Run>
void rc_assert_same_bits_for_thread_counts(Run run, std::initializer_list<int> counts = {2, 3, 7}) {
  struct Restore {
    ~Restore() { omp_set_num_threads(omp_get_num_procs()); }
  } restore;
  omp_set_num_threads(1);
  const auto one = run();
  for (int threads : counts) {
    omp_set_num_threads(threads);
    RC_ASSERT(same_bits(run(), one));
  }
}

inline std::string describe_close(const std::string& what, double actual, double expected,
                                  double tol) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s: actual %.20g (%a), expected %.20g (%a), |diff| %.3g, tolerance %.3g "
                "(%.3g of tolerance)",
                what.c_str(), actual, expected, actual, expected, std::fabs(actual - expected),
                tol, tol > 0 ? std::fabs(actual - expected) / tol : INFINITY);
  return buf;
}

/// RapidCheck assertion |actual - expected| <= tol, computed in Real (no early rounding).
template <class Real>
void rc_assert_close(const Real& actual, const Real& expected, const Real& tol,
                     const std::string& what) {
  using std::fabs;
  using std::isnan;
  const Real diff = fabs(actual - expected);
  if (isnan(diff) || diff > tol) {
    RC_FAIL(describe_close(what, to_double(actual), to_double(expected), to_double(tol)));
  }
}

}  // namespace posenc::properties

/// A RapidCheck property over the reference's scalar types. Inside the body `Real` is the type
/// under test. It expands to one gtest per type, in suites <Suite>Float, <Suite>Double and
/// <Suite>Mp50 (e.g. RopeReferenceMp50.PreservesPairNorms): plain suites rather than a gtest
/// typed suite, because CMake's gtest_discover_tests cannot name typed tests whose type is a
/// long template, and so `ctest -LE mp` / `--gtest_filter=*Mp50*` select by precision.
#define POSENC_TYPED_PROP(Suite, Name)                                                  \
  template <class Real>                                                                 \
  struct Suite##_##Name##_Prop {                                                        \
    static void check();                                                                \
  };                                                                                    \
  TEST(Suite##Float, Name) { ::rc::detail::checkGTest(&Suite##_##Name##_Prop<float>::check); } \
  TEST(Suite##Double, Name) {                                                           \
    ::rc::detail::checkGTest(&Suite##_##Name##_Prop<double>::check);                    \
  }                                                                                     \
  TEST(Suite##Mp50, Name) {                                                             \
    ::rc::detail::checkGTest(&Suite##_##Name##_Prop<::posenc::mp50>::check);            \
  }                                                                                     \
  template <class Real>                                                                 \
  void Suite##_##Name##_Prop<Real>::check()
