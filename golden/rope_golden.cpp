// Golden cases for RoPE. Formula: see reference/rope.hpp.
//
// Level 1 (committed): real-model presets (spec/schemes.md section 10.1) x target dtypes
// {f32, bf16, f16}, one token per hard position (DESIGN.md), stages:
//   inv_freq [d/2]            table, f32, ulp check
//   cos, sin [T, d/2]         table, target dtype, conditioned (c = a), attention factor folded in
//   q_rot [T, Hq, h], k_rot [T, Hk, h]   rotated, conditioned (c = a (|x_a| + |x_b|); tail c = 0:
//                             tail channels must be bit-identical copies)
//   scores [Hq, T, T]         unscaled q_rot . k_rot, kv head = q head / (Hq / Hk), conditioned
// plus one dense case per preset family (f32, every position 0..511 and the hard positions
// above, one q and one k head, no scores) that locates a pipeline's first failing position.
// Expected values: mp50 oracle, rounded once to the target dtype; mp100 must round the same.
// Every case also records, per profile and hard position, the smallest position offset, base
// error and inv_freq error that its budgets still detect ("resolution", computed below).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/cases/budgets.hpp"
#include "golden/cases/hard_positions.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/prng.hpp"
#include "optimized/rope.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/rope.hpp"

namespace posenc::golden {
namespace {

using reference::RopeLayout;
using reference::RopeParams;
using Json = nlohmann::json;
namespace bud = budgets;

struct RopePreset {
  std::string name;      // preset id, as in spec/presets.json where it exists there
  std::string short_id;  // used in the case id
  std::string hf_model;
  std::string source;    // where the config values were read (spec/schemes.md section 10.1)
  RopeParams params;
  int n_q_heads = 2, n_kv_heads = 1;
  Json config;           // the HF config keys that determine RoPE, verbatim
  bool dense = false;    // this preset stands for its family in a dense-positions case
};

std::vector<RopePreset> rope_presets() {
  auto half = [](int h, int r, double b) {
    return RopeParams{h, r, b, RopeLayout::kHalfSplit, 1.0};
  };
  std::vector<RopePreset> v;
  v.push_back({"llama-2-7b", "llama2_7b", "meta-llama/Llama-2-7b-hf",
               "spec/schemes.md 10.1 (philschmid/Llama-2-7b-hf config)", half(128, 128, 10000.0),
               2, 2,
               Json{{"hidden_size", 4096}, {"num_attention_heads", 32},
                    {"num_key_value_heads", 32}, {"rope_theta", 10000.0},
                    {"max_position_embeddings", 4096}, {"rope_scaling", nullptr}},
               true});
  RopePreset meta = v.back();
  meta.name = "llama-2-7b-meta";
  meta.short_id = "llama2_7b_meta";
  meta.hf_model = "meta-llama/Llama-2-7b (Meta checkpoint, complex view)";
  meta.source = "spec/schemes.md 1.3 (Meta apply_rotary_emb: interleaved pairs)";
  meta.params.layout = RopeLayout::kInterleaved;
  meta.config = Json{{"dim", 4096}, {"n_heads", 32}, {"rope_theta", 10000.0}};
  meta.dense = false;  // the same angles as llama-2-7b
  v.push_back(meta);
  v.push_back({"llama-3-8b", "llama3_8b", "meta-llama/Meta-Llama-3-8B",
               "spec/schemes.md 10.1 (zakkosi/jhcode-meta-llama3_eng config)",
               half(128, 128, 500000.0), 2, 1,
               Json{{"hidden_size", 4096}, {"num_attention_heads", 32},
                    {"num_key_value_heads", 8}, {"rope_theta", 500000.0},
                    {"max_position_embeddings", 8192}, {"rope_scaling", nullptr}},
               true});
  v.push_back({"gpt-j-6b", "gptj_6b", "EleutherAI/gpt-j-6B",
               "spec/schemes.md 10.1 and 1.6 (base hard-coded 10000)",
               RopeParams{256, 64, 10000.0, RopeLayout::kInterleaved, 1.0}, 2, 2,
               Json{{"n_embd", 4096}, {"n_head", 16}, {"rotary_dim", 64}, {"n_positions", 2048}},
               true});
  v.push_back({"gpt-neox-20b", "neox_20b", "EleutherAI/gpt-neox-20b",
               "spec/schemes.md 10.1 (Dahoas/gptneox-sft-static config)", half(96, 24, 10000.0),
               2, 2,
               Json{{"hidden_size", 6144}, {"num_attention_heads", 64}, {"rotary_pct", 0.25},
                    {"rotary_emb_base", 10000}, {"max_position_embeddings", 2048}},
               true});
  v.push_back({"qwen2-7b", "qwen2_7b", "Qwen/Qwen2-7B", "spec/schemes.md 10.1 (official config)",
               half(128, 128, 1000000.0), 2, 1,
               Json{{"hidden_size", 3584}, {"num_attention_heads", 28},
                    {"num_key_value_heads", 4}, {"rope_theta", 1000000.0},
                    {"max_position_embeddings", 131072}},
               true});
  v.push_back({"codellama-7b-hf", "codellama_7b", "codellama/CodeLlama-7b-hf",
               "spec/schemes.md 10.1 (loubnabnl/CodeLlama-7b-hf config)",
               half(128, 128, 1000000.0), 2, 2,
               Json{{"hidden_size", 4096}, {"num_attention_heads", 32},
                    {"num_key_value_heads", 32}, {"rope_theta", 1000000},
                    {"max_position_embeddings", 16384}, {"rope_scaling", nullptr}},
               false});  // the same angles as qwen2-7b
  return v;
}

std::string base_tag(double base) {
  const int e = static_cast<int>(std::floor(std::log10(base)));
  const double mant = base / std::pow(10.0, e);
  if (std::fabs(mant - std::round(mant)) < 1e-12) {
    return std::to_string(static_cast<int>(std::round(mant))) + "e" + std::to_string(e);
  }
  return std::to_string(static_cast<long long>(base));
}

constexpr int kDenseLast = 511;  // dense cases hold every position 0..kDenseLast

std::string case_id(const RopePreset& p, DType t, bool dense) {
  std::string id = "rope_";
  id += p.params.layout == RopeLayout::kInterleaved ? "inter" : "half";
  id += "_d" + std::to_string(p.params.head_dim);
  if (p.params.rotary_dim != p.params.head_dim) id += "_r" + std::to_string(p.params.rotary_dim);
  id += "_b" + base_tag(p.params.base) + "_" + p.short_id;
  if (dense) id += "_dense" + std::to_string(kDenseLast + 1);
  return id + "_" + std::string(dtype_short(t));
}

/// One exactly representable input value: an integer times a power of two, drawn from the
/// counter-based PRNG. bf16 carries 8 significant bits, f16 11, f32 24.
double input_value(DType t, std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 255)), -8);
  if (t == DType::kF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 2047)), -11);
  return std::ldexp(static_cast<double>(prng_int(seed, stream, i, (1 << 24) - 1)), -24);
}

struct RopeCaseDef {
  RopePreset preset;
  DType dtype;
  std::string id;
  std::uint64_t seed;
  bool dense = false;
};

std::vector<RopeCaseDef> rope_case_table() {
  std::vector<RopeCaseDef> v;
  std::uint64_t seed = 0x9e3779b9;
  for (const auto& p : rope_presets()) {
    for (DType t : {DType::kF32, DType::kBF16}) v.push_back({p, t, case_id(p, t, false), seed++});
  }
  // Later additions get later seeds, so the earlier cases keep their inputs.
  for (const auto& p : rope_presets()) {
    v.push_back({p, DType::kF16, case_id(p, DType::kF16, false), seed++});
  }
  for (const auto& p : rope_presets()) {
    if (!p.dense) continue;
    RopeCaseDef c{p, DType::kF32, case_id(p, DType::kF32, true), seed++, true};
    c.preset.n_q_heads = 1;
    c.preset.n_kv_heads = 0;  // q only: k would rotate the same angles again
    v.push_back(c);
  }
  return v;
}

/// Positions of a case: the hard positions, or 0..kDenseLast followed by the hard positions
/// above kDenseLast.
std::vector<HardPosition> case_positions(bool dense) {
  if (!dense) return hard_positions();
  std::vector<HardPosition> v;
  for (std::int64_t m = 0; m <= kDenseLast; ++m) {
    v.push_back({m, m < 2 ? hard_positions()[m].why : "dense low positions: every position 0..511"});
  }
  for (const auto& hp : hard_positions()) {
    if (hp.m > kDenseLast) v.push_back(hp);
  }
  return v;
}

/// Everything the oracle computes for a case, in one precision.
template <class Real>
struct RopeOracle {
  std::vector<Real> inv_freq, cos, sin, q_rot, k_rot, scores;
};

template <class Real>
RopeOracle<Real> rope_oracle(const RopeParams& p, const std::vector<std::int64_t>& pos, int hq,
                             int hk, const std::vector<double>& q, const std::vector<double>& k,
                             bool scores) {
  using std::cos;
  using std::sin;
  RopeOracle<Real> o;
  const auto tables = reference::rope_tables<Real>(p);
  o.inv_freq = tables.inv_freq;
  const int h = p.head_dim, np = p.rotary_dim / 2;
  const std::size_t t_n = pos.size();
  for (std::size_t t = 0; t < t_n; ++t) {
    for (int i = 0; i < np; ++i) {
      const Real phi = reference::rope_angle(tables, pos[t], i);
      o.cos.push_back(tables.attention_factor * cos(phi));
      o.sin.push_back(tables.attention_factor * sin(phi));
    }
  }
  // The rotation of reference::rope_apply, y_a = x_a (a cos) - x_b (a sin), y_b = x_a (a sin) +
  // x_b (a cos), with the table values just computed: the same operations on the same angle,
  // without evaluating every cos and sin once more per head.
  auto rotate = [&](const std::vector<double>& x, int heads, std::vector<Real>& out) {
    for (std::size_t t = 0; t < t_n; ++t) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t off = (t * heads + hh) * h;
        std::vector<Real> y(x.begin() + off, x.begin() + off + h);
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
          const Real& c = o.cos[t * np + i];
          const Real& s = o.sin[t * np + i];
          const Real xa = Real(x[off + ca]), xb = Real(x[off + cb]);
          y[ca] = xa * c - xb * s;
          y[cb] = xa * s + xb * c;
        }
        out.insert(out.end(), y.begin(), y.end());
      }
    }
  };
  rotate(q, hq, o.q_rot);
  rotate(k, hk, o.k_rot);
  if (!scores) return o;
  const int group = hq / hk;
  for (int hh = 0; hh < hq; ++hh) {
    for (std::size_t i = 0; i < t_n; ++i) {
      for (std::size_t j = 0; j < t_n; ++j) {
        Real s = 0;
        for (int c = 0; c < h; ++c) {
          s += o.q_rot[(i * hq + hh) * h + c] * o.k_rot[(j * hk + hh / group) * h + c];
        }
        o.scores.push_back(s);
      }
    }
  }
  return o;
}

// ---- budgets: the error analysis of each profile's pipeline (README "Profiles") ------------
//
// Symbols: t = target dtype, eps_t its machine epsilon, r = eps_f32 / eps_t, u = 2^-24,
// a = attention factor, A = 0.5 when a != 1 (one more float32 multiply), else 0, h = head_dim,
// phi = p * theta_i the exact angle of position p and pair i, c = the element's condition scale.
// Budget (golden/format/manifest.hpp): bound * eps_t * c + ulps * ulp_t(y*) + extra.
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
// fp32 (HF, Meta, vLLM): inv_freq = 1/powf(base, fl(2i)/fl(d)) (budgets.hpp enumerates every
//   faithful powf: its worst relative error delta_i, exact), phi^ = fl(fl(p) inv_freq):
//   |phi^ - phi| <= ((1 + rho_p)(1 + delta_i)(1 + u) - 1) |phi| = eps_i |phi| (rho_p: the
//   position's float32 conversion error, 0 up to 2^24); cosf/sinf within 2 ulp (CUDA).
//     inv_freq  extra delta_i inv_freq_i (bound 0)
//     cos, sin  bound (1 + A) r (2 ulp of |cos| < 1 is <= eps_f32), ulps = the cast (0.5 for
//               16-bit), extra a eps_i |phi|
//     rotated   bound (1.5 + A) r (tables + products), ulps 0.5 (+ 0.5 r when cast), extra
//               c eps_i |phi| (the chord of an angle error is shorter than its arc)
//     scores    R = (2 + A) eps_f32: bound (2 sqrt(2)(2 + A) + h/2) r, ulps the cast, extra
//               sum_i w_i (eps_i |phi_q,i| + eps_i |phi_k,i|), w_i = a^2 (|q_a|+|q_b|)(|k_a|+|k_b|)
// fp32-recurrence (ggml): theta_0 = fl(p), theta_i = fl(theta_{i-1} ts), ts = powf(base,
//   -2.0f/d) with worst relative error delta_ts (enumerated): |theta^_i - phi_i| <=
//   ((1 + rho_p)(1 + delta_ts)^i (1 + u)^i - 1) |phi_i|. Same bounds as fp32 with this eps_i;
//   inv_freq (an engine that reports ts^i built by the same recurrence) extra
//   ((1 + delta_ts)^i (1 + u)^i - 1) inv_freq_i.
// bf16, f16 (PyTorch eager in t): float32 tables as in fp32, cast to t; q*cos, rotate_half(q)
//   *sin and their sum each rounded to t; q_rot . k_rot accumulated in float32, rounded to t.
//     inv_freq, cos, sin   as fp32 (tables are float32, then cast)
//     rotated   tables (0.5 + (1 + A) r) eps_t a |x| + products 0.5 eps_t c: bound 1 + (1 + A) r,
//               ulps 0.5 (the sum), extra as fp32
//     scores    R = (1.5 + (1 + A) r) eps_t: bound 2 sqrt(2) R + (h/2) r, ulps 0.5, extra as fp32
// Every bound and extra gets 1% for the second-order terms the sums above leave out.
// Measured tightness (each pipeline emulated in float, `posenc engine --pipeline`): README.

constexpr double kSecondOrder = 1.01;

/// Mutant gold_rope_budgets_inflated: every budget 8x (the tightness test must notice).
double inflation() { return POSENC_MUTANT("gold_rope_budgets_inflated") ? 8.0 : 1.0; }

struct StageBudgets {
  ProfileBudget inv_freq, table, rotated, scores;
};

/// The budgets of one profile for a case of target t (extras are filled per element later).
StageBudgets rope_stage_budgets_derived(const std::string& profile, DType t, double a, int h);

StageBudgets rope_stage_budgets(const std::string& profile, DType t, double a, int h) {
  StageBudgets b = rope_stage_budgets_derived(profile, t, a, h);
  for (ProfileBudget* x : {&b.inv_freq, &b.table, &b.rotated, &b.scores}) {
    x->bound *= inflation();
    x->ulps *= inflation();
  }
  return b;
}

StageBudgets rope_stage_budgets_derived(const std::string& profile, DType t, double a, int h) {
  const double r = bud::f32_in(t);
  const double cast = bud::cast_to(t);
  const double A = a != 1.0 ? 0.5 : 0.0;
  const double sum_ulps = t == DType::kF32 ? 0.5 : 0.5 + 0.5 * r;
  const double root2x2 = 2 * std::sqrt(2.0);
  const double s = kSecondOrder;
  StageBudgets b;
  if (profile == "strict") {
    b.inv_freq = bound_of(0.5 + 0x1p-28);
    b.table = bound_of(0.05 * r, sum_ulps);
    b.rotated = bound_of((POSENC_MUTANT("gold_rope_strict_products_dropped") ? 0.55 : 1.05) * r * s, sum_ulps);
    b.scores = bound_of((root2x2 * 1.55 + h / 2.0) * r * s, cast);
    return b;
  }
  const std::string na = activation_na(profile, t);
  if (!na.empty()) {
    b.inv_freq = b.table = b.rotated = b.scores = not_applicable(na);
    return b;
  }
  b.inv_freq = bound_of(0.0);
  if (profile == "fp32" || profile == "fp32-recurrence") {
    b.table = bound_of((1 + A) * r * s, cast);
    b.rotated = bound_of((1.5 + A) * r * s, sum_ulps);
    b.scores = bound_of((root2x2 * (2 + A) + h / 2.0) * r * s, cast);
  } else {  // bf16, f16: eager in the target dtype
    b.table = bound_of((1 + A) * r * s, cast);
    b.rotated = bound_of(((POSENC_MUTANT("gold_rope_eager_products_dropped") ? 0.5 : 1.0) + (1 + A) * r) * s, 0.5);
    b.scores = bound_of((root2x2 * (1.5 + (1 + A) * r) + h / 2.0 * r) * s, 0.5);
  }
  return b;
}

/// Relative angle error bound eps_i of a pipeline at position p, pair i (0 for strict).
struct AngleModel {
  std::vector<double> hf_delta;  // fp32: worst relative error of the float32 inv_freq[i]
  double ts_delta = 0;           // fp32-recurrence: of theta_scale

  double eps(const std::string& profile, std::int64_t p, int i) const {
    const double rho = bud::position_rel_error_f32(p);
    if (profile == "fp32-recurrence") {
      if (POSENC_MUTANT("gold_rope_recurrence_pair_term_dropped")) return bud::product_rel_error(rho, 0.0);
      return bud::recurrence_rel_error(rho, ts_delta, i);
    }
    if (profile == "strict") return 0.0;
    if (POSENC_MUTANT("gold_rope_fp32_inv_freq_term_dropped")) return bud::product_rel_error(rho, 0.0);
    return bud::product_rel_error(rho, hf_delta[i]);  // fp32, bf16, f16
  }
  double inv_freq_eps(const std::string& profile, int i) const {
    if (profile == "fp32-recurrence") return bud::recurrence_rel_error(0.0, ts_delta, i);
    return hf_delta[i];
  }
};

AngleModel angle_model(const RopeParams& p) {
  AngleModel m;
  for (int i = 0; i < p.rotary_dim / 2; ++i) {
    m.hf_delta.push_back(bud::hf_inv_freq_rel_error(p.base, p.rotary_dim, i));
  }
  m.ts_delta = bud::ggml_theta_scale_rel_error(p.base, p.rotary_dim);
  return m;
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

// ---- the generator ---------------------------------------------------------------------------

GoldenCase rope_generate_def(const RopeCaseDef& def) {
  const RopeParams& p = def.preset.params;
  reference::rope_check(p, "rope_generate");
  const int h = p.head_dim, d = p.rotary_dim, np = d / 2;
  const int hq = def.preset.n_q_heads, hk = def.preset.n_kv_heads;  // hk = 0: no k (dense)
  const auto hps = case_positions(def.dense);
  std::vector<std::int64_t> pos;
  for (const auto& hp : hps) pos.push_back(hp.m);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const DType t = def.dtype;
  const bool with_scores = !def.dense;

  std::vector<double> q(static_cast<std::size_t>(tn * hq * h)), k(static_cast<std::size_t>(tn * hk * h));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = input_value(t, def.seed, 1, i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = input_value(t, def.seed, 2, i);

  const auto o50 = rope_oracle<mp50>(p, pos, hq, hk, q, k, with_scores);
  const auto o100 = rope_oracle<mp100>(p, pos, hq, hk, q, k, with_scores);
  cross_check(def.id, "inv_freq", DType::kF32, o50.inv_freq, o100.inv_freq);
  cross_check(def.id, "cos", t, o50.cos, o100.cos);
  cross_check(def.id, "sin", t, o50.sin, o100.sin);
  cross_check(def.id, "q_rot", t, o50.q_rot, o100.q_rot);
  cross_check(def.id, "k_rot", t, o50.k_rot, o100.k_rot);
  cross_check(def.id, "scores", t, o50.scores, o100.scores);

  const double a = p.attention_factor;
  const auto inv64 = to_f64(o50.inv_freq);
  std::vector<double> phi(static_cast<std::size_t>(tn * np));  // |exact angle|
  for (std::int64_t tt = 0; tt < tn; ++tt) {
    for (int i = 0; i < np; ++i) {
      phi[tt * np + i] = static_cast<double>(abs(mp50(pos[tt]) * o50.inv_freq[i]));
    }
  }
  const AngleModel am = angle_model(p);
  std::vector<std::string> angle_profiles;  // profiles with an angle extra that apply here
  std::map<std::string, StageBudgets> sb;
  for (const auto& prof : profiles()) {
    sb[prof.name] = rope_stage_budgets(prof.name, t, a, h);
    if (prof.name != "strict" && sb[prof.name].table.applies) angle_profiles.push_back(prof.name);
  }
  auto eps_at = [&](const std::string& prof, std::int64_t tt, int i) {
    return am.eps(prof, pos[tt], i) * kSecondOrder * inflation();
  };

  // inv_freq
  ExpectedTensor e_inv = expected_tensor("inv_freq", "table", DType::kF32, {np}, "ulp");
  e_inv.values = o50.inv_freq;
  std::vector<int> identity_pairs(static_cast<std::size_t>(np));
  for (int i = 0; i < np; ++i) identity_pairs[i] = i;
  e_inv.spec.axes = {{"pair", "", identity_pairs, {}}};
  for (const auto& prof : profiles()) {
    ProfileBudget b = sb[prof.name].inv_freq;
    // The f32 inv_freq of a bf16 / f16 pipeline is the fp32 one; in an f32 case the eager
    // profiles stay not applicable, as for every other stage.
    e_inv.spec.check.profiles[prof.name] = b;
    if (prof.name == "strict" || !b.applies) continue;
    std::vector<double> x(static_cast<std::size_t>(np));
    for (int i = 0; i < np; ++i) x[i] = am.inv_freq_eps(prof.name, i) * inv64[i] * kSecondOrder * inflation();
    e_inv.extra[prof.name] = x;
  }

  // cos, sin
  auto table_tensor = [&](const std::string& name, const std::vector<mp50>& values) {
    ExpectedTensor e = expected_tensor(name, "table", t, {tn, np}, "conditioned");
    e.spec.axes = {{"token", "positions", {}, {}}, {"pair", "", identity_pairs, {}}};
    e.values = values;
    e.cond.assign(static_cast<std::size_t>(tn * np), a);
    e.amp = e.cond;
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int i = 0; i < np; ++i) e.positions.push_back(pos[tt]);
    }
    for (const auto& prof : profiles()) e.spec.check.profiles[prof.name] = sb[prof.name].table;
    for (const auto& prof : angle_profiles) {
      std::vector<double> x(static_cast<std::size_t>(tn * np));
      for (std::int64_t tt = 0; tt < tn; ++tt) {
        for (int i = 0; i < np; ++i) x[tt * np + i] = a * phi[tt * np + i] * eps_at(prof, tt, i);
      }
      e.extra[prof] = x;
    }
    return e;
  };

  // q_rot, k_rot: per element cond = a (|x_a| + |x_b|) of its pair, 0 in the tail
  std::vector<int> channel_pairs(static_cast<std::size_t>(h));
  for (int c = 0; c < h; ++c) channel_pairs[c] = reference::rope_pair_of_channel(p, c);
  struct PairScales {
    std::vector<double> cond, amp;       // per element
    std::vector<double> pair_sum, pair_norm;  // per (token, head, pair): a(|xa|+|xb|), a||x||
  };
  auto pair_scales = [&](const std::vector<double>& x, int heads) {
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
  };
  const PairScales qs = pair_scales(q, hq), ks = pair_scales(k, hk);
  auto rotated_tensor = [&](const std::string& name, const std::vector<mp50>& values,
                            const PairScales& s, int heads) {
    ExpectedTensor e = expected_tensor(name, "rotated", t, {tn, heads, h}, "conditioned");
    e.spec.axes = {{"token", "positions", {}, {}}, {"head", "", {}, {}},
                   {"channel", "", channel_pairs, {}}};
    e.values = values;
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
            x[j] = s.cond[j] * phi[tt * np + i] * eps_at(prof, tt, i);
          }
        }
      }
      e.extra[prof] = x;
    }
    return e;
  };

  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  auto input_tensor = [&](const std::string& name, std::vector<std::int64_t> shape,
                          const std::vector<double>& x) {
    std::vector<mp50> mx(x.begin(), x.end());
    return target_tensor(name, t, std::move(shape), mx);  // exact: x is representable
  };
  tensors.push_back(input_tensor("q", {tn, hq, h}, q));
  if (hk > 0) tensors.push_back(input_tensor("k", {tn, hk, h}, k));
  std::vector<TensorSpec> inputs;
  for (const auto& tensor : tensors) inputs.push_back(input_spec(tensor));

  std::vector<TensorSpec> expected;
  expected.push_back(add_expected(&tensors, std::move(e_inv)));
  expected.push_back(add_expected(&tensors, table_tensor("cos", o50.cos)));
  expected.push_back(add_expected(&tensors, table_tensor("sin", o50.sin)));
  expected.push_back(add_expected(&tensors, rotated_tensor("q_rot", o50.q_rot, qs, hq)));
  if (hk > 0) expected.push_back(add_expected(&tensors, rotated_tensor("k_rot", o50.k_rot, ks, hk)));

  if (with_scores) {
    const int group = hq / hk;
    ExpectedTensor e = expected_tensor("scores", "scores", t, {hq, tn, tn}, "conditioned");
    e.spec.axes = {{"head", "", {}, {}}, {"query", "positions", {}, {}}, {"key", "positions", {}, {}}};
    e.values = o50.scores;
    for (const auto& prof : profiles()) e.spec.check.profiles[prof.name] = sb[prof.name].scores;
    std::map<std::string, std::vector<double>> extra;
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < tn; ++i) {
        for (std::int64_t j = 0; j < tn; ++j) {
          double c = 0, amp = 0;
          const std::int64_t qr = i * hq + hh, kr = j * hk + hh / group;
          std::map<std::string, double> x;
          for (int pi = 0; pi < np; ++pi) {
            const double w = qs.pair_sum[qr * np + pi] * ks.pair_sum[kr * np + pi];
            c += w;
            amp += qs.pair_norm[qr * np + pi] * ks.pair_norm[kr * np + pi];
            for (const auto& prof : angle_profiles) {
              x[prof] += w * (phi[i * np + pi] * eps_at(prof, i, pi) +
                              phi[j * np + pi] * eps_at(prof, j, pi));
            }
          }
          for (int ch = d; ch < h; ++ch) c += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
          e.cond.push_back(c);
          e.amp.push_back(amp);
          e.positions.push_back(std::max(pos[i], pos[j]));
          for (const auto& prof : angle_profiles) {
            extra[prof].push_back(POSENC_MUTANT("gold_rope_scores_extra_dropped") ? 0.0 : x[prof]);
          }
        }
      }
    }
    e.extra = std::move(extra);
    expected.push_back(add_expected(&tensors, std::move(e)));
  }

  Json m = manifest_header(def.id, "rope", reference::rope_layout_name(p.layout), "valid", 1);
  m["description"] = "RoPE, " + def.preset.name + " (" + reference::rope_layout_name(p.layout) +
                     ", head_dim " + std::to_string(h) + ", rotary_dim " + std::to_string(d) +
                     ", base " + base_tag(p.base) + "), target " +
                     std::string(dtype_short(t)) +
                     (def.dense ? ", every position 0..511 and the hard positions above, one q "
                                  "head (no k, no scores)"
                                : ", one token per hard position");
  m["citation"] = "J. Su et al., RoFormer, arXiv:2104.09864v5, Sec. 3.2.2 and 3.4.2";
  m["preset"] = {{"name", def.preset.name},
                 {"hf_model", def.preset.hf_model},
                 {"source", def.preset.source},
                 {"config", def.preset.config}};
  m["conventions"] = {
      {"pairing", p.layout == RopeLayout::kInterleaved
                      ? "interleaved: pair i = channels (2i, 2i+1)"
                      : "half_split: pair i = channels (i, i + rotary_dim/2)"},
      {"rotation", "y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos (counter-clockwise)"},
      {"angle", "phi[t][i] = positions[t] * inv_freq[i], exact (no float32 rounding; the "
                "profiles budget for a pipeline's)"},
      {"inv_freq", "inv_freq[i] = base^(-2i/rotary_dim), i < rotary_dim/2"},
      {"position_origin", "positions are absolute token indices; the first token is 0"},
      {"attention_factor", "multiplies both cos and sin tables (and so the rotated q, k)"},
      {"tail", "channels >= rotary_dim are copied unchanged (bit-identical)"},
      {"layout", "q, k, q_rot, k_rot are [tokens, heads, head_dim] (dense cases have q only); "
                 "cos, sin are [tokens, "
                 "rotary_dim/2] (HF's [tokens, rotary_dim] tables repeat each column twice); "
                 "scores are [q_heads, query token, key token]"},
      {"scores", "unscaled dot products q_rot . k_rot over all head_dim channels; kv head = "
                 "q head / (q_heads / kv_heads)"}};
  m["params"] = {{"head_dim", h},
                 {"rotary_dim", d},
                 {"base", p.base},
                 {"layout", reference::rope_layout_name(p.layout)},
                 {"attention_factor", p.attention_factor},
                 {"n_tokens", tn},
                 {"n_q_heads", hq},
                 {"n_kv_heads", hk},
                 {"dtype", std::string(dtype_short(t))}};
  m["oracle"] = mp_oracle_json();
  m["seed"] = def.seed;
  m["prng"] = "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k; q, k = "
              "integer * 2^-24 (f32), 2^-11 (f16) or 2^-8 (bf16), |integer| < 2^24, 2^11 or 2^8";
  Json why = Json::array();
  for (const auto& hp : hps) {
    if (!def.dense || hp.m > kDenseLast || hp.m < 2) why.push_back({{"position", hp.m}, {"why", hp.why}});
  }
  m["positions"] = why;
  if (def.dense) m["positions_dense"] = {{"from", 0}, {"to", kDenseLast}};
  Json inv = Json::array();
  for (int i = 0; i < np; ++i) {
    inv.push_back({{"i", i},
                   {"f32_hex", hex_bits_f32(round_to_f32(o50.inv_freq[i]))},
                   {"decimal", o50.inv_freq[i].str(25, std::ios_base::scientific)}});
  }
  m["tables"] = {{"inv_freq", inv}};
  Json pipe = Json::object();
  pipe["fp32"] = {{"inv_freq_rel_error_max", *std::max_element(am.hf_delta.begin(), am.hf_delta.end())},
                  {"model", "inv_freq = 1/powf(base, fl(2i)/fl(d)) (every faithful powf), phi = "
                            "fl(fl(p) inv_freq), cosf/sinf within 2 ulp"}};
  pipe["fp32-recurrence"] = {{"theta_scale_rel_error", am.ts_delta},
                             {"model", "theta_0 = fl(p), theta_i = fl(theta_{i-1} * powf(base, "
                                       "-2.0f/d)) (every faithful powf), cosf/sinf within 2 ulp"}};
  m["pipelines"] = pipe;
  Json flags = {"PairingLayout", "AnglePrecision", "PositionOffset", "WrongBase"};
  if (d < h) flags.push_back("PartialRotary");
  if (hq != hk) flags.push_back("GroupedQueryHeads");
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

  if (!def.dense) {
    // Resolution (README "Profiles"): at each hard position and for each applicable profile,
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
          const double ang = angle ? a * phi[tt * np + i] * eps_at(prof.name, tt, i) : 0.0;
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
        {
          const std::vector<double>& x = q;
          const std::vector<double>& y64 = qr64;
          const PairScales& s = qs;
          {
            const std::size_t off = static_cast<std::size_t>(tt * hq * h);
            for (int i = 0; i < np; ++i) {
              const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
              for (int kind = 2; kind < 4; ++kind) {
                const std::size_t j = off + (kind == 2 ? ca : cb);
                const double ang = angle ? s.cond[j] * phi[tt * np + i] * eps_at(prof.name, tt, i) : 0.0;
                el.exact.push_back(y64[j]);
                el.budget.push_back(b.rotated.bound * eps_t * s.cond[j] +
                                    b.rotated.ulps * dtype_ulp(t, y64[j]) + ang);
                el.kind.push_back(kind);
                el.pair.push_back(i);
                el.xa.push_back(x[off + ca]);
                el.xb.push_back(x[off + cb]);
              }
            }
          }
        }
        std::optional<std::int64_t> min_offset;
        for (std::int64_t off = 1; off <= 4096; ++off) {
          if (det.fails(el, pos[tt], static_cast<long double>(off), inv_ld)) {
            min_offset = off;
            break;
          }
        }
        auto scaled = [&](auto f) {
          std::vector<long double> v(inv_ld.size());
          for (int i = 0; i < np; ++i) v[i] = f(i);
          return v;
        };
        const auto base_eps = smallest_failing([&](double e) {
          return det.fails(el, pos[tt], 0, scaled([&](int i) {
            return inv_ld[i] * std::pow(1.0L + e, -2.0L * i / d);
          }));
        });
        const auto inv_eps = smallest_failing([&](double e) {
          return det.fails(el, pos[tt], 0, scaled([&](int i) { return inv_ld[i] * (1.0L + e); }));
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
  manifest_add_tensors(m, def.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

std::vector<CaseRow> rope_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : rope_case_table()) {
    rows.push_back({c.id, c.preset.name + ", " + reference::rope_layout_name(c.preset.params.layout) +
                              ", " + std::string(dtype_short(c.dtype)) +
                              (c.dense ? ", dense positions 0..511" : "")});
  }
  return rows;
}

GoldenCase rope_generate(const std::string& id) {
  for (const auto& c : rope_case_table()) {
    if (c.id == id) return rope_generate_def(c);
  }
  throw_invalid("rope_generate", "no RoPE case has this id", id);
}

// ---- the built-in engine: posenc's kernels and the emulated pipelines, through files ---------

std::vector<std::string> rope_mistakes() {
  return {"pairing", "offset", "double-rotation", "sin-sign"};
}

/// The pipeline tables: float32 inv_freq and cos/sin [T, d/2] of each emulated engine.
struct PipelineTables {
  std::vector<float> inv_freq, cos, sin;
};

PipelineTables pipeline_tables(const std::string& pipeline, const RopeParams& p,
                               const std::vector<std::int64_t>& pos) {
  const int np = p.rotary_dim / 2;
  PipelineTables tb;
  tb.cos.resize(pos.size() * np);
  tb.sin.resize(pos.size() * np);
  const float a = static_cast<float>(p.attention_factor);
  if (pipeline == "fp32-recurrence") {  // ggml: theta *= theta_scale along the pairs
    const float ts = pipelines::ggml_theta_scale(p.base, p.rotary_dim);
    tb.inv_freq = pipelines::ggml_thetas(1, ts, np);
    for (std::size_t t = 0; t < pos.size(); ++t) {
      const auto th = pipelines::ggml_thetas(pos[t], ts, np);
      for (int i = 0; i < np; ++i) {
        tb.cos[t * np + i] = std::cos(th[i]) * a;
        tb.sin[t * np + i] = std::sin(th[i]) * a;
      }
    }
    return tb;
  }
  // fp32, bf16, f16: HF's float32 inv_freq, angle and cos/sin (autocast off), then * a
  tb.inv_freq = pipelines::hf_inv_freq(p.base, p.rotary_dim);
  if (POSENC_MUTANT("engine_rope_pipeline_exact_tables")) {  // a float pipeline that is not one
    const auto c = optimized::rope_cache_init(p, pos);
    tb.inv_freq.assign(c.inv_freq.begin(), c.inv_freq.end());
    return PipelineTables{tb.inv_freq, c.cos_f32, c.sin_f32};
  }
  for (std::size_t t = 0; t < pos.size(); ++t) {
    const float pf = static_cast<float>(pos[t]);
    for (int i = 0; i < np; ++i) {
      const float phi = pf * tb.inv_freq[i];
      tb.cos[t * np + i] = std::cos(phi) * a;
      tb.sin[t * np + i] = std::sin(phi) * a;
    }
  }
  return tb;
}

TensorMap rope_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const Json& pj = spec.manifest.at("params");
  RopeParams p;
  p.head_dim = pj.at("head_dim").get<int>();
  p.rotary_dim = pj.at("rotary_dim").get<int>();
  p.base = pj.at("base").get<double>();
  p.layout = pj.at("layout").get<std::string>() == "interleaved" ? RopeLayout::kInterleaved
                                                                 : RopeLayout::kHalfSplit;
  p.attention_factor = pj.at("attention_factor").get<double>();
  const int hq = pj.at("n_q_heads").get<int>(), hk = pj.at("n_kv_heads").get<int>();  // hk 0: q only
  const auto& mk = rope_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("rope_run_engine", o.mistake == "fp32-angles"
                                         ? "fp32-angles is a pipeline now: use --pipeline fp32"
                                         : "unknown mistake (known: pairing, offset, "
                                           "double-rotation, sin-sign)",
                  o.mistake);
  }
  const DType t = golden.at("q").dtype;
  if (const auto why = pipelines::dtype_mismatch(o.pipeline, t); !why.empty()) {
    throw_invalid("rope_run_engine", why, o.pipeline);
  }
  const Tensor& tpos = golden.at("positions");
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tpos.numel()));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = tpos.get_i64(static_cast<std::int64_t>(i));
  if (o.mistake == "offset") {
    for (auto& m : pos) m += 1;
  }
  if (o.mistake == "pairing") {
    p.layout = p.layout == RopeLayout::kInterleaved ? RopeLayout::kHalfSplit
                                                    : RopeLayout::kInterleaved;
  }
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const int np = p.rotary_dim / 2, h = p.head_dim;
  const bool with_scores = std::any_of(spec.expected.begin(), spec.expected.end(),
                                       [](const TensorSpec& s) { return s.name == "scores"; });
  std::vector<float> q = tensor_to_f32(golden.at("q"));
  std::vector<float> k = hk > 0 ? tensor_to_f32(golden.at("k")) : std::vector<float>();
  std::vector<float> qr(q.size()), kr(k.size());
  std::vector<float> inv, cos_t, sin_t;
  if (o.pipeline == "exact") {
    optimized::RopeCache cache = optimized::rope_cache_init(p, pos);
    if (o.mistake == "sin-sign") {
      for (auto& s : cache.sin_f32) s = -s;
    }
    const optimized::RopeShape qs{tn, hq, optimized::RopeTensorLayout::kTokensHeadsDim};
    const optimized::RopeShape ks{tn, hk, optimized::RopeTensorLayout::kTokensHeadsDim};
    optimized::rope_apply_qk(p, cache, qs, q, qr, ks, k, kr);
    if (o.mistake == "double-rotation") optimized::rope_apply_qk(p, cache, qs, qr, qr, ks, kr, kr);
    inv.assign(cache.inv_freq.begin(), cache.inv_freq.end());
    cos_t = cache.cos_f32;
    sin_t = cache.sin_f32;
  } else {
    if (!o.mistake.empty()) {
      throw_invalid("rope_run_engine", "mistakes run on the exact pipeline only", o.mistake);
    }
    const PipelineTables tb = pipeline_tables(o.pipeline, p, pos);
    inv = tb.inv_freq;
    cos_t = tb.cos;
    sin_t = tb.sin;
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
  }

  TensorMap out;
  auto put = [&](Tensor x) {
    std::string n = x.name;
    out.emplace(n, std::move(x));
  };
  put(engine_tensor("inv_freq", DType::kF32, {np}, inv));
  put(engine_tensor("cos", t, {tn, np}, cos_t));
  put(engine_tensor("sin", t, {tn, np}, sin_t));
  put(engine_tensor("q_rot", t, {tn, hq, h}, qr));
  if (hk > 0) put(engine_tensor("k_rot", t, {tn, hk, h}, kr));
  if (with_scores) {
    std::vector<float> scores;
    const int group = hq / hk;
    const DType c = pipelines::compute_dtype(o.pipeline);
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < tn; ++i) {
        for (std::int64_t j = 0; j < tn; ++j) {
          const float* a = &qr[(i * hq + hh) * h];
          const float* b = &kr[(j * hk + hh / group) * h];
          if (o.pipeline == "exact") {  // posenc: an accurate dot product of the float rows
            double s = 0;
            for (int cc = 0; cc < h; ++cc) s += static_cast<double>(a[cc]) * b[cc];
            scores.push_back(static_cast<float>(s));
          } else {  // a float32 matmul (sequential sum), output in the compute dtype
            float s = 0;
            for (int cc = 0; cc < h; ++cc) s += pipelines::fl(a[cc], c) * pipelines::fl(b[cc], c);
            scores.push_back(pipelines::fl(s, c));
          }
        }
      }
    }
    put(engine_tensor("scores", t, {hq, tn, tn}, scores));
  }
  return out;
}

}  // namespace

SchemeEntry rope_scheme() {
  return SchemeEntry{"rope", "rotary position embedding (interleaved, half-split, partial)",
                     &rope_cases, &rope_generate, &rope_run_engine, &rope_mistakes};
}

}  // namespace posenc::golden
