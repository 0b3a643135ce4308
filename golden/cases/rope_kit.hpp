// The RoPE case kit's private parts: what the RoPE family's case files share (the oracle of a
// case, the float pipelines' error bounds, the resolution search, the generator's state). Only
// golden/cases/rope_*.cpp include it; the case kind's interface is golden/cases/rope_case.hpp.
//   rope_budgets.cpp   the error analysis of each profile's pipeline (stage budgets)
//   rope_defs.cpp      case definitions: ids, seeds, hard positions, alternatives, level 2
//   rope_generate.cpp  the generator: inputs, oracle, alternatives, budgets, tensors
//   rope_manifest.cpp  the generator's manifest: description, scaling, tables, detection
//   rope_engine.cpp    the built-in engine: posenc's kernels and the emulated pipelines
#pragma once
#include "golden/cases/rope_case.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "golden/cases/budgets.hpp"
#include "golden/cases/fast_rope.hpp"
#include "golden/cases/float_interval.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/format/prng.hpp"
#include "optimized/rope.hpp"
#include "optimized/rope_scaling.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/rope.hpp"
#include "reference/rope_scaling.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden::rope_kit {

using reference::LongRopePolicy;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;
namespace bud = budgets;


/// One exactly representable input value: an integer times a power of two, drawn from the
/// counter-based PRNG. bf16 carries 8 significant bits, f16 11, f32 24.
inline double input_value(DType t, std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 255)), -8);
  if (t == DType::kF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 2047)), -11);
  return std::ldexp(static_cast<double>(prng_int(seed, stream, i, (1 << 24) - 1)), -24);
}

inline std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return o;
}

inline bool scaled(const RopeScaling& s) { return s.type != RopeScalingType::kNone; }

/// Everything the oracle computes for a case, in one precision.
template <class Real>
struct RopeOracle {
  std::vector<Real> inv_freq, cos, sin, q_rot, k_rot, scores;
  Real a = 1, softmax_multiplier = 1;
};

template <class Real>
RopeOracle<Real> rope_oracle(const RopeParams& p, const RopeScaling& s,
                             const std::vector<std::int64_t>& pos, int hq, int hk,
                             const std::vector<double>& q, const std::vector<double>& k, bool scores) {
  using std::cos;
  using std::sin;
  RopeOracle<Real> o;
  const auto st = reference::rope_scaling_tables<Real>(p, s);
  const auto& tables = st.tables;
  o.inv_freq = tables.inv_freq;
  o.a = tables.attention_factor;
  o.softmax_multiplier = st.softmax_scale_multiplier;
  const int h = p.head_dim, np = p.rotary_dim / 2;
  const std::size_t t_n = pos.size();
  for (std::size_t t = 0; t < t_n; ++t) {
    for (int i = 0; i < np; ++i) {
      const Real phi = reference::rope_angle(tables, pos[t], i);
      o.cos.push_back(tables.attention_factor * cos(phi));
      o.sin.push_back(tables.attention_factor * sin(phi));
    }
  }
  rope_rotate_heads(p, o.cos, o.sin, t_n, q, hq, &o.q_rot);
  rope_rotate_heads(p, o.cos, o.sin, t_n, k, hk, &o.k_rot);
  if (!scores) return o;
  const int group = hq / hk;
  for (int hh = 0; hh < hq; ++hh) {
    for (std::size_t i = 0; i < t_n; ++i) {
      for (std::size_t j = 0; j < t_n; ++j) {
        Real sum = 0;
        for (int c = 0; c < h; ++c) {
          sum += o.q_rot[(i * hq + hh) * h + c] * o.k_rot[(j * hk + hh / group) * h + c];
        }
        o.scores.push_back(sum);
      }
    }
  }
  return o;
}

/// A progress line on stderr every 10 s while a call's scores are computed (long --positions
/// calls take minutes: the scores are Hq T^2 dot products in mp50 and mp100).
class RopeScoresProgress {
 public:
  RopeScoresProgress(std::string id, std::int64_t rows)
      : id_(std::move(id)), rows_(rows), start_(std::chrono::steady_clock::now()), last_(start_) {}
  void row_done() {
    ++done_;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "  %s: scores %lld/%lld rows, %.0f s, about %.0f s left\n", id_.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(rows_), s,
                 s / static_cast<double>(done_) * static_cast<double>(rows_ - done_));
  }

 private:
  std::string id_;
  std::int64_t rows_, done_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
};
constexpr double kSecondOrder = 1.01;

/// Mutant gold_rope_budgets_inflated: every budget 8x (the tightness test must notice).
inline double inflation() { return POSENC_MUTANT("gold_rope_budgets_inflated") ? 8.0 : 1.0; }

using StageBudgets = RopeStageBudgets;

/// What a float pipeline may get wrong, per element: the angle, inv_freq, the factors.
struct PipelineErrors {
  std::vector<double> angle;     // [T * np] absolute angle error bound
  std::vector<double> inv_freq;  // [np] absolute error bound
  double a_rel = 0;              // relative error of the attention factor
  double a_value = 1;            // the attention factor the error is relative to
  double softmax_abs = 0;        // absolute error of softmax_scale (MLA)
  double A = 0;                  // the factor's share of a table entry's error (eps_f32)
  double table_rel_max = 0;      // the largest relative inv_freq error (manifest "pipelines")
};

/// Largest distance of an interval from x.
inline double distance(const F32Interval& v, double x) { return std::max(std::fabs(v.lo() - x), std::fabs(v.hi() - x)); }

/// The plain rule's errors, from the exact enumeration of budgets.hpp.
inline PipelineErrors plain_errors(const std::string& profile, const RopeParams& p,
                            const std::vector<std::int64_t>& pos, const std::vector<double>& phi,
                            const std::vector<double>& inv64) {
  const int np = p.rotary_dim / 2;
  PipelineErrors e;
  const bool rec = profile == "fp32-recurrence";
  std::vector<double> hf_delta;
  for (int i = 0; i < np; ++i) hf_delta.push_back(bud::hf_inv_freq_rel_error(p.base, p.rotary_dim, i));
  const double ts_delta = bud::ggml_theta_scale_rel_error(p.base, p.rotary_dim);
  auto eps = [&](std::int64_t m, int i) {
    const double rho = bud::position_rel_error_f32(m);
    if (rec) {
      if (POSENC_MUTANT("gold_rope_recurrence_pair_term_dropped")) return bud::product_rel_error(rho, 0.0);
      return bud::recurrence_rel_error(rho, ts_delta, i);
    }
    if (POSENC_MUTANT("gold_rope_fp32_inv_freq_term_dropped")) return bud::product_rel_error(rho, 0.0);
    return bud::product_rel_error(rho, hf_delta[i]);
  };
  for (std::size_t t = 0; t < pos.size(); ++t) {
    for (int i = 0; i < np; ++i) e.angle.push_back(phi[t * np + i] * (eps(pos[t], i) * kSecondOrder * inflation()));
  }
  for (int i = 0; i < np; ++i) {
    const double d = rec ? bud::recurrence_rel_error(0.0, ts_delta, i) : hf_delta[i];
    e.inv_freq.push_back(d * inv64[i] * kSecondOrder * inflation());
    e.table_rel_max = std::max(e.table_rel_max, rec ? ts_delta : hf_delta[i]);
  }
  return e;
}

/// A scaled rule's errors, from the interval evaluation of the pipeline's own code.
inline PipelineErrors scaled_errors(const std::string& profile, const RopeParams& p, const RopeScaling& s,
                             const std::vector<std::int64_t>& pos, const std::vector<double>& phi_signed,
                             const std::vector<double>& inv64, double a, double softmax_value,
                             int softmax_head_dim) {
  const int np = p.rotary_dim / 2;
  const double grow = kSecondOrder * inflation();
  PipelineErrors e;
  e.a_value = a;
  const bool rec = profile == "fp32-recurrence";
  std::vector<F32Interval> inv;
  if (rec) {
    inv = pipelines::ggml_scaled_thetas<F32Interval>(p, s, 1);
  } else {
    inv = pipelines::hf_scaled_inv_freq<F32Interval>(p, s);
  }
  for (int i = 0; i < np; ++i) {
    e.inv_freq.push_back(distance(inv[i], inv64[i]) * grow);
    e.table_rel_max = std::max(e.table_rel_max, inv[i].rel_error(inv64[i]));
  }
  for (std::size_t t = 0; t < pos.size(); ++t) {
    std::vector<F32Interval> ang;
    if (rec) {
      ang = pipelines::ggml_scaled_thetas<F32Interval>(p, s, pos[t]);
    } else {
      const F32Interval pf = f32_const<F32Interval>(static_cast<double>(pos[t]));
      for (int i = 0; i < np; ++i) ang.push_back(pf * inv[i]);
    }
    for (int i = 0; i < np; ++i) {
      const double err = distance(ang[i], phi_signed[t * np + i]) * grow;
      e.angle.push_back(POSENC_MUTANT("gold_scaled_rope_angle_error_dropped") ? 0.0 : err);
    }
  }
  const F32Interval af = rec ? pipelines::ggml_attention_factor<F32Interval>(s, a) : f32_const<F32Interval>(a);
  e.a_rel = af.rel_error(a);
  e.A = (af.lo() == 1.0 && af.hi() == 1.0 && a == 1.0) ? 0.0 : 0.5 + e.a_rel / (2 * bud::kU32);
  if (s.mla) {
    const F32Interval sm = rec ? pipelines::ggml_softmax_scale<F32Interval>(s, softmax_head_dim)
                               : pipelines::hf_softmax_scale<F32Interval>(softmax_value);
    e.softmax_abs = distance(sm, softmax_value) * grow;
  }
  return e;
}

// ---- resolution: what each profile still detects at each hard position ---------------------

/// Per element of the position-wise stages at one token: the exact value and the budget.
struct TokenElements {
  std::vector<double> exact, budget;
  std::vector<int> kind;  // 0 cos, 1 sin, 2 rotated component a, 3 rotated component b
  std::vector<int> pair;
  std::vector<double> xa, xb;  // rotated: the input pair
};

/// The smallest perturbation (offset, base error, inv_freq error) whose exactly computed output,
/// rounded to the target dtype, leaves some element's budget at this token.
struct Detector {
  DType t;
  double a;

  bool fails(const TokenElements& e, std::int64_t pos, long double offset,
             const std::vector<long double>& inv_scaled) const {
    for (std::size_t j = 0; j < e.exact.size(); ++j) {
      const int i = e.pair[j];
      const long double phi = (static_cast<long double>(pos) + offset) * inv_scaled[i];
      const long double c = std::cos(phi), s = std::sin(phi);
      long double y;
      switch (e.kind[j]) {
        case 0: y = a * c; break;
        case 1: y = a * s; break;
        case 2: y = a * (e.xa[j] * c - e.xb[j] * s); break;
        default: y = a * (e.xa[j] * s + e.xb[j] * c); break;
      }
      const double stored = round_to_dtype(static_cast<double>(y), t);
      if (std::fabs(stored - e.exact[j]) > e.budget[j]) return true;
    }
    return false;
  }
};

/// Smallest epsilon in [2^-44, 1] for which fails(eps) holds, to about 2%: steps of 16x up
/// from 2^-44, then bisection of the last step in log scale.
template <class Fails>
std::optional<double> smallest_failing(Fails fails) {
  double lo = 0, hi = 0x1p-44;
  while (!fails(hi)) {
    lo = hi;
    hi *= 16;
    if (hi > 1.0) {
      if (!fails(1.0)) return std::nullopt;
      hi = 1.0;
      break;
    }
  }
  if (lo == 0) return hi;
  for (int k = 0; k < 9; ++k) {
    const double mid = std::sqrt(lo * hi);
    if (fails(mid)) hi = mid; else lo = mid;
  }
  return hi;
}

inline Json sig2(std::optional<double> v) {
  if (!v) return nullptr;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", *v);
  return std::stod(buf);
}

inline std::string dtype_text(DType t) { return std::string(dtype_short(t)); }

/// The why of a level-2 sweep position (the manifest gives the sweep as a range instead).
inline const std::string kSweepWhy = "sweep";

/// Values already rounded to t (doubles exact in t) as a tensor of t.
inline Tensor rounded_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape, const std::vector<double>& v) {
  if (t == DType::kF32) return tensor_from_f32(name, std::move(shape), std::vector<float>(v.begin(), v.end()));
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t j = 0; j < v.size(); ++j) {
    b[j] = t == DType::kBF16 ? float_to_bf16(static_cast<float>(v[j])) : double_to_f16(v[j]);
  }
  return tensor_from_bits16(name, t, std::move(shape), b);
}


// ---- the generator's state --------------------------------------------------------------------

/// The token positions of a case, in order.
inline std::vector<std::int64_t> position_values(const RopeCaseDef& def) {
  std::vector<std::int64_t> pos;
  for (const auto& hp : def.positions) pos.push_back(hp.m);
  return pos;
}

/// A declared alternative convention with its oracle values (cross-checked as the default's).
struct AltOracle {
  const RopeAlternative* def;
  RopeScaling rule;
  RopeOracle<mp50> o;
  mp50 softmax;
  double a;
  std::vector<double> cos64, sin64;  // tables-only cases: the fast oracle's doubles
};

/// The fast oracle's tables (fast_rope.hpp) of one rule at every position: the target-dtype
/// roundings (as doubles) and the double ones; a sample (every 997th element, the first and the
/// last) cross-checked against mp100 as cross_check_one does.
struct FastTables {
  std::vector<double> cos_t, cos_x, sin_t, sin_x;
};


FastTables fast_tables(const std::string& id, const RopeOracle<mp50>& o50, const RopeOracle<mp100>& o100,
                       const std::vector<std::int64_t>& pos, DType t);

struct PairScales {
  std::vector<double> cond, amp;            // per element
  std::vector<double> pair_sum, pair_norm;  // per (token, head, pair): a(|xa|+|xb|), a||x||
};

/// One case being generated: the state passed from stage to stage. rope_case_generate runs the
/// stages in order: inputs, oracle, alternatives, budgets, condition scales, scores, tensors,
/// manifest.
struct RopeCaseGen {
  const RopeCaseDef& def;
  const RopeParams& p = def.model.params;
  const RopeScaling& es = def.expected;
  const bool is_scaled = scaled(es) || scaled(def.model.scaling);
  // The MLA softmax_scale stage: the model's rule has one (a negative control whose expected
  // rule leaves the multiplier out, `mla` false, keeps the stage: its value lacks mscale^2).
  const bool softmax_stage = es.mla || def.model.scaling.mla;
  const int h = p.head_dim, d = p.rotary_dim, np = d / 2;
  const int hq = def.n_q_heads, hk = def.n_kv_heads;  // hk = 0: no k (dense)
  const std::vector<std::int64_t> pos = position_values(def);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const DType t = def.dtype;
  const bool with_scores = hk > 0;

  std::vector<double> q, k;  // the inputs
  RopeOracle<mp50> o50;      // the expected values
  RopeOracle<mp100> o100;    // their cross-check (freed after the scores)
  mp50 softmax50;            // the softmax scale (MLA)
  double a = 0;              // the attention factor, rounded to f64
  std::vector<double> inv64, phi, phi_signed;  // inv_freq and the angles (|angle|, signed)
  std::vector<AltOracle> alts;
  std::vector<RopeOracle<mp100>> alts100;  // their q_rot and k_rot, for the scores
  std::vector<std::string> angle_profiles;  // profiles with an angle extra that apply here
  std::map<std::string, StageBudgets> sb;
  std::map<std::string, PipelineErrors> pe;
  std::vector<int> identity_pairs, channel_pairs;
  PairScales qs, ks;
  std::vector<PairScales> alt_qs, alt_ks;
  FastTables ft;             // tables-only cases: the fast oracle's tables
  const std::vector<std::int64_t> no_positions;
  // The positions the mp oracles run at: none in a tables-only case (the fast oracle's).
  const std::vector<std::int64_t>& oracle_pos = def.tables_only ? no_positions : pos;
  GoldenCase g;
  TensorSpec scores_spec;
  std::vector<Tensor> tensors;
  std::vector<TensorSpec> inputs, expected;
  Json m;

  // Checks the rule; draws q and k from the seed, or takes the given values.
  void build_inputs();
  // Runs the mp50 and mp100 oracles, cross-checks them; a, inv_freq and the angles in f64.
  void run_oracle();
  // The declared alternative conventions' oracles, cross-checked as the default's.
  void run_alternatives();
  // Per profile: the pipeline errors (the larger of every convention) and the stage budgets.
  void pipeline_budgets();
  // The pair indices of the tensors' axes and the condition scales of q_rot and k_rot.
  void condition_scales();
  // Streams the scores to disk, each cross-checked; then frees the mp100 rotations.
  void stream_scores();
  // The input tensors and every expected tensor, with their specs.
  void build_tensors();
  // Manifest: header, description, citation, preset, conventions and params.
  void manifest_describe();
  // Manifest: the scaling rule and what it derives (scaled cases).
  void manifest_scaling();
  // Manifest: oracle, seed, positions, the inv_freq table and the pipeline models.
  void manifest_tables();
  // Manifest: the mistake flags and which stages detect them.
  void manifest_detection();
  // Manifest: the per-position resolution of each profile (plain, non-dense cases).
  void manifest_resolution();

  // The signed angles pos[t] * inv[i], rounded to f64.
  std::vector<double> signed_angles(const std::vector<mp50>& inv) const {
    std::vector<double> v(static_cast<std::size_t>(tn * np));
    if (def.tables_only) {  // within one ulp (double-double products), as budgets need them
      const FastRopeTables f(inv, mp50(1));
      for (std::int64_t tt = 0; tt < tn; ++tt) {
        for (int i = 0; i < np; ++i) v[tt * np + i] = f.angle(pos[tt], i);
      }
      return v;
    }
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int i = 0; i < np; ++i) v[tt * np + i] = round_to_f64(mp50(pos[tt]) * inv[i]);
    }
    return v;
  }

  // An alternative is attached to a tensor whose exact values it changes.
  void add_alternative(ExpectedTensor& e, const AltOracle& al, const std::vector<mp50>& values,
                       std::vector<double> cond) const {
    std::vector<double> x = to_f64(values);
    if (x == to_f64(e.values)) return;
    e.alternatives.push_back({al.def->name, al.def->description, std::move(x), std::move(cond)});
  }

  // inv_freq
  ExpectedTensor inv_freq_tensor();

  // attention_factor, softmax_scale (scaled cases; softmax_scale for MLA)
  ExpectedTensor scalar_tensor(const std::string& name, const mp50& value, bool softmax) {
    ExpectedTensor e = expected_tensor(name, "table", DType::kF32, {1}, CheckKind::kUlp);
    e.values = {value};
    for (const auto& prof : profiles()) {
      const ProfileBudget b = sb[prof.name].scalar;
      e.spec.check.profiles[prof.name] = b;
      if (prof.name == "strict" || !b.applies) continue;
      const PipelineErrors& x = pe[prof.name];
      double a_max = a;
      for (const auto& al : alts) a_max = std::max(a_max, al.a);
      e.extra[prof.name] = {softmax ? x.softmax_abs : x.a_rel * a_max * kSecondOrder * inflation()};
    }
    return e;
  }

  // cos, sin: a [tn, np] table tensor with its axes, cond = amp = a, positions, every
  // profile's table budget and the angle profiles' extras; the callers add values and
  // alternatives
  ExpectedTensor table_skeleton(const std::string& name) {
    ExpectedTensor e = expected_tensor(name, "table", t, {tn, np}, CheckKind::kConditioned);
    e.spec.axes = {{"token", "positions", {}, {}}, {"pair", "", identity_pairs, {}}};
    e.cond.assign(static_cast<std::size_t>(tn * np), a);
    e.amp = e.cond;
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int i = 0; i < np; ++i) e.positions.push_back(pos[tt]);
    }
    for (const auto& prof : profiles()) e.spec.check.profiles[prof.name] = sb[prof.name].table;
    for (const auto& prof : angle_profiles) {
      std::vector<double> x(static_cast<std::size_t>(tn * np));
      for (std::size_t j = 0; j < x.size(); ++j) x[j] = a * pe[prof].angle[j];
      e.extra[prof] = x;
    }
    return e;
  }

  // cos, sin
  ExpectedTensor table_tensor(
      const std::string& name, const std::vector<mp50>& values,
      std::vector<std::pair<const AltOracle*, const std::vector<mp50>*>> alt_values) {
    ExpectedTensor e = table_skeleton(name);
    e.values = values;
    for (const auto& [al, v] : alt_values) {
      add_alternative(e, *al, *v, std::vector<double>(static_cast<std::size_t>(tn * np), al->a));
    }
    return e;
  }

  // cos, sin of a tables-only case: the fast oracle's roundings (target dtype, double)
  ExpectedTensor fast_table_tensor(const std::string& name, const std::vector<double>& target,
                                   const std::vector<double>& exact, bool is_sin) {
    ExpectedTensor e = table_skeleton(name);
    e.rounded = rounded_tensor(name, t, {tn, np}, target);
    e.exact64 = exact;
    for (const auto& al : alts) {
      const std::vector<double>& x = is_sin ? al.sin64 : al.cos64;
      if (x == exact) continue;
      e.alternatives.push_back({al.def->name, al.def->description, x,
                                std::vector<double>(static_cast<std::size_t>(tn * np), al.a)});
    }
    return e;
  }

  // q_rot, k_rot: per element cond = a (|x_a| + |x_b|) of its pair, 0 in the tail
  PairScales pair_scales(const std::vector<double>& x, int heads, double a) const {
    PairScales s;
    s.cond.assign(x.size(), 0.0);
    s.amp.assign(x.size(), 0.0);
    s.pair_sum.assign(static_cast<std::size_t>(tn * heads * np), 0.0);
    s.pair_norm.assign(s.pair_sum.size(), 0.0);
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t off = static_cast<std::size_t>((tt * heads + hh) * h);
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
          const double c = a * (std::fabs(x[off + ca]) + std::fabs(x[off + cb]));
          const double nrm = a * std::hypot(x[off + ca], x[off + cb]);
          s.cond[off + ca] = s.cond[off + cb] = c;
          s.amp[off + ca] = s.amp[off + cb] = nrm;
          s.pair_sum[(tt * heads + hh) * np + i] = c;
          s.pair_norm[(tt * heads + hh) * np + i] = nrm;
        }
      }
    }
    return s;
  }

  // q_rot, k_rot
  ExpectedTensor rotated_tensor(const std::string& name, const std::vector<mp50>& values,
                                const PairScales& s, int heads, bool is_q) {
    ExpectedTensor e = expected_tensor(name, "rotated", t, {tn, heads, h}, CheckKind::kConditioned);
    e.spec.axes = {{"token", "positions", {}, {}}, {"head", "", {}, {}},
                   {"channel", "", channel_pairs, {}}};
    e.values = values;
    for (std::size_t j = 0; j < alts.size(); ++j) {
      add_alternative(e, alts[j], is_q ? alts[j].o.q_rot : alts[j].o.k_rot, (is_q ? alt_qs : alt_ks)[j].cond);
    }
    e.cond = s.cond;
    e.amp = s.amp;
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int j = 0; j < heads * h; ++j) e.positions.push_back(pos[tt]);
    }
    for (const auto& prof : profiles()) e.spec.check.profiles[prof.name] = sb[prof.name].rotated;
    for (const auto& prof : angle_profiles) {
      std::vector<double> x(values.size(), 0.0);
      for (std::int64_t tt = 0; tt < tn; ++tt) {
        for (int hh = 0; hh < heads; ++hh) {
          for (int c = 0; c < d; ++c) {
            const int i = channel_pairs[c];
            const std::size_t j = static_cast<std::size_t>((tt * heads + hh) * h + c);
            x[j] = s.cond[j] * pe[prof].angle[tt * np + i];
          }
        }
      }
      e.extra[prof] = x;
    }
    return e;
  }
};


}  // namespace posenc::golden::rope_kit
