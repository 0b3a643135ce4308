#include "golden/verify.hpp"

#include <cmath>
#include <cstdio>
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

int CaseReport::n_checked() const {
  int n = 0;
  for (const auto& t : tensors) n += (t.status == "PASS" || t.status == "FAIL");
  return n;
}

double CaseReport::worst_ratio() const {
  double w = 0;
  for (const auto& t : tensors) {
    if (t.status == "PASS" || t.status == "FAIL") w = std::max(w, t.ratio());
  }
  return w;
}

namespace {

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string describe(const TensorSpec& spec, const TensorMap& golden, std::int64_t index,
                     std::vector<std::int64_t>* coords_out) {
  std::vector<std::int64_t> coords(spec.shape.size());
  std::int64_t rem = index;
  for (std::size_t k = spec.shape.size(); k-- > 0;) {
    const std::int64_t dim = spec.shape[k] > 0 ? spec.shape[k] : 1;
    coords[k] = rem % dim;
    rem /= dim;
  }
  *coords_out = coords;
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

TensorReport check_tensor(const TensorSpec& spec, const TensorMap& golden, const Tensor& act,
                          const VerifyOptions& opt) {
  TensorReport r;
  r.name = spec.name;
  r.stage = spec.stage;
  r.kind = spec.check.kind;
  r.bound = spec.check.bound_for(opt.profile);
  if (POSENC_MUTANT("golden_verify_lenient")) r.bound *= 1e12;  // a verifier that passes anything
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
  const Tensor* exact = spec.exact.empty() ? nullptr : &golden.at(spec.exact);
  const Tensor* cond = spec.cond.empty() ? nullptr : &golden.at(spec.cond);
  const Tensor* phase = spec.phase.empty() ? nullptr : &golden.at(spec.phase);
  const double peps = spec.check.phase_eps_for(opt.profile);
  const double eps = dtype_eps(spec.dtype);
  r.n = act.numel();
  std::int64_t worst = -1;
  double worst_err = -1;
  for (std::int64_t j = 0; j < r.n; ++j) {
    double err;
    if (spec.check.kind == "exact") {
      err = act.get_bits(j) == want.get_bits(j) ? 0.0 : INFINITY;
    } else {
      const double a = act.get_f64(j);
      const double x = exact->get_f64(j);
      double scale = spec.check.kind == "ulp" ? dtype_ulp(spec.dtype, x) : eps * cond->get_f64(j);
      if (phase && peps > 0) scale += peps * phase->get_f64(j);
      const double diff = std::fabs(a - x);
      if (std::isnan(a) != std::isnan(x) || (std::isnan(a) && std::isnan(x))) {
        err = std::isnan(a) && std::isnan(x) ? 0.0 : INFINITY;
      } else if (diff == 0.0) {
        err = 0.0;
      } else if (!std::isfinite(diff) || scale == 0.0) {
        err = INFINITY;
      } else {
        err = diff / scale;
      }
    }
    if (err > r.bound) ++r.n_over;
    if (err > worst_err) {
      worst_err = err;
      worst = j;
    }
  }
  r.max_error = worst_err < 0 ? 0 : worst_err;
  r.status = r.n_over == 0 ? "PASS" : "FAIL";
  if (worst >= 0) {
    r.worst.index = worst;
    r.worst.error = worst_err;
    r.worst.actual = act.get_f64(worst);
    r.worst.expected = want.get_f64(worst);
    r.worst.exact = exact ? exact->get_f64(worst) : r.worst.expected;
    r.worst.where = describe(spec, golden, worst, &r.worst.coords);
  }
  return r;
}

}  // namespace

void check_golden_tensors(const CaseSpec& spec, const TensorMap& golden,
                          const std::string& source) {
  auto check = [&](const std::string& name, const DType* dtype,
                   const std::vector<std::int64_t>* shape, const std::string& sha) {
    auto it = golden.find(name);
    if (it == golden.end()) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" named in the manifest is missing");
    }
    if (dtype && it->second.dtype != *dtype) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has the wrong dtype");
    }
    if (shape && it->second.shape != *shape) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has the wrong shape");
    }
    if (!sha.empty() && sha256_hex(it->second.data) != sha) {
      throw GoldenFileError(source + ": golden tensor \"" + name +
                            "\" does not match its SHA-256 in the manifest (corrupted file?)");
    }
  };
  for (const auto& t : spec.inputs) check(t.name, &t.dtype, &t.shape, t.sha256);
  for (const auto& t : spec.expected) {
    check(t.name, &t.dtype, &t.shape, t.sha256);
    for (const std::string* c : {&t.exact, &t.cond, &t.phase}) {
      if (c->empty()) continue;
      check(*c, nullptr, &t.shape, "");
    }
  }
}

CaseReport verify_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                       const VerifyOptions& opt) {
  CaseReport rep;
  rep.id = spec.id;
  rep.scheme = spec.scheme;
  rep.result = spec.result;
  rep.profile = opt.profile;
  bool any_error = false, any_fail = false;
  for (const auto& spec_t : spec.expected) {
    auto rn = opt.rename.find(spec_t.name);
    const std::string actual_name = rn == opt.rename.end() ? spec_t.name : rn->second;
    auto it = actual.find(actual_name);
    if (it == actual.end()) {
      TensorReport t;
      t.name = spec_t.name;
      t.stage = spec_t.stage;
      t.kind = spec_t.check.kind;
      t.bound = spec_t.check.bound_for(opt.profile);
      t.status = "MISSING";
      t.message = "the engine output has no tensor \"" + actual_name + "\"";
      any_fail |= opt.require_all;
      rep.tensors.push_back(t);
      continue;
    }
    TensorReport t = check_tensor(spec_t, golden, it->second, opt);
    any_error |= t.status == "ERROR";
    any_fail |= t.status == "FAIL";
    rep.tensors.push_back(std::move(t));
  }
  if (any_error) {
    rep.status = "ERROR";
  } else if (rep.n_checked() == 0) {
    rep.status = "ERROR";
    rep.message = "the engine output contains none of the expected tensors";
  } else {
    rep.status = any_fail ? "FAIL" : "PASS";
  }
  // A negative control passes verification when the engine does NOT reproduce it.
  if (spec.result == "invalid" && rep.status != "ERROR") {
    rep.status = rep.status == "PASS" ? "FAIL" : "PASS";
    rep.message = rep.status == "FAIL" ? "the output reproduces a known-wrong convention"
                                       : "negative control: output differs from the wrong convention";
  }
  return rep;
}

std::string format_case_text(const CaseReport& r, bool verbose) {
  std::ostringstream os;
  char buf[512];
  for (const auto& t : r.tensors) {
    if (t.status == "MISSING" && !verbose) continue;
    if (t.status == "ERROR" || t.status == "MISSING") {
      os << r.id << "  " << t.name << "  " << t.status << ": " << t.message << '\n';
      continue;
    }
    std::snprintf(buf, sizeof buf, "%s  %-8s %-7s max_err=%.3g bound=%g (%.3f of bound) over=%lld/%lld",
                  r.id.c_str(), t.name.c_str(), t.stage.c_str(), t.max_error, t.bound, t.ratio(),
                  static_cast<long long>(t.n_over), static_cast<long long>(t.n));
    os << buf;
    if (t.status == "FAIL" || verbose) {
      std::snprintf(buf, sizeof buf, " worst=[%s] exact=%.17g actual=%.17g", t.worst.where.c_str(),
                    t.worst.exact, t.worst.actual);
      os << buf;
    }
    os << "  " << t.status << '\n';
  }
  os << r.id << "  profile=" << r.profile << "  " << r.status;
  if (!r.message.empty()) os << " (" << r.message << ")";
  os << '\n';
  return os.str();
}

nlohmann::json case_report_json(const CaseReport& r) {
  nlohmann::json j = {{"id", r.id},         {"scheme", r.scheme},   {"result", r.result},
                      {"profile", r.profile}, {"status", r.status}, {"message", r.message}};
  nlohmann::json ts = nlohmann::json::array();
  auto num = [](double v) -> nlohmann::json {
    if (std::isfinite(v)) return v;
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  };
  for (const auto& t : r.tensors) {
    nlohmann::json jt = {{"name", t.name},     {"stage", t.stage},   {"kind", t.kind},
                         {"status", t.status}, {"message", t.message}, {"bound", t.bound},
                         {"max_error", num(t.max_error)}, {"ratio", num(t.ratio())},
                         {"n", t.n},           {"n_over", t.n_over}};
    if (t.worst.index >= 0) {
      jt["worst"] = {{"index", t.worst.index}, {"coords", t.worst.coords},
                     {"where", t.worst.where}, {"exact", num(t.worst.exact)},
                     {"expected", num(t.worst.expected)}, {"actual", num(t.worst.actual)},
                     {"error", num(t.worst.error)}};
    }
    ts.push_back(jt);
  }
  j["tensors"] = ts;
  return j;
}

}  // namespace posenc::golden
