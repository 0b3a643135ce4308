#include "golden/verify/verify.hpp"
#include "golden/verify/element_ratios.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

TensorMap tensor_map(std::vector<Tensor> tensors) {
  TensorMap m;
  for (auto& t : tensors) {
    std::string name = t.name;
    m.emplace(std::move(name), std::move(t));
  }
  return m;
}

namespace {

bool checked(const TensorReport& t) { return t.status == "PASS" || t.status == "FAIL"; }

}  // namespace

int CaseReport::n_checked() const {
  int n = 0;
  for (const auto& t : tensors) n += checked(t);
  return n;
}

double CaseReport::worst_ratio() const {
  double w = 0;
  for (const auto& t : tensors) {
    if (checked(t)) w = std::max(w, t.max_ratio);
  }
  return w;
}

namespace {

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::vector<std::int64_t> coords_of(const std::vector<std::int64_t>& shape, std::int64_t index) {
  std::vector<std::int64_t> coords(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    const std::int64_t dim = shape[k] > 0 ? shape[k] : 1;
    coords[k] = index % dim;
    index /= dim;
  }
  return coords;
}

std::string describe(const TensorSpec& spec, const TensorMap& golden,
                     const std::vector<std::int64_t>& coords) {
  std::ostringstream os;
  for (std::size_t k = 0; k < coords.size(); ++k) {
    if (k) os << ", ";
    const AxisSpec* ax = k < spec.axes.size() ? &spec.axes[k] : nullptr;
    os << (ax && !ax->name.empty() ? ax->name : "dim" + std::to_string(k)) << ' ' << coords[k];
    if (!ax) continue;
    if (!ax->positions.empty()) {
      auto it = golden.find(ax->positions);
      if (it != golden.end() && coords[k] < it->second.numel()) {
        os << " (position " << it->second.get_i64(coords[k]) << ')';
      }
    }
    for (const auto& label : ax->labels) {
      auto it = golden.find(label);
      if (it != golden.end() && coords[k] < it->second.numel()) {
        os << " (" << label << ' ' << it->second.get_i64(coords[k]) << ')';
      }
    }
    if (!ax->pair_map.empty() && ax->name != "pair" &&
        coords[k] < static_cast<std::int64_t>(ax->pair_map.size())) {
      const int pair = ax->pair_map[coords[k]];
      if (pair < 0) {
        os << " (tail)";
      } else {
        os << " (pair " << pair << ')';
      }
    }
  }
  return os.str();
}

/// Position of every element: the largest of its coordinates' positions (a score between
/// positions 5 and 4095 is judged at 4095). Empty when no axis carries positions.
std::vector<std::int64_t> element_positions(const TensorSpec& spec, const TensorMap& golden) {
  std::vector<std::vector<std::int64_t>> axis_pos(spec.shape.size());
  bool any = false;
  for (std::size_t k = 0; k < spec.axes.size() && k < spec.shape.size(); ++k) {
    if (spec.axes[k].positions.empty()) continue;
    auto it = golden.find(spec.axes[k].positions);
    if (it == golden.end() || it->second.numel() != spec.shape[k]) continue;
    for (std::int64_t i = 0; i < spec.shape[k]; ++i) axis_pos[k].push_back(it->second.get_i64(i));
    any = true;
  }
  if (!any) return {};
  std::int64_t n = 1;
  for (auto d : spec.shape) n *= d;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n), std::numeric_limits<std::int64_t>::min());
  std::vector<std::int64_t> c(spec.shape.size(), 0);
  for (std::int64_t j = 0; j < n; ++j) {
    std::int64_t p = std::numeric_limits<std::int64_t>::min();
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (!axis_pos[k].empty()) p = std::max(p, axis_pos[k][c[k]]);
    }
    pos[j] = p;
    for (std::size_t k = c.size(); k-- > 0;) {  // odometer
      if (++c[k] < spec.shape[k]) break;
      c[k] = 0;
    }
  }
  return pos;
}

struct Judged {
  std::vector<double> ratio;  // per element; NaN output -> +inf
  std::vector<double> diff, budget;
  std::int64_t n_over = 0, n_nan = 0;
};

/// |y - y*| / budget for every element against one convention's exact and cond values.
Judged judge(const TensorSpec& spec, const Tensor& act, const Tensor& want, const Tensor* exact,
             const Tensor* cond, const Tensor* extra, const ProfileBudget& b) {
  const std::int64_t n = act.numel();
  Judged r;
  r.ratio.resize(static_cast<std::size_t>(n));
  r.diff.resize(static_cast<std::size_t>(n));
  r.budget.resize(static_cast<std::size_t>(n));
  const double eps = dtype_eps(spec.dtype);
  const bool is_float = dtype_is_float(act.dtype);
  double bound = b.bound;
  if (POSENC_MUTANT("golden_verify_lenient")) bound = bound * 1e12 + 1e12;  // passes anything
  for (std::int64_t j = 0; j < n; ++j) {
    double ratio, diff = 0, budget = 0;
    const double a = is_float ? act.get_f64(j) : 0.0;
    if (is_float && std::isnan(a)) {
      ratio = POSENC_MUTANT("golden_verify_nan_passes") ? 0.0 : INFINITY;
      diff = NAN;
      ++r.n_nan;
    } else if (spec.check.kind == "exact") {
      ratio = act.get_bits(j) == want.get_bits(j) ? 0.0 : INFINITY;
      if (is_float) diff = std::fabs(a - want.get_f64(j));
      if (POSENC_MUTANT("golden_verify_lenient")) ratio = 0.0;
    } else {
      const double x = exact->get_f64(j);
      if (spec.check.kind == "ulp") {
        budget = bound * dtype_ulp(spec.dtype, x);
      } else {
        const double c = cond->get_f64(j);
        const double ulps = POSENC_MUTANT("golden_verify_ulps_ignored") ? 0.0 : b.ulps;
        budget = c > 0 ? bound * eps * c + ulps * dtype_ulp(spec.dtype, x) : 0.0;
      }
      if (extra) budget += extra->get_f64(j);
      diff = std::fabs(a - x);
      if (diff == 0.0) {
        ratio = 0.0;
      } else if (!std::isfinite(diff) || !(budget > 0.0)) {
        ratio = INFINITY;
      } else {
        ratio = diff / budget;
      }
    }
    if (ratio > 1.0) ++r.n_over;
    r.ratio[j] = ratio;
    r.diff[j] = diff;
    r.budget[j] = budget;
  }
  return r;
}

TensorReport check_tensor(const TensorSpec& spec, const TensorMap& golden, const Tensor& act,
                          const VerifyOptions& opt, std::vector<double>* keep_ratios = nullptr) {
  TensorReport r;
  r.name = spec.name;
  r.stage = spec.stage;
  r.kind = spec.check.kind;
  const ProfileBudget& b = spec.check.profile(
      POSENC_MUTANT("golden_verify_na_uses_strict") && !spec.check.profile(opt.profile).applies
          ? std::string("strict") : opt.profile);
  r.bound = b.bound;
  r.has_extra = !b.extra.empty();
  if (!b.applies) {
    r.status = "N/A";
    r.message = "profile " + opt.profile + " does not apply: " + b.not_applicable;
    return r;
  }
  if (act.dtype != spec.dtype) {
    r.status = "ERROR";
    r.message = "dtype is " + std::string(dtype_short(act.dtype)) + ", the case expects " +
                std::string(dtype_short(spec.dtype));
    return r;
  }
  if (act.shape != spec.shape) {
    r.status = "ERROR";
    r.message = "shape is " + shape_str(act.shape) + ", the case expects " + shape_str(spec.shape);
    return r;
  }
  const Tensor& want = golden.at(spec.name);
  const Tensor* extra = b.extra.empty() ? nullptr : &golden.at(b.extra);
  auto find = [&](const std::string& n) { return n.empty() ? nullptr : &golden.at(n); };
  // The default convention, then each declared alternative; the engine is judged by the one
  // it follows (fewest elements over budget, the default on a tie).
  Judged best = judge(spec, act, want, find(spec.exact), find(spec.cond), extra, b);
  for (const auto& alt : spec.alternatives) {
    if (POSENC_MUTANT("golden_verify_alternatives_ignored")) break;
    Judged j = judge(spec, act, want, find(alt.exact), find(alt.cond), extra, b);
    if (j.n_over < best.n_over) {
      best = std::move(j);
      r.convention = alt.name;
    }
  }
  const std::vector<std::int64_t> pos = element_positions(spec, golden);
  r.has_positions = !pos.empty();
  const std::int64_t n = act.numel();
  std::int64_t worst = -1;
  double worst_ratio = -1;
  std::map<std::int64_t, PositionStat> per_pos;
  for (std::int64_t j = 0; j < n; ++j) {
    if (r.has_positions && opt.max_position && pos[j] > *opt.max_position &&
        !POSENC_MUTANT("golden_verify_max_position_ignored")) {
      ++r.n_skipped;
      continue;
    }
    ++r.n;
    const double q = best.ratio[j];
    const bool over = q > 1.0;
    r.n_over += over;
    if (q > worst_ratio) {
      worst_ratio = q;
      worst = j;
    }
    if (r.has_positions) {
      PositionStat& ps = per_pos[pos[j]];
      ps.position = pos[j];
      ps.worst_ratio = std::max(ps.worst_ratio, q);
      ++ps.n;
      ps.n_over += over;
    }
  }
  if (keep_ratios) {
    *keep_ratios = best.ratio;
    if (r.has_positions && opt.max_position) {
      for (std::int64_t j = 0; j < n; ++j) {
        if (pos[j] > *opt.max_position) (*keep_ratios)[j] = std::nan("");
      }
    }
  }
  r.n_nan = best.n_nan;
  r.max_ratio = worst_ratio < 0 ? 0 : worst_ratio;
  r.status = r.n_over == 0 ? "PASS" : "FAIL";
  if (r.n_nan > 0) {
    r.message = std::to_string(r.n_nan) + " NaN element(s): NaN never passes";
  }
  if (r.convention != "default") {
    for (const auto& alt : spec.alternatives) {
      if (alt.name == r.convention) {
        r.message += (r.message.empty() ? "" : "; ") + std::string("follows the declared "
                     "alternative \"") + alt.name + "\": " + alt.description;
      }
    }
  }
  for (auto& [p, ps] : per_pos) {
    auto it = b.saturated.find(p);
    if (it != b.saturated.end() && !POSENC_MUTANT("golden_verify_saturation_dropped")) ps.saturated = it->second;
    r.by_position.push_back(ps);
  }
  if (r.has_positions) {
    for (const auto& ps : r.by_position) {
      if (ps.n_over > 0) {
        r.first_fail_position = ps.position;
        if (!POSENC_MUTANT("golden_verify_first_fail_wrong")) break;
        continue;
      }
      r.passes_up_to_position = ps.position;
    }
  }
  if (worst >= 0) {
    r.worst.index = worst;
    r.worst.ratio = worst_ratio;
    r.worst.actual = dtype_is_float(act.dtype) ? act.get_f64(worst) : static_cast<double>(act.get_i64(worst));
    r.worst.expected = dtype_is_float(want.dtype) ? want.get_f64(worst) : static_cast<double>(want.get_i64(worst));
    r.worst.exact = spec.exact.empty() ? r.worst.expected : golden.at(spec.exact).get_f64(worst);
    r.worst.abs_error = best.diff[worst];
    r.worst.budget = best.budget[worst];
    r.worst.coords = coords_of(spec.shape, worst);
    r.worst.where = describe(spec, golden, r.worst.coords);
  }
  return r;
}

}  // namespace

std::string describe_element(const TensorSpec& spec, const TensorMap& golden, std::int64_t index) {
  return describe(spec, golden, coords_of(spec.shape, index));
}

void check_golden_tensors(const CaseSpec& spec, const TensorMap& golden,
                          const std::string& source) {
  std::set<std::string> listed;
  auto check = [&](const std::string& name, DType dtype, const std::vector<std::int64_t>& shape,
                   const std::string& sha) {
    listed.insert(name);
    auto it = golden.find(name);
    if (it == golden.end()) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" named in the manifest is missing");
    }
    if (it->second.dtype != dtype) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has dtype " +
                            std::string(dtype_short(it->second.dtype)) + ", the manifest says " +
                            std::string(dtype_short(dtype)));
    }
    if (it->second.shape != shape) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has the wrong shape");
    }
    if (sha256_hex(it->second.data) != sha && !POSENC_MUTANT("golden_companion_hash_unchecked")) {
      throw GoldenFileError(source + ": golden tensor \"" + name +
                            "\" does not match its SHA-256 in the manifest (corrupted or tampered file?)");
    }
  };
  for (const auto& t : spec.inputs) check(t.name, t.dtype, t.shape, t.sha256);
  for (const auto& t : spec.expected) {
    check(t.name, t.dtype, t.shape, t.sha256);
    for (const auto& c : t.companions) check(c.name, c.dtype, t.shape, c.sha256);
  }
  for (const auto& [name, t] : golden) {
    if (!listed.count(name) && !POSENC_MUTANT("golden_unlisted_tensor_allowed")) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" is not listed in the manifest");
    }
  }
}

namespace {

/// The first trace step with a failing tensor: its worst failing tensor, and the position and
/// slot of that tensor's worst element (from the step's positions / slots / cache_positions).
TraceStepReport trace_step_report(const CaseSpec& spec, const TensorMap& golden, const CaseReport& rep) {
  TraceStepReport tr;
  const auto& steps = spec.manifest.at("trace").at("steps");
  tr.n_steps = static_cast<int>(steps.size());
  auto lookup = [&](const std::string& name, std::int64_t b, std::int64_t i) -> std::optional<std::int64_t> {
    auto it = golden.find(name);
    if (it == golden.end() || it->second.shape.size() != 2) return std::nullopt;
    const std::int64_t idx = b * it->second.shape[1] + i;
    if (b < 0 || i < 0 || i >= it->second.shape[1] || idx >= it->second.numel()) return std::nullopt;
    return it->second.get_i64(idx);
  };
  for (const auto& js : steps) {
    const TensorReport* worst = nullptr;
    bool checked_any = false;
    for (const auto& name : js.at("expected")) {
      for (const auto& t : rep.tensors) {
        if (t.name != name.get<std::string>()) continue;
        checked_any |= checked(t);
        const bool bad = t.status == "FAIL" && !POSENC_MUTANT("golden_trace_step_report_blind");
        if (bad && (!worst || t.max_ratio > worst->max_ratio)) worst = &t;
      }
    }
    tr.n_checked += checked_any;
    if (!worst) continue;
    tr.index = js.at("index").get<int>();
    tr.name = js.at("name").get<std::string>();
    tr.kind = js.at("kind").get<std::string>();
    tr.tensor = worst->name;
    tr.where = worst->worst.where;
    tr.ratio = worst->max_ratio;
    const auto& c = worst->worst.coords;
    if (c.size() >= 2) {
      tr.sequence = c[0];
      if (worst->stage == "cache") {
        tr.position = lookup(tr.name + ".cache_positions", c[0], c[1]);
      } else {
        tr.position = lookup(tr.name + ".positions", c[0], c[1]);
        if (!POSENC_MUTANT("golden_trace_slot_dropped")) tr.slot = lookup(tr.name + ".slots", c[0], c[1]);
        if (worst->stage == "positions" && std::isfinite(worst->worst.actual)) {
          tr.engine_position = static_cast<std::int64_t>(worst->worst.actual);
        }
      }
    }
    break;
  }
  return tr;
}

/// verify_case, also keeping every judged element's ratio per tensor when `ratios` is given.
CaseReport verify_case_impl(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                            const VerifyOptions& opt, ElementRatios* ratios);

}  // namespace

CaseReport verify_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                       const VerifyOptions& opt) {
  return verify_case_impl(spec, golden, actual, opt, nullptr);
}

CaseReport verify_case_with_ratios(const CaseSpec& spec, const TensorMap& golden,
                                   const TensorMap& actual, const VerifyOptions& opt,
                                   ElementRatios& ratios) {
  ratios.clear();
  return verify_case_impl(spec, golden, actual, opt, &ratios);
}

namespace {

CaseReport verify_case_impl(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                            const VerifyOptions& opt, ElementRatios* ratios) {
  CaseReport rep;
  rep.id = spec.id;
  rep.scheme = spec.scheme;
  rep.result = spec.result;
  rep.profile = opt.profile;
  bool any_error = false, any_fail = false, any_nan = false;
  std::vector<std::string> missing;
  for (const auto& spec_t : spec.expected) {
    auto rn = opt.rename.find(spec_t.name);
    const std::string actual_name = rn == opt.rename.end() ? spec_t.name : rn->second;
    auto it = actual.find(actual_name);
    if (it == actual.end()) {
      TensorReport t;
      t.name = spec_t.name;
      t.stage = spec_t.stage;
      t.kind = spec_t.check.kind;
      t.status = "MISSING";
      t.message = "the engine output has no tensor \"" + actual_name + "\"";
      missing.push_back(spec_t.name);
      rep.tensors.push_back(t);
      continue;
    }
    TensorReport t = check_tensor(spec_t, golden, it->second, opt,
                                  ratios ? &(*ratios)[spec_t.name] : nullptr);
    any_error |= t.status == "ERROR";
    any_fail |= t.status == "FAIL";
    any_nan |= t.n_nan > 0;
    rep.tensors.push_back(std::move(t));
  }
  int n_na = 0;
  for (const auto& t : rep.tensors) n_na += t.status == "N/A";
  if (any_error) {
    rep.status = "ERROR";
  } else if (opt.require_all && !missing.empty() && !POSENC_MUTANT("golden_verify_require_all_ignored")) {
    rep.status = "ERROR";
    std::string m;
    for (const auto& s : missing) m += (m.empty() ? "" : ", ") + s;
    rep.message = "--require-all: the engine output lacks stage(s) " + m;
  } else if (rep.n_checked() == 0) {
    if (n_na > 0) {
      rep.status = "N/A";
      rep.message = "profile " + opt.profile + " applies to none of the given stages";
    } else {
      rep.status = "ERROR";
      rep.message = "the engine output contains none of the expected tensors";
    }
  } else {
    rep.status = any_fail ? "FAIL" : "PASS";
  }
  // A negative control passes verification when the engine does NOT reproduce it; NaN output
  // never passes, not even a negative control.
  if (spec.result == "invalid" && (rep.status == "PASS" || rep.status == "FAIL")) {
    if (any_nan) {
      rep.status = "FAIL";
      rep.message = "NaN in the output: NaN never passes";
    } else {
      rep.status = rep.status == "PASS" ? "FAIL" : "PASS";
      rep.message = rep.status == "FAIL"
                        ? "the output reproduces a known-wrong convention"
                        : "negative control: the output differs from the known-wrong convention";
    }
  }
  if (spec.manifest.contains("trace")) rep.trace = trace_step_report(spec, golden, rep);
  if (rep.n_checked() > 0 && !POSENC_MUTANT("golden_verify_detection_notes_dropped")) {
    std::set<std::string> given;
    for (const auto& t : rep.tensors) {
      if (checked(t)) given.insert(t.name);
    }
    for (const auto& d : spec.detection) {
      const bool seen = std::any_of(d.stages.begin(), d.stages.end(),
                                    [&](const std::string& s) { return given.count(s) > 0; });
      if (seen) continue;
      std::string stages;
      for (const auto& s : d.stages) stages += (stages.empty() ? "" : ", ") + s;
      rep.notes.push_back("the stages given cannot detect " + d.flag +
                          (d.blind.empty() ? "" : " (" + d.blind + ")") + "; give one of: " + stages);
    }
  }
  return rep;
}

std::string pos_text(const std::optional<std::int64_t>& p) {
  return p ? std::to_string(*p) : std::string("-");
}

}  // namespace

std::string trace_text(const TraceStepReport& t, bool negative) {
  std::ostringstream os;
  if (t.index < 0) {
    os << (negative ? "every checked step reproduces the known-wrong output ("
                    : "every checked step passes (")
       << t.n_checked << " of " << t.n_steps << " steps checked)";
    return os.str();
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", t.ratio);
  os << (negative ? "first step that differs from the known-wrong output: " : "first failing step: ")
     << t.name << " (" << t.kind << ", step " << t.index << " of " << t.n_steps << "): " << t.tensor
     << " worst " << buf << " of budget";
  if (t.sequence) os << " in sequence " << *t.sequence;
  if (t.position) os << " at position " << *t.position;
  if (t.slot) os << ", slot " << *t.slot;
  if (t.engine_position) os << " (the engine gave position " << *t.engine_position << ")";
  os << " [" << t.where << "]";
  if (t.index > 0) os << "; steps before it " << (negative ? "reproduce it" : "pass");
  return os.str();
}

std::string format_case_text(const CaseReport& r, bool verbose, bool by_position) {
  std::ostringstream os;
  char buf[768];
  const bool negative = r.result == "invalid";
  for (const auto& t : r.tensors) {
    if (t.status == "ERROR" || t.status == "MISSING" || t.status == "N/A") {
      if (t.status == "MISSING" && POSENC_MUTANT("golden_verify_hides_missing")) continue;
      os << r.id << "  " << t.name << "  " << t.status << ": " << t.message << '\n';
      continue;
    }
    std::snprintf(buf, sizeof buf, "%s  %-8s %-9s worst %.3g of budget (bound %g%s) over=%lld/%lld",
                  r.id.c_str(), t.name.c_str(), t.stage.c_str(), t.max_ratio, t.bound,
                  t.has_extra ? " + extra" : "", static_cast<long long>(t.n_over),
                  static_cast<long long>(t.n));
    os << buf;
    if (t.n_skipped > 0) os << " skipped=" << t.n_skipped << " (beyond --max-position)";
    if (t.has_positions) {
      os << " first_fail_position=" << pos_text(t.first_fail_position)
         << " passes_up_to_position=" << pos_text(t.passes_up_to_position);
    }
    if ((t.status == "FAIL" && !negative) || verbose) {
      std::snprintf(buf, sizeof buf, " worst=[%s] exact=%.9g actual=%.9g |err|=%.3g budget=%.3g",
                    t.worst.where.c_str(), t.worst.exact, t.worst.actual, t.worst.abs_error,
                    t.worst.budget);
      os << buf;
    }
    if (negative && !POSENC_MUTANT("golden_verify_negative_lines_as_fail")) {
      os << "  " << (t.status == "FAIL" ? "DIFFERS from the known-wrong output" : "REPRODUCES the known-wrong output");
    } else {
      os << "  " << t.status;
    }
    if (!t.message.empty()) os << " (" << t.message << ")";
    os << '\n';
    if (by_position && t.has_positions) {
      for (const auto& ps : t.by_position) {
        std::snprintf(buf, sizeof buf, "    position %-10lld worst %-10.3g over=%lld/%lld",
                      static_cast<long long>(ps.position), ps.worst_ratio,
                      static_cast<long long>(ps.n_over), static_cast<long long>(ps.n));
        os << buf;
        if (ps.saturated >= 1.0) {
          os << "  UNCHECKED: the budget admits any angle for every element here";
        } else if (ps.saturated > 0) {
          std::snprintf(buf, sizeof buf, "  partly unchecked: %.0f%% of elements admit any angle",
                        100 * ps.saturated);
          os << buf;
        }
        os << '\n';
      }
    }
  }
  for (const auto& n : r.notes) os << r.id << "  note: " << n << '\n';
  if (r.trace) os << r.id << "  trace: " << trace_text(*r.trace, negative) << '\n';
  os << r.id << "  profile=" << r.profile << "  " << r.status;
  if (!r.message.empty()) os << " (" << r.message << ")";
  os << '\n';
  return os.str();
}

nlohmann::json case_report_json(const CaseReport& r, bool by_position) {
  nlohmann::json j = {{"id", r.id},         {"scheme", r.scheme},   {"result", r.result},
                      {"profile", r.profile}, {"status", r.status}, {"message", r.message},
                      {"notes", r.notes}};
  nlohmann::json ts = nlohmann::json::array();
  auto num = [](double v) -> nlohmann::json {
    if (std::isfinite(v)) return v;
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  };
  auto opt_pos = [](const std::optional<std::int64_t>& p) -> nlohmann::json {
    return p ? nlohmann::json(*p) : nlohmann::json(nullptr);
  };
  for (const auto& t : r.tensors) {
    nlohmann::json jt = {{"name", t.name},       {"stage", t.stage},     {"kind", t.kind},
                         {"status", t.status},   {"message", t.message}, {"bound", t.bound},
                         {"has_extra", t.has_extra}, {"ratio", num(t.max_ratio)},
                         {"n", t.n},             {"n_over", t.n_over},   {"n_skipped", t.n_skipped},
                         {"n_nan", t.n_nan},     {"convention", t.convention}};
    if (t.has_positions) {
      jt["first_fail_position"] = opt_pos(t.first_fail_position);
      jt["passes_up_to_position"] = opt_pos(t.passes_up_to_position);
    }
    if (t.worst.index >= 0) {
      jt["worst"] = {{"index", t.worst.index}, {"coords", t.worst.coords},
                     {"where", t.worst.where}, {"exact", num(t.worst.exact)},
                     {"expected", num(t.worst.expected)}, {"actual", num(t.worst.actual)},
                     {"abs_error", num(t.worst.abs_error)}, {"budget", num(t.worst.budget)},
                     {"ratio", num(t.worst.ratio)}};
    }
    if (by_position && t.has_positions) {
      nlohmann::json bp = nlohmann::json::array();
      for (const auto& ps : t.by_position) {
        bp.push_back({{"position", ps.position}, {"worst_ratio", num(ps.worst_ratio)},
                      {"n", ps.n}, {"n_over", ps.n_over}, {"saturated", ps.saturated}});
      }
      jt["by_position"] = bp;
    }
    ts.push_back(jt);
  }
  j["tensors"] = ts;
  if (r.trace) {
    const auto& t = *r.trace;
    auto o = [](const std::optional<std::int64_t>& p) { return p ? nlohmann::json(*p) : nlohmann::json(nullptr); };
    j["trace"] = {{"n_steps", t.n_steps}, {"n_checked", t.n_checked},
                  {"first_failing_step", t.index < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.index)},
                  {"step", t.name}, {"kind", t.kind}, {"tensor", t.tensor}, {"where", t.where},
                  {"ratio", num(t.ratio)}, {"sequence", o(t.sequence)}, {"position", o(t.position)},
                  {"slot", o(t.slot)}, {"engine_position", o(t.engine_position)}};
  }
  return j;
}

}  // namespace posenc::golden
