// posenc's RoPE properties, run on a user's own kernel (docs/property-testing.md).
//
// The user writes one function with the signature of RopeKernel (below) and registers it:
//
//   #include "check/rope.hpp"
//   void my_rope(const posenc::check::RopeCall& c) { ... }   // fills c.q_out and c.k_out
//   POSENC_ROPE_PROPERTIES(MyRope, my_rope, "fp32");          // 4 GoogleTest tests
//
// Each test is a RapidCheck property (seed and max_success from RC_PARAMS; the seed is printed)
// that draws a call (head_dim, rotary_dim, base, pairing layout, heads, token positions from the
// hard positions and up to 2^24, q and k values) and builds, in memory, the golden case of that
// call (golden/cases/rope_case.hpp: the mp50 oracle cross-checked with mp100 and the budgets of
// every profile, the same bounds `posenc verify` applies). The tests:
//   Oracle       q_rot, k_rot within the named profile's budget of the oracle (verify_case)
//   Relative     <R(m)q, R(n)k> = <R(m+s)q, R(n+s)k>: the kernel's two dot products differ by at
//                most the sum of the two cases' `scores` budgets (each is within its own)
//   PairNorm     | ||y_pair|| - ||x_pair|| | <= budget(y_a) + budget(y_b) (a = 1); tail channels
//                (>= rotary_dim) copied bit for bit (their budget is 0)
//   Composition  R(a) applied to the kernel's own R(b) x equals R(a + b) x: per pair within the
//                budget of both rotations plus the first rotation's actual error (it is rotated
//                rigidly by the exact R(a))
// Every property also judges the kernel's outputs at the inputs it draws against the oracle, so a
// failure names the property, the shrunk call (positions, dims, base, layout, seed), the worst
// element with its budget, and, through posenc's diagnoser (golden/cases/diagnose.hpp), what the
// output is when a known pipeline or mistake explains it (offset, pairing, sin-sign, ...).
//
// Only float32 kernels are driven: profiles strict, fp32 and fp32-recurrence (bf16 and f16 judge
// 16-bit targets). The properties are compiled into posenc::golden (golden/cases/check_rope.cpp);
// this header is the RapidCheck and GoogleTest glue: link posenc::golden, rapidcheck and GTest.
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
#include "golden/cases/check_rope.hpp"  // RopeCall, RopeCheckOptions, the compiled properties
#include "golden/format/profiles.hpp"
#include "reference/common/errors.hpp"

namespace posenc::check {
namespace detail {

inline rc::Gen<std::int64_t> position_gen(std::int64_t max_position) {
  const std::vector<std::int64_t> hard = hard_position_values(max_position);
  const std::int64_t top = std::min<std::int64_t>(max_position, std::int64_t{1} << 24);
  return rc::gen::oneOf(rc::gen::elementOf(hard), rc::gen::inRange<std::int64_t>(0, 65),
                        rc::gen::inRange<std::int64_t>(0, top + 1));
}

inline RopeDraw draw(RopeProperty which, const RopeCheckOptions& o) {
  RopeDraw d;
  d.head_dim = *rc::gen::elementOf(o.head_dims);
  d.rotary_dim = d.head_dim;
  if (o.partial_rotary && d.head_dim % 4 == 0 && *rc::gen::arbitrary<bool>()) d.rotary_dim /= 2;
  d.base = *rc::gen::elementOf(o.bases);
  d.layout = *rc::gen::elementOf(o.layouts);
  d.n_heads = *rc::gen::inRange(1, 3);
  d.seed = *rc::gen::inRange<std::uint32_t>(0, 1u << 30);
  const auto pos = position_gen(o.max_position);
  if (which == RopeProperty::kOracle || which == RopeProperty::kPairNorm) {
    d.positions = *rc::gen::container<std::vector<std::int64_t>>(
        static_cast<std::size_t>(*rc::gen::inRange(1, o.max_tokens + 1)), pos);
    return d;
  }
  if (which == RopeProperty::kRelative) d.positions = {*pos, *pos};
  if (which == RopeProperty::kComposition) d.positions = {*pos};
  const std::int64_t hi = *std::max_element(d.positions.begin(), d.positions.end());
  d.shift = std::min(*pos, std::max<std::int64_t>(o.max_position - hi, 0));
  return d;
}

}  // namespace detail


/// Runs one property on a kernel (RapidCheck, seed from RC_PARAMS). On failure the message has
/// the property, the shrunk call, the profile's bound and verify's report of the worst element,
/// and posenc's diagnosis of the outputs at that call.
inline PropertyResult check_rope_property(RopeProperty which, const RopeKernel& kernel,
                                          const RopeCheckOptions& o) {
  const std::string profile = golden::canonical_profile(o.profile);
  if (profile != "strict" && profile != "fp32" && profile != "fp32-recurrence") {
    throw_invalid("posenc::check::check_rope_property",
                  "profile must be strict, fp32 (fp32-angles) or fp32-recurrence (float32 kernels; "
                  "bf16 and f16 judge 16-bit targets)",
                  o.profile);
  }
  if (o.head_dims.empty() || o.layouts.empty() || o.bases.empty() || o.max_tokens < 1) {
    throw_invalid("posenc::check::check_rope_property",
                  "head_dims, layouts and bases must be non-empty and max_tokens >= 1",
                  o.max_tokens);
  }
  auto last = std::make_shared<detail::LastFailure>();
  auto shrunk = std::make_shared<detail::RopeDraw>();
  const auto prop = [=]() {
    const detail::RopeDraw d = detail::draw(which, o);
    std::string f;
    try {
      f = detail::property_at(which, kernel, profile, d, last.get());
    } catch (const std::exception& e) {
      f = std::string("the kernel or the case threw: ") + e.what();
    }
    if (!f.empty()) {
      *shrunk = d;
      RC_FAIL(std::string(rope_property_name(which)) + " fails at " + detail::describe(d) +
              "\n" + f);
    }
  };
  PropertyResult r =
      detail::run_property(std::string("posenc rope ") + rope_property_name(which),
                           o.max_success, prop);
  if (r.passed) return r;
  r.message += "\nshrunk call: " + detail::describe(*shrunk) + "\n";
  const std::string dg = detail::diagnose_last(*last, profile);
  if (!dg.empty()) r.message += dg + "\n";
  return r;
}

/// Registers the four properties as GoogleTest tests suite.Oracle, suite.Relative,
/// suite.PairNorm, suite.Composition. Call before RUN_ALL_TESTS (the macro below does it at
/// static initialisation).
inline bool register_rope_properties(const char* suite, RopeKernel kernel, RopeCheckOptions o) {
  for (RopeProperty p : rope_properties()) {
    ::testing::RegisterTest(suite, rope_property_name(p), nullptr, nullptr, __FILE__, __LINE__,
                            [=]() -> ::testing::Test* {
                              return new detail::PropertyTest(
                                  [=] { return check_rope_property(p, kernel, o); });
                            });
  }
  return true;
}
inline bool register_rope_properties(const char* suite, RopeKernel kernel, const char* profile) {
  RopeCheckOptions o;
  o.profile = profile;
  return register_rope_properties(suite, std::move(kernel), std::move(o));
}

}  // namespace posenc::check

/// POSENC_ROPE_PROPERTIES(Suite, kernel, profile_or_options): registers Suite.Oracle,
/// Suite.Relative, Suite.PairNorm and Suite.Composition for `kernel` (a RopeKernel callable).
#define POSENC_ROPE_PROPERTIES(Suite, kernel, profile_or_options)                 \
  [[maybe_unused]] static const bool posenc_rope_properties_registered_##Suite = \
      ::posenc::check::register_rope_properties(#Suite, (kernel), (profile_or_options))
