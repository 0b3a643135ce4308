// Fitted parameters of a plan case's output: golden/cases/plan_fit.hpp.
#include "golden/cases/plan_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "golden/cases/plan_case.hpp"
#include "reference/common/mutant.hpp"
#include "reference/common/errors.hpp"
#include "reference/qk_norm.hpp"

namespace posenc::golden {
namespace {

using Json = nlohmann::json;

/// What the fits read of a case.
struct PlanSetup {
  PlanLayerType t;
  std::vector<std::int64_t> pos;
  std::vector<double> u;  // q as the rotation receives it: normalized before RoPE where so
  int hq = 0, h = 0;
};

std::optional<PlanSetup> setup_of(const LoadedCase& lc) {
  PlanSetup s;
  const Json& p = lc.spec.manifest.at("params");
  s.t = plan_type_from_json(p.at("type"), lc.spec.id + " params");
  s.hq = p.at("n_q_heads").get<int>();
  s.h = p.at("head_dim").get<int>();
  const Tensor& pt = lc.golden.at("positions");
  for (std::int64_t r = 0; r < pt.numel(); ++r) s.pos.push_back(pt.get_i64(r));
  s.u = tensor_to_f64(lc.golden.at("q"));
  const reference::QkNorm& n = s.t.qk_norm;
  const bool projections = p.value("qk_inputs", std::string("projections")) == "projections";
  if (n.kind != reference::QkNormKind::kNone && projections &&
      n.position == reference::QkNormPosition::kBeforeRope) {
    std::vector<double> w;
    if (n.has_weights()) w = tensor_to_f64(lc.golden.at("q_norm_weight"));
    for (std::size_t off = 0; off < s.u.size(); off += static_cast<std::size_t>(s.h)) {
      const std::vector<double> row(s.u.begin() + off, s.u.begin() + off + s.h);
      const std::vector<double> y = reference::qk_norm_apply<double>(n, row, w);
      std::copy(y.begin(), y.end(), s.u.begin() + off);
    }
  }
  return s;
}

std::vector<PlanLayerType> plan_types_of(const LoadedCase& lc) {
  std::vector<PlanLayerType> v;
  for (const Json& t : lc.spec.manifest.at("params").at("plan").at("types"))
    v.push_back(plan_type_from_json(t, lc.spec.id + " params"));
  return v;
}

std::string digits(double v, int n) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", n, v);
  return buf;
}

double round_digits(double v, int n) { return std::stod(digits(v, n)); }

/// A candidate whose run is the built-in engine's (exact pipeline) with `t` and `tau`.
RopeFitCandidate candidate(const LoadedCase& lc, const PlanLayerType& t, std::string parameter,
                           std::string value, std::string case_value, std::string evidence,
                           const std::function<double(std::int64_t)>& tau = {}) {
  RopeFitCandidate c;
  c.parameter = std::move(parameter);
  c.value = std::move(value);
  c.case_value = std::move(case_value);
  c.evidence = std::move(evidence);
  c.run = plan_case_run_type(lc.spec, lc.golden, t, "exact", tau);
  return c;
}

/// The same with the mp50 oracle's run of `t` and its own budgets: for a type whose mask or
/// angles differ from the case's, whose budgets would be the wrong ones (0 where the case masks).
RopeFitCandidate oracle_candidate(const LoadedCase& lc, const PlanLayerType& t,
                                  std::string parameter, std::string value, std::string case_value,
                                  std::string evidence) {
  RopeFitCandidate c;
  c.parameter = std::move(parameter);
  c.value = std::move(value);
  c.case_value = std::move(case_value);
  c.evidence = std::move(evidence);
  PlanOracleRun r = plan_case_oracle_run(lc.spec, lc.golden, t);
  c.run = std::move(r.run);
  c.budgets = std::move(r.spec);
  return c;
}

/// How far an output lies from a run, scale-free (per stage both hold: sum |a - r| / sum |r|,
/// averaged): picks the value of a scan before its oracle run is made.
double deviation(const TensorMap& run, const TensorMap& actual) {
  double total = 0;
  int n = 0;
  for (const auto& [name, r] : run) {
    const auto a = actual.find(name);
    if (a == actual.end() || a->second.numel() != r.numel()) continue;
    double diff = 0, mag = 0;
    for (std::int64_t i = 0; i < r.numel(); ++i) {
      const double x = r.get_f64(i), y = a->second.get_f64(i);
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      diff += std::fabs(y - x);
      mag += std::fabs(x);
    }
    total += mag > 0 ? diff / mag : (diff > 0 ? 1 : 0);
    ++n;
  }
  return n ? total / n : 1e300;
}

/// The base from q_rot: per pair the angle between the rotation's input and the output at the
/// smallest position > 0, averaged over the q heads; log w_i fitted over the faster half.
std::optional<double> measured_base(const PlanSetup& s, const Tensor& q_rot, std::string* ev) {
  std::size_t r0 = 0;
  while (r0 < s.pos.size() && s.pos[r0] <= 0) ++r0;
  if (r0 == s.pos.size()) return std::nullopt;
  const double p = static_cast<double>(s.pos[r0]);
  const int np = s.t.params.rotary_dim / 2, d = s.t.params.rotary_dim;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  // the fastest quarter of the pairs: no scaling rule (YaRN, Llama 3) touches them
  for (int i = 0; i < std::max(3, np / 4); ++i) {
    const int ca = reference::rope_pair_a(s.t.params, i),
              cb = reference::rope_pair_b(s.t.params, i);
    double phi = 0;
    int heads = 0;
    for (int hh = 0; hh < s.hq; ++hh) {
      const std::size_t off = (r0 * s.hq + hh) * s.h;
      const double xa = s.u[off + ca], xb = s.u[off + cb];
      const double ya = q_rot.get_f64(static_cast<std::int64_t>(off + ca)),
                   yb = q_rot.get_f64(static_cast<std::int64_t>(off + cb));
      if (!std::isfinite(ya) || !std::isfinite(yb) || std::hypot(xa, xb) < 1e-3) continue;
      phi += std::atan2(xa * yb - xb * ya, xa * ya + xb * yb);
      ++heads;
    }
    if (heads == 0) continue;
    const double w = phi / heads / p;
    if (!(w * p > 1e-3)) continue;
    const double x = 2.0 * i / d, y = std::log(w);
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    ++n;
  }
  if (n < 3) return std::nullopt;
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  if (!std::isfinite(slope) || slope >= 0) return std::nullopt;
  *ev = "the angles of q_rot at position " + std::to_string(s.pos[r0]) + " over " +
        std::to_string(n) + " pairs: log w_i falls by " + digits(-slope, 6) + " per 2i/d";
  return std::exp(-slope);
}

void add_base(const LoadedCase& lc, const PlanSetup& s, const TensorMap& actual,
              std::vector<RopeFitCandidate>& out) {
  if (s.t.rope == PlanRope::kNone) return;
  const double was = s.t.params.base;
  std::vector<std::pair<double, std::string>> bases;
  std::string ev;
  const auto it = actual.find("q_rot");
  std::optional<double> m;
  if (it != actual.end() && it->second.numel() == static_cast<std::int64_t>(s.u.size()))
    m = measured_base(s, it->second, &ev);
  if (m) {
    bases.push_back({round_digits(*m, 3), ev + " (fitted " + digits(*m, 6) + ")"});
  } else {  // no q_rot to read: the base whose run the output lies closest to
    double best = 1e300, pick = 0;
    for (int k = 8; k <= 30; ++k) {
      PlanLayerType t = s.t;
      t.params.base = round_digits(std::pow(10.0, k / 4.0), 3);
      const double dv = deviation(plan_case_run_type(lc.spec, lc.golden, t, "exact"), actual);
      if (dv < best) {
        best = dv;
        pick = t.params.base;
      }
    }
    bases.push_back({pick, "the closest of 1e2 .. 1e7.5 in quarter decades (no q_rot given)"});
  }
  for (const auto& [b, why] : bases) {
    if (!(b > 1) || std::fabs(b / was - 1) < 1e-3) continue;
    PlanLayerType t = s.t;
    t.params.base = b;
    out.push_back(oracle_candidate(lc, t, "base", digits(b, 6), digits(was, 6), why));
  }
}

/// The window W + d (d = -3 .. +2, the case's positions W - 3 .. W + 2 tell each apart) whose
/// run the output lies closest to, with its oracle run.
void add_window(const LoadedCase& lc, const PlanSetup& s, const TensorMap& actual,
                std::vector<RopeFitCandidate>& out) {
  if (s.t.mask != PlanMask::kSliding) return;
  const std::int64_t W = s.t.window;
  double best = 1e300;
  std::int64_t pick = 0;
  for (std::int64_t dw : {-1, 1, -2, 2, -3}) {
    if (W + dw < 1) continue;
    PlanLayerType t = s.t;
    t.window = W + dw;
    const double dv = deviation(plan_case_run_type(lc.spec, lc.golden, t, "exact"), actual);
    if (dv < best) {
      best = dv;
      pick = dw;
    }
  }
  if (pick == 0) return;
  PlanLayerType t = s.t;
  t.window = W + pick;
  const std::string v = "W " + std::string(pick < 0 ? "- " : "+ ") +
                        std::to_string(pick < 0 ? -pick : pick) + " = " + std::to_string(W + pick);
  out.push_back(oracle_candidate(lc, t, "window", v, std::to_string(W),
                                 "the closest of W - 3 .. W + 2 on the case's positions around W"));
}

/// The plan's other layer type computed on this case's inputs (a layer pattern off by one, or
/// the wrong type's layer picked), and the fixed mistakes that change the angles (another
/// type's RoPE, YaRN's truncate), each with its own budgets: the case's budgets hold no angle
/// error where the case does not rotate, and another base's angle errors are not the case's.
void add_other_type(const LoadedCase& lc, const PlanSetup& s, std::vector<RopeFitCandidate>& out) {
  const std::vector<PlanLayerType> types = plan_types_of(lc);
  for (const char* m :
       {"other-layer-type", "rope-on-nope", "global-rope-on-sliding", "yarn-truncate"}) {
    PlanLayerType other;
    try {
      other = plan_type_with_mistake(s.t, types, m);
    } catch (const InvalidArgument&) {
      continue;  // the mistake does not apply to this type
    }
    const bool o = std::string(m) == "other-layer-type";
    out.push_back(oracle_candidate(lc, other, m, o ? other.name : "", o ? s.t.name : "",
                                   o ? "the layer computes the plan's other layer type"
                                     : "the fixed mistake with its own budgets"));
  }
}

void add_temperature(const LoadedCase& lc, const PlanSetup& s, const TensorMap& actual,
                     std::vector<RopeFitCandidate>& out) {
  if (!s.t.has_temperature) return;
  const reference::QueryTemperature q = s.t.temperature;
  const bool l4 = q.rule == reference::QueryTemperatureRule::kLlama4;
  const std::int64_t b = l4 ? 1 : 0, L = q.length;
  const double c = q.coefficient;
  for (std::int64_t o : {-2, -1, 1, 2}) {
    if ((l4 && o == -1) || (!l4 && o == 1)) continue;  // the other rule: a fixed mistake
    auto tau = [=](std::int64_t m) {
      const std::int64_t n = std::max<std::int64_t>(0, (m + b + o) / L);
      return 1.0 + c * std::log1p(static_cast<double>(n));
    };
    out.push_back(candidate(
        lc, s.t, "temperature-offset", (o > 0 ? "+" : "") + std::to_string(o), "0",
        std::string("floor((p") + (l4 ? " + 1" : "") + " + o) / " + std::to_string(L) + ")", tau));
  }
  auto unfloored = [=](std::int64_t m) {
    return 1.0 + c * std::log1p(static_cast<double>(m + b) / static_cast<double>(L));
  };
  out.push_back(candidate(
      lc, s.t, "temperature-floor", "no floor", "floor",
      "1 + c ln(1 + (p" + std::string(l4 ? " + 1" : "") + ") / " + std::to_string(L) + ")",
      unfloored));
  // the coefficient: from |q_rot| / |q| past a step (NoPE or a rotation that keeps pair norms)
  std::vector<double> cs;
  std::string ev = "c / 2 and 2 c tried";
  const auto it = actual.find("q_rot");
  if (it != actual.end() && it->second.numel() == static_cast<std::int64_t>(s.u.size())) {
    auto norm_ratio = [&](std::size_t r) {
      double a = 0, y = 0;
      for (std::size_t x = r * s.hq * s.h; x < (r + 1) * s.hq * s.h; ++x) {
        a += s.u[x] * s.u[x];
        y += it->second.get_f64(static_cast<std::int64_t>(x)) *
             it->second.get_f64(static_cast<std::int64_t>(x));
      }
      return a > 0 ? std::sqrt(y / a) : 0.0;
    };
    const double base = norm_ratio(0);  // position 0: tau = 1 (the attention factor only)
    double sum = 0;
    int n = 0;
    for (std::size_t r = 0; r < s.pos.size(); ++r) {
      const std::int64_t k = reference::query_temperature_steps(q, s.pos[r]);
      if (k < 1 || !(base > 0)) continue;
      const double ci = (norm_ratio(r) / base - 1) / std::log1p(static_cast<double>(k));
      if (std::isfinite(ci)) {
        sum += ci;
        ++n;
      }
    }
    if (n > 0) {
      cs.push_back(round_digits(sum / n, 4));
      ev = "|q_rot| / |q| at " + std::to_string(n) + " tokens past a step";
    }
  }
  if (cs.empty()) cs = {c / 2, 2 * c};
  for (double ci : cs) {
    if (!(ci >= 0) || std::fabs(ci - c) <= 1e-3 * std::max(c, 1e-9)) continue;
    PlanLayerType t = s.t;
    t.temperature.coefficient = ci;
    out.push_back(candidate(lc, t, "temperature-scale", digits(ci, 6), digits(c, 6), ev));
  }
}

}  // namespace

std::vector<RopeFitCandidate> plan_fit_candidates(const LoadedCase& lc, const TensorMap& actual) {
  std::vector<RopeFitCandidate> out;
  if (lc.spec.scheme != "plan" || POSENC_MUTANT("plan_fit_nothing")) return out;
  std::optional<PlanSetup> s;
  try {
    s = setup_of(lc);
    if (!s) return out;
    add_other_type(lc, *s, out);
    add_base(lc, *s, actual, out);
    add_window(lc, *s, actual, out);
    add_temperature(lc, *s, actual, out);
  } catch (const std::exception&) {
    return out;  // a case these fits do not read
  }
  // Two values that give the same run are one fit (the first: the smaller change).
  std::vector<RopeFitCandidate> kept;
  for (auto& c : out) {
    const bool dup = std::any_of(kept.begin(), kept.end(), [&](const RopeFitCandidate& k) {
      if (k.parameter != c.parameter || k.run.size() != c.run.size()) return false;
      for (const auto& [name, t] : k.run) {
        const auto it = c.run.find(name);
        if (it == c.run.end() || it->second.data != t.data) return false;
      }
      return true;
    });
    if (!dup) kept.push_back(std::move(c));
  }
  return kept;
}

std::string plan_fit_words(const RopeFitCandidate& c, const std::string& residual_text) {
  const std::string res = residual_text.empty() ? "" : ", residual " + residual_text;
  if (c.parameter != "other-layer-type" && c.case_value.empty())
    return plan_case_mistake_words(c.parameter) + " (judged with the budgets of that computation" +
           res + ")";
  if (c.parameter == "other-layer-type")
    return "the layer computes the plan's other layer type " + c.value + " where the case is " +
           c.case_value + " (a layer pattern off by one, or the wrong type's layer picked" + res +
           ")";
  if (c.parameter == "base")
    return "the layer type's RoPE base fitted as " + c.value + "; the case says " + c.case_value +
           " (" + c.evidence + res + ")";
  if (c.parameter == "window")
    return "the sliding window fitted as " + c.value + "; the case says " + c.case_value + " (" +
           c.evidence + res + ")";
  if (c.parameter == "temperature-offset")
    return "the query temperature's steps offset by " + c.value + " token(s): " + c.evidence +
           " (fitted o = " + c.value + " of -2 .. +2" + res + ")";
  if (c.parameter == "temperature-floor")
    return "the query temperature without its floor: " + c.evidence + " (" + c.value + res + ")";
  return "the query temperature's coefficient fitted as " + c.value + "; the case says " +
         c.case_value + " (" + c.evidence + res + ")";
}

}  // namespace posenc::golden
