// Fitted parameters of a RoPE-family output (golden/cases/rope_fit.hpp has the method).
#include "golden/cases/rope_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/rope_case.hpp"
#include "reference/rope.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::golden {
namespace {

using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;

constexpr double kTwoPi = 2 * std::numbers::pi;
constexpr int kMaxOffset = 4;

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

/// What the fit needs from the case: its parameters, positions and inputs.
struct RopeSetup {
  RopeParams p;
  RopeScaling s;
  bool is_scaled = false;
  int hq = 0, hk = 0, np = 0;
  std::int64_t tn = 0;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> pos;
  std::vector<double> q, k;
  std::vector<double> inv_freq;  // the case's, in double
  double a = 1;                  // the case's attention factor
  bool with_scores = false;      // the case expects scores (q_rot . k_rot)
  bool with_factor = false;      // the case expects the attention_factor stage
};

RopeSetup setup_of(const LoadedCase& lc) {
  const auto& pj = lc.spec.manifest.at("params");
  RopeSetup r;
  r.p.head_dim = pj.at("head_dim").get<int>();
  r.p.rotary_dim = pj.at("rotary_dim").get<int>();
  r.p.base = pj.at("base").get<double>();
  r.p.layout = pj.at("layout").get<std::string>() == "interleaved" ? RopeLayout::kInterleaved
                                                                   : RopeLayout::kHalfSplit;
  r.p.attention_factor = pj.at("attention_factor").get<double>();
  r.hq = pj.at("n_q_heads").get<int>();
  r.hk = pj.at("n_kv_heads").get<int>();
  r.is_scaled = pj.contains("scaling");
  if (r.is_scaled) r.s = rope_scaling_from_json(pj.at("scaling"));
  r.np = r.p.rotary_dim / 2;
  const Tensor& tp = lc.golden.at("positions");
  for (std::int64_t i = 0; i < tp.numel(); ++i) r.pos.push_back(tp.get_i64(i));
  r.tn = static_cast<std::int64_t>(r.pos.size());
  std::int64_t last = 0;
  for (auto m : r.pos) last = std::max(last, m);
  r.s.seq_len = last + 1;
  r.dtype = lc.golden.at("q").dtype;
  r.q = tensor_to_f64(lc.golden.at("q"));
  if (r.hk > 0) r.k = tensor_to_f64(lc.golden.at("k"));
  const auto st = reference::rope_scaling_tables<double>(r.p, r.s);
  r.inv_freq = st.tables.inv_freq;
  r.a = st.tables.attention_factor;
  auto expects = [&](const char* name) {
    return std::any_of(lc.spec.expected.begin(), lc.spec.expected.end(),
                       [&](const TensorSpec& t) { return t.name == name; });
  };
  r.with_scores = r.hk > 0 && expects("scores");
  r.with_factor = expects("attention_factor");
  return r;
}

/// Scores [hq, T, T] of the rotated rows (as the engine wrote them), accumulated in double:
/// unscaled q_rot . k_rot over every channel, kv head = q head / (hq / hk).
std::vector<float> scores_of(const RopeSetup& r, const std::vector<float>& qr, const std::vector<float>& kr) {
  const int h = r.p.head_dim, group = r.hq / r.hk;
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(r.hq * r.tn * r.tn));
  for (int hh = 0; hh < r.hq; ++hh) {
    for (std::int64_t i = 0; i < r.tn; ++i) {
      for (std::int64_t j = 0; j < r.tn; ++j) {
        const float* x = &qr[static_cast<std::size_t>((i * r.hq + hh) * h)];
        const float* y = &kr[static_cast<std::size_t>((j * r.hk + hh / group) * h)];
        double sum = 0;
        for (int c = 0; c < h; ++c) sum += static_cast<double>(x[c]) * y[c];
        out.push_back(static_cast<float>(sum));
      }
    }
  }
  return out;
}

/// The stages that angles phi [T, np] and magnitude m give, computed in double and rounded to
/// the case dtype once (scores from the rounded rotations, as an engine computes them).
TensorMap run_of(const RopeSetup& r, const std::vector<double>& phi, double m,
                 const std::vector<double>* inv_freq) {
  const int np = r.np, h = r.p.head_dim;
  std::vector<float> c(phi.size()), sn(phi.size());
  for (std::size_t i = 0; i < phi.size(); ++i) {
    c[i] = static_cast<float>(m * std::cos(phi[i]));
    sn[i] = static_cast<float>(m * std::sin(phi[i]));
  }
  auto rotate = [&](const std::vector<double>& x, int heads) {
    std::vector<float> y(x.size());
    for (std::int64_t t = 0; t < r.tn; ++t) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t off = static_cast<std::size_t>((t * heads + hh) * h);
        for (int cc = r.p.rotary_dim; cc < h; ++cc) y[off + cc] = static_cast<float>(x[off + cc]);
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(r.p, i), cb = reference::rope_pair_b(r.p, i);
          const double f = phi[static_cast<std::size_t>(t * np + i)];
          const double cs = m * std::cos(f), s = m * std::sin(f);
          y[off + ca] = static_cast<float>(x[off + ca] * cs - x[off + cb] * s);
          y[off + cb] = static_cast<float>(x[off + cb] * cs + x[off + ca] * s);
        }
      }
    }
    return y;
  };
  TensorMap out;
  out.emplace("cos", engine_tensor("cos", r.dtype, {r.tn, np}, c));
  out.emplace("sin", engine_tensor("sin", r.dtype, {r.tn, np}, sn));
  out.emplace("q_rot", engine_tensor("q_rot", r.dtype, {r.tn, r.hq, h}, rotate(r.q, r.hq)));
  if (r.hk > 0) out.emplace("k_rot", engine_tensor("k_rot", r.dtype, {r.tn, r.hk, h}, rotate(r.k, r.hk)));
  if (r.with_scores) {
    const auto qr = tensor_to_f32(out.at("q_rot")), kr = tensor_to_f32(out.at("k_rot"));
    out.emplace("scores", engine_tensor("scores", r.dtype, {r.hq, r.tn, r.tn}, scores_of(r, qr, kr)));
  }
  if (r.with_factor) {
    out.emplace("attention_factor", engine_tensor("attention_factor", DType::kF32, {1}, {static_cast<float>(m)}));
  }
  if (inv_freq) {
    std::vector<float> w(inv_freq->begin(), inv_freq->end());
    out.emplace("inv_freq", engine_tensor("inv_freq", DType::kF32, {np}, w));
  }
  return out;
}

std::vector<double> angles(const RopeSetup& r, const std::vector<double>& w, std::int64_t d) {
  std::vector<double> phi;
  phi.reserve(static_cast<std::size_t>(r.tn * r.np));
  for (auto m : r.pos) {
    for (int i = 0; i < r.np; ++i) phi.push_back(static_cast<double>(m + d) * w[i]);
  }
  return phi;
}

/// The output read back: angle and magnitude (over the case's a) per (position, pair); NaN
/// where it cannot be read.
struct Measured {
  std::vector<double> phi, mag;
  std::string from;  // "cos/sin" or "q_rot"
};

bool has_shape(const TensorMap& m, const std::string& name, std::vector<std::int64_t> shape) {
  const auto it = m.find(name);
  return it != m.end() && it->second.shape == shape;
}

std::optional<Measured> measure(const RopeSetup& r, const TensorMap& actual) {
  const std::size_t n = static_cast<std::size_t>(r.tn * r.np);
  Measured ms;
  ms.phi.assign(n, std::nan(""));
  ms.mag.assign(n, std::nan(""));
  if (has_shape(actual, "cos", {r.tn, r.np}) && has_shape(actual, "sin", {r.tn, r.np})) {
    const auto c = tensor_to_f64(actual.at("cos")), s = tensor_to_f64(actual.at("sin"));
    for (std::size_t i = 0; i < n; ++i) {
      ms.phi[i] = std::atan2(s[i], c[i]);
      ms.mag[i] = std::hypot(s[i], c[i]) / r.a;
    }
    ms.from = "cos/sin";
    return ms;
  }
  if (!has_shape(actual, "q_rot", {r.tn, r.hq, r.p.head_dim})) return std::nullopt;
  const auto y = tensor_to_f64(actual.at("q_rot"));
  const int h = r.p.head_dim;
  for (std::int64_t t = 0; t < r.tn; ++t) {
    for (int i = 0; i < r.np; ++i) {
      // The head with the largest input pair reads the angle best.
      double best = 0;
      const int ca = reference::rope_pair_a(r.p, i), cb = reference::rope_pair_b(r.p, i);
      for (int hh = 0; hh < r.hq; ++hh) {
        const std::size_t off = static_cast<std::size_t>((t * r.hq + hh) * h);
        const double xa = r.q[off + ca], xb = r.q[off + cb], ya = y[off + ca], yb = y[off + cb];
        const double nx = std::hypot(xa, xb);
        if (!(nx > best)) continue;
        best = nx;
        const std::size_t at = static_cast<std::size_t>(t * r.np + i);
        ms.phi[at] = std::atan2(yb * xa - ya * xb, ya * xa + yb * xb);
        ms.mag[at] = std::hypot(ya, yb) / nx / r.a;
      }
    }
  }
  ms.from = "q_rot";
  return ms;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

/// Unit roundoff of a dtype (half an ulp of 1).
double unit_roundoff(DType t) {
  if (t == DType::kBF16) return std::ldexp(1.0, -8);
  if (t == DType::kF16) return std::ldexp(1.0, -11);
  return std::ldexp(1.0, -24);
}

const char* precision_name(DType t) {
  if (t == DType::kBF16) return "bfloat16";
  if (t == DType::kF16) return "float16";
  return "float32";
}

// ---- the fit's stages: one per parameter (offset, base, attention factor, angle precision) --

/// HF's float32 inv_freq of the case's rule (or of base b).
std::vector<float> hf_w32(const RopeSetup& r, double b) {
  RopeParams pb = r.p;
  pb.base = b;
  return r.is_scaled ? pipelines::hf_scaled_inv_freq<float>(pb, r.s)
                     : pipelines::hf_inv_freq(b, r.p.rotary_dim);
}

/// Float32 angles fl(fl(p + d) w32_i), as HF computes them.
std::vector<double> angles32(const RopeSetup& r, const std::vector<float>& w32, std::int64_t d) {
  std::vector<double> phi;
  phi.reserve(static_cast<std::size_t>(r.tn * r.np));
  for (auto m : r.pos) {
    for (int i = 0; i < r.np; ++i) phi.push_back(static_cast<float>(m + d) * w32[i]);
  }
  return phi;
}

/// A candidate's twin whose run takes float32 angles (the fp32 pipeline's, judged by the fp32
/// profile, its budget widened by how far it lies from the exact run of the same value: a
/// float32 engine with another base or offset rounds other angles and frequencies than the
/// case's budgets were made for).
RopeFitCandidate fp32_twin(const RopeFitCandidate& c, TensorMap run) {
  RopeFitCandidate t = c;
  t.widen = c.run;
  t.run = std::move(run);
  t.pipeline = "fp32";
  return t;
}

/// (a) offset: angles (p + d) w_i, d in -4..+4 (just +1 when `offset_plus_one_only`).
void add_offset_candidates(const RopeSetup& r, bool offset_plus_one_only, std::vector<RopeFitCandidate>& out) {
  const std::vector<float> w32 = hf_w32(r, r.p.base);
  for (int d = -kMaxOffset; d <= kMaxOffset; ++d) {
    if (d == 0 || (offset_plus_one_only && d != 1)) continue;
    RopeFitCandidate c;
    c.parameter = "offset";
    c.value = (d > 0 ? "+" : "") + std::to_string(d);
    c.case_value = "0";
    c.number = d;
    c.run = run_of(r, angles(r, r.inv_freq, d), r.a, nullptr);
    if (r.dtype == DType::kF32 && !offset_plus_one_only) {
      out.push_back(fp32_twin(c, run_of(r, angles32(r, w32, d), r.a, nullptr)));
    }
    out.push_back(std::move(c));
  }
}

/// One base b fitted at position m (estimate est): its run with correctly rounded angles and
/// with float32 angles; none when the rule refuses the base.
void add_base_candidate(const RopeSetup& r, double b, std::int64_t m, double est, std::vector<RopeFitCandidate>& out) {
  RopeParams pb = r.p;
  pb.base = b;
  try {
    const auto st = reference::rope_scaling_tables<double>(pb, r.s);
    RopeFitCandidate c;
    c.parameter = "base";
    c.value = fmt("%.6g", b);
    c.case_value = fmt("%.6g", r.p.base);
    c.number = b;
    c.evidence = "the pair frequencies at position " + std::to_string(m) + " fit base " +
                 fmt("%.6g", est);
    c.run = run_of(r, angles(r, st.tables.inv_freq, 0), st.tables.attention_factor,
                   &st.tables.inv_freq);
    // The same base through float32 angles (HF's inv_freq and fl(fl(p) w)), for an engine
    // that computes the way the fp32 profile models: its budget is the case base's.
    const std::vector<float> w32 = hf_w32(r, b);
    const std::vector<double> w64(w32.begin(), w32.end());
    RopeFitCandidate c32 =
        fp32_twin(c, run_of(r, angles32(r, w32, 0), st.tables.attention_factor, &w64));
    out.push_back(std::move(c));
    out.push_back(std::move(c32));
  } catch (const std::exception&) {
    return;  // the rule refuses this base
  }
}

/// (b) base: log w_i = log c - (2i / rotary_dim) log base at the smallest position 1..3.
void add_base_candidates(const RopeSetup& r, const Measured& ms, std::vector<RopeFitCandidate>& out) {
  for (std::int64_t t = 0; t < r.tn; ++t) {
    const std::int64_t m = r.pos[static_cast<std::size_t>(t)];
    if (m < 1 || m > 3) continue;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 1; i < r.np; ++i) {
      const double phi = ms.phi[static_cast<std::size_t>(t * r.np + i)];
      const double w = phi / static_cast<double>(m);
      if (!(w > 1e-3) || !(phi < 3.0)) continue;  // too slow to read accurately, or wrapped
      const double x = 2.0 * i / r.p.rotary_dim, yv = std::log(w);
      sx += x, sy += yv, sxx += x * x, sxy += x * yv, ++k;
    }
    if (k < 3) break;
    const double slope = (k * sxy - sx * sy) / (k * sxx - sx * sx);
    const double est = std::exp(-slope);
    if (!std::isfinite(est) || est <= 1) break;
    std::vector<double> tries;
    for (int digits : {1, 2, 3}) {
      const double e = std::pow(10.0, std::floor(std::log10(est)) - digits + 1);
      tries.push_back(std::round(est / e) * e);
    }
    tries.push_back(est);
    std::sort(tries.begin(), tries.end());
    tries.erase(std::unique(tries.begin(), tries.end()), tries.end());
    for (double b : tries) {
      if (b == r.p.base || fmt("%.6g", b) == fmt("%.6g", r.p.base)) continue;
      add_base_candidate(r, b, m, est, out);
    }
    break;
  }
}

/// (c) a constant magnitude ratio: the attention factor (or mscale) fitted.
void add_attention_factor_candidate(const RopeSetup& r, const Measured& ms, std::vector<RopeFitCandidate>& out) {
  std::vector<double> mags;
  for (double x : ms.mag) {
    if (std::isfinite(x)) mags.push_back(x);
  }
  const double med = median(mags);
  if (std::isfinite(med) && med > 0 && std::abs(med - 1) > 1e-5) {
    double lo = med, hi = med;
    for (double x : mags) lo = std::min(lo, x), hi = std::max(hi, x);
    RopeFitCandidate c;
    c.parameter = "attention-factor";
    c.value = fmt("%.6g", med * r.a);
    c.case_value = fmt("%.6g", r.a);
    c.number = med * r.a;
    c.evidence = "magnitudes from " + ms.from + " are " + fmt("%.6g", med) +
                 " times the case's (from " + fmt("%.6g", lo) + " to " + fmt("%.6g", hi) + ")";
    c.run = run_of(r, angles(r, r.inv_freq, 0), med * r.a, nullptr);
    if (r.dtype == DType::kF32) {
      out.push_back(
          fp32_twin(c, run_of(r, angles32(r, hf_w32(r, r.p.base), 0), med * r.a, nullptr)));
    }
    out.push_back(std::move(c));
  }
}

/// (d), the measurement: the rate at which the angle error grows with the angle, in words
/// (which precision's rate it is, where NaN begins); none when no rate can be read.
std::optional<std::string> angle_precision_evidence(const RopeSetup& r, const Measured& ms) {
  const std::size_t n = ms.phi.size();
  // The median over elements of (|angle error| - the output's own rounding) / angle, where a
  // float32 angle's error would stand 4x above that rounding (else wherever the angle >= 1).
  const double floor_err = 4 * unit_roundoff(r.dtype);
  const double far = 4 * floor_err / unit_roundoff(DType::kF32);
  std::vector<double> near_rates, far_rates;
  std::int64_t nan_from = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t m = r.pos[i / r.np];
    const double exact = static_cast<double>(m) * r.inv_freq[i % r.np];
    if (!std::isfinite(ms.phi[i])) {
      if (nan_from < 0 || m < nan_from) nan_from = m;
      continue;
    }
    if (exact < 1) continue;
    const double e = std::abs(std::remainder(ms.phi[i] - exact, kTwoPi));
    if (e > 0.5) continue;  // wrapped: the angle is anywhere here
    const double q = std::max(0.0, e - floor_err) / exact;
    near_rates.push_back(q);
    if (exact >= far) far_rates.push_back(q);
  }
  const double rate = far_rates.size() >= 8 ? median(far_rates) : median(near_rates);
  if (!std::isfinite(rate)) return std::nullopt;
  DType match = DType::kF32;
  double best = 1e300;
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32}) {
    const double dist = std::abs(std::log(std::max(rate, 1e-30) / unit_roundoff(t)));
    if (dist < best) best = dist, match = t;
  }
  std::string said = "the angle error grows with the angle: median " + fmt("%.2g", rate) +
                     " x angle";
  if (best <= std::log(16.0)) {
    said += std::string(": ") + precision_name(match) + "'s rate (unit roundoff " +
            fmt("%.2g", unit_roundoff(match)) + ")";
  } else if (rate < unit_roundoff(DType::kF32) / 16) {
    said += " (below float32's rate: angles more accurate than float32)";
  } else {
    said += " (no float precision's rate)";
  }
  if (nan_from >= 0) said += "; NaN from position " + std::to_string(nan_from);
  return said;
}

/// (d), the runs: angles fl(fl(p) fl(w_i)) in float16, bfloat16 and float32 (HF's float32
/// inv_freq), each judged up to its last finite position.
void add_angle_precision_candidates(const RopeSetup& r, const std::string& said, std::vector<RopeFitCandidate>& out) {
  const std::vector<float> w32 = r.is_scaled ? pipelines::hf_scaled_inv_freq<float>(r.p, r.s)
                                             : pipelines::hf_inv_freq(r.p.base, r.p.rotary_dim);
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32}) {
    std::vector<double> phi;
    std::optional<std::int64_t> last_finite;
    bool overflow = false;
    for (auto m : r.pos) {
      bool finite = true;
      for (int i = 0; i < r.np; ++i) {
        const float x = pipelines::fl(pipelines::fl(static_cast<float>(m), t) * pipelines::fl(w32[i], t), t);
        finite = finite && std::isfinite(x);
        phi.push_back(x);
      }
      if (finite) {
        last_finite = std::max(last_finite.value_or(m), m);
      } else {
        overflow = true;
      }
    }
    if (!last_finite) continue;
    RopeFitCandidate c;
    c.parameter = "angle-precision";
    c.value = precision_name(t);
    c.case_value = "correctly rounded";
    c.number = unit_roundoff(t);
    c.evidence = said;
    if (overflow) {
      c.max_position = last_finite;
      c.evidence += "; judged up to position " + std::to_string(*last_finite) + " (" +
                    precision_name(t) + " angles overflow above)";
    }
    c.run = run_of(r, phi, r.a, nullptr);
    if (t != DType::kF32) {
      // The same angles from an engine that casts inv_freq to that precision first (and
      // writes it so): its inv_freq judged as that too.
      std::vector<double> wt;
      for (float x : w32) wt.push_back(pipelines::fl(x, t));
      RopeFitCandidate ct = c;
      ct.run = run_of(r, phi, r.a, &wt);
      out.push_back(std::move(ct));
    }
    out.push_back(std::move(c));
  }
}

}  // namespace

std::vector<RopeFitCandidate> rope_fit_candidates(const LoadedCase& lc, const TensorMap& actual,
                                                  bool offset_plus_one_only) {
  std::vector<RopeFitCandidate> out;
  if (lc.spec.scheme != "rope" && lc.spec.scheme != "rope_scaling") return out;
  RopeSetup r;
  try {
    r = setup_of(lc);
  } catch (const std::exception&) {
    return out;  // a case this fit does not read (no q, odd params): no fit
  }
  const auto ms = measure(r, actual);
  if (!ms) return out;
  add_offset_candidates(r, offset_plus_one_only, out);
  if (offset_plus_one_only) return out;
  add_base_candidates(r, *ms, out);
  add_attention_factor_candidate(r, *ms, out);
  if (const auto said = angle_precision_evidence(r, *ms)) add_angle_precision_candidates(r, *said, out);
  return out;
}

std::string rope_fit_words(const RopeFitCandidate& c, const std::string& residual_text) {
  const std::string res = residual_text.empty() ? "" : ", residual " + residual_text;
  if (c.parameter == "offset") {
    return "positions offset by " + c.value + " (fitted d = " + c.value + " of -4..+4" + res + ")";
  }
  if (c.parameter == "base") {
    return "base fitted as " + c.value + "; the case says " + c.case_value + " (" + c.evidence +
           res + ")";
  }
  if (c.parameter == "attention-factor") {
    return "a constant magnitude ratio: attention factor fitted as " + c.value +
           "; the case says " + c.case_value + " (" + c.evidence + res + ")";
  }
  return "angles computed in " + c.value + " (" + c.evidence + res + ")";
}

}  // namespace posenc::golden
