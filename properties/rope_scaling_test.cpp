// RoPE scaling properties: each rule against its defining identity (float, double, mp50), the
// worked values of docs/schemes/rope_scaling.md, the optimized tables and kernel against the mp50
// oracle, the HF config reader (every committed preset round-trips; errors name the key), and
// the golden catalog. Formulas: reference/rope_scaling.hpp.
// Replay a failure: RC_PARAMS="reproduce=..." (printed by RapidCheck) or seed=N.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include "golden/cases/diagnose.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/format.hpp"
#include "optimized/rope.hpp"
#include "optimized/rope_scaling.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::properties {
namespace {

using reference::LongRopePolicy;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::int64_t kMaxTestPosition = std::int64_t{1} << 20;

rc::Gen<RopeParams> gen_params() {
  return rc::gen::exec([] {
    RopeParams p;
    p.rotary_dim = 2 * *rc::gen::inRange(2, 65);
    p.head_dim = p.rotary_dim + *rc::gen::element(0, 0, 2, 16);
    p.base = *rc::gen::oneOf(rc::gen::element(10000.0, 500000.0, 1000000.0),
                             rc::gen::map(rc::gen::inRange(100, 10000001),
                                          [](int b) { return static_cast<double>(b); }));
    p.layout = *rc::gen::element(RopeLayout::kInterleaved, RopeLayout::kHalfSplit);
    return p;
  });
}

/// A factor that is exact in every Real: k / 4 with k in [5, 256], or a published one.
rc::Gen<double> gen_factor() {
  return rc::gen::oneOf(rc::gen::element(2.0, 4.0, 8.0, 16.0, 32.0, 40.0),
                        rc::gen::map(rc::gen::inRange(5, 257), [](int k) { return k / 4.0; }));
}

/// A random rule of the given type, valid for p (lists sized d/2, lengths consistent).
RopeScaling gen_rule(const RopeParams& p, RopeScalingType type) {
  RopeScaling s;
  s.type = type;
  s.factor = *gen_factor();
  const int np = p.rotary_dim / 2;
  switch (type) {
    case RopeScalingType::kDynamic:
      s.max_position = *rc::gen::element<std::int64_t>(2048, 4096, 8192);
      s.seq_len = *rc::gen::inRange<std::int64_t>(1, 4 * s.max_position);
      break;
    case RopeScalingType::kYarn:
      s.original_max_position = *rc::gen::element<std::int64_t>(2048, 4096, 32768);
      s.max_position = static_cast<std::int64_t>(s.original_max_position * s.factor);
      s.yarn_form = *rc::gen::element(YarnForm::kPaper, YarnForm::kHfEarly, YarnForm::kHfCurrent,
                                      YarnForm::kDeepSeekOfficial);
      s.beta_fast = *rc::gen::element(32.0, 16.0);
      s.beta_slow = *rc::gen::element(1.0, 2.0);
      s.mscale = *rc::gen::element(0.0, 0.707, 1.0);
      s.mscale_all_dim = *rc::gen::element(0.0, 0.707, 1.0);
      s.truncate = *rc::gen::arbitrary<bool>();
      s.mla = *rc::gen::arbitrary<bool>();
      break;
    case RopeScalingType::kLlama3:
      s.original_max_position = *rc::gen::element<std::int64_t>(2048, 8192);
      s.low_freq_factor = *rc::gen::element(1.0, 2.0);
      s.high_freq_factor = s.low_freq_factor * *rc::gen::element(1.0, 2.0, 4.0);
      break;
    case RopeScalingType::kLongRope: {
      s.original_max_position = *rc::gen::element<std::int64_t>(2048, 4096);
      s.max_position = s.original_max_position * *rc::gen::element<std::int64_t>(1, 8, 32);
      auto list = [&] {
        return *rc::gen::container<std::vector<double>>(
            static_cast<std::size_t>(np), rc::gen::map(rc::gen::inRange(4, 257), [](int k) { return k / 4.0; }));
      };
      s.short_factor = list();
      s.long_factor = list();
      s.seq_len = *rc::gen::inRange<std::int64_t>(s.original_max_position - 2, s.original_max_position + 3);
      s.longrope_policy = *rc::gen::element(LongRopePolicy::kHfSeqLen, LongRopePolicy::kVllmAnyAbove,
                                            LongRopePolicy::kVllmMaxModelLen);
      break;
    }
    default:
      break;
  }
  return s;
}

rc::Gen<RopeScalingType> gen_type() {
  return rc::gen::element(RopeScalingType::kLinear, RopeScalingType::kNtk, RopeScalingType::kDynamic,
                          RopeScalingType::kYarn, RopeScalingType::kLlama3, RopeScalingType::kLongRope);
}

/// |x - y| <= k eps |y| for every element (k eps relative: the rules' few roundings).
template <class Real>
void rc_assert_rel(const std::vector<Real>& x, const std::vector<Real>& y, double k, const std::string& what) {
  RC_ASSERT(x.size() == y.size());
  using std::fabs;
  for (std::size_t i = 0; i < x.size(); ++i) {
    rc_assert_close<Real>(x[i], y[i], Real(k * eps_of<Real>()) * fabs(y[i]), what + " pair " + std::to_string(i));
  }
}

// ---- the rules, typed over float, double and the oracle type -------------------------------

POSENC_TYPED_PROP(RopeScalingReference, UnitFactorIsPlainRope) {
  // s = 1 reduces every rule to plain RoPE (dynamic NTK: at seq_len <= L, where it is defined
  // to be plain; above L its base grows even at s = 1, HF's formula).
  const RopeParams p = *gen_params();
  const RopeScalingType type = *gen_type();
  RopeScaling s = gen_rule(p, type);
  s.factor = 1.0;
  if (type == RopeScalingType::kDynamic) s.seq_len = std::min(s.seq_len, s.max_position);
  if (type == RopeScalingType::kLongRope) {
    std::fill(s.short_factor.begin(), s.short_factor.end(), 1.0);
    std::fill(s.long_factor.begin(), s.long_factor.end(), 1.0);
  }
  RC_CLASSIFY(reference::rope_scaling_type_name(type));
  const auto t = reference::rope_scaling_tables<Real>(p, s);
  rc_assert_rel(t.tables.inv_freq, reference::rope_inv_freq<Real>(p), 4, "inv_freq");
  RC_ASSERT(t.tables.attention_factor == Real(1));
  RC_ASSERT(t.softmax_scale_multiplier == Real(1));
}

POSENC_TYPED_PROP(RopeScalingReference, YarnRampKeepsBlendsAndDivides) {
  // Indices at or below the ramp keep theta_i exactly, those at or above it are theta_i / s
  // exactly, and in between theta'_i = theta_i (1 - rho_i (1 - 1/s)) with rho linear in i; the
  // ramp ends are corr(beta) from their own formula, floored / ceiled iff truncate.
  using std::fabs;
  const RopeParams p = *gen_params();
  RopeScaling s = gen_rule(p, RopeScalingType::kYarn);
  const auto t = reference::rope_scaling_tables<Real>(p, s);
  const auto plain = reference::rope_inv_freq<Real>(p);
  const double lc = static_cast<double>(s.yarn_form == YarnForm::kHfEarly ? s.max_position : s.original_max_position);
  auto corr = [&](double r) { return p.rotary_dim * std::log(lc / (2 * M_PI * r)) / (2 * std::log(p.base)); };
  double low = corr(s.beta_fast), high = corr(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, p.rotary_dim - 1.0);
  if (low == high) high += 0.001;
  const double tol_end = s.truncate ? 0.0 : 1e-4 + 64 * eps_of<Real>() * (1 + fabs(high));
  RC_ASSERT(fabs(to_double(t.ramp_low) - low) <= tol_end);
  RC_ASSERT(fabs(to_double(t.ramp_high) - high) <= tol_end);
  const Real sf = Real(s.factor);
  for (int i = 0; i < p.rotary_dim / 2; ++i) {
    const std::string where = "pair " + std::to_string(i) + " (ramp " + std::to_string(low) + " .. " +
                              std::to_string(high) + ")";
    if (Real(i) <= t.ramp_low) {
      RC_ASSERT(t.tables.inv_freq[i] == plain[i]);
    } else if (Real(i) >= t.ramp_high) {
      RC_ASSERT(t.tables.inv_freq[i] == plain[i] / sf);
    } else {
      const Real rho = (Real(i) - t.ramp_low) / (t.ramp_high - t.ramp_low);
      const Real want = plain[i] * (Real(1) - rho * (Real(1) - Real(1) / sf));
      // Absolute in theta_i: 1 - rho loses relative accuracy as rho nears 1 (the rule's own
      // evaluation order, and this one's, each err by a few eps theta_i).
      rc_assert_close<Real>(t.tables.inv_freq[i], want, Real(16 * eps_of<Real>()) * plain[i], where);
      RC_ASSERT(t.tables.inv_freq[i] < plain[i]);
      RC_ASSERT(t.tables.inv_freq[i] > plain[i] / sf);
    }
  }
  // Attention factor and softmax multiplier by form.
  auto mscale = [](double f, double m) { return f <= 1 ? 1.0 : 0.1 * m * std::log(f) + 1; };
  double a = mscale(s.factor, 1.0), soft = 1.0;
  if (s.yarn_form == YarnForm::kDeepSeekOfficial) {
    a = 1.0;
    const double m = mscale(s.factor, s.mscale != 0 ? s.mscale : 1.0);
    soft = m * m;
  } else if (s.yarn_form == YarnForm::kHfCurrent) {
    if (s.mscale != 0 && s.mscale_all_dim != 0) a = mscale(s.factor, s.mscale) / mscale(s.factor, s.mscale_all_dim);
    if (s.mla && s.mscale_all_dim != 0) soft = mscale(s.factor, s.mscale_all_dim) * mscale(s.factor, s.mscale_all_dim);
  }
  const double ulp = std::max(eps_of<Real>(), 0x1p-52);
  RC_ASSERT(fabs(to_double(t.tables.attention_factor) - a) <= 8 * ulp * a);
  RC_ASSERT(fabs(to_double(t.softmax_scale_multiplier) - soft) <= 8 * ulp * soft);
}

POSENC_TYPED_PROP(RopeScalingReference, Llama3BandsKeepSmoothAndDivide) {
  // Wavelength below L0 / high_freq_factor: theta_i kept; above L0 / low_freq_factor: theta_i / s;
  // between (inclusive): the blend, which lies between the two and is monotone in the wavelength.
  using std::fabs;
  const RopeParams p = *gen_params();
  const RopeScaling s = gen_rule(p, RopeScalingType::kLlama3);
  const auto t = reference::rope_scaling_tables<Real>(p, s);
  const auto plain = reference::rope_inv_freq<Real>(p);
  const double hi_edge = s.original_max_position / s.high_freq_factor;
  const double lo_edge = s.original_max_position / s.low_freq_factor;
  const Real sf = Real(s.factor);
  for (int i = 0; i < p.rotary_dim / 2; ++i) {
    const double wl = 2 * M_PI / to_double(plain[i]);
    if (fabs(wl - hi_edge) < 1e-9 * hi_edge || fabs(wl - lo_edge) < 1e-9 * lo_edge) continue;
    if (wl < hi_edge) {
      RC_ASSERT(t.band[i] == 0);
      RC_ASSERT(t.tables.inv_freq[i] == plain[i]);
    } else if (wl > lo_edge) {
      RC_ASSERT(t.band[i] == 2);
      RC_ASSERT(t.tables.inv_freq[i] == plain[i] / sf);
    } else {
      RC_ASSERT(t.band[i] == 1);
      const Real g = (Real(s.original_max_position) / (Real(2) * boost::math::constants::pi<Real>() / plain[i]) -
                      Real(s.low_freq_factor)) / Real(s.high_freq_factor - s.low_freq_factor);
      const Real want = (Real(1) - g) * plain[i] / sf + g * plain[i];
      rc_assert_close<Real>(t.tables.inv_freq[i], want, Real(16 * eps_of<Real>()) * want,
                            "smoothed pair " + std::to_string(i));
    }
  }
  for (int i = 1; i < p.rotary_dim / 2; ++i) {
    RC_ASSERT(t.tables.inv_freq[i] <= t.tables.inv_freq[i - 1]);  // still decreasing
  }
}

POSENC_TYPED_PROP(RopeScalingReference, DynamicNtkIsPlainUpToLThenClosedForm) {
  using std::fabs;
  using std::pow;
  const RopeParams p = *gen_params();
  RopeScaling s = gen_rule(p, RopeScalingType::kDynamic);
  const auto plain = reference::rope_inv_freq<Real>(p);
  const auto t = reference::rope_scaling_tables<Real>(p, s);
  const int d = p.rotary_dim;
  if (s.seq_len <= s.max_position) {
    RC_ASSERT(t.tables.inv_freq == plain);  // the bracket is exactly 1
    return;
  }
  // theta_i = b'^(-2i/d) = theta_i^plain * bracket^(-2i/(d-2)): another evaluation order.
  const Real bracket = Real(s.factor) * Real(s.seq_len) / Real(s.max_position) - (Real(s.factor) - Real(1));
  for (int i = 0; i < d / 2; ++i) {
    const Real want = plain[i] * pow(bracket, -Real(2 * i) / Real(d - 2));
    rc_assert_close<Real>(t.tables.inv_freq[i], want, Real(64 * eps_of<Real>() * (1 + std::log(p.base))) * want,
                          "pair " + std::to_string(i));
    if (i > 0) RC_ASSERT(t.tables.inv_freq[i] < plain[i]);  // a larger base: lower frequencies
  }
}

RC_GTEST_PROP(RopeScalingReference, DynamicPolicyGrowsAndResets, ()) {
  // HF 4.45+: a call's tables are those of the largest seq_len seen since the last call shorter
  // than L (or since the start), never below L; per call: its own seq_len. Checked against that
  // history, not the state machine.
  const std::int64_t l = *rc::gen::element<std::int64_t>(2048, 4096);
  const auto calls = *rc::gen::nonEmpty(rc::gen::container<std::vector<std::int64_t>>(
      rc::gen::oneOf(rc::gen::inRange<std::int64_t>(1, l), rc::gen::inRange<std::int64_t>(l, 4 * l),
                     rc::gen::element<std::int64_t>(l - 1, l, l + 1))));
  reference::DynamicNtkState grow, per;
  for (std::size_t k = 0; k < calls.size(); ++k) {
    std::int64_t want = l;
    for (std::size_t j = 0; j <= k; ++j) want = calls[j] < l ? l : std::max(want, calls[j]);
    const std::int64_t got = reference::dynamic_ntk_call_seq_len(reference::DynamicPolicy::kGrowReset, grow, calls[k], l);
    RC_ASSERT(got == want);
    RC_ASSERT(reference::dynamic_ntk_call_seq_len(reference::DynamicPolicy::kPerCall, per, calls[k], l) == calls[k]);
  }
  RC_CLASSIFY(std::any_of(calls.begin(), calls.end(), [&](auto c) { return c < l; }) &&
                  std::any_of(calls.begin(), calls.end(), [&](auto c) { return c > l; }),
              "grows and resets");
}

POSENC_TYPED_PROP(RopeScalingReference, LongRopeSwitchesAtTheDocumentedBoundary) {
  // HF: long iff seq_len > L0 (a call whose largest position is L0 is long); older vLLM: iff some
  // position > L0 (seq_len > L0 + 1); current vLLM: long for every call when L > L0.
  using std::log;
  using std::sqrt;
  const RopeParams p = *gen_params();
  RopeScaling s = gen_rule(p, RopeScalingType::kLongRope);
  const std::int64_t l0 = s.original_max_position;
  bool want_long = false;
  switch (s.longrope_policy) {
    case LongRopePolicy::kHfSeqLen: want_long = s.seq_len >= l0 + 1; break;
    case LongRopePolicy::kVllmAnyAbove: want_long = s.seq_len >= l0 + 2; break;
    case LongRopePolicy::kVllmMaxModelLen: want_long = s.max_position > l0; break;
  }
  RC_CLASSIFY(reference::longrope_policy_name(s.longrope_policy), want_long ? "long" : "short");
  const auto t = reference::rope_scaling_tables<Real>(p, s);
  RC_ASSERT(t.long_factors == want_long);
  const auto plain = reference::rope_inv_freq<Real>(p);
  const auto& e = want_long ? s.long_factor : s.short_factor;
  for (int i = 0; i < p.rotary_dim / 2; ++i) RC_ASSERT(t.tables.inv_freq[i] == plain[i] / Real(e[i]));
  const Real a = Real(s.factor) > Real(1) ? sqrt(Real(1) + log(Real(s.factor)) / log(Real(l0))) : Real(1);
  rc_assert_close<Real>(t.tables.attention_factor, a, Real(4 * eps_of<Real>()), "attention factor");
}

TEST(RopeScalingReferenceSpot, PositionInterpolationIsPlainRopeAtScaledPosition) {
  // PI rotates position m with theta_i / s: the plain rotation at the real position m / s, to the
  // oracle's precision (mp50: 1e-40 relative of the inputs' magnitude).
  rc::detail::checkGTest([] {
    using std::cos;
    using std::sin;
    const RopeParams p = *gen_params();
    RopeScaling s;
    s.type = RopeScalingType::kLinear;
    s.factor = *gen_factor();
    const std::int64_t m = *gen_position(kMaxTestPosition);
    const auto xd = *gen_dyadic_vector(p.head_dim, 24);
    const std::vector<mp50> x(xd.begin(), xd.end());
    const auto t = reference::rope_scaling_tables<mp50>(p, s);
    const auto y = reference::rope_apply(p, t.tables, m, x);
    const auto plain = reference::rope_inv_freq<mp50>(p);
    for (int i = 0; i < p.rotary_dim / 2; ++i) {
      const int a = reference::rope_pair_a(p, i), b = reference::rope_pair_b(p, i);
      const mp50 phi = (mp50(m) / mp50(s.factor)) * plain[i];
      const mp50 ya = x[a] * cos(phi) - x[b] * sin(phi), yb = x[a] * sin(phi) + x[b] * cos(phi);
      const mp50 tol = mp50(1e-40) * (mp50(1) + abs(x[a]) + abs(x[b]));
      rc_assert_close(y[a], ya, tol, "channel a of pair " + std::to_string(i));
      rc_assert_close(y[b], yb, tol, "channel b of pair " + std::to_string(i));
    }
  });
}

// ---- the worked values of docs/schemes/rope_scaling.md (and the presets they come from) ------

golden::RopeModelConfig preset(const std::string& name) {
  return golden::rope_config_read(golden::default_presets_dir() / (name + ".json"));
}

reference::RopeScaledTables<mp50> tables_of(const golden::RopeModelConfig& m, std::int64_t seq_len = 0) {
  RopeScaling s = m.scaling;
  s.seq_len = seq_len;
  return reference::rope_scaling_tables<mp50>(m.params, s);
}

TEST(RopeScalingReferenceSpot, YarnCorrectionRangesOfSection12) {
  struct Row {
    const char* preset;
    YarnForm form;
    double low, high;
  };
  for (const Row& r : {Row{"yarn-llama-2-7b-64k", YarnForm::kHfCurrent, 20, 46},
                       Row{"yarn-llama-2-7b-64k", YarnForm::kHfEarly, 40, 65},
                       Row{"deepseek-v2-lite", YarnForm::kHfCurrent, 10, 23},
                       Row{"deepseek-v3", YarnForm::kHfCurrent, 10, 23},
                       Row{"qwen2.5-7b-instruct-yarn", YarnForm::kHfCurrent, 23, 40}}) {
    auto m = preset(r.preset);
    m.scaling.yarn_form = r.form;
    const auto t = tables_of(m);
    EXPECT_EQ(static_cast<double>(t.ramp_low), r.low) << r.preset << " " << reference::yarn_form_name(r.form);
    EXPECT_EQ(static_cast<double>(t.ramp_high), r.high) << r.preset << " " << reference::yarn_form_name(r.form);
  }
}

TEST(RopeScalingReferenceSpot, YarnMagnitudesOfSection12) {
  const std::vector<std::pair<double, double>> rows = {
      {4, 1.138629}, {8, 1.207944}, {16, 1.277259}, {32, 1.346574}, {40, 1.368888}};
  for (const auto& [f, a] : rows) {
    RopeScaling s;
    s.type = RopeScalingType::kYarn;
    s.factor = f;
    s.original_max_position = 4096;
    s.yarn_form = YarnForm::kPaper;
    const auto t = reference::rope_scaling_tables<mp50>({128, 128, 10000.0}, s);
    EXPECT_NEAR(static_cast<double>(t.tables.attention_factor), a, 5e-7) << "s = " << f;
  }
  // DeepSeek-V2: mscale = mscale_all_dim = 0.707, s = 40: cos/sin factor exactly 1, softmax
  // multiplier mscale(40, 0.707)^2 = 1.260804^2 = 1.589626.
  const auto t = tables_of(preset("deepseek-v2"));
  EXPECT_EQ(t.tables.attention_factor, mp50(1));
  EXPECT_NEAR(static_cast<double>(sqrt(t.softmax_scale_multiplier)), 1.260804, 5e-7);
  EXPECT_NEAR(static_cast<double>(t.softmax_scale_multiplier), 1.589626, 5e-7);
  // DeepSeek's official code: no cos/sin factor, the same multiplier from args.mscale.
  auto m = preset("deepseek-v2");
  m.scaling.yarn_form = YarnForm::kDeepSeekOfficial;
  EXPECT_EQ(tables_of(m).tables.attention_factor, mp50(1));
  EXPECT_NEAR(static_cast<double>(tables_of(m).softmax_scale_multiplier), 1.589626, 5e-7);
}

TEST(RopeScalingReferenceSpot, Llama31BandsAre29Then6Then29) {
  const auto t = tables_of(preset("llama-3.1-8b"));
  ASSERT_EQ(t.band.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(t.band[i], i <= 28 ? 0 : (i <= 34 ? 1 : 2)) << "pair " << i;
  }
}

TEST(RopeScalingReferenceSpot, LongRopeAttentionFactorAndSwitchOfPhi3Mini) {
  const auto m = preset("phi-3-mini-128k-instruct");
  EXPECT_NEAR(static_cast<double>(tables_of(m, 4096).tables.attention_factor), 1.190238, 5e-7);
  EXPECT_FALSE(tables_of(m, 4096).long_factors);  // largest position 4095
  EXPECT_TRUE(tables_of(m, 4097).long_factors);   // largest position 4096
}

TEST(RopeScalingReferenceSpot, NtkBasesOfSection12) {
  // The base is recovered from theta_1 = b'^(-2/d).
  auto base_of = [](const reference::RopeScaledTables<mp50>& t, int d) {
    return static_cast<double>(pow(t.tables.inv_freq[1], mp50(-d) / 2));
  };
  const auto dyn = preset("llama-2-7b-dynamic-x2");
  EXPECT_NEAR(base_of(tables_of(dyn, 8192), 128), 30527.74, 0.005);
  EXPECT_EQ(base_of(tables_of(dyn, 4096), 128), base_of(tables_of(dyn, 1), 128));
  EXPECT_NEAR(base_of(tables_of(preset("llama-2-7b-ntk-x8")), 128), 82684.62, 0.005);
}

// The formulas' decimal constants enter the oracle as exact decimals (a ratio of integers
// rounded once in mp50), not through a double: each agrees with its decimal text read at mp100
// to mp50 precision, alone and inside the YaRN magnitudes (a Real(0.1) is 5.6e-18 off, 1e32
// times the tolerance). Config values (mscale 0.707, factor, beta) enter as the double the
// config parses to (RopeScaling's comment): the mp100 side uses the same double.
TEST(RopeScalingReferenceSpot, DecimalConstantsAreExactDecimals) {
  const mp100 eps50 = mp100(std::numeric_limits<mp50>::epsilon());
  auto expect_agrees = [&](const mp50& got, const mp100& want, int ulps, const std::string& what) {
    EXPECT_LE(abs(mp100(got) - want), ulps * eps50 * abs(want))
        << what << ": mp50 " << got.str(40) << " vs mp100 " << want.str(40);
  };
  expect_agrees(reference::yarn_mscale_coefficient<mp50>(), mp100("0.1"), 1,
                "yarn_mscale_coefficient");
  expect_agrees(reference::yarn_ramp_guard<mp50>(), mp100("0.001"), 1, "yarn_ramp_guard");
  // get_mscale(s, m) = 0.1 m ln s + 1 at mp100 from the decimal text.
  auto mscale100 = [](double s, double m) {
    return s <= 1 ? mp100(1) : mp100("0.1") * mp100(m) * log(mp100(s)) + mp100(1);
  };
  for (const char* name : {"qwen2.5-7b-instruct-yarn", "yarn-llama-2-7b-64k", "deepseek-v2",
                           "deepseek-v2-lite", "deepseek-v3"}) {
    for (YarnForm form : {YarnForm::kPaper, YarnForm::kHfEarly, YarnForm::kHfCurrent,
                          YarnForm::kDeepSeekOfficial}) {
      auto m = preset(name);
      RopeScaling& s = m.scaling;
      s.yarn_form = form;
      const auto t = tables_of(m);
      mp100 a = 1, mult = 1;
      switch (form) {
        case YarnForm::kPaper:
          a = mscale100(s.factor, 1);
          break;
        case YarnForm::kHfEarly:
          a = s.attention_factor > 0 ? mp100(s.attention_factor)
                                     : mp100("0.1") * log(mp100(s.factor)) + 1;
          break;
        case YarnForm::kHfCurrent:
          a = s.attention_factor > 0 ? mp100(s.attention_factor)
              : s.mscale != 0 && s.mscale_all_dim != 0
                  ? mscale100(s.factor, s.mscale) / mscale100(s.factor, s.mscale_all_dim)
                  : mscale100(s.factor, 1);
          if (s.mla && s.mscale_all_dim != 0) mult = pow(mscale100(s.factor, s.mscale_all_dim), 2);
          break;
        case YarnForm::kDeepSeekOfficial:
          mult = pow(mscale100(s.factor, s.mscale != 0 ? s.mscale : 1.0), 2);
          break;
      }
      const std::string where = std::string(name) + " " + reference::yarn_form_name(form);
      expect_agrees(t.tables.attention_factor, a, 4, where + " attention factor");
      expect_agrees(t.softmax_scale_multiplier, mult, 8, where + " softmax multiplier");
    }
  }
  // The ramp guard inside the rule: beta_fast == beta_slow without truncation gives low == high.
  RopeScaling s;
  s.type = RopeScalingType::kYarn;
  s.factor = 8;
  s.original_max_position = 4096;
  s.beta_fast = s.beta_slow = 8;
  s.truncate = false;
  const RopeParams p{128, 128, 10000.0};
  const auto t50 = reference::rope_scaling_tables<mp50>(p, s);
  const auto t100 = reference::rope_scaling_tables<mp100>(p, s);
  expect_agrees(t50.ramp_high, t100.ramp_low + mp100("0.001"), 2, "ramp high = low + 0.001");
}

// The f64 companions (`.exact`) of every committed YaRN case are the oracle's values correctly
// rounded to double: recomputed here at mp100 from the manifest's params and scaling.rule (the
// attention factor's 0.1 as an exact decimal), tables and rotations must match bit for bit.
TEST(RopeScalingGolden, YarnF64CompanionsAreTheCorrectlyRoundedMp100Values) {
  using std::cos;
  using std::sin;
  const auto dir = golden::default_data_dir() / "rope_scaling";
  int cases = 0, scaled_magnitude = 0;
  for (const auto& row : golden::scheme_by_slug("rope_scaling").cases()) {
    const auto text = golden::read_file(dir / (row.id + ".json"));
    const Json m = Json::parse(text.begin(), text.end());
    const Json& pj = m.at("params");
    if (pj.at("scaling").at("type") != "yarn") continue;
    ++cases;
    RopeParams p;
    p.head_dim = pj.at("head_dim").get<int>();
    p.rotary_dim = pj.at("rotary_dim").get<int>();
    p.base = pj.at("base").get<double>();
    p.layout = pj.at("layout").get<std::string>() == "interleaved" ? RopeLayout::kInterleaved
                                                                   : RopeLayout::kHalfSplit;
    // The rule the expected values follow (a negative control's params hold the model's).
    const RopeScaling s = golden::rope_scaling_from_json(m.at("scaling").at("rule"));
    const auto st = reference::rope_scaling_tables<mp100>(p, s);
    const mp100 a = st.tables.attention_factor;
    if (a != mp100(1) || st.softmax_scale_multiplier != mp100(1)) ++scaled_magnitude;
    std::map<std::string, golden::Tensor> t;
    for (auto& x : golden::safetensors_read(dir / (row.id + ".safetensors")))
      t.emplace(x.name, std::move(x));
    const int np = p.rotary_dim / 2, h = p.head_dim;
    const std::int64_t tn = t.at("positions").numel();
    std::map<std::string, std::vector<mp100>> want;
    want["inv_freq"] = st.tables.inv_freq;
    want["attention_factor"] = {a};
    if (t.count("softmax_scale.exact")) {
      want["softmax_scale"] = {pow(mp100(pj.value("softmax_head_dim", h)), mp100(-1) / 2) *
                               st.softmax_scale_multiplier};
    }
    for (std::int64_t x = 0; x < tn; ++x) {
      for (int i = 0; i < np; ++i) {
        const mp100 phi = mp100(t.at("positions").get_i64(x)) * st.tables.inv_freq[i];
        want["cos"].push_back(a * cos(phi));
        want["sin"].push_back(a * sin(phi));
      }
    }
    for (const char* name : {"q", "k"}) {
      const golden::Tensor& in = t.at(name);
      const std::int64_t heads = in.shape.at(1);
      auto& out = want[std::string(name) + "_rot"];
      for (std::int64_t x = 0; x < tn; ++x) {
        for (std::int64_t hh = 0; hh < heads; ++hh) {
          const std::int64_t off = (x * heads + hh) * h;
          for (int c = 0; c < h; ++c) out.push_back(mp100(in.get_f64(off + c)));  // tail: a copy
          for (int i = 0; i < np; ++i) {
            const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
            const mp100 xa(in.get_f64(off + ca)), xb(in.get_f64(off + cb));
            const mp100 c = want["cos"][x * np + i], sn = want["sin"][x * np + i];
            out[off + ca] = xa * c - xb * sn;
            out[off + cb] = xa * sn + xb * c;
          }
        }
      }
    }
    for (const auto& [name, values] : want) {
      const golden::Tensor& e = t.at(name + ".exact");
      ASSERT_EQ(e.numel(), static_cast<std::int64_t>(values.size())) << row.id << " " << name;
      int wrong = 0;
      for (std::size_t x = 0; x < values.size(); ++x) {
        const double w = round_to_f64(values[x]), g = e.get_f64(static_cast<std::int64_t>(x));
        if (w != g && wrong++ == 0) {
          ADD_FAILURE() << row.id << " " << name << ".exact[" << x << "] = " << g
                        << " but mp100 rounds to " << w << " ("
                        << (g - w) / std::ldexp(1.0, std::ilogb(w) - 52) << " ulp)";
        }
      }
      EXPECT_EQ(wrong, 0) << row.id << " " << name << ".exact: elements not correctly rounded";
    }
  }
  EXPECT_EQ(cases, 11);  // DeepSeek-V3's softmax_factor_missing control included: its own rule reproduces it
  EXPECT_GE(scaled_magnitude, 5);  // cases whose attention factor or softmax multiplier is not 1
}

TEST(RopeScalingReferenceSpot, RejectsBadArguments) {
  const RopeParams p{8, 8, 10000.0};
  auto expect_message = [&](RopeScaling s, const std::string& needle) {
    try {
      reference::rope_scaling_tables<double>(p, s);
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rope_scaling_tables"), std::string::npos) << e.what();
    }
  };
  RopeScaling s;
  s.type = RopeScalingType::kLinear;
  s.factor = 0;
  expect_message(s, "factor must be finite and > 0 (got 0)");
  s.type = RopeScalingType::kDynamic;
  s.factor = 2;
  expect_message(s, "dynamic scaling needs max_position_embeddings > 0 (got 0)");
  s.type = RopeScalingType::kYarn;
  expect_message(s, "yarn needs original_max_position_embeddings > 0 (got 0)");
  s.type = RopeScalingType::kLlama3;
  expect_message(s, "llama3 needs original_max_position_embeddings > 0");
  s.type = RopeScalingType::kLongRope;
  s.original_max_position = 4096;
  s.short_factor = {1, 1, 1, 1};
  s.long_factor = {1, 1, 1};
  expect_message(s, "long_factor must have rotary_dim/2 = 4 entries (got 3)");
  s.long_factor = {1, 1, 1, -1};
  expect_message(s, "long_factor entries must be > 0 (got -1)");
  s.type = RopeScalingType::kNtk;
  try {
    reference::rope_scaling_tables<double>({2, 2, 10000.0}, s);
    ADD_FAILURE() << "ntk with rotary_dim 2";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ntk scaling needs rotary_dim > 2 (got 2)"), std::string::npos) << e.what();
  }
}

// ---- optimized tables and kernel against the oracle -------------------------------------------

TEST(RopeScalingOptimized, MatchesOracleWithinBound) {
  // Tables within 2 ulp of double of the mp50 values; rotated rows within the kernel's contract
  // bound (optimized/rope.hpp) for float and double, every rule, positions up to 2^20.
  double worst_table = 0, worst_f32 = 0, worst_f64 = 0;
  rc::detail::checkGTest([&] {
    const RopeParams p = *gen_params();
    const RopeScalingType type = *gen_type();
    RC_CLASSIFY(reference::rope_scaling_type_name(type));
    RopeScaling s = gen_rule(p, type);
    const auto want = reference::rope_scaling_tables<mp50>(p, s);
    const auto got = optimized::rope_scaling_tables(p, s);
    auto table_close = [&](double g, const mp50& w, const std::string& what) {
      const double err = static_cast<double>(abs(mp50(g) - w) / w) / 0x1p-52;
      worst_table = std::max(worst_table, err);
      if (err > 2) RC_FAIL(describe_close(what, g, static_cast<double>(w), 0x1p-51 * static_cast<double>(w)));
    };
    for (int i = 0; i < p.rotary_dim / 2; ++i) table_close(got.inv_freq[i], want.tables.inv_freq[i], "inv_freq " + std::to_string(i));
    table_close(got.attention_factor, want.tables.attention_factor, "attention factor");
    table_close(got.softmax_scale_multiplier, want.softmax_scale_multiplier, "softmax multiplier");

    const std::int64_t n_tokens = *rc::gen::inRange(1, 5);
    std::vector<std::int64_t> pos;
    for (std::int64_t k = 0; k < n_tokens; ++k) pos.push_back(*gen_position(kMaxTestPosition));
    const auto cache = optimized::rope_scaling_cache_init(p, s, pos);
    const auto xd = *gen_dyadic_vector(static_cast<int>(n_tokens * p.head_dim), 24);
    const optimized::RopeShape shape{n_tokens, 1, optimized::RopeTensorLayout::kTokensHeadsDim};
    std::vector<float> xf(xd.begin(), xd.end()), yf(xf.size());
    std::vector<double> yd(xd.size());
    optimized::rope_apply(p, cache, shape, xf, yf);
    optimized::rope_apply(p, cache, shape, xd, yd);
    const double a = static_cast<double>(want.tables.attention_factor);
    for (std::int64_t k = 0; k < n_tokens; ++k) {
      const std::vector<mp50> x(xd.begin() + k * p.head_dim, xd.begin() + (k + 1) * p.head_dim);
      const auto y = reference::rope_apply(p, want.tables, pos[k], x);
      for (int c = 0; c < p.head_dim; ++c) {
        const int i = reference::rope_pair_of_channel(p, c);
        const std::size_t e = static_cast<std::size_t>(k * p.head_dim + c);
        if (i < 0) {
          RC_ASSERT(yf[e] == static_cast<float>(xd[e]) && yd[e] == xd[e]);
          continue;
        }
        const double cond = a * (std::fabs(static_cast<double>(x[reference::rope_pair_a(p, i)])) +
                                 std::fabs(static_cast<double>(x[reference::rope_pair_b(p, i)])));
        const double phi = std::fabs(static_cast<double>(pos[k]) * got.inv_freq[i]);
        const double b32 = optimized::kRopeMaxError * 0x1p-23 * cond;
        const double b64 = (optimized::kRopeMaxErrorF64 + optimized::kRopeAngleErrorF64 * phi) * 0x1p-52 * cond;
        const double e32 = static_cast<double>(abs(mp50(yf[e]) - y[c]));
        const double e64 = static_cast<double>(abs(mp50(yd[e]) - y[c]));
        if (b32 > 0) worst_f32 = std::max(worst_f32, e32 / b32);
        if (b64 > 0) worst_f64 = std::max(worst_f64, e64 / b64);
        const std::string where = "position " + std::to_string(pos[k]) + " channel " + std::to_string(c);
        if (e32 > b32) RC_FAIL(describe_close("float " + where, yf[e], static_cast<double>(y[c]), b32));
        if (e64 > b64) RC_FAIL(describe_close("double " + where, yd[e], static_cast<double>(y[c]), b64));
      }
    }
  });
  std::printf("RopeScalingOptimized measured max error: tables %.3f ulp of double, float %.4f of "
              "kRopeMaxError, double %.4f of its bound\n", worst_table, worst_f32, worst_f64);
}

RC_GTEST_PROP(RopeScalingOptimized, IdenticalBitsForAnyThreadCount, ()) {
  const RopeParams p = *gen_params();
  const RopeScaling s = gen_rule(p, *gen_type());
  std::vector<std::int64_t> pos;
  for (int k = 0; k < 37; ++k) pos.push_back(*gen_position(kMaxTestPosition));
  rc_assert_same_bits_for_thread_counts(
      [&] {
        const auto c = optimized::rope_scaling_cache_init(p, s, pos);
        return std::tuple{c.inv_freq, c.cos_f32, c.sin_f32, c.cos_f64, c.sin_f64};
      },
      {2, 3});
}

// ---- the HF config reader ----------------------------------------------------------------------

// The RoPE presets (the vision-language ones, which mrope_config_is_vl tells, are M-RoPE's:
// mrope_test.cpp).
std::vector<std::filesystem::path> preset_files() {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(golden::default_presets_dir())) {
    if (e.path().extension() == ".json" &&
        !golden::mrope_config_is_vl(nlohmann::json::parse(golden::read_json_text(e.path())))) {
      v.push_back(e.path());
    }
  }
  std::sort(v.begin(), v.end());
  return v;
}

void expect_same_model(const golden::RopeModelConfig& a, const golden::RopeModelConfig& b, const std::string& what) {
  EXPECT_EQ(a.id, b.id) << what;
  EXPECT_EQ(a.params.head_dim, b.params.head_dim) << what;
  EXPECT_EQ(a.params.rotary_dim, b.params.rotary_dim) << what;
  EXPECT_EQ(a.params.base, b.params.base) << what;
  EXPECT_EQ(a.params.layout, b.params.layout) << what;
  EXPECT_EQ(a.n_heads, b.n_heads) << what;
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads) << what;
  EXPECT_EQ(a.softmax_head_dim, b.softmax_head_dim) << what;
  EXPECT_EQ(a.max_position, b.max_position) << what;
  EXPECT_EQ(golden::rope_scaling_to_json(a.scaling), golden::rope_scaling_to_json(b.scaling)) << what;
}

TEST(RopeScalingConfig, EveryPresetRoundTrips) {
  const auto files = preset_files();
  ASSERT_GE(files.size(), 19u);
  for (const auto& f : files) {
    const auto m = golden::rope_config_read(f);
    const Json canonical = golden::rope_config_to_json(m);
    const auto back = golden::rope_config_from_json(canonical, f.string() + " (canonical)");
    expect_same_model(m, back, f.filename().string());
    EXPECT_EQ(golden::rope_config_to_json(back), canonical) << f.filename();
    // The legacy spelling (rope_scaling with "type", rope_theta at the top) reads the same.
    Json legacy = canonical;
    Json r = legacy.at("rope_parameters");
    legacy.erase("rope_parameters");
    legacy["rope_theta"] = r.at("rope_theta");
    r.erase("rope_theta");
    r["type"] = r.at("rope_type");
    r.erase("rope_type");
    legacy["rope_scaling"] = r;
    expect_same_model(m, golden::rope_config_from_json(legacy, "legacy"), f.filename().string() + " (legacy keys)");
    EXPECT_FALSE(m.source.empty()) << f.filename() << ": every preset names its source";
    EXPECT_EQ(m.id + ".json", f.filename().string()) << "a preset's id is its file name";
  }
}

TEST(RopeScalingConfig, PresetFacts) {
  {
    const auto m = preset("llama-3.1-8b");
    EXPECT_EQ(m.scaling.type, RopeScalingType::kLlama3);
    EXPECT_EQ(m.scaling.factor, 8.0);
    EXPECT_EQ(m.scaling.original_max_position, 8192);
    EXPECT_EQ(m.params.rotary_dim, 128);
    EXPECT_EQ(m.params.base, 500000.0);
    EXPECT_EQ(m.n_kv_heads, 8);
  }
  {
    const auto m = preset("deepseek-v3");
    EXPECT_EQ(m.scaling.type, RopeScalingType::kYarn);
    EXPECT_EQ(m.params.rotary_dim, 64);
    EXPECT_EQ(m.params.layout, RopeLayout::kInterleaved);
    EXPECT_EQ(m.softmax_head_dim, 192);
    EXPECT_EQ(m.scaling.factor, 40.0);
    EXPECT_TRUE(m.scaling.mla);
  }
  {
    const auto m = preset("phi-3-mini-128k-instruct");
    EXPECT_EQ(m.scaling.type, RopeScalingType::kLongRope);
    EXPECT_EQ(m.scaling.long_factor.size(), 48u);
    EXPECT_EQ(m.scaling.original_max_position, 4096);
    EXPECT_EQ(m.scaling.factor, 32.0);  // L / L0: the config has no factor
  }
  EXPECT_EQ(preset("gpt-neox-20b").params.rotary_dim, 24);  // rotary_pct 0.25 of 96
  EXPECT_EQ(preset("gpt-j-6b").params.rotary_dim, 64);
  EXPECT_EQ(preset("gpt-j-6b").params.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(preset("llama-2-7b-meta").params.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(preset("llama-2-7b").params.layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(preset("codellama-7b-hf").params.base, 1000000.0);
  EXPECT_EQ(preset("qwen2.5-7b-instruct-yarn").scaling.original_max_position, 32768);
}

TEST(RopeScalingConfig, ErrorsNameTheKey) {
  const Json base = Json::parse(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
    "max_position_embeddings": 8192, "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 2.0}})");
  struct Row {
    std::string what;
    Json patch;  // merge patch
    std::string needle;
  };
  const std::vector<Row> rows = {
      {"unknown key", Json::parse(R"({"rope_scaling": {"beta_fast": 32}})"), "\"rope_scaling\" of type linear has unknown key \"beta_fast\""},
      {"factor type", Json::parse(R"({"rope_scaling": {"factor": "2"}})"), "rope_scaling.factor = \"2\": must be a number in [0.001, 65536]"},
      {"no factor", Json::parse(R"({"rope_scaling": {"factor": null}})"), "\"rope_scaling\" of type linear needs \"factor\""},
      {"factor <= 0", Json::parse(R"({"rope_scaling": {"factor": -2}})"), "rope_scaling.factor = -2: must be a number in [0.001, 65536]"},
      {"unknown type", Json::parse(R"({"rope_scaling": {"rope_type": "magic"}})"), "unknown type \"magic\""},
      {"no type", Json::parse(R"({"rope_scaling": {"rope_type": null}})"), "has neither \"rope_type\" nor \"type\""},
      {"odd rotary", Json::parse(R"({"rotary_dim": 63})"), "rotary_dim = 63: must be an even integer in [2, head_dim = 64]"},
      {"partial", Json::parse(R"({"partial_rotary_factor": 1.5})"), "partial_rotary_factor = 1.5: must be a number in (0, 1]"},
      {"heads", Json::parse(R"({"num_attention_heads": null})"), "missing \"num_attention_heads\""},
      {"kv heads", Json::parse(R"({"num_key_value_heads": 3})"), "num_key_value_heads = 3: must be a divisor of num_attention_heads = 8"},
      {"hidden", Json::parse(R"({"hidden_size": 500})"), "hidden_size = 500: must be a multiple of the 8 heads"},
      {"base", Json::parse(R"({"rope_theta": 1})"), "rope_theta = 1: must be a number in (1, 1e15]"},
      {"llama3 key", Json::parse(R"({"rope_scaling": {"rope_type": "llama3", "original_max_position_embeddings": 8192, "high_freq_factor": 4}})"),
       "\"rope_scaling\" of type llama3 needs \"low_freq_factor\""},
      {"llama3 order", Json::parse(R"({"rope_scaling": {"rope_type": "llama3", "original_max_position_embeddings": 8192, "low_freq_factor": 4, "high_freq_factor": 1}})"),
       "rope_scaling.high_freq_factor = 1: must be >= low_freq_factor = 4"},
      {"longrope list", Json::parse(R"({"rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 4096, "short_factor": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "long_factor": [1, 2]}})"),
       "rope_scaling.long_factor has 2 entries: must have rotary_dim / 2 = 32"},
      {"longrope list type", Json::parse(R"({"rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 4096, "short_factor": 1, "long_factor": [1]}})"),
       "rope_scaling.short_factor = 1: must be a list of 32 numbers"},
      {"yarn truncate", Json::parse(R"({"rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096, "truncate": "yes"}})"),
       "rope_scaling.truncate = \"yes\": must be true or false"},
      {"not an object", Json::parse(R"({"rope_scaling": [1]})"), "rope_scaling = [1]: must be an object or null"},
  };
  for (const auto& r : rows) {
    Json j = base;
    j.merge_patch(r.patch);
    try {
      golden::rope_config_from_json(j, "my/config.json");
      ADD_FAILURE() << r.what << ": accepted " << j.dump();
    } catch (const GoldenFileError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(r.needle), std::string::npos) << r.what << ": " << msg;
      EXPECT_EQ(msg.rfind("my/config.json", 0), 0u) << r.what << ": the file comes first: " << msg;
    }
  }
  // The same base config is fine, in both key spellings.
  EXPECT_EQ(golden::rope_config_from_json(base, "ok").scaling.factor, 2.0);
  Json v5 = base;
  v5.erase("rope_scaling");
  v5["rope_parameters"] = Json::parse(R"({"rope_type": "su", "short_factor": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],
    "long_factor": [2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2]})");
  v5["original_max_position_embeddings"] = 2048;
  const auto m = golden::rope_config_from_json(v5, "v5");
  EXPECT_EQ(m.scaling.type, RopeScalingType::kLongRope);
  EXPECT_EQ(m.scaling.original_max_position, 2048);
  EXPECT_EQ(m.scaling.factor, 4.0);
}

/// A scratch folder of this test, emptied.
fs::path config_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("posenc_config_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

fs::path write_config(const fs::path& d, const std::string& name, const std::string& text) {
  const fs::path f = d / name;
  std::ofstream(f, std::ios::binary) << text;
  return f;
}

// Issue 22: absurd numbers are refused before any arithmetic, with the file, the key (with its
// path), the value as the file writes it (never wrapped or converted) and the accepted range.
TEST(RopeScalingConfig, AbsurdNumbersAreRefusedWithFileKeyValueAndRange) {
  const fs::path d = config_dir("absurd");
  const std::string head = R"("num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 4096)";
  auto with = [&](const std::string& rest) { return "{" + head + ", " + rest + "}"; };
  std::string ones = "1";
  for (int i = 1; i < 32; ++i) ones += ",1";
  const std::string lr = R"("original_max_position_embeddings": 4096, "short_factor": [)" + ones + R"(], )";
  struct Row {
    std::string what, config, needle;
  };
  const std::string L28 = "an integer in [1, 268435456] (2^28, the kernel's position limit)";
  const std::vector<Row> rows = {
      {"2^62 with dynamic NTK (overflowed seq_len)",
       R"({"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 4611686018427387904,
          "rope_scaling": {"type": "dynamic", "factor": 2}})",
       "max_position_embeddings = 4611686018427387904: must be " + L28},
      {"2^63 - 1", R"({"num_attention_heads": 4, "head_dim": 64, "n_positions": 9223372036854775807})",
       "n_positions = 9223372036854775807: must be " + L28},
      {"dynamic: 2L - 1 beyond 2^28",
       R"({"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 134217729,
          "rope_scaling": {"type": "dynamic", "factor": 2}})",
       "max_position_embeddings = 134217729: must be an integer in [1, 134217728] for dynamic scaling"},
      {"yarn attention_factor -1 (was replaced by the default)",
       with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "attention_factor": -1})"),
       "rope_scaling.attention_factor = -1: must be a number in (0, 100]"},
      {"yarn attention_factor 0", with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "attention_factor": 0.0})"),
       "rope_scaling.attention_factor = 0.0: must be a number in (0, 100]"},
      {"longrope attention_factor -1",
       with(R"("rope_scaling": {"rope_type": "longrope", )" + lr + R"("long_factor": [)" + ones +
            R"(], "attention_factor": -1})"),
       "rope_scaling.attention_factor = -1: must be a number in (0, 100]"},
      {"head_dim 2^31 (was printed -2147483648)", R"({"num_attention_heads": 4, "head_dim": 2147483648})",
       "head_dim = 2147483648: must be an integer in [1, 16384]"},
      {"head_dim 1e20 (was printed 0)", R"({"num_attention_heads": 4, "head_dim": 1e20})",
       "head_dim = 1e20: must be an integer in [1, 16384]"},
      {"head_dim fractional", R"({"num_attention_heads": 4, "head_dim": 64.5})",
       "head_dim = 64.5: must be an integer in [1, 16384]"},
      {"head_dim negative", R"({"num_attention_heads": 4, "head_dim": -64})",
       "head_dim = -64: must be an integer in [1, 16384]"},
      {"heads 2^64 - 1", R"({"num_attention_heads": 18446744073709551615, "head_dim": 64})",
       "num_attention_heads = 18446744073709551615: must be an integer in [1, 65536]"},
      {"heads -2^63", R"({"n_head": -9223372036854775808, "head_dim": 64})",
       "n_head = -9223372036854775808: must be an integer in [1, 65536]"},
      {"heads 0", R"({"num_attention_heads": 0, "head_dim": 64})",
       "num_attention_heads = 0: must be an integer in [1, 65536]"},
      {"hidden beyond uint64", R"({"num_attention_heads": 4, "hidden_size": 99999999999999999999})",
       "hidden_size = 99999999999999999999: must be an integer in [1, 16777216]"},
      {"hidden / heads beyond the head limit", R"({"num_attention_heads": 1, "hidden_size": 32768})",
       "hidden_size = 32768: must be at most 16384 per head"},
      {"kv heads 0", with(R"("num_key_value_heads": 0)"), "num_key_value_heads = 0: must be an integer in [1, 65536]"},
      {"qk_nope negative", R"({"num_attention_heads": 4, "qk_rope_head_dim": 64, "qk_nope_head_dim": -1})",
       "qk_nope_head_dim = -1: must be an integer in [0, 16384]"},
      {"rotary_dim 2^40", with(R"("rotary_dim": 1099511627776)"),
       "rotary_dim = 1099511627776: must be an even integer in [2, head_dim = 64]"},
      {"partial 0", with(R"("partial_rotary_factor": 0)"), "partial_rotary_factor = 0: must be a number in (0, 1]"},
      {"rope_theta 1e300", with(R"("rope_theta": 1e300)"), "rope_theta = 1e300: must be a number in (1, 1e15]"},
      {"rope_theta a string", with(R"("rope_theta": "10000")"),
       "rope_theta = \"10000\": must be a number in (1, 1e15]"},
      {"factor 1E-400 (underflows to 0)", with(R"("rope_scaling": {"type": "linear", "factor": 1E-400})"),
       "rope_scaling.factor = 1E-400: must be a number in [0.001, 65536]"},
      {"factor 1e20", with(R"("rope_scaling": {"type": "ntk", "factor": 1e20})"),
       "rope_scaling.factor = 1e20: must be a number in [0.001, 65536]"},
      {"factor 0", with(R"("rope_parameters": {"rope_type": "dynamic", "factor": 0})"),
       "rope_parameters.factor = 0: must be a number in [0.001, 65536]"},
      {"yarn beta order", with(R"("rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32})"),
       "rope_scaling.beta_fast = 1: must be > beta_slow = 32"},
      {"yarn beta_slow 0", with(R"("rope_scaling": {"type": "yarn", "factor": 4, "beta_slow": 0})"),
       "rope_scaling.beta_slow = 0: must be a number in (0, 65536]"},
      {"yarn mscale -1", with(R"("rope_scaling": {"type": "yarn", "factor": 4, "mscale": -1, "mscale_all_dim": 1})"),
       "rope_scaling.mscale = -1: must be a number in [0, 100]"},
      {"yarn L0 2^62",
       with(R"("rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 4611686018427387904})"),
       "rope_scaling.original_max_position_embeddings = 4611686018427387904: must be " + L28},
      {"yarn truncate null (HF reads it as false)", with(R"("rope_scaling": {"type": "yarn", "factor": 4, "truncate": null})"),
       "rope_scaling.truncate = null: must be true or false"},
      {"llama3 freq factors in the wrong order",
       with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 1024,
               "low_freq_factor": 2.0, "high_freq_factor": 1})"),
       "rope_scaling.high_freq_factor = 1: must be >= low_freq_factor = 2.0"},
      {"llama3 low 0",
       with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 1024,
               "low_freq_factor": 0, "high_freq_factor": 4})"),
       "rope_scaling.low_freq_factor = 0: must be a number in (0, 65536]"},
      {"longrope entry 0",
       with(R"("rope_scaling": {"rope_type": "longrope", )" + lr + R"("long_factor": [)" + ones.substr(0, ones.size() - 1) +
            R"(0]})"),
       "rope_scaling.long_factor[31] = 0: must be a number in [0.001, 65536]"},
      {"longrope entry a string",
       with(R"("rope_scaling": {"rope_type": "longrope", )" + lr + R"("long_factor": ["x")" + ones.substr(1) + R"(]})"),
       "rope_scaling.long_factor[0] = \"x\": must be a number in [0.001, 65536]"},
      {"longrope derived factor",
       R"({"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 268435456,
          "rope_scaling": {"rope_type": "longrope", )" + lr + R"("long_factor": [)" + ones + R"(],
          "original_max_position_embeddings": 2}})",
       "max_position_embeddings / original_max_position_embeddings = 268435456 / 2 must be in [0.001, 65536]"},
      {"top-level L0 0", with(R"("original_max_position_embeddings": 0)"),
       "original_max_position_embeddings = 0: must be " + L28},
      {"model_type not a string", with(R"("model_type": 5)"), "model_type = 5: must be a string"},
      {"_name_or_path not a string", with(R"("_name_or_path": ["a"])"), "_name_or_path = [\"a\"]: must be a string"},
      {"_posenc not an object", with(R"("_posenc": "x")"), "_posenc = \"x\": must be an object"},
      {"rope_type not a string", with(R"("rope_scaling": {"rope_type": 5})"),
       "rope_scaling.rope_type = 5: must be a string"},
  };
  int i = 0;
  for (const auto& r : rows) {
    const fs::path f = write_config(d, "config" + std::to_string(i++) + ".json", r.config);
    try {
      golden::rope_config_read(f);
      ADD_FAILURE() << r.what << ": accepted " << r.config;
    } catch (const GoldenFileError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(f.string() + ": ", 0), 0u) << r.what << ": the file comes first: " << msg;
      EXPECT_NE(msg.find(r.needle), std::string::npos) << r.what << ": " << msg;
    }
  }
  // A given value is kept, not replaced: the limits themselves are accepted.
  const auto m = golden::rope_config_read(write_config(
      d, "edge.json",
      R"({"num_attention_heads": 65536, "head_dim": 16384, "max_position_embeddings": 268435456, "rope_theta": 1e15,
          "rope_scaling": {"rope_type": "yarn", "factor": 0.001, "attention_factor": 100, "beta_fast": 65536,
          "beta_slow": 1e-300, "mscale": 0, "mscale_all_dim": 100, "original_max_position_embeddings": 268435456}})"));
  EXPECT_EQ(m.scaling.attention_factor, 100.0);
  EXPECT_EQ(m.scaling.beta_slow, 1e-300);
  EXPECT_EQ(m.max_position, 268435456);
  // ... and its cases stay within the kernel's positions (the YaRN ramp edges L0 / beta are beyond).
  for (const auto& c : golden::rope_cases_for_config(m, DType::kF32, {})) {
    EXPECT_LE(c.positions.back().m, optimized::kRopeMaxPosition) << c.id;
  }
  const auto dyn = golden::rope_config_read(write_config(
      d, "dynamic_edge.json",
      R"({"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 134217728,
          "rope_scaling": {"type": "dynamic", "factor": 2}})"));
  const auto dc = golden::rope_cases_for_config(dyn, DType::kF32, {});
  ASSERT_FALSE(dc.empty());
  std::int64_t last = 0;
  for (const auto& c : dc) {
    last = std::max(last, c.positions.back().m);
    EXPECT_EQ(c.expected.seq_len, c.positions.back().m + 1) << c.id;
  }
  EXPECT_EQ(last, 2 * dyn.max_position - 1);
  EXPECT_LE(last, optimized::kRopeMaxPosition);
}

/// The case ids `generate --config` would write for a config file.
std::vector<std::string> config_case_ids(const fs::path& f) {
  std::vector<std::string> ids;
  for (const auto& c : golden::cases_for_config(f, {}, DType::kF32).cases) ids.push_back(c.id);
  return ids;
}

TEST(RopeScalingConfig, CaseNamesCarryTheModelAndTheConfigHash) {
  const fs::path d = config_dir("names");
  const std::string a = R"({"model_type": "llama", "num_attention_heads": 4, "head_dim": 64, "rope_theta": 10000})";
  const std::string b = R"({"model_type": "llama", "num_attention_heads": 4, "head_dim": 64, "rope_theta": 500000})";
  const auto ia = config_case_ids(write_config(d, "a.json", a));
  const auto ib = config_case_ids(write_config(d, "b.json", b));
  ASSERT_EQ(ia.size(), 1u);
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_NE(ia[0], ib[0]) << "one model_type, two configs: one name";
  const golden::RopeModelConfig ma = golden::rope_config_from_json(Json::parse(a), "a.json");
  const std::string hash = golden::sha256_hex(std::span(reinterpret_cast<const std::uint8_t*>(a.data()), a.size()));
  EXPECT_EQ(golden::config_case_name(ma, a), "llama_" + hash.substr(0, 8));
  EXPECT_EQ(ia[0], "rope_llama_" + hash.substr(0, 8) + "_all_f32");
  // The same bytes under another file name: the same cases (the name is the content's).
  EXPECT_EQ(config_case_ids(write_config(d, "copy.json", a)), ia);

  // A hostile _name_or_path: its basename, sanitised; never a path.
  const std::string hostile = R"({"_name_or_path": "../../etc/x;rm -rf", "num_attention_heads": 4, "head_dim": 64})";
  const auto ih = config_case_ids(write_config(d, "h.json", hostile));
  ASSERT_EQ(ih.size(), 1u);
  EXPECT_EQ(ih[0].rfind("rope_x_rm_rf_", 0), 0u) << ih[0];
  for (const std::string& weird : {std::string("..."), std::string("/"), std::string("\xff\xfe"),
                                   std::string(300, 'A'), std::string("a/b/\\..\\C:\\Con")}) {
    golden::RopeModelConfig m = ma;
    m.name_or_path = weird;
    const std::string name = golden::config_case_name(m, weird);
    EXPECT_LE(name.size(), golden::kConfigNameMax + 9) << name;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos) << name;
    EXPECT_NE(name.front(), '_') << name;
  }

  // A committed preset keeps the catalog's name; one byte changed, it is another model's.
  const fs::path preset = golden::default_presets_dir() / "llama-3.1-8b.json";
  const auto ip = config_case_ids(preset);
  EXPECT_EQ(ip.back(), "rope_scaling_llama_3_1_8b_all_f32");
  std::ifstream in(preset, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto edited = config_case_ids(write_config(d, "llama-3.1-8b.json", text + " "));
  EXPECT_EQ(edited.back().rfind("rope_scaling_llama_", 0), 0u) << edited.back();
  EXPECT_NE(edited.back(), ip.back());
}

// ---- golden catalog ----------------------------------------------------------------------------

/// The negative controls, as the scheme's case table describes them.
bool is_invalid_case(const std::string& id) {
  for (const auto& row : golden::scheme_by_slug("rope_scaling").cases()) {
    if (row.id == id) return row.description.find(", invalid convention ") != std::string::npos;
  }
  ADD_FAILURE() << "no rope_scaling case " << id;
  return false;
}

// First: it stops at the first stale case, which also ends a generator mutant run quickly.
TEST(RopeScalingGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("rope_scaling", 30); }
TEST(RopeScalingGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("rope_scaling"); }

/// Whether a mistake may pass a rope_scaling case (EngineMistakesAreCaught).
bool scaling_mistake_may_pass(const std::string& id, const std::string& mistake) {
  if (is_invalid_case(id)) {
    // A negative control passes when the output differs from the wrong convention; the two
    // mistakes that reproduce one must fail it.
    // DeepSeek-V3's attention factor is 1, so leaving out the whole magnitude (no-mscale) is
    // leaving out the softmax multiplier too.
    const bool no_softmax = id.find("_softmax_factor_missing_") != std::string::npos;
    const bool reproduces =
        (mistake == "factor-inverted" && id.find("_factor_inverted_") != std::string::npos) ||
        (mistake == "yarn-truncate-flipped" &&
         id.find("_truncate_flipped_") != std::string::npos) ||
        (mistake == "unscaled" && id.find("_hf_prefix_factor_override_") != std::string::npos) ||
        (no_softmax && (mistake == "softmax-scale-missing" || mistake == "no-mscale"));
    return !reproduces;
  }
  const bool within = id.find("_within_") != std::string::npos;  // dynamic NTK up to L: plain
  if (within && (mistake == "unscaled" || mistake == "factor-inverted")) return true;
  // These rules have no magnitude scaling (a = 1, no softmax multiplier): nothing to leave out.
  const bool a_is_one = id.find("dynamic") != std::string::npos || id.find("linear") != std::string::npos ||
                        id.find("ntk") != std::string::npos || id.find("llama_3") != std::string::npos;
  if (mistake == "no-mscale" && a_is_one) return true;
  // The DeepSeek softmax-scale mistakes need an MLA multiplier (DeepSeek's cases); the
  // dynamic-NTK one a dynamic case.
  const bool mla = id.find("deepseek") != std::string::npos;
  if (mistake.rfind("softmax-scale-", 0) == 0 || mistake == "mscale-on-rotation") return !mla;
  // llama.cpp's DeepSeek kq_scale conventions need an MLA multiplier too; a flipped YaRN
  // `truncate` a YaRN case (DeepSeek's are YaRN).
  if (mistake.rfind("kq-scale-", 0) == 0 || mistake == "rope-mscale-not-cancelled") return !mla;
  if (mistake == "yarn-truncate-flipped") return !mla && id.find("yarn") == std::string::npos;
  return mistake == "dynamic-ntk" && id.find("dynamic") == std::string::npos;
}

TEST(RopeScalingGolden, EngineMistakesAreCaught) { expect_engine_mistakes_caught("rope_scaling", scaling_mistake_may_pass); }

TEST(RopeScalingGolden, EngineMistakesFailTheRecurrenceProfile) {
  // Every rule (dynamic NTK too, whose fp32-recurrence budget is its host base' per call) and
  // the 16-bit scores' KV-cache term: every mistake still leaves the budget.
  expect_engine_mistakes_caught("rope_scaling", scaling_mistake_may_pass, "fp32-recurrence");
}

TEST(RopeScalingGolden, LlamaCppSixteenBitKvCachePassesTheRecurrenceProfile) {
  // As RopeGolden's: before the KV-cache term Llama-3.1 bf16 failed at 3.9x, DeepSeek-V2-Lite
  // bf16 at 13.1x.
  EXPECT_EQ(expect_llama_cpp_kv_cache_scores_pass("rope_scaling"), 3);
}

TEST(RopeScalingGolden, DynamicNtkHostBaseEnginePassesTheRecurrenceProfile) {
  // llama.cpp serves dynamic NTK as a host that computes the call's base' in double and passes
  // it to ggml as freq_base (within L, base' = base): plain ggml RoPE at that base. The
  // recurrence profile applies to every stage of every dynamic case and that engine passes it.
  int n = 0;
  for_each_golden_case("rope_scaling", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    const Json& sc = lc.spec.manifest.at("params").at("scaling");
    if (sc.at("type") != "dynamic") return;
    const Json& pj = lc.spec.manifest.at("params");
    const double base = pj.at("base").get<double>(), factor = sc.at("factor").get<double>();
    const double l0 = sc.at("max_position_embeddings").get<double>();
    const int d = pj.at("rotary_dim").get<int>();
    std::int64_t last = 0;
    const golden::Tensor& pos = lc.golden.at("positions");
    for (std::int64_t i = 0; i < pos.numel(); ++i) last = std::max(last, pos.get_i64(i));
    const double l = std::max(static_cast<double>(last + 1), l0);
    golden::CaseSpec host = lc.spec;
    host.manifest["params"]["base"] = base * std::pow(factor * l / l0 - (factor - 1), static_cast<double>(d) / (d - 2));
    host.manifest["params"].erase("scaling");
    golden::EngineOptions eo;
    eo.pipeline = "fp32-recurrence";
    const auto out = s.run_engine(host, lc.golden, eo);
    for (const auto& t : lc.spec.expected) {
      EXPECT_TRUE(t.check.profile("fp32-recurrence").applies) << lc.spec.id << " " << t.name;
    }
    const auto r = golden::verify_case(lc.spec, lc.golden, out, {"fp32-recurrence", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kPass) << golden::format_case_text(r, true);
    ++n;
  });
  EXPECT_EQ(n, 3);
}

TEST(RopeScalingGolden, NegativeControlsFailTheRecurrenceProfile) {
  // The known-wrong convention's own values leave the fp32-recurrence budget too.
  int n = 0;
  for_each_golden_case("rope_scaling", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (lc.spec.result != "invalid" || !profile_applies(lc.spec, "fp32-recurrence")) return;
    golden::TensorMap out;
    for (const auto& t : lc.spec.expected) out.emplace(t.name, lc.golden.at(t.name));
    const auto r = golden::verify_case(lc.spec, lc.golden, out, {"fp32-recurrence", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id;
    ++n;
  });
  EXPECT_EQ(n, 7);
}

TEST(RopeScalingGolden, PipelinesPassTheirProfiles) {
  // The bf16 and f16 cases (Llama-3.1, DeepSeek-V2-Lite) have a = 1, so their attention factor
  // is exact in any pipeline, and one MLA softmax scale cannot show a rounding worst case; the
  // float32 cases show both budgets tight (attention_factor 0.65, softmax_scale 0.50 of budget).
  expect_pipelines_pass_their_profiles("rope_scaling", 0.25,
                                       {"scores", "bf16/attention_factor", "f16/attention_factor",
                                        "bf16/softmax_scale", "f16/softmax_scale"});
}

TEST(RopeScalingGolden, FloatPipelinesFailStrict) {
  expect_float_pipelines_fail_strict("rope_scaling", [](const std::string& id, const std::string&) {
    return !is_invalid_case(id);
  });
}

TEST(RopeScalingGolden, NegativeControlsFailForTheirConvention) {
  // An engine that follows the known-wrong convention reproduces the invalid case and FAILs;
  // posenc's own engine (the default convention) passes it (it differs).
  const auto dir = golden::default_data_dir();
  int n = 0;
  for_each_golden_case("rope_scaling", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid") return;
    golden::TensorMap out;
    for (const auto& t : lc.spec.expected) out.emplace(t.name, lc.golden.at(t.name));
    const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id << ": the wrong convention itself must fail";
    const auto mine = golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {}), {"strict", {}, true});
    EXPECT_EQ(mine.status, golden::Verdict::kPass) << lc.spec.id;
    ++n;
  });
  EXPECT_EQ(n, 7);
}

TEST(RopeScalingGolden, DiagnoseNamesTheMistakeOfTheNegativeControls) {
  // The engine mistake that models a negative control's convention reproduces the control (its
  // output FAILs it), and on the default case of the same call (the twin; a convention case has
  // inputs of its own seed) diagnose names that mistake (a tie names it among the others).
  const std::map<std::string, std::string> mistake_of = {{"softmax_factor_missing", "softmax-scale-missing"},
                                                         {"factor_inverted", "factor-inverted"}};
  const auto dir = golden::default_data_dir() / "rope_scaling";
  int n = 0;
  for_each_golden_case("rope_scaling", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid") return;
    const std::string conv = lc.spec.manifest.at("scaling").at("convention").get<std::string>();
    if (!mistake_of.count(conv)) return;
    const std::string m = mistake_of.at(conv);
    const auto own = s.run_engine(lc.spec, lc.golden, {m});
    EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, own, {"strict", {}, true}).status, golden::Verdict::kFail)
        << lc.spec.id << ": the mistake " << m << " does not reproduce it";
    std::string twin = lc.spec.id;
    twin.erase(twin.find("_" + conv), conv.size() + 1);
    const auto def = generator_mutant_active() ? fresh_case(s, twin) : golden::load_case(dir / (twin + ".json"));
    const auto d = golden::diagnose_case(def, s.run_engine(def.spec, def.golden, {m}), "strict");
    EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
    const bool named = (!d.ranked.empty() && d.ranked.front().mistake == m) ||
                       std::find(d.tied.begin(), d.tied.end(), m) != d.tied.end();
    EXPECT_TRUE(named) << lc.spec.id << "\n" << golden::diagnosis_text(d, true);
    EXPECT_NE(d.summary.find("`" + m + "`"), std::string::npos) << d.summary;
    ++n;
  });
  EXPECT_EQ(n, 2);
}

TEST(RopeScalingGolden, EngineFollowingAnAcceptableConventionPassesTheDefaultCase) {
  // Current vLLM's LongRoPE switch and DeepSeek's own code are correct engines: told the rule of
  // the `acceptable` case, posenc's engine (exact and fp32 pipelines) passes the default case
  // of the same call too, and verify names the convention it follows. Without the declared
  // alternative it would fail there.
  const auto dir = golden::default_data_dir();
  int n = 0;
  for_each_golden_case("rope_scaling", [&](const golden::LoadedCase& acc, const golden::SchemeEntry& s) {
    if (acc.spec.result != "acceptable") return;
    const std::string conv = acc.spec.manifest.at("scaling").at("convention").get<std::string>();
    std::string default_id = acc.spec.id;
    default_id.erase(default_id.find("_" + conv), conv.size() + 1);
    const golden::LoadedCase def = golden::load_case(dir / "rope_scaling" / (default_id + ".json"));
    golden::CaseSpec told = def.spec;
    told.manifest["params"]["scaling"] = acc.spec.manifest.at("params").at("scaling");
    for (const std::string pipeline : {"exact", "fp32"}) {
      golden::EngineOptions eo;
      eo.pipeline = pipeline;
      const auto out = s.run_engine(told, def.golden, eo);
      golden::VerifyOptions vo;
      vo.profile = golden::pipelines::profile_of(pipeline);
      vo.require_all = true;
      const auto r = golden::verify_case(def.spec, def.golden, out, vo);
      EXPECT_EQ(r.status, golden::Verdict::kPass) << pipeline << "\n" << golden::format_case_text(r, true);
      const bool named = std::any_of(r.tensors.begin(), r.tensors.end(),
                                     [&](const golden::TensorReport& t) { return t.convention == conv; });
      EXPECT_TRUE(named) << default_id << ": verify does not say the engine follows " << conv;
    }
    ++n;
  });
  EXPECT_EQ(n, 2);
}

}  // namespace
}  // namespace posenc::properties
