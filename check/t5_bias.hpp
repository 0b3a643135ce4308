// posenc's T5 bucket properties, run on a user's own bucket function
// (docs/property-testing.md; check/rope.hpp has the conventions).
//
//   #include "check/t5_bias.hpp"
//   void my_buckets(const posenc::check::T5BucketCall& c) { ... }  // fills c.buckets
//   POSENC_T5_BIAS_PROPERTIES(MyT5, my_buckets);                    // MyT5.Buckets, .Monotonic
//
// Buckets are integers and a gather is exact, so every profile judges them the same way: equal to
// posenc's exact bucket (reference/t5_bias.hpp, which settles ties of the float truncation with
// integer arithmetic). The properties (RapidCheck; seed and max_success from RC_PARAMS):
//   Buckets    every bucket equals the exact one, at drawn relative positions r = key - query
//              (both directions, around max_exact and max_distance, up to 4 max_distance)
//   Monotonic  past keys (r <= 0): the bucket does not decrease as -r grows; bidirectional
//              future keys (r > 0): in the upper half (>= num_buckets / 2), not decreasing in r;
//              causal future keys: bucket 0
// A failure names the shrunk call and, when it explains the output, the known mistake: the
// relative position taken as query - key (direction flipped), or the other of bidirectional and
// causal.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "check/run.hpp"
#include "golden/cases/check_rope.hpp"  // PropertyResult
#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"
#include "reference/t5_bias.hpp"

namespace posenc::check {

/// One call of a user's bucket function: buckets[i] for relative_positions[i] = key - query.
struct T5BucketCall {
  int num_buckets = 32;
  std::int64_t max_distance = 128;
  bool bidirectional = true;
  span<const std::int64_t> relative_positions;
  span<std::int32_t> buckets;
};
using T5BucketKernel = std::function<void(const T5BucketCall&)>;

struct T5BucketCheckOptions {
  std::vector<int> num_buckets = {8, 32, 64};
  std::vector<std::int64_t> max_distances = {128, 256, 1000};
  int max_positions = 16;
  int max_success = 25;
};

enum class T5BucketProperty { kBuckets, kMonotonic };
inline const char* t5_bucket_property_name(T5BucketProperty p) {
  return p == T5BucketProperty::kBuckets ? "Buckets" : "Monotonic";
}

namespace detail {

struct T5Draw {
  reference::T5BiasParams p;
  std::vector<std::int64_t> r;
};

inline std::string describe(const T5Draw& d) {
  std::ostringstream os;
  os << "num_buckets " << d.p.num_buckets << ", max_distance " << d.p.max_distance << ", "
     << (d.p.bidirectional ? "bidirectional" : "causal") << ", relative positions [";
  for (std::size_t i = 0; i < d.r.size(); ++i) os << (i ? ", " : "") << d.r[i];
  os << "]";
  return os.str();
}

inline std::vector<std::int32_t> run_buckets(const T5BucketKernel& k, const T5Draw& d,
                                             const std::vector<std::int64_t>& r) {
  std::vector<std::int32_t> b(r.size(), -1);
  T5BucketCall c;
  c.num_buckets = d.p.num_buckets;
  c.max_distance = d.p.max_distance;
  c.bidirectional = d.p.bidirectional;
  c.relative_positions = r;
  c.buckets = b;
  k(c);
  return b;
}

/// Which known mistake the buckets are, if any.
inline std::string t5_diagnosis(const T5Draw& d, const std::vector<std::int32_t>& b) {
  auto all = [&](auto expect) {
    for (std::size_t i = 0; i < d.r.size(); ++i) {
      if (b[i] != expect(d.r[i])) return false;
    }
    return true;
  };
  std::vector<std::string> fits;  // every known mistake the buckets are (a call may not tell)
  if (all([&](std::int64_t r) { return reference::t5_bias_bucket(d.p, -r); })) {
    fits.push_back("the direction is flipped (relative position taken as query - key instead of "
                   "key - query)");
  }
  reference::T5BiasParams other = d.p;
  other.bidirectional = !d.p.bidirectional;
  if (all([&](std::int64_t r) { return reference::t5_bias_bucket(other, r); })) {
    fits.push_back(std::string(d.p.bidirectional ? "causal" : "bidirectional") +
                   " buckets for a " + (d.p.bidirectional ? "bidirectional" : "causal") + " call");
  }
  if (fits.empty()) return "";
  std::string s = "\ndiagnosis: " + fits[0];
  for (std::size_t i = 1; i < fits.size(); ++i) s += "; or " + fits[i];
  return fits.size() > 1 ? s + " (this call cannot tell them apart)" : s;
}

inline std::string t5_property_at(T5BucketProperty which, const T5BucketKernel& kernel,
                                  const T5Draw& d) {
  const std::vector<std::int32_t> b = run_buckets(kernel, d, d.r);
  for (std::size_t i = 0; i < d.r.size(); ++i) {
    const int want = reference::t5_bias_bucket(d.p, d.r[i]);
    if (b[i] == want) continue;
    return "bucket of relative position " + std::to_string(d.r[i]) + " (key - query) = " +
           std::to_string(b[i]) + ", exact " + std::to_string(want) + t5_diagnosis(d, b);
  }
  if (which == T5BucketProperty::kBuckets) return "";
  // Monotonic: sweep each drawn r's direction from 0 outwards to |r|, in steps.
  const int half = d.p.num_buckets / 2;
  for (std::int64_t r0 : d.r) {
    std::vector<std::int64_t> sweep;
    const std::int64_t n = r0 < 0 ? -r0 : r0, step = std::max<std::int64_t>(1, n / 64);
    for (std::int64_t x = 0; x <= n; x += step) sweep.push_back(r0 < 0 ? -x : x);
    const std::vector<std::int32_t> s = run_buckets(kernel, d, sweep);
    for (std::size_t i = 0; i < sweep.size(); ++i) {
      const std::int64_t r = sweep[i];
      if (r > 0 && !d.p.bidirectional && s[i] != 0) {
        return "causal call: future key at relative position " + std::to_string(r) +
               " has bucket " + std::to_string(s[i]) + ", not 0";
      }
      if (r > 0 && d.p.bidirectional && s[i] < half) {
        return "bidirectional call: future key at relative position " + std::to_string(r) +
               " has bucket " + std::to_string(s[i]) + ", below the upper half (>= " +
               std::to_string(half) + ")";
      }
      if (i > 0 && s[i] < s[i - 1]) {
        return "the bucket decreases with the distance: relative position " +
               std::to_string(sweep[i - 1]) + " -> bucket " + std::to_string(s[i - 1]) + ", " +
               std::to_string(r) + " -> bucket " + std::to_string(s[i]);
      }
    }
  }
  return "";
}

inline T5Draw t5_draw(const T5BucketCheckOptions& o) {
  T5Draw d;
  d.p.num_buckets = *rc::gen::elementOf(o.num_buckets);
  d.p.max_distance = *rc::gen::elementOf(o.max_distances);
  d.p.bidirectional = *rc::gen::arbitrary<bool>();
  const std::int64_t e = reference::t5_bias_max_exact(d.p), dm = d.p.max_distance;
  const std::vector<std::int64_t> edges = {0, 1, e - 1, e, e + 1, dm - 1, dm, dm + 1};
  const auto one = rc::gen::oneOf(
      rc::gen::map(rc::gen::elementOf(edges), [](std::int64_t x) { return x; }),
      rc::gen::map(rc::gen::elementOf(edges), [](std::int64_t x) { return -x; }),
      rc::gen::inRange<std::int64_t>(-4 * dm, 4 * dm + 1));
  const int n = *rc::gen::inRange(1, o.max_positions + 1);
  for (int i = 0; i < n; ++i) d.r.push_back(*one);
  return d;
}

}  // namespace detail

/// Runs one T5 bucket property (RapidCheck); the message has the shrunk call and the diagnosis.
inline PropertyResult check_t5_bucket_property(T5BucketProperty which,
                                               const T5BucketKernel& kernel,
                                               const T5BucketCheckOptions& o) {
  if (o.num_buckets.empty() || o.max_distances.empty() || o.max_positions < 1) {
    throw_invalid("posenc::check::check_t5_bucket_property",
                  "num_buckets and max_distances must be non-empty and max_positions >= 1",
                  o.max_positions);
  }
  for (int n : o.num_buckets) {
    for (std::int64_t dm : o.max_distances) {
      reference::T5BiasParams p;
      p.num_buckets = n;
      p.max_distance = dm;
      reference::t5_bias_check(p, "posenc::check::check_t5_bucket_property");
    }
  }
  auto shrunk = std::make_shared<detail::T5Draw>();
  const auto prop = [=]() {
    const detail::T5Draw d = detail::t5_draw(o);
    std::string f;
    try {
      f = detail::t5_property_at(which, kernel, d);
    } catch (const std::exception& e) {
      f = std::string("the kernel threw: ") + e.what();
    }
    if (!f.empty()) {
      *shrunk = d;
      RC_FAIL(std::string(t5_bucket_property_name(which)) + " fails at " + detail::describe(d) +
              "\n" + f);
    }
  };
  PropertyResult r =
      detail::run_property(std::string("posenc t5_bias ") + t5_bucket_property_name(which),
                           o.max_success, prop);
  if (r.passed) return r;
  r.message += "\nshrunk call: " + detail::describe(*shrunk) + "\n";
  return r;
}

/// Registers suite.Buckets and suite.Monotonic as GoogleTest tests.
inline bool register_t5_bucket_properties(const char* suite, T5BucketKernel kernel,
                                          T5BucketCheckOptions o = {}) {
  for (T5BucketProperty p : {T5BucketProperty::kBuckets, T5BucketProperty::kMonotonic}) {
    ::testing::RegisterTest(suite, t5_bucket_property_name(p), nullptr, nullptr, __FILE__,
                            __LINE__, [=]() -> ::testing::Test* {
                              return new detail::PropertyTest(
                                  [=] { return check_t5_bucket_property(p, kernel, o); });
                            });
  }
  return true;
}

}  // namespace posenc::check

/// POSENC_T5_BIAS_PROPERTIES(Suite, kernel[, options]): Suite.Buckets, Suite.Monotonic.
#define POSENC_T5_BIAS_PROPERTIES(Suite, ...)                                       \
  [[maybe_unused]] static const bool posenc_t5_bias_properties_registered_##Suite = \
      ::posenc::check::register_t5_bucket_properties(#Suite, __VA_ARGS__)
