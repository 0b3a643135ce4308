// RoPE golden cases, plain and scaled. Formulas: reference/rope.hpp, reference/rope_scaling.hpp.
// Expected values: the mp50 oracle, rounded once to the target dtype; mp100 must round the same.
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
#include "optimized/common/mutant.hpp"

namespace posenc::golden {

using reference::LongRopePolicy;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;
namespace bud = budgets;

namespace {

/// One exactly representable input value: an integer times a power of two, drawn from the
/// counter-based PRNG. bf16 carries 8 significant bits, f16 11, f32 24.
double input_value(DType t, std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 255)), -8);
  if (t == DType::kF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 2047)), -11);
  return std::ldexp(static_cast<double>(prng_int(seed, stream, i, (1 << 24) - 1)), -24);
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return o;
}

bool scaled(const RopeScaling& s) { return s.type != RopeScalingType::kNone; }

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

// ---- budgets: the error analysis of each profile's pipeline (docs/profiles.md) -------------
//
// Symbols: t = target dtype, eps_t its machine epsilon, r = eps_f32 / eps_t, u = 2^-24,
// a = attention factor, h = head_dim, phi = p * theta_i the exact angle of position p and pair
// i, c = the element's condition scale. Budget (golden/format/manifest.hpp):
// bound * eps_t * c + ulps * ulp_t(y*) + extra.
// A = the attention factor's share of a table entry's error, in eps_f32: 0 when the pipeline's
// factor is exactly 1, else 0.5 (the product a * cos) + alpha / eps_f32, alpha = the relative
// error of the pipeline's float32 factor (HF: fl(a), u; ggml: its float32 mscale, from the
// interval model below).
//
// strict (`--pipeline exact`, posenc's kernel): theta_i in long double -> double, phi in
//   double (|d phi| <= 2^-52 |phi| <= 0.05 eps_f32 up to 2^24 + 1), a cos(phi) rounded once to
//   float32 and once more to t.
//     inv_freq  0.5 ulp + 2^-28 (double rounding through double)
//     cos, sin  bound 0.05 r, ulps 0.5 (f32) or 0.5 + 0.5 r (16-bit: f32 then t)
//     rotated   tables 0.5 eps_f32 a |x| + two products 0.5 eps_f32 c + angle 0.05: bound 1.05 r;
//               the sum's rounding and the cast: ulps as for the tables
//     scores    each rotated component is within R = 1.55 eps_f32 of its pair's c; a pair's
//               contribution to q.k moves by at most sqrt(2) R (|q_pair| |k_pair|) from each
//               side, and an f32 dot product of h terms adds gamma_h = h u = (h/2) eps_f32
//               of sum |q_c k_c| <= c: bound (2 sqrt(2) 1.55 + h/2) r; ulps 0.5 for 16-bit casts
//     attention_factor, softmax_scale: 0.5 ulp + 2^-28 (computed in long double / double)
// fp32 (HF, Meta, vLLM): float32 inv_freq, phi^ = fl(fl(p) inv_freq), cosf/sinf within 2 ulp
//   (CUDA). The angle error E_i(p) = |phi^ - phi|:
//     plain     inv_freq = 1/powf(base, fl(2i)/fl(d)) (budgets.hpp enumerates every faithful
//               powf: its worst relative error delta_i, exact); E = ((1 + rho_p)(1 + delta_i)
//               (1 + u) - 1) |phi| (rho_p: the position's float32 conversion error, 0 up to 2^24)
//     scaled    the rule as HF writes it (pipelines::hf_scaled_inv_freq) evaluated in interval
//               arithmetic (golden/cases/float_interval.hpp: every float32 result the code may
//               produce, faithful powf), and fl(fl(p) * inv_freq) likewise: E = the interval's
//               largest distance from the exact angle
//     inv_freq  extra = the largest distance of the float32 inv_freq from the exact one
//     cos, sin  bound (1 + A) r (2 ulp of |cos| < 1 is <= eps_f32), ulps = the cast (0.5 for
//               16-bit), extra a E
//     rotated   bound (1.5 + A) r (tables + products), ulps 0.5 (+ 0.5 r when cast), extra c E
//               (the chord of an angle error is shorter than its arc)
//     scores    R = (2 + A) eps_f32: bound (2 sqrt(2)(2 + A) + h/2) r, ulps the cast, extra
//               sum_i w_i (E_i(p_q) + E_i(p_k)), w_i = a^2 (|q_a|+|q_b|)(|k_a|+|k_b|)
//     attention_factor, softmax_scale: extra = the float32 value's interval distance (fl of
//               HF's double: u relative)
// fp32-recurrence (ggml): theta_0 = fl(p), theta_i = fl(theta_{i-1} ts), ts = powf(base,
//   -2.0f/d). Plain: ts's worst relative error delta_ts enumerated, E = ((1 + rho_p)
//   (1 + delta_ts)^i (1 + u)^i - 1)|phi_i|; scaled: ggml's rule (pipelines::ggml_scaled_thetas:
//   freq_scale, YaRN mix with float32 corr dims and ramp, rope_freqs factors) in interval
//   arithmetic, E = the interval's largest distance; dynamic NTK: the host's base' for the call
//   (pipelines::host_rope_base, in double) as freq_base, i.e. ts = powf(fl(base'), -2.0f/d) over
//   every faithful powf (within L, base' = base). Same bounds as fp32 with this E; inv_freq =
//   the pipeline's angles at position 1; except the scores of a 16-bit target:
//     scores    llama.cpp stores k_rot in its KV cache in the target dtype t (the case's dtype
//               stands for the cache's) and converts q_rot to t for the dot product, which it
//               accumulates in float32. Each of q_c, k_c carries one more rounding to t,
//               fl_t(x) = x (1 + d), |d| <= u_t = eps_t / 2, so a term q_c k_c moves by
//               (2 u_t + u_t^2) |q_c k_c| (budgets::stored_product_rel_error); the products of
//               16-bit values are exact in float32 and the accumulation is the gamma_h term
//               already counted. sum_c |q_c k_c| <= c (per pair |q_a k_a| + |q_b k_b| <=
//               |q_pair| |k_pair| = a^2 |x_q,pair| |x_k,pair| <= w_i; tail channels are exact
//               copies, already in t): bound (2 sqrt(2)(2 + A) + h/2) r + 1 + eps_t / 4.
//               Below t's smallest normal the rounding is absolute, up to eta_t / 2 (half the
//               subnormal spacing, budgets::stored_rounding_abs_floor): extra + eta_t / 2
//               sum_c (|q_c| + |k_c|) <= eta_t / 2 sqrt(2) sum_i (pair_sum_q,i + pair_sum_k,i).
// bf16, f16 (PyTorch eager in t): float32 tables as in fp32, cast to t; q*cos, rotate_half(q)
//   *sin and their sum each rounded to t; q_rot . k_rot accumulated in float32, rounded to t.
//     inv_freq, cos, sin   as fp32 (tables are float32, then cast)
//     rotated   tables (0.5 + (1 + A) r) eps_t a |x| + products 0.5 eps_t c: bound 1 + (1 + A) r,
//               ulps 0.5 (the sum), extra as fp32
//     scores    R = (1.5 + (1 + A) r) eps_t: bound 2 sqrt(2) R + (h/2) r, ulps 0.5, extra as fp32
// Every bound and extra gets 1% for the second-order terms the sums above leave out.
// Measured tightness (each pipeline emulated in float, `posenc engine --pipeline`):
// docs/profiles.md.

constexpr double kSecondOrder = 1.01;

/// Mutant gold_rope_budgets_inflated: every budget 8x (the tightness test must notice).
double inflation() { return POSENC_MUTANT("gold_rope_budgets_inflated") ? 8.0 : 1.0; }

using StageBudgets = RopeStageBudgets;

StageBudgets rope_stage_budgets_derived(const std::string& profile, DType t, double A, int h) {
  const double r = bud::f32_in(t);
  const double cast = bud::cast_to(t);
  const double sum_ulps = t == DType::kF32 ? 0.5 : 0.5 + 0.5 * r;
  const double root2x2 = 2 * std::sqrt(2.0);
  const double s = kSecondOrder;
  StageBudgets b;
  if (profile == "strict") {
    b.inv_freq = bound_of(0.5 + 0x1p-28);
    b.scalar = bound_of(0.5 + 0x1p-28);
    b.table = bound_of(0.05 * r, sum_ulps);
    b.rotated = bound_of((POSENC_MUTANT("gold_rope_strict_products_dropped") ? 0.55 : 1.05) * r * s, sum_ulps);
    b.scores = bound_of((root2x2 * 1.55 + h / 2.0) * r * s, cast);
    return b;
  }
  const std::string na = activation_na(profile, t);
  if (!na.empty()) {
    b.inv_freq = b.table = b.rotated = b.scores = b.scalar = not_applicable(na);
    return b;
  }
  b.inv_freq = bound_of(0.0);
  b.scalar = bound_of(0.0);
  if (profile == "fp32" || profile == "fp32-recurrence") {
    b.table = bound_of((1 + A) * r * s, cast);
    b.rotated = bound_of((1.5 + A) * r * s, sum_ulps);
    // llama.cpp: q_rot and k_rot in the KV-cache dtype (the target) before the dot product
    const double kv = profile == "fp32-recurrence" && !POSENC_MUTANT("gold_rope_kv_storage_term_dropped")
                          ? bud::stored_product_rel_error(t) / dtype_eps(t)
                          : 0.0;
    b.scores = bound_of(((root2x2 * (2 + A) + h / 2.0) * r + kv) * s, cast);
  } else {  // bf16, f16: eager in the target dtype
    b.table = bound_of((1 + A) * r * s, cast);
    b.rotated = bound_of(((POSENC_MUTANT("gold_rope_eager_products_dropped") ? 0.5 : 1.0) + (1 + A) * r) * s, 0.5);
    b.scores = bound_of((root2x2 * (1.5 + (1 + A) * r) + h / 2.0 * r) * s, 0.5);
  }
  return b;
}

}  // namespace

RopeStageBudgets rope_stage_budgets(const std::string& profile, DType t, double A, int h) {
  StageBudgets b = rope_stage_budgets_derived(profile, t, A, h);
  for (ProfileBudget* x : {&b.inv_freq, &b.table, &b.rotated, &b.scores, &b.scalar}) {
    x->bound *= inflation();
    x->ulps *= inflation();
  }
  return b;
}

namespace {

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
double distance(const F32Interval& v, double x) { return std::max(std::fabs(v.lo() - x), std::fabs(v.hi() - x)); }

/// The plain rule's errors, from the exact enumeration of budgets.hpp.
PipelineErrors plain_errors(const std::string& profile, const RopeParams& p,
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
PipelineErrors scaled_errors(const std::string& profile, const RopeParams& p, const RopeScaling& s,
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

Json sig2(std::optional<double> v) {
  if (!v) return nullptr;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", *v);
  return std::stod(buf);
}

std::string dtype_text(DType t) { return std::string(dtype_short(t)); }

/// The why of a level-2 sweep position (the manifest gives the sweep as a range instead).
const std::string kSweepWhy = "sweep";

/// Values already rounded to t (doubles exact in t) as a tensor of t.
Tensor rounded_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape, const std::vector<double>& v) {
  if (t == DType::kF32) return tensor_from_f32(name, std::move(shape), std::vector<float>(v.begin(), v.end()));
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t j = 0; j < v.size(); ++j) {
    b[j] = t == DType::kBF16 ? float_to_bf16(static_cast<float>(v[j])) : double_to_f16(v[j]);
  }
  return tensor_from_bits16(name, t, std::move(shape), b);
}

}  // namespace

// ---- case definitions -----------------------------------------------------------------------

std::string rope_base_tag(double base) {
  const int e = static_cast<int>(std::floor(std::log10(base)));
  const double mant = base / std::pow(10.0, e);
  if (std::fabs(mant - std::round(mant)) < 1e-12) {
    return std::to_string(static_cast<int>(std::round(mant))) + "e" + std::to_string(e);
  }
  return std::to_string(static_cast<long long>(base));
}

std::uint64_t rope_seed_of(const std::string& id) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<HardPosition> rope_call_positions(std::int64_t last, const std::vector<HardPosition>& edges) {
  std::map<std::int64_t, std::string> m;
  for (const auto& hp : hard_positions()) {
    if (hp.m <= last) m.emplace(hp.m, hp.why);
  }
  for (const auto& e : edges) {
    if (e.m >= 0 && e.m <= last) m.emplace(e.m, e.why);
  }
  m.emplace(last, "the call's last position: seq_len = " + std::to_string(last + 1));
  std::vector<HardPosition> v;
  for (const auto& [pos, why] : m) v.push_back({pos, why});
  return v;
}

std::vector<HardPosition> rope_scaling_edges(const RopeModelConfig& m, std::int64_t last) {
  const RopeScaling& s = m.scaling;
  std::vector<HardPosition> v;
  // x: a position as a double (L0 / beta, L0 / a factor); none beyond the kernel's range, where
  // no call reaches (and llround would overflow).
  auto around = [&](double xd, const std::string& what) {
    if (!(xd >= 0.5 && xd <= static_cast<double>(optimized::kRopeMaxPosition))) return;
    const auto x = static_cast<std::int64_t>(std::llround(xd));
    v.push_back({x - 1, what + " - 1"});
    v.push_back({x, what});
    v.push_back({x + 1, what + " + 1"});
  };
  const std::string l0 = "L0 = original_max_position_embeddings = " + std::to_string(s.original_max_position);
  switch (s.type) {
    case RopeScalingType::kLlama3:
      around(static_cast<double>(s.original_max_position) / s.high_freq_factor,
             "wavelength edge L0 / high_freq_factor (kept below)");
      around(static_cast<double>(s.original_max_position) / s.low_freq_factor,
             "wavelength edge L0 / low_freq_factor (divided above)");
      break;
    case RopeScalingType::kYarn:
      around(static_cast<double>(s.original_max_position) / s.beta_fast,
             "ramp edge: beta_fast turns over L0 (wavelength L0 / beta_fast)");
      around(static_cast<double>(s.original_max_position) / s.beta_slow,
             "ramp edge: beta_slow turns over L0 (wavelength L0 / beta_slow)");
      break;
    case RopeScalingType::kLongRope:
      around(static_cast<double>(s.original_max_position), "switch boundary " + l0);
      break;
    case RopeScalingType::kDynamic:
      around(static_cast<double>(m.max_position),
             "dynamic boundary L = max_position_embeddings = " + std::to_string(m.max_position));
      break;
    default:
      break;
  }
  if (s.type != RopeScalingType::kNone && m.max_position > 0 && s.type != RopeScalingType::kDynamic) {
    v.push_back({m.max_position - 1, "the last position of the extended context L - 1"});
  }
  std::vector<HardPosition> out;
  for (const auto& e : v) {
    if (e.m <= last) out.push_back(e);
  }
  return out;
}

std::vector<RopeAlternative> rope_default_alternatives(const RopeModelConfig& m, const RopeScaling& expected) {
  std::vector<RopeAlternative> v;
  (void)m;
  if (expected.type == RopeScalingType::kLongRope && !reference::longrope_uses_long(expected)) {
    RopeScaling r = expected;
    r.longrope_policy = reference::LongRopePolicy::kVllmMaxModelLen;
    if (reference::longrope_uses_long(r)) {
      v.push_back({reference::longrope_policy_name(r.longrope_policy),
                   "current vLLM (phi3_long_rope_scaled_rope.py) uses the long factors for every call "
                   "whenever max_model_len > original_max_position_embeddings, chosen once so the KV "
                   "cache never mixes the two; HF uses the short ones for this call (seq_len <= L0)",
                   r});
    }
  }
  return v;
}

RopeCaseDef rope_case_for(const RopeModelConfig& m, const std::string& short_id, DType t,
                          std::vector<HardPosition> positions, const std::string& call) {
  RopeCaseDef d;
  d.model = m;
  d.scheme = scaled(m.scaling) ? "rope_scaling" : "rope";
  d.short_id = short_id;
  d.dtype = t;
  d.n_q_heads = 2;
  d.n_kv_heads = m.n_kv_heads == m.n_heads ? 2 : 1;
  d.positions = std::move(positions);
  d.call = call;
  d.expected = m.scaling;
  std::int64_t last = 0;
  for (const auto& hp : d.positions) last = std::max(last, hp.m);
  d.expected.seq_len = last + 1;
  d.model.scaling.seq_len = last + 1;
  d.resolution = !scaled(m.scaling);
  d.alternatives = rope_default_alternatives(m, d.expected);
  const std::string tag = call.empty() ? "" : "_" + call;
  d.id = d.scheme + "_" + short_id + tag + "_" + dtype_text(t);
  d.seed = rope_seed_of(d.id);
  return d;
}

std::size_t rope_case_n_positions(const RopeCaseDef& d) {
  return d.positions.size() + (d.sweep_lazy ? d.sweep_end - d.sweep_begin : 0);
}

std::int64_t rope_case_last_position(const RopeCaseDef& d) {
  std::int64_t last = d.sweep_lazy ? d.sweep_last : 0;
  for (const auto& hp : d.positions) last = std::max(last, hp.m);
  return last;
}

void rope_case_estimate(const RopeCaseDef& d, std::uint64_t* largest_tensor_bytes, std::uint64_t* file_bytes,
                        double* seconds) {
  const std::uint64_t t = rope_case_n_positions(d);
  const std::uint64_t hq = static_cast<std::uint64_t>(d.n_q_heads);
  const std::uint64_t hk = static_cast<std::uint64_t>(d.n_kv_heads);
  const std::uint64_t hd = static_cast<std::uint64_t>(d.model.params.head_dim);
  const std::uint64_t pairs = static_cast<std::uint64_t>(d.model.params.rotary_dim) / 2;
  const std::uint64_t scores = hk > 0 ? hq * t * t : 0;
  // An expected element: its dtype, .cond (f32), .exact (f64) and at most four .extra (f32).
  const std::uint64_t per = static_cast<std::uint64_t>(dtype_size(d.dtype)) + 4 + 8 + 4 * 4;
  const std::uint64_t inputs = t * 8 + (hq + hk) * t * hd * static_cast<std::uint64_t>(dtype_size(d.dtype));
  const std::uint64_t expected = pairs + 2 * t * pairs + (hq + hk) * t * hd + scores;
  *largest_tensor_bytes = std::max<std::uint64_t>({8 * scores, 8 * (hq + hk) * t * hd, 8 * t * pairs});
  *file_bytes = inputs + per * expected + 65536;  // + the header
  if (d.tables_only) {  // inv_freq, cos, sin with .cond, .exact and two .extra; q is an input
    *file_bytes = t * 8 + t * hd * static_cast<std::uint64_t>(dtype_size(d.dtype)) +
                  (static_cast<std::uint64_t>(dtype_size(d.dtype)) + 4 + 8 + 2 * 4) * (pairs + 2 * t * pairs) + 65536;
  }
  *seconds = 3.5e-7 * static_cast<double>(scores * hd) + 1e-3 * static_cast<double>(t);
  if (d.tables_only)
    *seconds = 0.03 + 7.5e-7 * static_cast<double>(t * pairs);  // fast oracle and budgets
}

namespace {

/// A tables-only case (RopeCaseDef::tables_only) of `positions`, its sweep range [first, last].
RopeCaseDef level2_tables(const RopeModelConfig& m, const std::string& sid, DType t,
                          std::vector<HardPosition> positions, const std::string& call, std::int64_t first,
                          std::int64_t last) {
  RopeCaseDef d = rope_case_for(m, sid, t, std::move(positions), call);
  d.tables_only = true;
  d.n_q_heads = 1;
  d.n_kv_heads = 0;
  d.resolution = false;
  d.sweep_first = first;
  d.sweep_last = last;
  return d;
}

/// Tables-only chunks of a call's sorted, unique positions (`list`, shared; null: the integers
/// 0 .. n - 1), each named lazily (RopeCaseDef::sweep_lazy); each also holds the last position.
void level2_chunks(const RopeModelConfig& m, const std::string& sid, DType t,
                   const std::shared_ptr<const std::vector<std::int64_t>>& list, std::size_t n,
                   const std::string& call, std::int64_t chunk, std::vector<RopeCaseDef>* out) {
  auto at = [&](std::size_t j) { return list ? (*list)[j] : static_cast<std::int64_t>(j); };
  const std::int64_t last = at(n - 1);
  const HardPosition last_hp{last, "the call's last position: seq_len = " + std::to_string(last + 1)};
  for (std::size_t b = 0; b < n; b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(n, b + static_cast<std::size_t>(chunk));
    char tag[32];
    std::snprintf(tag, sizeof tag, "_%09lld", static_cast<long long>(at(b)));
    // Built with the call's last position (its seq_len and alternatives), then made lazy.
    RopeCaseDef d = level2_tables(m, sid, t, {last_hp}, call + tag, at(b), at(e - 1));
    if (at(e - 1) == last) d.positions.clear();
    d.sweep_lazy = true;
    d.sweep_list = list;
    d.sweep_begin = b;
    d.sweep_end = e;
    out->push_back(std::move(d));
  }
}

/// A full case (q, k, rotations, scores) at `n` of the positions (first, last, evenly spread;
/// `keep` first, each with its why).
RopeCaseDef level2_sampled(const RopeModelConfig& m, const std::string& sid, DType t, const std::vector<std::int64_t>& pos,
                           std::map<std::int64_t, std::string> keep, int n, const std::string& call) {
  for (int j = 0; j < n && !pos.empty(); ++j) {
    const std::size_t at = n == 1 ? 0 : static_cast<std::size_t>((pos.size() - 1) * static_cast<std::uint64_t>(j) / (n - 1));
    keep.emplace(pos[at], "sampled: evenly spread over the call's positions");
  }
  std::vector<HardPosition> hp;
  for (const auto& [x, why] : keep) hp.push_back({x, why});
  RopeCaseDef d = rope_case_for(m, sid, t, std::move(hp), call);
  d.resolution = false;
  return d;
}

}  // namespace

std::vector<RopeCaseDef> rope_level2_cases(const RopeModelConfig& m, DType t, const std::string& name,
                                           const RopeLevel2Plan& plan) {
  const std::string sid = name.empty() ? sanitize(m.id) : sanitize(name);
  const RopeScaling& s = m.scaling;
  const std::int64_t l = m.max_position > 0 ? m.max_position : 4096;
  std::vector<std::pair<std::string, std::int64_t>> sweeps;  // call, last position
  if (s.type == RopeScalingType::kLongRope) sweeps.emplace_back("l2_short", s.original_max_position - 1);
  if (s.type == RopeScalingType::kDynamic) {
    sweeps.emplace_back("l2_within", l - 1);
    sweeps.emplace_back("l2_double", 2 * l - 1);
  } else {
    sweeps.emplace_back("l2_sweep", l - 1);
  }
  std::vector<RopeCaseDef> v;
  for (const auto& [call, last] : sweeps) {
    level2_chunks(m, sid, t, nullptr, static_cast<std::size_t>(last + 1), call, plan.chunk, &v);
  }
  // Windows: every position within `window` of each boundary of the rule, 2^k and 2^24.
  std::map<std::int64_t, std::string> centers;
  for (const auto& e : rope_scaling_edges(m, optimized::kRopeMaxPosition)) centers.emplace(e.m, e.why);
  for (std::int64_t x = 2; x <= 2 * l; x *= 2) centers.emplace(x, "2^" + std::to_string(std::countr_zero(static_cast<std::uint64_t>(x))));
  centers.emplace(std::int64_t{1} << 24, "2^24, the last integer float32 holds with every neighbour");
  std::map<std::int64_t, std::string> win;
  for (const auto& [c, why] : centers) {
    for (std::int64_t x = std::max<std::int64_t>(0, c - plan.window); x <= c + plan.window; ++x) {
      if (x <= optimized::kRopeMaxPosition) win.emplace(x, x == c ? why : "within " + std::to_string(plan.window) + " of " + why);
    }
  }
  std::vector<HardPosition> wp;
  for (const auto& [x, why] : win) wp.push_back({x, why});
  v.push_back(level2_tables(m, sid, t, std::move(wp), "l2_windows", -1, -1));
  // Sampled tokens of the context: the boundaries inside it, then evenly spread.
  std::map<std::int64_t, std::string> keep;
  for (const auto& [c, why] : centers) {
    if (c < l) keep.emplace(c, "sampled: " + why);
  }
  std::vector<std::int64_t> spread;
  for (int j = 0; j < plan.samples; ++j) spread.push_back((l - 1) * j / std::max(1, plan.samples - 1));
  v.push_back(level2_sampled(m, sid, t, spread, keep, plan.samples, "l2_sampled"));
  return v;
}

std::vector<RopeCaseDef> rope_given_level2_cases(const RopeModelConfig& m, DType t, const std::string& name,
                                                 const std::vector<std::int64_t>& positions,
                                                 const RopeLevel2Plan& plan) {
  const std::string sid = name.empty() ? sanitize(m.id) : sanitize(name);
  std::vector<RopeCaseDef> v;
  level2_chunks(m, sid, t, std::make_shared<const std::vector<std::int64_t>>(positions), positions.size(),
                "given", plan.chunk, &v);
  v.push_back(level2_sampled(m, sid, t, positions, {}, plan.samples, "given_sampled"));
  return v;
}

std::vector<RopeCaseDef> rope_cases_for_config(const RopeModelConfig& m, DType t,
                                               const std::vector<std::int64_t>& positions, const std::string& name) {
  const std::string sid = name.empty() ? sanitize(m.id) : sanitize(name);
  std::vector<RopeCaseDef> v;
  if (!positions.empty()) {
    // Sorted and deduplicated as plain integers: a list of 2^22 positions stays 32 MB (a set
    // and a reason string per position took about 600 MB before the job's estimate was printed).
    std::vector<std::int64_t> sorted = positions;
    for (std::int64_t x : sorted) {
      if (x < 0) throw_invalid("rope_cases_for_config", "positions must be >= 0", x);
      if (x > optimized::kRopeMaxPosition) {
        throw_invalid("rope_cases_for_config", "positions must be <= 2^28 (the kernel's valid range)", x);
      }
    }
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    if (sorted.size() > kRopeMaxGivenPositions) {  // scores would hold T^2 values per head: level 2
      return rope_given_level2_cases(m, t, name, sorted);
    }
    std::vector<HardPosition> hp;
    hp.reserve(sorted.size());
    for (std::int64_t x : sorted) hp.push_back({x, "given by --positions"});
    v.push_back(rope_case_for(m, sid, t, hp, "given"));
    return v;
  }
  const std::int64_t all = hard_positions().back().m;
  const RopeScaling& s = m.scaling;
  if (s.type == RopeScalingType::kLongRope) {
    const std::int64_t l0 = s.original_max_position;
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(l0 - 1, rope_scaling_edges(m, l0 - 1)), "short"));
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(l0, rope_scaling_edges(m, l0)), "boundary"));
  }
  if (s.type == RopeScalingType::kDynamic) {
    const std::int64_t l = m.max_position;
    if (l <= 0 || l > optimized::kRopeMaxPosition / 2) {  // the reader refuses these; 2L - 1 must stay valid
      throw_invalid("rope_cases_for_config",
                    "dynamic scaling needs max_position_embeddings in [1, 2^27] (its call ends at 2L - 1)", l);
    }
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(l - 1, rope_scaling_edges(m, l - 1)), "within"));
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(2 * l - 1, rope_scaling_edges(m, 2 * l - 1)), "double"));
  }
  v.push_back(rope_case_for(m, sid, t, rope_call_positions(all, rope_scaling_edges(m, all)), "all"));
  return v;
}

// The scaling rule in the manifest (rope_scaling_to_json, rope_scaling_from_json):
// golden/cases/plan_json.cpp, with the plan types' codec that uses it.

// ---- the generator ---------------------------------------------------------------------------

namespace {

/// The token positions of a case, in order.
std::vector<std::int64_t> position_values(const RopeCaseDef& def) {
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
                       const std::vector<std::int64_t>& pos, DType t) {
  const FastRopeTables f(o50.inv_freq, o50.a);
  const int np = f.pairs();
  const auto n = static_cast<std::int64_t>(pos.size()) * np;
  FastTables r;
  for (auto* v : {&r.cos_t, &r.cos_x, &r.sin_t, &r.sin_x}) v->resize(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t j = 0; j < n; ++j) {
    FastRopeTables::Value c, s;
    f.eval(pos[static_cast<std::size_t>(j / np)], static_cast<int>(j % np), t, &c, &s);
    r.cos_t[j] = c.target;
    r.cos_x[j] = c.exact;
    r.sin_t[j] = s.target;
    r.sin_x[j] = s.exact;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    if (j % 997 != 0 && j != n - 1) continue;
    const mp100 phi = mp100(pos[static_cast<std::size_t>(j / np)]) * o100.inv_freq[static_cast<std::size_t>(j % np)];
    const mp100 yc = o100.a * cos(phi), ys = o100.a * sin(phi);
    for (auto [name, y, tv, xv] : {std::tuple{"cos", yc, r.cos_t[j], r.cos_x[j]}, std::tuple{"sin", ys, r.sin_t[j], r.sin_x[j]}}) {
      const double y64 = round_to_f64(y);
      if (round_to_dtype(y, t) != tv || (y64 != xv && std::nextafter(xv, y64) != y64)) {
        throw std::runtime_error("generate: " + id + ": the fast oracle and mp100 round " + name + "[" +
                                 std::to_string(j) + "] differently (" + y.str(60) + ")");
      }
    }
  }
  return r;
}

/// The condition scales of q_rot or k_rot.
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

ExpectedTensor RopeCaseGen::inv_freq_tensor() {
  ExpectedTensor e_inv = expected_tensor("inv_freq", "table", DType::kF32, {np}, CheckKind::kUlp);
  e_inv.values = o50.inv_freq;
  for (const auto& al : alts) add_alternative(e_inv, al, al.o.inv_freq, {});
  e_inv.spec.axes = {{"pair", "", identity_pairs, {}}};
  for (const auto& prof : profiles()) {
    const ProfileBudget b = sb[prof.name].inv_freq;
    // The f32 inv_freq of a bf16 / f16 pipeline is the fp32 one; in an f32 case the eager
    // profiles stay not applicable, as for every other stage.
    e_inv.spec.check.profiles[prof.name] = b;
    if (prof.name == "strict" || !b.applies) continue;
    e_inv.extra[prof.name] = pe[prof.name].inv_freq;
  }
  return e_inv;
}

void RopeCaseGen::build_inputs() {
  reference::rope_scaling_check(p, es, "rope_case_generate");
  q.assign(static_cast<std::size_t>(tn * hq * h), 0.0);
  k.assign(static_cast<std::size_t>(tn * hk * h), 0.0);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = input_value(t, def.seed, 1, i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = input_value(t, def.seed, 2, i);
  auto given = [&](const std::vector<double>& v, std::vector<double>* x, const char* name) {
    if (v.empty()) return;
    if (v.size() != x->size()) {
      throw_invalid("rope_case_generate", std::string(name) + " must have tokens * heads * head_dim = " +
                                              std::to_string(x->size()) + " entries", v.size());
    }
    *x = v;
  };
  given(def.q_values, &q, "q_values");
  given(def.k_values, &k, "k_values");
}

void RopeCaseGen::run_oracle() {
  // The scores ([Hq, T, T]) are never held: computed element by element below and streamed to
  // disk (StreamedExpected), each cross-checked as it comes.
  o50 = rope_oracle<mp50>(p, es, oracle_pos, hq, hk, q, k, false);
  o100 = rope_oracle<mp100>(p, es, oracle_pos, hq, hk, q, k, false);
  cross_check(def.id, "inv_freq", DType::kF32, o50.inv_freq, o100.inv_freq);
  cross_check(def.id, "cos", t, o50.cos, o100.cos);
  cross_check(def.id, "sin", t, o50.sin, o100.sin);
  cross_check(def.id, "q_rot", t, o50.q_rot, o100.q_rot);
  cross_check(def.id, "k_rot", t, o50.k_rot, o100.k_rot);
  o100.cos = o100.sin = {};
  softmax50 = pow(mp50(def.model.softmax_head_dim), mp50(-0.5)) * o50.softmax_multiplier;
  cross_check(def.id, "attention_factor", DType::kF32, {o50.a}, {o100.a});
  cross_check(def.id, "softmax_scale", DType::kF32, {softmax50},
              {pow(mp100(def.model.softmax_head_dim), mp100(-0.5)) * o100.softmax_multiplier});

  a = round_to_f64(o50.a);
  inv64 = to_f64(o50.inv_freq);
  phi_signed = signed_angles(o50.inv_freq);
  if (def.tables_only) {
    ft = fast_tables(def.id, o50, o100, pos, t);
    phi = phi_signed;  // every angle is >= 0
    return;
  }
  phi.assign(static_cast<std::size_t>(tn * np), 0.0);
  for (std::int64_t tt = 0; tt < tn; ++tt) {
    for (int i = 0; i < np; ++i) phi[tt * np + i] = static_cast<double>(abs(mp50(pos[tt]) * o50.inv_freq[i]));
  }
}

void RopeCaseGen::run_alternatives() {
  // Declared alternative conventions: their oracle values (cross-checked as the default's), and
  // below their pipeline errors, merged into the budgets so that a float engine following one
  // passes too.
  for (const auto& al : def.alternatives) {
    RopeScaling r = al.rule;
    r.seq_len = es.seq_len;
    reference::rope_scaling_check(p, r, "rope_case_generate");
    AltOracle x{&al, r, rope_oracle<mp50>(p, r, oracle_pos, hq, hk, q, k, false), 0, 0, {}, {}};
    auto y = rope_oracle<mp100>(p, r, oracle_pos, hq, hk, q, k, false);
    const std::string aid = def.id + " (alternative " + al.name + ")";
    if (def.tables_only) {
      FastTables at = fast_tables(aid, x.o, y, pos, t);
      x.cos64 = std::move(at.cos_x);
      x.sin64 = std::move(at.sin_x);
    }
    cross_check(aid, "inv_freq", DType::kF32, x.o.inv_freq, y.inv_freq);
    cross_check(aid, "cos", t, x.o.cos, y.cos);
    cross_check(aid, "sin", t, x.o.sin, y.sin);
    cross_check(aid, "q_rot", t, x.o.q_rot, y.q_rot);
    cross_check(aid, "k_rot", t, x.o.k_rot, y.k_rot);
    x.softmax = pow(mp50(def.model.softmax_head_dim), mp50(-0.5)) * x.o.softmax_multiplier;
    x.a = round_to_f64(x.o.a);
    alts.push_back(std::move(x));
    y.cos = y.sin = {};
    alts100.push_back(std::move(y));
  }
}

void RopeCaseGen::pipeline_budgets() {
  for (const auto& prof : profiles()) {
    if (prof.name == "strict") {
      sb[prof.name] = rope_stage_budgets(prof.name, t, 0.0, h);
      continue;
    }
    PipelineErrors e = is_scaled ? scaled_errors(prof.name, p, es, pos, phi_signed, inv64, a,
                                                 round_to_f64(softmax50), def.model.softmax_head_dim)
                                 : plain_errors(prof.name, p, pos, phi, inv64);
    if (softmax_stage && !es.mla) {
      // A control whose softmax scale lacks the MLA multiplier: the pipelines computing it
      // round the double 1/sqrt(q head) once to float32.
      const double v = round_to_f64(softmax50);
      e.softmax_abs = distance(pipelines::hf_softmax_scale<F32Interval>(v), v) * kSecondOrder * inflation();
    }
    for (const auto& al : alts) {  // the larger error of either convention, element by element
      const PipelineErrors x = scaled_errors(prof.name, p, al.rule, pos, signed_angles(al.o.inv_freq),
                                             to_f64(al.o.inv_freq), al.a, round_to_f64(al.softmax),
                                             def.model.softmax_head_dim);
      for (std::size_t j = 0; j < e.angle.size(); ++j) e.angle[j] = std::max(e.angle[j], x.angle[j]);
      for (std::size_t j = 0; j < e.inv_freq.size(); ++j) e.inv_freq[j] = std::max(e.inv_freq[j], x.inv_freq[j]);
      e.a_rel = std::max(e.a_rel, x.a_rel);
      e.softmax_abs = std::max(e.softmax_abs, x.softmax_abs);
      e.A = std::max(e.A, x.A);
    }
    sb[prof.name] = rope_stage_budgets(prof.name, t, e.A, h);
    if (sb[prof.name].table.applies) angle_profiles.push_back(prof.name);
    pe[prof.name] = std::move(e);
  }
}

void RopeCaseGen::condition_scales() {
  identity_pairs.resize(static_cast<std::size_t>(np));
  for (int i = 0; i < np; ++i) identity_pairs[i] = i;
  channel_pairs.resize(static_cast<std::size_t>(h));
  for (int c = 0; c < h; ++c) channel_pairs[c] = reference::rope_pair_of_channel(p, c);
  qs = pair_scales(q, hq, a);
  ks = pair_scales(k, hk, a);
  for (const auto& al : alts) {
    alt_qs.push_back(pair_scales(q, hq, al.a));
    alt_ks.push_back(pair_scales(k, hk, al.a));
  }
}

void RopeCaseGen::stream_scores() {
  // scores: streamed (rope_scores below), then the mp100 rotations are no longer needed
  if (with_scores) {
    const int group = hq / hk;
    ExpectedTensor es0 = expected_tensor("scores", "scores", t, {hq, tn, tn}, CheckKind::kConditioned);
    es0.spec.axes = {{"head", "", {}, {}}, {"query", "positions", {}, {}}, {"key", "positions", {}, {}}};
    for (const auto& prof : profiles()) es0.spec.check.profiles[prof.name] = sb[prof.name].scores;
    std::vector<std::pair<std::string, std::string>> alt_names;
    for (const auto& al : alts) alt_names.emplace_back(al.def->name, al.def->description);
    StreamedExpected e(std::move(es0.spec), angle_profiles, alt_names);
    const std::size_t na = angle_profiles.size(), nalt = alts.size();
    std::vector<double> x(na), alt_exact(nalt), alt_cond(nalt);
    // q_rot . k_rot of one (head, query, key) in precision Real, from rotations q and k
    auto dot = [&](const auto& qr, const auto& kr, int hh, std::int64_t i, std::int64_t j) {
      typename std::decay_t<decltype(qr)>::value_type sum = 0;
      for (int c = 0; c < h; ++c) sum += qr[(i * hq + hh) * h + c] * kr[(j * hk + hh / group) * h + c];
      return sum;
    };
    // fp32-recurrence on a 16-bit target: the KV-cache rounding's subnormal floor eta_t / 2 per
    // rotated component (a pair's |x_a| + |x_b| <= sqrt(2) a |x_pair| <= sqrt(2) pair_sum, for
    // the largest attention factor of the conventions)
    const auto rec_at = std::find(angle_profiles.begin(), angle_profiles.end(), "fp32-recurrence");
    const std::size_t rec = static_cast<std::size_t>(rec_at - angle_profiles.begin());
    double a_ratio = 1;
    for (const auto& al : alts) a_ratio = std::max(a_ratio, al.a / a);
    const double floor_scale = std::sqrt(2.0) * a_ratio * bud::stored_rounding_abs_floor(t) * kSecondOrder * inflation();
    RopeScoresProgress progress(def.id, static_cast<std::int64_t>(hq) * tn);
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < tn; ++i) {
        for (std::int64_t j = 0; j < tn; ++j) {
          const std::size_t flat = static_cast<std::size_t>((hh * tn + i) * tn + j);
          const mp50 v = dot(o50.q_rot, o50.k_rot, hh, i, j);
          cross_check_one(def.id, "scores", t, flat, v, dot(o100.q_rot, o100.k_rot, hh, i, j));
          double c = 0, amp = 0;
          const std::int64_t qr = i * hq + hh, kr = j * hk + hh / group;
          std::fill(x.begin(), x.end(), 0.0);
          double l1 = 0;  // sum of the pairs' a (|q_a| + |q_b|) + a (|k_a| + |k_b|)
          for (int pi = 0; pi < np; ++pi) {
            const double w = qs.pair_sum[qr * np + pi] * ks.pair_sum[kr * np + pi];
            c += w;
            amp += qs.pair_norm[qr * np + pi] * ks.pair_norm[kr * np + pi];
            l1 += qs.pair_sum[qr * np + pi] + ks.pair_sum[kr * np + pi];
            for (std::size_t pr = 0; pr < na; ++pr) {
              const auto& angle = pe[angle_profiles[pr]].angle;
              x[pr] += w * (angle[i * np + pi] + angle[j * np + pi]);
            }
          }
          if (rec < na) x[rec] += floor_scale * l1;
          for (int ch = d; ch < h; ++ch) c += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
          if (POSENC_MUTANT("gold_rope_scores_extra_dropped")) std::fill(x.begin(), x.end(), 0.0);
          for (std::size_t ai = 0; ai < nalt; ++ai) {
            const mp50 av = dot(alts[ai].o.q_rot, alts[ai].o.k_rot, hh, i, j);
            cross_check_one(def.id + " (alternative " + alts[ai].def->name + ")", "scores", t, flat, av,
                            dot(alts100[ai].q_rot, alts100[ai].k_rot, hh, i, j));
            alt_exact[ai] = round_to_f64(av);
            double ac = 0;
            for (int pi = 0; pi < np; ++pi) ac += alt_qs[ai].pair_sum[qr * np + pi] * alt_ks[ai].pair_sum[kr * np + pi];
            for (int ch = d; ch < h; ++ch) ac += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
            alt_cond[ai] = ac;
          }
          e.add(v, c, amp, std::max(pos[i], pos[j]), x.data(), alt_exact.data(), alt_cond.data());
        }
        progress.row_done();
      }
    }
    scores_spec = e.finish(&g.spilled);
  }
  o100 = {};
  alts100.clear();
}

void RopeCaseGen::build_tensors() {
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  tensors.push_back(input_tensor("q", t, {tn, hq, h}, q));
  if (hk > 0) tensors.push_back(input_tensor("k", t, {tn, hk, h}, k));
  for (const auto& tensor : tensors) inputs.push_back(input_spec(tensor));

  expected.push_back(add_expected(&tensors, inv_freq_tensor()));
  if (is_scaled) {
    ExpectedTensor ea = scalar_tensor("attention_factor", o50.a, false);
    for (const auto& al : alts) add_alternative(ea, al, {al.o.a}, {});
    expected.push_back(add_expected(&tensors, std::move(ea)));
    if (softmax_stage) {
      ExpectedTensor esm = scalar_tensor("softmax_scale", softmax50, true);
      for (const auto& al : alts) add_alternative(esm, al, {al.softmax}, {});
      expected.push_back(add_expected(&tensors, std::move(esm)));
    }
  }
  std::vector<std::pair<const AltOracle*, const std::vector<mp50>*>> alt_cos, alt_sin;
  for (const auto& al : alts) {
    alt_cos.emplace_back(&al, &al.o.cos);
    alt_sin.emplace_back(&al, &al.o.sin);
  }
  if (def.tables_only) {
    expected.push_back(add_expected(&tensors, fast_table_tensor("cos", ft.cos_t, ft.cos_x, false)));
    expected.push_back(add_expected(&tensors, fast_table_tensor("sin", ft.sin_t, ft.sin_x, true)));
    ft = {};
    return;
  }
  expected.push_back(add_expected(&tensors, table_tensor("cos", o50.cos, alt_cos)));
  expected.push_back(add_expected(&tensors, table_tensor("sin", o50.sin, alt_sin)));
  expected.push_back(add_expected(&tensors, rotated_tensor("q_rot", o50.q_rot, qs, hq, true)));
  if (hk > 0) expected.push_back(add_expected(&tensors, rotated_tensor("k_rot", o50.k_rot, ks, hk, false)));

  if (with_scores) expected.push_back(std::move(scores_spec));
}

void RopeCaseGen::manifest_describe() {
  // ---- the manifest ----
  const std::string layout = reference::rope_layout_name(p.layout);
  m = manifest_header(def.id, def.scheme, is_scaled ? reference::rope_scaling_type_name(es.type) : layout,
                           def.result, is_scaled ? 2 : 1);
  std::string desc = (is_scaled ? "RoPE scaling " + std::string(reference::rope_scaling_type_name(def.model.scaling.type)) + ", "
                                : "RoPE, ") +
                     def.model.id + " (" + layout + ", head_dim " + std::to_string(h) + ", rotary_dim " +
                     std::to_string(d) + ", base " + rope_base_tag(p.base) + "), target " + dtype_text(t);
  if (def.tables_only) {
    desc += ", level 2, tables only (inv_freq, cos, sin; q holds one head of inputs, no rotations, "
            "no scores), call \"" + def.call + "\": " + std::to_string(tn) + " positions up to " +
            std::to_string(pos.back()) + " (seq_len " + std::to_string(pos.back() + 1) + ")";
  } else if (def.dense) {
    desc += ", every position 0..511 and the hard positions above, one q head (no k, no scores)";
  } else if (!is_scaled && def.call.empty()) {
    desc += ", one token per hard position";
  } else {
    desc += ", call \"" + def.call + "\": " + std::to_string(tn) + " positions up to " +
            std::to_string(pos.back()) + " (seq_len " + std::to_string(pos.back() + 1) + ")";
  }
  if (!def.convention.empty()) desc += "; convention " + def.convention + " (" + def.result + ")";
  m["description"] = desc;
  m["citation"] = is_scaled ? "J. Su et al., RoFormer, arXiv:2104.09864v5; the scaling rule: see "
                              "reference/rope_scaling.hpp (PI arXiv:2306.15595, YaRN arXiv:2309.00071, "
                              "DeepSeek-V2 arXiv:2405.04434 App. B, Llama 3 apply_scaling, LongRoPE "
                              "arXiv:2402.13753)"
                            : "J. Su et al., RoFormer, arXiv:2104.09864v5, Sec. 3.2.2 and 3.4.2";
  m["preset"] = {{"name", def.model.id},
                 {"hf_model", def.model.hf_model},
                 {"source", def.model.source},
                 {"config", def.model.config}};
  if (!def.model.notes.empty()) m["preset"]["reader_notes"] = def.model.notes;
  m["conventions"] = {
      {"pairing", p.layout == RopeLayout::kInterleaved
                      ? "interleaved: pair i = channels (2i, 2i+1)"
                      : "half_split: pair i = channels (i, i + rotary_dim/2)"},
      {"rotation", "y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos (counter-clockwise)"},
      {"angle", "phi[t][i] = positions[t] * inv_freq[i], exact (no float32 rounding; the "
                "profiles budget for a pipeline's)"},
      {"inv_freq", is_scaled ? "the scaling rule's frequencies (\"scaling\" below) from base^(-2i/rotary_dim)"
                             : "inv_freq[i] = base^(-2i/rotary_dim), i < rotary_dim/2"},
      {"position_origin", "positions are absolute token indices; the first token is 0"},
      {"attention_factor", "multiplies both cos and sin tables (and so the rotated q, k)"},
      {"tail", "channels >= rotary_dim are copied unchanged (bit-identical)"},
      {"layout", "q, k, q_rot, k_rot are [tokens, heads, head_dim] (dense cases have q only); "
                 "cos, sin are [tokens, "
                 "rotary_dim/2] (HF's [tokens, rotary_dim] tables repeat each column twice); "
                 "scores are [q_heads, query token, key token]"},
      {"scores", "unscaled dot products q_rot . k_rot over all head_dim channels; kv head = "
                 "q head / (q_heads / kv_heads)"}};
  if (!def.model.layout_reason.empty() && is_scaled) m["conventions"]["pairing_source"] = def.model.layout_reason;
  Json params = {{"head_dim", h},
                 {"rotary_dim", d},
                 {"base", p.base},
                 {"layout", layout},
                 {"attention_factor", p.attention_factor},
                 {"n_tokens", tn},
                 {"n_q_heads", hq},
                 {"n_kv_heads", hk},
                 {"dtype", dtype_text(t)}};
  if (is_scaled) {
    // What an engine is told: the model's rule (for a negative control, not what the expected
    // values follow; for an accepted alternative, the alternative).
    params["scaling"] = rope_scaling_to_json(def.result == "invalid" ? def.model.scaling : es);
    if (softmax_stage) params["softmax_head_dim"] = def.model.softmax_head_dim;
  }
  m["params"] = params;
}

void RopeCaseGen::manifest_scaling() {
  if (is_scaled) {
    const auto st = reference::rope_scaling_tables<mp50>(p, es);
    Json derived = {{"attention_factor", round_to_f64(st.tables.attention_factor)},
                    {"softmax_scale_multiplier", round_to_f64(st.softmax_scale_multiplier)},
                    {"seq_len", es.seq_len}};
    // Two attention factors in the manifest: say which one the expected tables apply.
    const double a_rule = round_to_f64(st.tables.attention_factor);
    char a_text[96];
    std::snprintf(a_text, sizeof a_text, "%.9g", a_rule);
    std::string applied = std::string("scaling.derived.attention_factor (") + a_text +
                          ") multiplies both cos and sin tables (and so the rotated q, k); ";
    std::snprintf(a_text, sizeof a_text, "%.9g", p.attention_factor);
    applied += a_rule == p.attention_factor
                   ? std::string("it equals params.attention_factor")
                   : std::string("the scaling rule's factor replaces params.attention_factor (") +
                         a_text + "), which an engine does not apply as well";
    m["conventions"]["attention_factor"] = applied;
    if (es.type == RopeScalingType::kYarn) {
      derived["ramp_low"] = round_to_f64(st.ramp_low);
      derived["ramp_high"] = round_to_f64(st.ramp_high);
    }
    if (es.type == RopeScalingType::kYarn || es.type == RopeScalingType::kLlama3) {
      Json bands = {{"kept", Json::array()}, {"blended", Json::array()}, {"divided", Json::array()}};
      for (int i = 0; i < np; ++i) {
        bands[st.band[i] == 0 ? "kept" : (st.band[i] == 1 ? "blended" : "divided")].push_back(i);
      }
      derived["pairs"] = bands;
    }
    if (es.type == RopeScalingType::kLongRope) derived["factors"] = st.long_factors ? "long" : "short";
    if (es.type == RopeScalingType::kNtk || es.type == RopeScalingType::kDynamic) {
      // b' = b scale^(d/(d-2)), from theta_1 = b'^(-2/d)
      derived["base"] = round_to_f64(pow(st.tables.inv_freq[1], mp50(-d) / mp50(2)));
    }
    Json sc = {{"rule", rope_scaling_to_json(es)}, {"derived", derived}, {"call", def.call}};
    if (es.type == RopeScalingType::kDynamic) {
      sc["policy"] = "tables for this call's own seq_len (" + std::to_string(es.seq_len) +
                     "): run the call as the first of a fresh sequence. Later calls depend on the "
                     "engine's policy: HF 4.45+ keeps the tables of the largest seq_len seen until a "
                     "call is shorter than max_position_embeddings (grow and reset), v4.38 rebuilds "
                     "them per call (reference::DynamicPolicy)";
    }
    if (!def.convention.empty()) {
      sc["convention"] = def.convention;
      sc["reason"] = def.reason;
    }
    m["scaling"] = sc;
  }
}

void RopeCaseGen::manifest_tables() {
  m["oracle"] = mp_oracle_json();
  m["seed"] = def.seed;
  m["prng"] = "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k; q, k = "
              "integer * 2^-24 (f32), 2^-11 (f16) or 2^-8 (bf16), |integer| < 2^24, 2^11 or 2^8";
  Json why = Json::array();
  for (const auto& hp : def.positions) {
    if (def.dense && hp.m <= kRopeDenseLast && hp.m >= 2) continue;
    if (hp.m >= def.sweep_first && hp.m <= def.sweep_last && hp.why == kSweepWhy) continue;
    // A near-pi/2 position's distance in this case's own pair-0 frequency (scaled or not).
    why.push_back({{"position", hp.m},
                   {"why", is_near_half_pi_position(hp.m) ? near_half_pi_why(hp.m, o50.inv_freq[0])
                                                          : hp.why}});
  }
  m["positions"] = why;
  if (def.dense) m["positions_dense"] = {{"from", 0}, {"to", kRopeDenseLast}};
  if (def.sweep_last >= 0) {
    m["positions_sweep"] = {{"from", def.sweep_first},
                            {"to", def.sweep_last},
                            {"what", "every entry of the positions tensor in [from, to] (not listed above)"}};
  }
  Json inv = Json::array();
  for (int i = 0; i < np; ++i) {
    inv.push_back({{"i", i},
                   {"f32_hex", hex_bits_f32(round_to_f32(o50.inv_freq[i]))},
                   {"decimal", o50.inv_freq[i].str(25, std::ios_base::scientific)}});
  }
  m["tables"] = {{"inv_freq", inv}};
  Json pipe = Json::object();
  if (pe.count("fp32")) {
    pipe["fp32"] = {{"inv_freq_rel_error_max", pe["fp32"].table_rel_max},
                    {"model", is_scaled ? "HF's float32 rule (modeling_rope_utils) evaluated in interval "
                                          "arithmetic (faithful powf), phi = fl(fl(p) inv_freq), "
                                          "cosf/sinf within 2 ulp, cos * fl(attention factor)"
                                        : "inv_freq = 1/powf(base, fl(2i)/fl(d)) (every faithful powf), phi = "
                                          "fl(fl(p) inv_freq), cosf/sinf within 2 ulp"}};
  }
  if (pe.count("fp32-recurrence")) {
    pipe["fp32-recurrence"] = {
        {is_scaled ? "inv_freq_rel_error_max" : "theta_scale_rel_error",
         is_scaled ? pe["fp32-recurrence"].table_rel_max : bud::ggml_theta_scale_rel_error(p.base, p.rotary_dim)},
        {"model", is_scaled ? "ggml rope_ext: theta = fl(p) ts^i (float32 recurrence), freq_scale, YaRN mix "
                              "with float32 corr dims and ramp, rope_freqs factors, float32 mscale; "
                              "NTK and dynamic NTK: freq_base = the host's base' for the call "
                              "(double, then float32); interval arithmetic (faithful powf, logf)"
                            : "theta_0 = fl(p), theta_i = fl(theta_{i-1} * powf(base, "
                              "-2.0f/d)) (every faithful powf), cosf/sinf within 2 ulp"}};
    if (with_scores && bud::stored_product_rel_error(t) > 0) {
      pipe["fp32-recurrence"]["scores"] =
          "llama.cpp's " + dtype_text(t) + " KV cache: q_rot and k_rot rounded to " + dtype_text(t) +
          " before a float32-accumulated dot product (each product within (2 u_t + u_t^2) |q k|)";
    }
  }
  m["pipelines"] = pipe;
}

void RopeCaseGen::manifest_detection() {
  Json flags = {"PairingLayout", "AnglePrecision", "PositionOffset", "WrongBase"};
  if (d < h) flags.push_back("PartialRotary");
  if (hq != hk) flags.push_back("GroupedQueryHeads");
  if (is_scaled) {
    flags.push_back("ScalingRule");
    if (es.type == RopeScalingType::kYarn || es.type == RopeScalingType::kLongRope) flags.push_back("AttentionFactor");
    if (softmax_stage) flags.push_back("SoftmaxScale");
    if (es.type == RopeScalingType::kLongRope) flags.push_back("LongRopeSwitch");
    if (es.type == RopeScalingType::kLlama3 || es.type == RopeScalingType::kYarn) flags.push_back("BandEdges");
  }
  m["flags"] = flags;
  m["detection"] = Json::array(
      {{{"flag", "PositionOffset"}, {"stages", {"cos", "sin", "q_rot", "k_rot"}},
        {"blind", "a uniform position offset cancels in q.k, so scores cannot show it"}},
       {{"flag", "PairingLayout"}, {"stages", {"q_rot", "k_rot", "scores"}},
        {"blind", "cos, sin and inv_freq are per pair and do not show which channels pair up"}},
       {{"flag", "WrongBase"}, {"stages", {"inv_freq", "cos", "sin", "q_rot", "k_rot", "scores"}},
        {"blind", ""}}});
  if (d < h) {
    m["detection"].push_back({{"flag", "PartialRotary"}, {"stages", {"inv_freq", "q_rot", "k_rot", "scores"}},
                              {"blind", "cos and sin show the frequency denominator only through the angles"}});
  }
  if (is_scaled) {
    m["detection"].push_back({{"flag", "ScalingRule"}, {"stages", {"inv_freq", "cos", "sin", "q_rot", "k_rot", "scores"}},
                              {"blind", "at position 0 every angle is 0, whatever the frequencies"}});
    m["detection"].push_back({{"flag", "AttentionFactor"}, {"stages", {"attention_factor", "cos", "sin", "q_rot", "k_rot", "scores"}},
                              {"blind", "inv_freq does not carry it"}});
    if (softmax_stage) {
      m["detection"].push_back({{"flag", "SoftmaxScale"}, {"stages", {"softmax_scale"}},
                                {"blind", "the rotation stages do not carry the softmax multiplier"}});
    }
  }
}

void RopeCaseGen::manifest_resolution() {
  if (def.resolution && !def.dense) {
    // Resolution (docs/profiles.md): at each hard position and for each applicable profile,
    // the smallest perturbation whose exactly computed output (stored in the target dtype)
    // leaves the budget of some element of cos, sin, q_rot or k_rot at that position.
    Json res = Json::object();
    std::vector<long double> inv_ld;
    for (const auto& w : o50.inv_freq) inv_ld.push_back(static_cast<long double>(w));
    const Detector det{t, a};
    const auto cos64 = to_f64(o50.cos), sin64 = to_f64(o50.sin);
    const auto qr64 = to_f64(o50.q_rot);
    for (const auto& prof : profiles()) {
      const StageBudgets& b = sb[prof.name];
      if (!b.rotated.applies) continue;
      const bool angle = prof.name != "strict";
      Json rows = Json::array();
      for (std::int64_t tt = 0; tt < tn; ++tt) {
        TokenElements el;
        const double eps_t = dtype_eps(t);
        for (int i = 0; i < np; ++i) {
          const double ang = angle ? a * pe[prof.name].angle[tt * np + i] : 0.0;
          for (int kind = 0; kind < 2; ++kind) {
            const double y = kind == 0 ? cos64[tt * np + i] : sin64[tt * np + i];
            el.exact.push_back(y);
            el.budget.push_back(b.table.bound * eps_t * a + b.table.ulps * dtype_ulp(t, y) + ang);
            el.kind.push_back(kind);
            el.pair.push_back(i);
            el.xa.push_back(0);
            el.xb.push_back(0);
          }
        }
        // Head 0 of q: every rotated stage sees the same angles.
        const std::size_t off = static_cast<std::size_t>(tt * hq * h);
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
          for (int kind = 2; kind < 4; ++kind) {
            const std::size_t j = off + (kind == 2 ? ca : cb);
            const double ang = angle ? qs.cond[j] * pe[prof.name].angle[tt * np + i] : 0.0;
            el.exact.push_back(qr64[j]);
            el.budget.push_back(b.rotated.bound * eps_t * qs.cond[j] + b.rotated.ulps * dtype_ulp(t, qr64[j]) + ang);
            el.kind.push_back(kind);
            el.pair.push_back(i);
            el.xa.push_back(q[off + ca]);
            el.xb.push_back(q[off + cb]);
          }
        }
        std::optional<std::int64_t> min_offset;
        for (std::int64_t o = 1; o <= 4096; ++o) {
          if (det.fails(el, pos[tt], static_cast<long double>(o), inv_ld)) {
            min_offset = o;
            break;
          }
        }
        auto scaled_inv = [&](auto f) {
          std::vector<long double> v(inv_ld.size());
          for (int i = 0; i < np; ++i) v[i] = f(i);
          return v;
        };
        const auto base_eps = smallest_failing([&](double e) {
          return det.fails(el, pos[tt], 0, scaled_inv([&](int i) {
            return inv_ld[i] * std::pow(1.0L + e, -2.0L * i / d);
          }));
        });
        const auto inv_eps = smallest_failing([&](double e) {
          return det.fails(el, pos[tt], 0, scaled_inv([&](int i) { return inv_ld[i] * (1.0L + e); }));
        });
        rows.push_back({{"position", pos[tt]},
                        {"min_offset", min_offset ? Json(*min_offset) : Json(nullptr)},
                        {"min_base_rel_error", sig2(base_eps)},
                        {"min_inv_freq_rel_error", sig2(inv_eps)}});
      }
      res[prof.name] = rows;
    }
    m["resolution"] = {
        {"what", "per profile and hard position: the smallest position offset (1..4096), "
                 "relative error of base, and relative error of every inv_freq entry whose "
                 "exactly computed cos, sin or q_rot (head 0; stored in the target dtype) leaves "
                 "the profile's budget at that position; null = none up to 4096 or 1.0"},
        {"profiles", res}};
  }
}

}  // namespace

GoldenCase rope_case_generate(const RopeCaseDef& def) {
  if (def.sweep_lazy) {  // the chunk's positions, as level2_chunks would have listed them
    RopeCaseDef d = def;
    d.sweep_lazy = false;
    d.sweep_list = nullptr;
    std::vector<HardPosition> hp;
    hp.reserve(def.sweep_end - def.sweep_begin + def.positions.size());
    for (std::size_t j = def.sweep_begin; j < def.sweep_end; ++j) {
      hp.push_back({def.sweep_list ? (*def.sweep_list)[j] : static_cast<std::int64_t>(j), kSweepWhy});
    }
    hp.insert(hp.end(), def.positions.begin(), def.positions.end());
    d.positions = std::move(hp);
    return rope_case_generate(d);
  }
  RopeCaseGen c{def};
  c.build_inputs();
  c.run_oracle();
  c.run_alternatives();
  c.pipeline_budgets();
  c.condition_scales();
  c.stream_scores();
  c.build_tensors();
  c.manifest_describe();
  c.manifest_scaling();
  c.manifest_tables();
  c.manifest_detection();
  c.manifest_resolution();
  manifest_add_tensors(c.m, def.id, c.inputs, c.expected);
  c.g.manifest = std::move(c.m);
  c.g.tensors = std::move(c.tensors);
  return std::move(c.g);
}

// ---- the built-in engine: posenc's kernels and the emulated pipelines, through files ---------

namespace {

const std::vector<std::string>& plain_mistakes() {
  static const std::vector<std::string> v = {"pairing", "offset", "double-rotation", "sin-sign"};
  return v;
}
const std::vector<std::string>& scaling_mistakes() {
  static const std::vector<std::string> v = {"unscaled",
                                             "factor-inverted",
                                             "no-mscale",
                                             "softmax-scale-missing",
                                             "softmax-scale-unsquared",
                                             "mscale-on-rotation",
                                             "dynamic-ntk",
                                             "yarn-truncate-flipped",
                                             "kq-scale-log-mul-not-undone",
                                             "kq-scale-log-mul-twice",
                                             "rope-mscale-not-cancelled"};
  return v;
}

}  // namespace

namespace {
/// The kernel's tables in tb: a float pipeline that is not one (mutant
/// engine_rope_pipeline_exact_tables).
RopePipelineTables kernel_tables(RopePipelineTables tb, const RopeParams& p, const RopeScaling& s,
                                 const std::vector<std::int64_t>& pos) {
  const auto c = optimized::rope_scaling_cache_init(p, s, pos);
  tb.inv_freq.assign(c.inv_freq.begin(), c.inv_freq.end());
  tb.cos = c.cos_f32;
  tb.sin = c.sin_f32;
  return tb;
}
}  // namespace

RopePipelineTables rope_pipeline_tables(const std::string& pipeline, const RopeParams& p, const RopeScaling& s,
                                        int softmax_head_dim, const std::vector<std::int64_t>& pos,
                                        const RopeMagnitude& magnitude) {
  const int np = p.rotary_dim / 2;
  RopePipelineTables tb;
  tb.cos.resize(pos.size() * np);
  tb.sin.resize(pos.size() * np);
  // The factors as Python / the converter computes them: double, then float32.
  const auto st = reference::rope_scaling_tables<double>(p, s);
  const double a_double = magnitude.a.value_or(st.tables.attention_factor);
  const double softmax_double = std::pow(static_cast<double>(softmax_head_dim), -0.5) *
                                magnitude.softmax_multiplier.value_or(st.softmax_scale_multiplier);
  if (pipeline == "fp32-recurrence") {  // ggml: theta *= theta_scale along the pairs
    if (!scaled(s)) {
      const float ts = pipelines::ggml_theta_scale(p.base, p.rotary_dim);
      tb.inv_freq = pipelines::ggml_thetas(1, ts, np);
    } else {
      tb.inv_freq = pipelines::ggml_scaled_thetas<float>(p, s, 1);
    }
    tb.a = scaled(s) ? pipelines::ggml_attention_factor<float>(s, a_double) : static_cast<float>(p.attention_factor);
    tb.softmax = pipelines::ggml_softmax_scale<float>(s, softmax_head_dim);
    if (magnitude.a) tb.a = static_cast<float>(*magnitude.a);
    if (magnitude.softmax_multiplier) tb.softmax = static_cast<float>(softmax_double);
    const float ts = pipelines::ggml_theta_scale(p.base, p.rotary_dim);
    for (std::size_t t = 0; t < pos.size(); ++t) {
      const auto th = scaled(s) ? pipelines::ggml_scaled_thetas<float>(p, s, pos[t]) : pipelines::ggml_thetas(pos[t], ts, np);
      for (int i = 0; i < np; ++i) {
        tb.cos[t * np + i] = std::cos(th[i]) * tb.a;
        tb.sin[t * np + i] = std::sin(th[i]) * tb.a;
      }
    }
    return tb;
  }
  // fp32, bf16, f16: HF's float32 inv_freq, angle and cos/sin (autocast off), then * fl(a)
  const bool rescaled = scaled(s) && !POSENC_MUTANT("engine_scaled_rope_pipeline_unscaled");
  tb.inv_freq = rescaled ? pipelines::hf_scaled_inv_freq<float>(p, s)
                         : pipelines::hf_inv_freq(p.base, p.rotary_dim);
  tb.a = static_cast<float>(scaled(s) || magnitude.a ? a_double : p.attention_factor);
  tb.softmax = static_cast<float>(softmax_double);
  if (POSENC_MUTANT("engine_rope_pipeline_exact_tables")) return kernel_tables(tb, p, s, pos);
  for (std::size_t t = 0; t < pos.size(); ++t) {
    const float pf = static_cast<float>(pos[t]);
    for (int i = 0; i < np; ++i) {
      const float phi = pf * tb.inv_freq[i];
      tb.cos[t * np + i] = std::cos(phi) * tb.a;
      tb.sin[t * np + i] = std::sin(phi) * tb.a;
    }
  }
  return tb;
}

RopeAngleErrors rope_pipeline_angle_errors(const std::string& profile, const RopeParams& p,
                                           const RopeScaling& s, const std::vector<std::int64_t>& pos) {
  const int np = p.rotary_dim / 2;
  RopeAngleErrors r;
  if (profile == "strict") {
    r.angle.assign(pos.size() * np, 0.0);
    return r;
  }
  const auto st = reference::rope_scaling_tables<mp50>(p, s);
  const auto inv64 = to_f64(st.tables.inv_freq);
  const double a = round_to_f64(st.tables.attention_factor);
  std::vector<double> phi, phi_signed;
  for (std::int64_t m : pos) {
    for (int i = 0; i < np; ++i) {
      const mp50 x = mp50(m) * st.tables.inv_freq[i];
      phi.push_back(static_cast<double>(abs(x)));
      phi_signed.push_back(round_to_f64(x));
    }
  }
  const PipelineErrors e = scaled(s) ? scaled_errors(profile, p, s, pos, phi_signed, inv64, a, 1.0, p.head_dim)
                                     : plain_errors(profile, p, pos, phi, inv64);
  r.angle = e.angle;
  r.A = e.A;
  r.a = a;
  return r;
}

std::vector<std::string> rope_case_mistakes() {
  std::vector<std::string> v = plain_mistakes();
  v.insert(v.end(), scaling_mistakes().begin(), scaling_mistakes().end());
  return v;
}

namespace {

/// One run of the built-in engine on a RoPE case: the case as read (and as the mistake changes
/// it), the engine's tables and rotations. rope_case_run_engine runs the stages in order.
struct RopeEngineRun {
  const CaseSpec& spec;
  const TensorMap& golden;
  const EngineOptions& o;
  RopeParams p;
  RopeScaling s;
  int hq = 0, hk = 0;  // hk 0: q only
  bool is_scaled = false;
  int softmax_head_dim = 0;
  DType t = DType::kF32;
  std::vector<std::int64_t> pos;
  std::int64_t tn = 0;
  int np = 0, h = 0;
  std::vector<float> q, k, qr, kr;
  std::vector<float> inv, cos_t, sin_t;
  float a_out = 1.0f, softmax_out = 0.0f;

  // Reads the params (and scaling rule) from the manifest; checks the mistake and the pipeline.
  void read_params();
  // Reads the positions and q, k; applies the mistakes that change the positions or the rule.
  void read_inputs();
  // The tables and rotations of the exact pipeline (posenc's kernel) or of an emulated one.
  void rotate_qk();
  // The magnitude mistakes: the attention factor a and the softmax-scale multiplier an engine
  // applies instead of the rule's (unchanged without such a mistake).
  void magnitude(double& a, double& multiplier) const;
  // An emulated pipeline's tables and rotations (with the mistake: they run on every pipeline).
  void rotate_qk_pipeline();
  // The engine's tensors, with the scores of its rotations.
  TensorMap outputs() const;

  // Whether the case has an expected tensor of this name.
  bool expects(const char* name) const {
    return std::any_of(spec.expected.begin(), spec.expected.end(),
                       [&](const TensorSpec& x) { return x.name == name; });
  }
};

void RopeEngineRun::read_params() {
  const Json& pj = spec.manifest.at("params");
  p.head_dim = pj.at("head_dim").get<int>();
  p.rotary_dim = pj.at("rotary_dim").get<int>();
  p.base = pj.at("base").get<double>();
  p.layout = pj.at("layout").get<std::string>() == "interleaved" ? RopeLayout::kInterleaved
                                                                 : RopeLayout::kHalfSplit;
  p.attention_factor = pj.at("attention_factor").get<double>();
  hq = pj.at("n_q_heads").get<int>();
  hk = pj.at("n_kv_heads").get<int>();
  is_scaled = pj.contains("scaling");
  s = is_scaled ? rope_scaling_from_json(pj.at("scaling")) : RopeScaling{};
  softmax_head_dim = pj.value("softmax_head_dim", p.head_dim);
  std::vector<std::string> mk = plain_mistakes();
  if (is_scaled) mk.insert(mk.end(), scaling_mistakes().begin(), scaling_mistakes().end());
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    std::string known;
    for (const auto& x : mk) known += (known.empty() ? "" : ", ") + x;
    throw_invalid("rope_run_engine", o.mistake == "fp32-angles"
                                         ? "fp32-angles is a pipeline now: use --pipeline fp32"
                                         : "unknown mistake for a " + spec.scheme + " case (known: " + known + ")",
                  o.mistake);
  }
  t = golden.at("q").dtype;
  if (const auto why = pipelines::dtype_mismatch(o.pipeline, t); !why.empty()) {
    throw_invalid("rope_run_engine", why, o.pipeline);
  }
}

void RopeEngineRun::read_inputs() {
  const Tensor& tpos = golden.at("positions");
  pos.resize(static_cast<std::size_t>(tpos.numel()));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = tpos.get_i64(static_cast<std::int64_t>(i));
  if (o.mistake == "offset") {
    for (auto& m : pos) m += 1;
  }
  if (o.mistake == "pairing") {
    p.layout = p.layout == RopeLayout::kInterleaved ? RopeLayout::kHalfSplit
                                                    : RopeLayout::kInterleaved;
  }
  // The call's seq_len, as HF reads it: max(position_ids) + 1.
  std::int64_t last = 0;
  for (auto m : pos) last = std::max(last, m);
  s.seq_len = last + 1;
  if (o.mistake == "unscaled") s = RopeScaling{};
  if (o.mistake == "factor-inverted") s.factor = 1.0 / s.factor;
  // YaRN's correction range with the other `truncate` (integer ramp ends <-> fractional).
  if (o.mistake == "yarn-truncate-flipped" && s.type == reference::RopeScalingType::kYarn)
    s.truncate = !s.truncate;
  // Static NTK on a dynamic case: the base scaled by the factor whatever the call's length.
  if (o.mistake == "dynamic-ntk" && s.type == reference::RopeScalingType::kDynamic) {
    s.type = reference::RopeScalingType::kNtk;
  }
  tn = static_cast<std::int64_t>(pos.size());
  np = p.rotary_dim / 2;
  h = p.head_dim;
  q = tensor_to_f32(golden.at("q"));
  k = hk > 0 ? tensor_to_f32(golden.at("k")) : std::vector<float>();
  qr.resize(q.size());
  kr.resize(k.size());
}

void RopeEngineRun::rotate_qk() {
  if (o.pipeline == "exact") {
    // Plain RoPE: the kernel's own tables; scaled: the rule's tables through the kernel's hook.
    optimized::RopeScaledTablesF64 st;
    st.attention_factor = p.attention_factor;
    if (is_scaled) st = optimized::rope_scaling_tables(p, s);
    magnitude(st.attention_factor, st.softmax_scale_multiplier);
    optimized::RopeCache cache = is_scaled ? optimized::rope_cache_init(p, pos, st.inv_freq, st.attention_factor)
                                           : optimized::rope_cache_init(p, pos);
    if (o.mistake == "sin-sign") {
      for (auto& x : cache.sin_f32) x = -x;
    }
    const optimized::RopeShape qs{tn, hq, optimized::RopeTensorLayout::kTokensHeadsDim};
    const optimized::RopeShape ks{tn, hk, optimized::RopeTensorLayout::kTokensHeadsDim};
    optimized::rope_apply_qk(p, cache, qs, q, qr, ks, k, kr);
    if (o.mistake == "double-rotation") optimized::rope_apply_qk(p, cache, qs, qr, qr, ks, kr, kr);
    inv.assign(cache.inv_freq.begin(), cache.inv_freq.end());
    cos_t = cache.cos_f32;
    sin_t = cache.sin_f32;
    a_out = static_cast<float>(st.attention_factor);
    softmax_out = static_cast<float>(std::pow(static_cast<double>(softmax_head_dim), -0.5) * st.softmax_scale_multiplier);
  } else {
    rotate_qk_pipeline();
  }
}

void RopeEngineRun::magnitude(double& a, double& multiplier) const {
  if (o.mistake == "no-mscale") {  // the rule's magnitude left out: cos/sin factor and MLA multiplier
    a = 1.0;
    multiplier = 1.0;
  } else if (o.mistake == "softmax-scale-missing") {  // DeepSeek MLA's m^2 left out of the softmax
    multiplier = 1.0;
  } else if (o.mistake == "softmax-scale-unsquared") {  // m instead of m^2
    multiplier = std::sqrt(multiplier);
  } else if (o.mistake == "mscale-on-rotation") {  // m on cos and sin (q and k) instead of m^2 on the softmax
    a *= std::sqrt(multiplier);
    multiplier = 1.0;
  }
  // llama.cpp's DeepSeek kq_scale conventions (docs/schemes/rope_scaling.md): kq_scale =
  // mscale^2 / sqrt(d), mscale = 1 + 0.1 L ln s with L the loaded rope_yarn_log_mul.
  if (!s.mla || s.mscale_all_dim == 0 || !(s.factor > 1)) return;
  const double ln_s = std::log(s.factor);
  auto sq = [](double x) { return x * x; };
  if (o.mistake == "kq-scale-log-mul-not-undone") {  // the GGUF's 0.1 mscale_all_dim, not divided
    multiplier = sq(1 + 0.1 * (0.1 * s.mscale_all_dim) * ln_s);
  } else if (o.mistake ==
             "kq-scale-log-mul-twice") {  // ik_llama.cpp's formula on the divided value
    multiplier = sq(1 + s.mscale_all_dim * ln_s);
  } else if (o.mistake ==
             "rope-mscale-not-cancelled") {  // ggml's internal 1 + 0.1 ln s left on q, k
    a *= 1 + 0.1 * ln_s;
  }
}

void RopeEngineRun::rotate_qk_pipeline() {
  RopeMagnitude mag;
  if (!o.mistake.empty()) {
    const auto st = reference::rope_scaling_tables<double>(p, s);
    double a = is_scaled ? st.tables.attention_factor : p.attention_factor;
    double mult = st.softmax_scale_multiplier;
    magnitude(a, mult);
    if (a != (is_scaled ? st.tables.attention_factor : p.attention_factor)) mag.a = a;
    if (mult != st.softmax_scale_multiplier) mag.softmax_multiplier = mult;
  }
  const RopePipelineTables tb = rope_pipeline_tables(o.pipeline, p, s, softmax_head_dim, pos, mag);
  inv = tb.inv_freq;
  cos_t = tb.cos;
  sin_t = tb.sin;
  if (o.mistake == "sin-sign") {
    for (auto& x : sin_t) x = -x;
  }
  a_out = tb.a;
  softmax_out = tb.softmax;
  // Eager pipelines multiply and add in their compute dtype: q and the cast tables.
  const DType c = pipelines::compute_dtype(o.pipeline);
  for (auto& v : cos_t) v = pipelines::fl(v, c);
  for (auto& v : sin_t) v = pipelines::fl(v, c);
  auto rotate = [&](const std::vector<float>& x, int heads, std::vector<float>& y) {
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t off = static_cast<std::size_t>((tt * heads + hh) * h);
        for (int cc = p.rotary_dim; cc < h; ++cc) y[off + cc] = x[off + cc];
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
          const float cs = cos_t[tt * np + i], sn = sin_t[tt * np + i];
          const float xa = x[off + ca], xb = x[off + cb];
          // HF: q * cos + rotate_half(q) * sin, each operation rounded
          y[off + ca] = pipelines::fl(pipelines::fl(xa * cs, c) + pipelines::fl(-xb * sn, c), c);
          y[off + cb] = pipelines::fl(pipelines::fl(xb * cs, c) + pipelines::fl(xa * sn, c), c);
        }
      }
    }
  };
  rotate(q, hq, qr);
  rotate(k, hk, kr);
  if (o.mistake == "double-rotation") {
    const std::vector<float> q1 = qr, k1 = kr;
    rotate(q1, hq, qr);
    rotate(k1, hk, kr);
  }
}

TensorMap RopeEngineRun::outputs() const {
  const bool with_scores = expects("scores");
  TensorMap out;
  auto put = [&](Tensor x) {
    std::string n = x.name;
    out.emplace(n, std::move(x));
  };
  put(engine_tensor("inv_freq", DType::kF32, {np}, inv));
  if (expects("attention_factor")) put(engine_tensor("attention_factor", DType::kF32, {1}, {a_out}));
  if (expects("softmax_scale")) put(engine_tensor("softmax_scale", DType::kF32, {1}, {softmax_out}));
  put(engine_tensor("cos", t, {tn, np}, cos_t));
  put(engine_tensor("sin", t, {tn, np}, sin_t));
  put(engine_tensor("q_rot", t, {tn, hq, h}, qr));
  if (hk > 0) put(engine_tensor("k_rot", t, {tn, hk, h}, kr));
  if (with_scores) {
    std::vector<float> scores;
    const int group = hq / hk;
    const DType c = pipelines::compute_dtype(o.pipeline);
    const DType qk = pipelines::score_operand_dtype(o.pipeline, t);  // llama.cpp: the KV-cache dtype
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < tn; ++i) {
        for (std::int64_t j = 0; j < tn; ++j) {
          const float* x = &qr[(i * hq + hh) * h];
          const float* y = &kr[(j * hk + hh / group) * h];
          if (o.pipeline == "exact") {  // posenc: an accurate dot product of the float rows
            double sum = 0;
            for (int cc = 0; cc < h; ++cc) sum += static_cast<double>(x[cc]) * y[cc];
            scores.push_back(static_cast<float>(sum));
          } else {  // a float32 matmul (sequential sum) of q and k as held, output in the compute dtype
            float sum = 0;
            for (int cc = 0; cc < h; ++cc) sum += pipelines::fl(x[cc], qk) * pipelines::fl(y[cc], qk);
            scores.push_back(pipelines::fl(sum, c));
          }
        }
      }
    }
    put(engine_tensor("scores", t, {hq, tn, tn}, scores));
  }
  return out;
}

}  // namespace

TensorMap rope_case_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  RopeEngineRun r{spec, golden, o};
  r.read_params();
  r.read_inputs();
  r.rotate_qk();
  return r.outputs();
}

}  // namespace posenc::golden
