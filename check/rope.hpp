// posenc's RoPE properties, run on a user's own kernel (README "Property-test your own kernel").
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
// 16-bit targets). Header-only; link posenc::golden, rapidcheck and GTest.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "golden/cases/diagnose.hpp"
#include "golden/cases/hard_positions.hpp"
#include "golden/cases/rope_call_case.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/element_budgets.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/scalar.hpp"
#include "reference/common/span.hpp"
#include "reference/rope.hpp"

namespace posenc::check {

using reference::RopeLayout;

/// One call of a user's RoPE kernel. Tensors are row-major [tokens, heads, head_dim]; token t is
/// at positions[t] for every head. Pairs: RopeLayout::kHalfSplit (i, i + rotary_dim/2), NeoX /
/// HF rotate_half; kInterleaved (2i, 2i + 1), GPT-J / Meta. Channels >= rotary_dim are copied.
/// inv_freq[i] = base^(-2i/rotary_dim) correctly rounded to double, for kernels that take a
/// table instead of the base. The kernel writes every element of q_out and k_out.
struct RopeCall {
  span<const std::int64_t> positions;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double base = 0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  span<const double> inv_freq;
  span<const float> q, k;
  span<float> q_out, k_out;
};
using RopeKernel = std::function<void(const RopeCall&)>;

/// What the properties draw, and under which profile they judge.
struct RopeCheckOptions {
  std::string profile = "fp32";  // strict, fp32 (fp32-angles), fp32-recurrence
  std::vector<RopeLayout> layouts = {RopeLayout::kHalfSplit, RopeLayout::kInterleaved};
  std::vector<int> head_dims = {8, 64, 128};
  bool partial_rotary = true;  // also draw rotary_dim = head_dim / 2
  std::vector<double> bases = {10000.0, 500000.0, 1000000.0};
  int max_tokens = 4;
  std::int64_t max_position = (std::int64_t{1} << 24) + 1;  // hard positions up to here too
  int max_success = 25;  // per property; RC_PARAMS max_success lowers it
};

enum class RopeProperty { kOracle, kRelative, kPairNorm, kComposition };

inline const char* rope_property_name(RopeProperty p) {
  switch (p) {
    case RopeProperty::kOracle: return "Oracle";
    case RopeProperty::kRelative: return "Relative";
    case RopeProperty::kPairNorm: return "PairNorm";
    case RopeProperty::kComposition: return "Composition";
  }
  return "?";
}

inline std::vector<RopeProperty> rope_properties() {
  return {RopeProperty::kOracle, RopeProperty::kRelative, RopeProperty::kPairNorm,
          RopeProperty::kComposition};
}

/// The outcome of one property run: passed, or the report of the shrunk counterexample.
struct PropertyResult {
  bool passed = false;
  std::string message;
};

namespace detail {

/// One drawn call: everything but the values, which the case draws from `seed`.
struct RopeDraw {
  int head_dim = 0, rotary_dim = 0, n_heads = 1;
  double base = 0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  std::vector<std::int64_t> positions;  // Oracle, PairNorm: the call; Relative: m, n
  std::int64_t shift = 0;               // Relative: s; Composition: positions = {b}, shift = a
  std::uint32_t seed = 0;
};

inline std::string describe(const RopeDraw& d) {
  std::ostringstream os;
  os << "head_dim " << d.head_dim << ", rotary_dim " << d.rotary_dim << ", base " << d.base
     << ", layout " << reference::rope_layout_name(d.layout) << ", heads " << d.n_heads
     << " (kv 1), positions [";
  for (std::size_t i = 0; i < d.positions.size(); ++i) os << (i ? ", " : "") << d.positions[i];
  os << "], shift " << d.shift << ", seed " << d.seed;
  return os.str();
}

/// The in-memory golden case of one call (q, k given or drawn from the seed).
inline golden::LoadedCase rope_case(const RopeDraw& d, const std::vector<std::int64_t>& positions,
                                    const std::vector<double>& q = {},
                                    const std::vector<double>& k = {}) {
  reference::RopeParams p;
  p.head_dim = d.head_dim;
  p.rotary_dim = d.rotary_dim;
  p.base = d.base;
  p.layout = d.layout;
  return golden::rope_call_case(p, d.n_heads, 1, positions, d.seed, q, k);
}

/// Runs the kernel on a case's inputs: q_rot and k_rot, [tokens, heads, head_dim] float32.
inline golden::TensorMap run_kernel(const RopeKernel& kernel, const RopeDraw& d,
                                    const golden::LoadedCase& lc) {
  const golden::Tensor& pt = lc.golden.at("positions");
  std::vector<std::int64_t> pos;
  for (std::int64_t i = 0; i < pt.numel(); ++i) pos.push_back(pt.get_i64(i));
  const std::vector<float> q = golden::tensor_to_f32(lc.golden.at("q"));
  const std::vector<float> k = golden::tensor_to_f32(lc.golden.at("k"));
  std::vector<double> inv(static_cast<std::size_t>(d.rotary_dim / 2));
  for (int i = 0; i < d.rotary_dim / 2; ++i) {
    inv[i] = static_cast<double>(pow(mp50(d.base), -mp50(2 * i) / mp50(d.rotary_dim)));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> qo(q.size(), nan), ko(k.size(), nan);
  RopeCall c;
  c.positions = pos;
  c.n_heads = d.n_heads;
  c.n_kv_heads = 1;
  c.head_dim = d.head_dim;
  c.rotary_dim = d.rotary_dim;
  c.base = d.base;
  c.layout = d.layout;
  c.inv_freq = inv;
  c.q = q;
  c.k = k;
  c.q_out = qo;
  c.k_out = ko;
  kernel(c);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  return golden::tensor_map({golden::tensor_from_f32("q_rot", {tn, d.n_heads, d.head_dim}, qo),
                             golden::tensor_from_f32("k_rot", {tn, 1, d.head_dim}, ko)});
}

using Budgets = golden::ElementBudgets;
inline Budgets budgets_of(const golden::LoadedCase& lc, const std::string& name,
                          const std::string& profile) {
  return golden::element_budgets(lc.spec, lc.golden, name, profile);
}

/// The verdict of verify on the kernel's outputs: "" when both pass, else the verbose report.
inline std::string oracle_failure(const golden::LoadedCase& lc, const golden::TensorMap& out,
                                  const std::string& profile) {
  golden::VerifyOptions o;
  o.profile = profile;
  golden::CaseSpec spec = lc.spec;  // judge the two stages a kernel produces
  std::erase_if(spec.expected, [](const golden::TensorSpec& t) {
    return t.name != "q_rot" && t.name != "k_rot";
  });
  const golden::CaseReport r = golden::verify_case(spec, lc.golden, out, o);
  bool ok = true;
  for (const auto& t : r.tensors) {
    if ((t.name == "q_rot" || t.name == "k_rot") && t.status != "PASS") ok = false;
  }
  if (ok) return "";
  return "outputs vs the mp50 oracle under profile " + profile + ": " + r.status + "\n" +
         golden::format_case_text(r, true);
}

/// What the last failing run saw: the case and the outputs (for the diagnoser).
struct LastFailure {
  std::optional<golden::LoadedCase> lc;
  golden::TensorMap out;
};

inline std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

/// Which elements of a [tokens, heads, head_dim] tensor form pair i of a head: (a, b).
inline std::pair<int, int> pair_channels(const RopeDraw& d, int i) {
  reference::RopeParams p;
  p.head_dim = d.head_dim;
  p.rotary_dim = d.rotary_dim;
  p.layout = d.layout;
  return {reference::rope_pair_a(p, i), reference::rope_pair_b(p, i)};
}

/// One property at one drawn call: "" or what fails. Records the failing case in `last`.
inline std::string property_at(RopeProperty which, const RopeKernel& kernel,
                               const std::string& profile, const RopeDraw& d, LastFailure* last) {
  auto judge = [&](const golden::LoadedCase& lc, const golden::TensorMap& out) {
    std::string f = oracle_failure(lc, out, profile);
    if (!f.empty()) {
      last->lc = lc;
      last->out = out;
    }
    return f;
  };
  const int h = d.head_dim, np = d.rotary_dim / 2;
  if (which == RopeProperty::kOracle || which == RopeProperty::kPairNorm) {
    const golden::LoadedCase lc = rope_case(d, d.positions);
    const golden::TensorMap out = run_kernel(kernel, d, lc);
    if (which == RopeProperty::kOracle) return judge(lc, out);
    // PairNorm: the exact rotation keeps every pair's norm; the tail is copied.
    for (const char* name : {"q_rot", "k_rot"}) {
      const Budgets b = budgets_of(lc, name, profile);
      const golden::Tensor& x = lc.golden.at(name[0] == 'q' ? "q" : "k");
      const golden::Tensor& y = out.at(name);
      const std::int64_t rows = x.numel() / h;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t o = r * h;
        for (int i = 0; i < np; ++i) {
          const auto [ca, cb] = pair_channels(d, i);
          const double nx = std::hypot(x.get_f64(o + ca), x.get_f64(o + cb));
          const double ny = std::hypot(y.get_f64(o + ca), y.get_f64(o + cb));
          const double tol = b.budget[o + ca] + b.budget[o + cb];
          if (!(std::fabs(ny - nx) <= tol)) {
            last->lc = lc;
            last->out = out;
            return std::string(name) + " row " + std::to_string(r) + " (token " +
                   std::to_string(r / (name[0] == 'q' ? d.n_heads : 1)) + ") pair " +
                   std::to_string(i) + " (channels " + std::to_string(ca) + ", " +
                   std::to_string(cb) + "): norm " + fmt(ny) + " vs input norm " + fmt(nx) +
                   ", |difference| " + fmt(std::fabs(ny - nx)) + " > the " + profile +
                   " budget " + fmt(tol) + "\n" + judge(lc, out);
          }
        }
        for (int c = d.rotary_dim; c < h; ++c) {
          if (y.get_bits(o + c) != x.get_bits(o + c)) {
            last->lc = lc;
            last->out = out;
            return std::string(name) + " row " + std::to_string(r) + " tail channel " +
                   std::to_string(c) + " (>= rotary_dim) changed: " + fmt(x.get_f64(o + c)) +
                   " -> " + fmt(y.get_f64(o + c)) + "\n" + judge(lc, out);
          }
        }
      }
    }
    return judge(lc, out);
  }
  if (which == RopeProperty::kRelative) {
    const std::int64_t m = d.positions[0], n = d.positions[1], s = d.shift;
    const golden::LoadedCase a = rope_case(d, {m, n}), b = rope_case(d, {m + s, n + s});
    const golden::TensorMap oa = run_kernel(kernel, d, a), ob = run_kernel(kernel, d, b);
    const Budgets ba = budgets_of(a, "scores", profile), bb = budgets_of(b, "scores", profile);
    for (int hh = 0; hh < d.n_heads; ++hh) {
      auto score = [&](const golden::TensorMap& o) {
        const golden::Tensor& q = o.at("q_rot");
        const golden::Tensor& k = o.at("k_rot");
        double sum = 0;  // q at token 0, k at token 1 (its one kv head)
        for (int c = 0; c < h; ++c) sum += q.get_f64(hh * h + c) * k.get_f64(h + c);
        return sum;
      };
      const std::size_t j = static_cast<std::size_t>(hh * 4 + 1);  // scores[hh, 0, 1]
      const double sa = score(oa), sb = score(ob), tol = ba.budget[j] + bb.budget[j];
      if (!(std::fabs(sa - sb) <= tol)) {
        std::string f = judge(a, oa);
        if (f.empty()) f = judge(b, ob);
        return "head " + std::to_string(hh) + ": q.k at positions (" + std::to_string(m) + ", " +
               std::to_string(n) + ") = " + fmt(sa) + " but at (" + std::to_string(m + s) + ", " +
               std::to_string(n + s) + ") = " + fmt(sb) + " (exact " + fmt(ba.exact[j]) +
               "); |difference| " + fmt(std::fabs(sa - sb)) + " > the " + profile +
               " budget " + fmt(tol) + " of the two scores\n" + f;
      }
    }
    std::string f = judge(a, oa);
    return f.empty() ? judge(b, ob) : f;
  }
  // Composition: z = kernel(a, kernel(b, x)) vs w = kernel(a + b, x).
  const std::int64_t pb = d.positions[0], pa = d.shift;
  const golden::LoadedCase cb = rope_case(d, {pb});
  const golden::TensorMap ob = run_kernel(kernel, d, cb);
  const std::string fb = judge(cb, ob);
  if (!fb.empty()) return "the first rotation R(" + std::to_string(pb) + ") x fails\n" + fb;
  std::vector<double> yq = golden::tensor_to_f64(ob.at("q_rot"));
  std::vector<double> yk = golden::tensor_to_f64(ob.at("k_rot"));
  const golden::LoadedCase ca = rope_case(d, {pa}, yq, yk);
  const golden::TensorMap oa = run_kernel(kernel, d, ca);
  const golden::LoadedCase cab = rope_case(d, {pa + pb});
  const golden::TensorMap oab = run_kernel(kernel, d, cab);
  for (const char* name : {"q_rot", "k_rot"}) {
    const Budgets e1 = budgets_of(cb, name, profile), e2 = budgets_of(ca, name, profile),
                  e3 = budgets_of(cab, name, profile);
    const golden::Tensor &y = ob.at(name), &z = oa.at(name), &w = oab.at(name);
    const std::int64_t rows = y.numel() / h;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t o = r * h;
      for (int i = 0; i < np; ++i) {
        const auto [a_, b_] = pair_channels(d, i);
        const double err1 = std::hypot(y.get_f64(o + a_) - e1.exact[o + a_],
                                       y.get_f64(o + b_) - e1.exact[o + b_]);
        const double tol = err1 + e2.budget[o + a_] + e2.budget[o + b_] + e3.budget[o + a_] +
                           e3.budget[o + b_];
        const double dist = std::hypot(z.get_f64(o + a_) - w.get_f64(o + a_),
                                       z.get_f64(o + b_) - w.get_f64(o + b_));
        if (!(dist <= tol)) {
          std::string f = judge(ca, oa);
          if (f.empty()) f = judge(cab, oab);
          return std::string(name) + " row " + std::to_string(r) + " pair " + std::to_string(i) +
                 ": R(" + std::to_string(pa) + ") R(" + std::to_string(pb) + ") x and R(" +
                 std::to_string(pa + pb) + ") x differ by " + fmt(dist) + " > the " + profile +
                 " budget " + fmt(tol) + " (both rotations' budgets + the first one's error)\n" +
                 f;
        }
      }
    }
  }
  std::string f = judge(ca, oa);
  return f.empty() ? judge(cab, oab) : f;
}

inline rc::Gen<std::int64_t> position_gen(std::int64_t max_position) {
  std::vector<std::int64_t> hard;
  for (const auto& hp : golden::hard_positions()) {
    if (hp.m >= 0 && hp.m <= max_position) hard.push_back(hp.m);
  }
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
  rc::detail::TestMetadata md;
  md.id = md.description = std::string("posenc rope ") + rope_property_name(which);
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = std::min(params.maxSuccess, o.max_success);
  const auto result = rc::detail::checkTestable(prop, md, params);
  PropertyResult r;
  r.passed = result.template is<rc::detail::SuccessResult>();
  if (r.passed) return r;
  std::ostringstream os;
  rc::detail::printResultMessage(result, os);
  os << "\nshrunk call: " << detail::describe(*shrunk) << "\n";
  if (last->lc) {
    try {
      const golden::Diagnosis dg = golden::diagnose_case(*last->lc, last->out, profile);
      os << "posenc diagnose: " << dg.verdict << ": " << dg.summary << "\n";
    } catch (const std::exception& e) {
      os << "posenc diagnose: not available (" << e.what() << ")\n";
    }
  }
  r.message = os.str();
  return r;
}

namespace detail {
class RopePropertyTest : public ::testing::Test {
 public:
  RopePropertyTest(RopeProperty p, RopeKernel k, RopeCheckOptions o)
      : p_(p), k_(std::move(k)), o_(std::move(o)) {}
  void TestBody() override {
    const PropertyResult r = check_rope_property(p_, k_, o_);
    if (!r.passed) ADD_FAILURE() << r.message;
  }

 private:
  RopeProperty p_;
  RopeKernel k_;
  RopeCheckOptions o_;
};
}  // namespace detail

/// Registers the four properties as GoogleTest tests suite.Oracle, suite.Relative,
/// suite.PairNorm, suite.Composition. Call before RUN_ALL_TESTS (the macro below does it at
/// static initialisation).
inline bool register_rope_properties(const char* suite, RopeKernel kernel, RopeCheckOptions o) {
  for (RopeProperty p : rope_properties()) {
    ::testing::RegisterTest(suite, rope_property_name(p), nullptr, nullptr, __FILE__, __LINE__,
                            [=]() -> ::testing::Test* {
                              return new detail::RopePropertyTest(p, kernel, o);
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
