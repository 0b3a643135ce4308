// posenc's ALiBi properties, run on a user's own slopes and bias producer
// (docs/property-testing.md; check/rope.hpp has the RoPE ones and the shared conventions).
//
//   #include "check/alibi.hpp"
//   void my_alibi(const posenc::check::AlibiCall& c) { ... }  // fills c.slopes and c.bias
//   POSENC_ALIBI_PROPERTIES(MyAlibi, my_alibi, "fp32");        // MyAlibi.Slopes, MyAlibi.Ratios
//
// The properties (RapidCheck; seed and max_success from RC_PARAMS):
//   Slopes  for a drawn head count n in 1..256, every slope within the named profile's budget of
//           the mp50 value: the committed case alibi_slopes_h1_to_256_f32 (its budgets: 0.5 ulp
//           for strict; for fp32 / fp32-recurrence the worst error of BLOOM's, MPT's or ggml's
//           float32 powers, up to 32 ulp). Needs the golden data ($POSENC_DATA when installed).
//   Ratios  softmax probability ratios p_ij / p_ij' = exp(m_h (j - j')) for keys j, j' <= i: the
//           bias difference b_ij - b_ij' is within rho_h |m_h| |j - j'| (rho_h |m_h| = the slope's
//           budget above) plus half an ulp of each bias value (one float32 product) of
//           m_h (j - j'), m_h the exact slope. Any bias form that adds m (j - i) up to a per-row
//           constant passes (the paper's -m (i - j), BLOOM's m j).
// A failure names the shrunk call, the worst element with its budget and, when one explains the
// output, the known mistake (naive slopes 2^(-8k/n) for n not a power of two, slopes in reversed
// order, bias sign flipped).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "check/run.hpp"
#include "check/rope.hpp"  // PropertyResult
#include "golden/format/profiles.hpp"
#include "golden/verify/catalog.hpp"
#include "golden/verify/element_budgets.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"

namespace posenc::check {

/// One call of a user's ALiBi producer: n_heads slopes, and the additive attention bias
/// [n_heads, q_positions.size(), k_positions.size()] (row-major) of causal attention (only keys
/// j with k_positions[j] <= q_positions[i] are read).
struct AlibiCall {
  int n_heads = 0;
  span<const std::int64_t> q_positions, k_positions;
  span<float> slopes;
  span<float> bias;
};
using AlibiKernel = std::function<void(const AlibiCall&)>;

struct AlibiCheckOptions {
  std::string profile = "fp32";  // strict, fp32 (fp32-angles), fp32-recurrence
  int max_heads = 256;
  std::int64_t max_position = 4096;
  int max_keys = 8;
  int max_success = 25;
};

enum class AlibiProperty { kSlopes, kRatios };
inline const char* alibi_property_name(AlibiProperty p) {
  return p == AlibiProperty::kSlopes ? "Slopes" : "Ratios";
}

namespace detail {

/// The committed slopes of every head count with every profile's budgets, read once.
inline const golden::LoadedCase& alibi_slopes_case() {
  static const golden::LoadedCase c = golden::load_case(
      golden::default_data_dir() / "alibi" / "alibi_slopes_h1_to_256_f32.json");
  return c;
}

/// Exact slopes and budgets of n heads under a profile.
inline golden::ElementBudgets alibi_slopes_of(int n, const std::string& profile) {
  const golden::LoadedCase& c = alibi_slopes_case();
  static std::map<std::string, golden::ElementBudgets> all;
  auto it = all.find(profile);
  if (it == all.end()) {
    it = all.emplace(profile, golden::element_budgets(c.spec, c.golden, "slopes", profile)).first;
  }
  const golden::Tensor& nh = c.golden.at("n_heads");
  golden::ElementBudgets r;
  for (std::int64_t e = 0; e < nh.numel(); ++e) {
    if (nh.get_i64(e) != n) continue;
    r.exact.push_back(it->second.exact[e]);
    r.budget.push_back(it->second.budget[e]);
  }
  return r;
}

struct AlibiDraw {
  int n_heads = 1;
  std::vector<std::int64_t> q_positions, k_positions;
};

inline std::string describe(const AlibiDraw& d) {
  std::ostringstream os;
  os << "n_heads " << d.n_heads << ", q_positions [";
  for (std::size_t i = 0; i < d.q_positions.size(); ++i) os << (i ? ", " : "") << d.q_positions[i];
  os << "], k_positions [";
  for (std::size_t i = 0; i < d.k_positions.size(); ++i) os << (i ? ", " : "") << d.k_positions[i];
  os << "]";
  return os.str();
}

/// Which known mistake the slopes are, if any: "" or words.
inline std::string alibi_slope_diagnosis(const std::vector<float>& s,
                                         const golden::ElementBudgets& b) {
  const int n = static_cast<int>(s.size());
  auto within = [&](auto value_of) {
    for (int h = 0; h < n; ++h) {
      const double v = value_of(h);  // a float32 pipeline of that mistake: its own roundings
      if (!(std::fabs(s[h] - v) <= 2 * b.budget[h] + 4 * dtype_ulp(DType::kF32, v))) return false;
    }
    return true;
  };
  if (within([&](int h) { return std::exp2(-8.0 * (h + 1) / n); })) {
    return "naive slopes: 2^(-8(h+1)/n) for a head count that is not a power of two (the paper "
           "interleaves 2^(-8(h+1)/c), c = 2^floor(log2 n), with 2^(-4(2k+1)/c))";
  }
  if (within([&](int h) { return b.exact[n - 1 - h]; })) return "the slopes in reversed head order";
  if (within([&](int h) { return -b.exact[h]; })) return "the slopes with the sign flipped";
  return "";
}

inline std::string alibi_property_at(AlibiProperty which, const AlibiKernel& kernel,
                                     const std::string& profile, const AlibiDraw& d) {
  const golden::ElementBudgets sb = alibi_slopes_of(d.n_heads, profile);
  const std::size_t tq = d.q_positions.size(), tk = d.k_positions.size();
  std::vector<float> slopes(d.n_heads, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> bias(d.n_heads * tq * tk, std::numeric_limits<float>::quiet_NaN());
  AlibiCall c;
  c.n_heads = d.n_heads;
  c.q_positions = d.q_positions;
  c.k_positions = d.k_positions;
  c.slopes = slopes;
  c.bias = bias;
  kernel(c);
  char buf[640];
  for (int h = 0; h < d.n_heads; ++h) {
    if (std::fabs(slopes[h] - sb.exact[h]) <= sb.budget[h]) continue;
    std::snprintf(buf, sizeof buf,
                  "slope of head %d of %d = %.9g, exact %.9g, |error| %.3g > the %s budget %.3g",
                  h, d.n_heads, slopes[h], sb.exact[h], std::fabs(slopes[h] - sb.exact[h]),
                  profile.c_str(), sb.budget[h]);
    const std::string dg = alibi_slope_diagnosis(slopes, sb);
    return std::string(buf) + (dg.empty() ? "" : "\ndiagnosis: " + dg);
  }
  if (which == AlibiProperty::kSlopes) return "";
  for (int h = 0; h < d.n_heads; ++h) {
    // rho |m|: the slope's budget beyond its own rounding is what a float pipeline's slope may
    // be off by; the bias of one float32 product adds half an ulp of each value.
    const double slope_err = sb.budget[h];
    for (std::size_t i = 0; i < tq; ++i) {
      for (std::size_t j = 0; j < tk; ++j) {
        for (std::size_t j2 = 0; j2 < tk; ++j2) {
          if (d.k_positions[j] > d.q_positions[i] || d.k_positions[j2] > d.q_positions[i]) continue;
          const double b1 = bias[(h * tq + i) * tk + j], b2 = bias[(h * tq + i) * tk + j2];
          const double dist = static_cast<double>(d.k_positions[j] - d.k_positions[j2]);
          const double want = sb.exact[h] * dist;
          const double tol = slope_err * std::fabs(dist) + 0.5 * dtype_ulp(DType::kF32, b1) +
                             0.5 * dtype_ulp(DType::kF32, b2);
          if (std::fabs((b1 - b2) - want) <= tol) continue;
          std::snprintf(buf, sizeof buf,
                        "head %d of %d, query %zu (position %lld): bias[key %zu (position %lld)] - "
                        "bias[key %zu (position %lld)] = %.9g, exact m (j - j') = %.9g (ratio of "
                        "probabilities exp(%.6g) instead of exp(%.6g)); |error| %.3g > the %s "
                        "budget %.3g",
                        h, d.n_heads, i, static_cast<long long>(d.q_positions[i]), j,
                        static_cast<long long>(d.k_positions[j]), j2,
                        static_cast<long long>(d.k_positions[j2]), b1 - b2, want, b1 - b2, want,
                        std::fabs((b1 - b2) - want), profile.c_str(), tol);
          std::string dg;
          if (std::fabs((b1 - b2) + want) <= tol) dg = "\ndiagnosis: the bias sign is flipped";
          return buf + dg;
        }
      }
    }
  }
  return "";
}

inline AlibiDraw alibi_draw(AlibiProperty which, const AlibiCheckOptions& o) {
  AlibiDraw d;
  d.n_heads = *rc::gen::inRange(1, o.max_heads + 1);
  if (which == AlibiProperty::kSlopes) {
    d.q_positions = {0};
    d.k_positions = {0};
    return d;
  }
  d.n_heads = std::min(d.n_heads, 16);
  const auto pos = rc::gen::inRange<std::int64_t>(0, o.max_position + 1);
  const std::int64_t q = *pos;
  d.q_positions = {q};
  const int nk = *rc::gen::inRange(2, o.max_keys + 1);
  for (int j = 0; j < nk; ++j) d.k_positions.push_back(*rc::gen::inRange<std::int64_t>(0, q + 1));
  return d;
}

}  // namespace detail

/// Runs one ALiBi property (RapidCheck); the message holds the shrunk call and the diagnosis.
inline PropertyResult check_alibi_property(AlibiProperty which, const AlibiKernel& kernel,
                                           const AlibiCheckOptions& o) {
  const std::string profile = golden::canonical_profile(o.profile);
  if (profile != "strict" && profile != "fp32" && profile != "fp32-recurrence") {
    throw_invalid("posenc::check::check_alibi_property",
                  "profile must be strict, fp32 (fp32-angles) or fp32-recurrence", o.profile);
  }
  if (o.max_heads < 1 || o.max_heads > 256 || o.max_keys < 2) {
    throw_invalid("posenc::check::check_alibi_property",
                  "max_heads must be in 1..256 and max_keys >= 2", o.max_heads);
  }
  auto shrunk = std::make_shared<detail::AlibiDraw>();
  const auto prop = [=]() {
    const detail::AlibiDraw d = detail::alibi_draw(which, o);
    std::string f;
    try {
      f = detail::alibi_property_at(which, kernel, profile, d);
    } catch (const std::exception& e) {
      f = std::string("the kernel or the case threw: ") + e.what();
    }
    if (!f.empty()) {
      *shrunk = d;
      RC_FAIL(std::string(alibi_property_name(which)) + " fails at " + detail::describe(d) +
              "\n" + f);
    }
  };
  PropertyResult r =
      detail::run_property(std::string("posenc alibi ") + alibi_property_name(which),
                           o.max_success, prop);
  if (r.passed) return r;
  r.message += "\nshrunk call: " + detail::describe(*shrunk) + "\n";
  return r;
}

/// Registers suite.Slopes and suite.Ratios as GoogleTest tests.
inline bool register_alibi_properties(const char* suite, AlibiKernel kernel, AlibiCheckOptions o) {
  for (AlibiProperty p : {AlibiProperty::kSlopes, AlibiProperty::kRatios}) {
    ::testing::RegisterTest(suite, alibi_property_name(p), nullptr, nullptr, __FILE__, __LINE__,
                            [=]() -> ::testing::Test* {
                              return new detail::PropertyTest(
                                  [=] { return check_alibi_property(p, kernel, o); });
                            });
  }
  return true;
}
inline bool register_alibi_properties(const char* suite, AlibiKernel kernel, const char* profile) {
  AlibiCheckOptions o;
  o.profile = profile;
  return register_alibi_properties(suite, std::move(kernel), std::move(o));
}

}  // namespace posenc::check

/// POSENC_ALIBI_PROPERTIES(Suite, kernel, profile_or_options): Suite.Slopes, Suite.Ratios.
#define POSENC_ALIBI_PROPERTIES(Suite, kernel, profile_or_options)                 \
  [[maybe_unused]] static const bool posenc_alibi_properties_registered_##Suite = \
      ::posenc::check::register_alibi_properties(#Suite, (kernel), (profile_or_options))
