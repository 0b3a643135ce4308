// posenc's KV-cache properties, run on a user's own cache (docs/property-testing.md;
// check/rope.hpp has the conventions).
//
//   #include "check/kv_cache.hpp"
//   posenc::check::KvStepFunction my_session(const posenc::check::KvCacheCheckConfig& c) {
//     auto cache = std::make_shared<MyCache>(c);               // the session keeps its cache
//     return [cache](const posenc::check::KvStepCall& s) { cache->step(s); };  // fills s.out
//   }
//   POSENC_KV_CACHE_PROPERTIES(MyCache, my_session, "fp32");   // MyCache.Oracle, .PrefillDecode
//
// The calling convention is golden/cases/check_kv_cache.hpp (KvCacheCheckConfig, KvStepCall).
// For each drawn configuration (heads and kv heads, head_dim, RoPE base and layout, a plain cache
// or a sliding window in a ring buffer smaller than the sequence) posenc builds the kv_cache
// golden trace of a prefill followed by one-token decode steps in memory: the mp50 oracle and
// the generator's per-profile budgets (golden/schemes/kv_cache/kv_cache_golden.cpp: optimized::kKvCacheMaxError
// eps (A + B) plus the profile's RoPE angle errors). The properties (RapidCheck; seed and
// max_success from RC_PARAMS):
//   Oracle         every output of the prefill and of each decode step is within its budget of
//                  the oracle
//   PrefillDecode  a fresh session given all the tokens in one step agrees with prefill + decode
//                  steps: each output within 2 budgets of the other (each is within one budget
//                  of the same exact value)
// A failure names the shrunk configuration, the worst output (step, position, head, channel)
// and, when the outputs are those of a known numbering mistake, the mistake in words: positions
// restarting at 0 after the prefill, or the cache length taken as the position.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "check/run.hpp"
#include "golden/cases/check_kv_cache.hpp"
#include "reference/common/errors.hpp"

namespace posenc::check {

namespace detail {

inline KvDraw kv_draw(const KvCacheCheckOptions& o) {
  KvDraw d;
  KvCacheCheckConfig& c = d.config;
  c.n_kv_heads = *rc::gen::elementOf(std::vector<int>{1, 2});
  c.n_heads = c.n_kv_heads * *rc::gen::elementOf(std::vector<int>{1, 2});
  c.head_dim = *rc::gen::elementOf(o.head_dims);
  c.base = *rc::gen::elementOf(o.bases);
  c.layout = *rc::gen::elementOf(o.layouts);
  d.prefill = *rc::gen::inRange(1, o.max_prefill + 1);
  d.decode = *rc::gen::inRange(1, o.max_decode + 1);
  const std::int64_t n = d.prefill + d.decode;
  if (o.sliding_window && *rc::gen::arbitrary<bool>()) {
    // a ring smaller than the sequence (n >= 2): it fills
    c.capacity = *rc::gen::inRange<std::int64_t>(1, n);
    c.window = *rc::gen::inRange<std::int64_t>(1, c.capacity + 1);
  } else {
    c.capacity = n;  // every token stays
  }
  d.seed = *rc::gen::inRange<std::uint64_t>(1, 1u << 30);
  return d;
}

}  // namespace detail

/// Runs one KV-cache property (RapidCheck); the message has the shrunk configuration and the
/// diagnosis. InvalidArgument for a profile other than strict, fp32, fp32-recurrence.
inline PropertyResult check_kv_cache_property(KvCacheProperty which,
                                              const KvSessionFactory& factory,
                                              const KvCacheCheckOptions& o) {
  const char* fn = "posenc::check::check_kv_cache_property";
  detail::kv_check_profile(o.profile, fn);
  if (o.head_dims.empty() || o.bases.empty() || o.layouts.empty() || o.max_prefill < 1 ||
      o.max_decode < 1) {
    throw_invalid(fn,
                  "head_dims, bases and layouts must be non-empty, max_prefill and max_decode "
                  ">= 1",
                  o.max_decode);
  }
  for (int hd : o.head_dims) {
    if (hd <= 0 || hd % 2 != 0) throw_invalid(fn, "head_dims must be even and > 0", hd);
  }
  auto shrunk = std::make_shared<detail::KvDraw>();
  const auto prop = [=]() {
    const detail::KvDraw d = detail::kv_draw(o);
    std::string f;
    try {
      f = detail::kv_property_at(which, factory, d, o.profile);
    } catch (const std::exception& e) {
      f = std::string("the cache threw: ") + e.what();
    }
    if (!f.empty()) {
      *shrunk = d;
      RC_FAIL(std::string(kv_cache_property_name(which)) + " fails at " + detail::describe(d) +
              "\n" + f);
    }
  };
  PropertyResult r =
      detail::run_property(std::string("posenc kv_cache ") + kv_cache_property_name(which),
                           o.max_success, prop);
  if (r.passed) return r;
  r.message += "\nshrunk configuration: " + detail::describe(*shrunk) + "\n";
  return r;
}

namespace detail {

inline KvCacheCheckOptions kv_options(const char* profile) {
  KvCacheCheckOptions o;
  o.profile = profile;
  return o;
}
inline KvCacheCheckOptions kv_options(KvCacheCheckOptions o) { return o; }
}  // namespace detail

/// Registers suite.Oracle and suite.PrefillDecode as GoogleTest tests.
inline bool register_kv_cache_properties(const char* suite, KvSessionFactory factory,
                                         KvCacheCheckOptions o) {
  detail::kv_check_profile(o.profile, "posenc::check::register_kv_cache_properties");
  for (KvCacheProperty p : {KvCacheProperty::kOracle, KvCacheProperty::kPrefillDecode}) {
    ::testing::RegisterTest(suite, kv_cache_property_name(p), nullptr, nullptr, __FILE__,
                            __LINE__, [=]() -> ::testing::Test* {
                              return new detail::PropertyTest(
                                  [=] { return check_kv_cache_property(p, factory, o); });
                            });
  }
  return true;
}

}  // namespace posenc::check

/// POSENC_KV_CACHE_PROPERTIES(Suite, factory, "fp32" | KvCacheCheckOptions):
/// Suite.Oracle, Suite.PrefillDecode.
#define POSENC_KV_CACHE_PROPERTIES(Suite, factory, profile_or_options)                  \
  [[maybe_unused]] static const bool posenc_kv_cache_properties_registered_##Suite =    \
      ::posenc::check::register_kv_cache_properties(                                    \
          #Suite, factory, ::posenc::check::detail::kv_options(profile_or_options))
