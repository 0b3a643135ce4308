// Golden cases for the sinusoidal encoding. Formula: see reference/sinusoidal.hpp.
//
// Level 1 (committed): Transformer base (d_model 512) in both
// variants x target dtypes {f32, bf16}, plus an odd d_model (33) in both variants (f32), which
// pins the lone sin channel of kPaper and the zero column of kConcat. One token per hard
// position (golden/cases/hard_positions.hpp). Stages:
//   inv_freq [n]              table, f32, ulp check
//   pe [T, d_model]           table, target dtype, conditioned: c = 1 (values lie in [-1, 1], so
//                             the error is absolute), c = 0 for the zero column (must be exact)
//   h [T, d_model]            h = e + pe for a seeded e, conditioned: c = 1 + |e|, zero column
//                             c = 0 (h must equal e there)
// Expected values: mp50 oracle, rounded once to the target dtype; mp100 must round the same.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/budgets.hpp"
#include "golden/cases/hard_positions.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/format/prng.hpp"
#include "golden/cases/registry.hpp"
#include "optimized/sinusoidal.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/sinusoidal.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kFp32Angles, kOffset, kOtherVariant, kSinCosSwapped };
const MistakeTable<MistakeId, 4> kMistakes(
    {"sinusoidal"},
    {{
     {MistakeId::kFp32Angles, "fp32-angles", true},  // retired: now a pipeline
     {MistakeId::kOffset, "offset"},
     {MistakeId::kOtherVariant, "other-variant"},
     {MistakeId::kSinCosSwapped, "sin-cos-swapped"}}});

}  // namespace

namespace {

using reference::SinusoidalParams;
using reference::SinusoidalVariant;
using Json = nlohmann::json;

struct SinusoidalCaseDef {
  std::string id;
  std::string preset;  // "transformer-base" or "" (no model)
  std::string source;  // where the parameters come from
  Json config;         // the model's hyper-parameters verbatim, or null
  SinusoidalParams params;
  DType dtype = DType::kF32;
  std::uint64_t seed = 0;
};

std::string case_id(const SinusoidalParams& p, const std::string& tag, DType t) {
  return "sinusoidal_" + std::string(reference::sinusoidal_variant_name(p.variant)) + "_d" +
         std::to_string(p.d_model) + "_b1e4_" + tag + "_" + std::string(dtype_short(t));
}

std::vector<SinusoidalCaseDef> sinusoidal_case_table() {
  std::vector<SinusoidalCaseDef> v;
  std::uint64_t seed = 0x5f3759df;
  const Json base_config = {
      {"hidden_size", 512}, {"num_heads", 8}, {"filter_size", 2048}, {"num_hidden_layers", 6}};
  for (SinusoidalVariant var : {SinusoidalVariant::kPaper, SinusoidalVariant::kConcat}) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      const SinusoidalParams p{512, var, 10000.0};
      Json config = base_config;
      if (var == SinusoidalVariant::kConcat) {  // get_timing_signal_1d defaults
        config["min_timescale"] = 1.0;
        config["max_timescale"] = 1.0e4;
      }
      v.push_back({case_id(p, "transformer_base", t), "transformer-base",
                   var == SinusoidalVariant::kPaper
                       ? "Vaswani et al. Transformer base (paper variant)"
                       : "tensor2tensor transformer_base_v1 (concat variant, "
                         "get_timing_signal_1d)",
                   config, p, t, seed++});
    }
  }
  for (SinusoidalVariant var : {SinusoidalVariant::kPaper, SinusoidalVariant::kConcat}) {
    const SinusoidalParams p{33, var, 10000.0};
    v.push_back({case_id(p, "odd", DType::kF32), "",
                 "odd d_model rule of the variant (docs/schemes/sinusoidal.md)", nullptr, p,
                 DType::kF32, seed++});
  }
  return v;
}


/// One exactly representable e value in (-1, 1): an integer times a power of two from the
/// counter-based PRNG; bf16 carries 8 significant bits, f32 24.
double input_value(DType t, std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 255)), -8);
  return std::ldexp(static_cast<double>(prng_int(seed, stream, i, (1 << 24) - 1)), -24);
}

/// Everything the oracle computes for a case, in one precision.
template <class Real>
struct SinusoidalOracle {
  std::vector<Real> inv_freq, pe, h;
};

template <class Real>
SinusoidalOracle<Real> sinusoidal_oracle(const SinusoidalParams& p,
                                         const std::vector<std::int64_t>& pos,
                                         const std::vector<double>& e) {
  SinusoidalOracle<Real> o;
  o.inv_freq = reference::sinusoidal_inv_freq<Real>(p);
  o.pe = reference::sinusoidal_rows<Real>(p, pos);
  const std::vector<Real> er(e.begin(), e.end());
  o.h.resize(er.size());
  reference::sinusoidal_add<Real>(p, pos, er, o.h);
  return o;
}

// ---- budgets: the error analysis of each profile's pipeline (docs/profiles.md) ------------
//
// Symbols: t = target dtype, r = eps_f32 / eps_t, u = 2^-24, phi = m * inv_freq_i the exact
// angle. pe has c = 1 (|pe| <= 1, so its error is absolute), h = e + pe has c = 1 + |e|.
// strict (`--pipeline exact`, posenc's kernel): inv_freq in long double, phi in double (error
//   <= 2^-52 |phi| <= 0.05 eps_f32 for |m| <= 2^24 + 1), sin/cos in double, rounded to float32
//   and then to t.
//     inv_freq  0.5 ulp + 2^-28
//     pe        bound 0.1 r, ulps 0.5 (f32) or 0.5 + 0.5 r (16-bit: f32, then t)
//     h         pe's float32 value is within 0.25 eps_f32 (half an ulp of |pe| < 1) + 0.1:
//               bound 0.35 r; the float32 add and the cast: ulps as pe
// fp32 (tensor2tensor / fairseq for concat: exp(fl(i) * -fl(ln(base)/(n-1))); a float32 port of
//   the paper: 1/powf(base, fl(2i)/fl(d))): the worst relative frequency error delta_i over every
//   faithful expf / powf (golden/cases/budgets.hpp), phi^ = fl(fl(m) inv_freq) within
//   eps_i |phi|, eps_i = (1 + rho_m)(1 + delta_i)(1 + u) - 1; sinf/cosf within 2 ulp (<= eps_f32).
//     inv_freq  extra delta_i inv_freq_i
//     pe        bound r, ulps the cast, extra eps_i |phi|
//     h         bound r, ulps 0.5 (+ 0.5 r when cast), extra eps_i |phi|
// fp32-recurrence: not applicable (ggml engines read sinusoid tables from the model file, made
//   in float64 by the converter: such an engine is judged by strict).
// bf16, f16 (PyTorch eager in t): the float32 table cast to t (pe: as fp32), h = e + pe in t:
//   pe's error 0.25 eps_t (half an ulp) + r, then the add: bound 0.25 + r, ulps 0.5, extra as fp32.
// Every bound and extra gets 1% for second-order terms.

constexpr double kSecondOrder = 1.01;

/// Mutant gold_sinusoidal_budgets_inflated: every budget 8x (the tightness test must notice).
double inflation() { return POSENC_MUTANT("gold_sinusoidal_budgets_inflated") ? 8.0 : 1.0; }

struct StageBudgets {
  ProfileBudget inv_freq, pe, h;
};

StageBudgets sinusoidal_budgets_derived(const std::string& profile, DType t);

StageBudgets sinusoidal_budgets(const std::string& profile, DType t) {
  StageBudgets b = sinusoidal_budgets_derived(profile, t);
  for (ProfileBudget* x : {&b.inv_freq, &b.pe, &b.h}) {
    x->bound *= inflation();
    x->ulps *= inflation();
  }
  return b;
}

StageBudgets sinusoidal_budgets_derived(const std::string& profile, DType t) {
  const double r = budgets::f32_in(t), cast = budgets::cast_to(t);
  const double sum_ulps = t == DType::kF32 ? 0.5 : 0.5 + 0.5 * r;
  const double s = kSecondOrder;
  StageBudgets b;
  if (profile == "strict") {
    b.inv_freq = bound_of(0.5 + 0x1p-28);
    b.pe = bound_of(0.1 * r, sum_ulps);
    b.h = bound_of(0.35 * r * s, sum_ulps);
    return b;
  }
  if (profile == "fp32-recurrence") {
    b.inv_freq = b.pe = b.h = not_applicable(
        "ggml engines read sinusoid tables from the model file (made in float64 by the "
        "converter): judge them with strict");
    return b;
  }
  const std::string na = activation_na(profile, t);
  if (!na.empty()) {
    b.inv_freq = b.pe = b.h = not_applicable(na);
    return b;
  }
  b.inv_freq = bound_of(0.0);
  b.pe = bound_of(r * s, cast);
  if (profile == "fp32") {
    b.h = bound_of(r * s, sum_ulps);
  } else {  // bf16, f16
    b.h = bound_of((0.25 + r) * s, 0.5);
  }
  if (POSENC_MUTANT("gold_sinusoidal_eager_add_dropped") && profile != "fp32") b.h.bound = r * s;
  return b;
}

AxisSpec axis(const std::string& name, const std::string& positions, std::vector<int> pair_map) {
  AxisSpec a;
  a.name = name;
  a.positions = positions;
  a.pair_map = std::move(pair_map);
  return a;
}

const char* layout_text(SinusoidalVariant v) {
  return v == SinusoidalVariant::kPaper
             ? "interleaved: channel 2i = sin(m * inv_freq[i]), channel 2i+1 = cos(m * "
               "inv_freq[i]); odd d_model: the last channel is a sin without cos partner"
             : "concatenated [sin | cos]: channel i = sin(m * inv_freq[i]), channel n + i = "
               "cos(m * inv_freq[i]), n = floor(d_model/2); odd d_model: a zero column is "
               "appended at channel d_model - 1";
}

const char* inv_freq_text(SinusoidalVariant v) {
  return v == SinusoidalVariant::kPaper
             ? "inv_freq[i] = base^(-2i/d_model), i < ceil(d_model/2) (the paper, Sec. 3.5)"
             : "inv_freq[i] = base^(-i/max(n-1, 1)) = exp(-i ln(base)/(n-1)), i < n = "
               "floor(d_model/2) (tensor2tensor get_timing_signal_1d, fairseq half_dim - 1): "
               "the last is exactly 1/base";
}

/// Worst relative error of the float32 pipelines' frequency i (exact enumeration), over the
/// forms engines write: the paper variant 1/powf(base, fl(2i)/fl(d)) (a float32 port, HF
/// style) or powf(base, -fl(2i)/fl(d)) (numpy / PyTorch `base ** (-arange / d)`); the concat
/// variant tensor2tensor / fairseq's expf or powf(base, -fl(i)/fl(n-1)).
double fp32_freq_rel_error(const SinusoidalParams& p, int i) {
  if (POSENC_MUTANT("gold_sinusoidal_freq_term_dropped")) return 0.0;
  const bool powf_form = !POSENC_MUTANT("gold_sinusoidal_powf_form_dropped");
  if (p.variant == SinusoidalVariant::kPaper) {
    const double recip = budgets::hf_inv_freq_rel_error(p.base, p.d_model, i);
    return powf_form ? std::max(recip, budgets::powf_inv_freq_rel_error(p.base, 2 * i, p.d_model)) : recip;
  }
  const int n = reference::sinusoidal_n_freq(p);
  const double t2t = budgets::t2t_inv_freq_rel_error(p.base, n, i);
  return powf_form ? std::max(t2t, budgets::powf_inv_freq_rel_error(p.base, i, std::max(n - 1, 1))) : t2t;
}

GoldenCase sinusoidal_generate_def(const SinusoidalCaseDef& def) {
  const SinusoidalParams& p = def.params;
  reference::sinusoidal_check(p, "sinusoidal_generate");
  const int d = p.d_model;
  const int n = reference::sinusoidal_n_freq(p);
  std::vector<std::int64_t> pos;
  for (const auto& hp : hard_positions()) pos.push_back(hp.m);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const DType t = def.dtype;

  std::vector<double> e(static_cast<std::size_t>(tn * d));
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = input_value(t, def.seed, 1, i);

  const auto o50 = sinusoidal_oracle<mp50>(p, pos, e);
  const auto o100 = sinusoidal_oracle<mp100>(p, pos, e);
  cross_check(def.id, "inv_freq", DType::kF32, o50.inv_freq, o100.inv_freq);
  cross_check(def.id, "pe", t, o50.pe, o100.pe);
  cross_check(def.id, "h", t, o50.h, o100.h);

  std::map<std::string, StageBudgets> sb;
  std::vector<std::string> angle_profiles;
  for (const auto& prof : profiles()) {
    sb[prof.name] = sinusoidal_budgets(prof.name, t);
    if (prof.name != "strict" && sb[prof.name].pe.applies) angle_profiles.push_back(prof.name);
  }
  std::vector<double> delta(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) delta[i] = fp32_freq_rel_error(p, i);

  // Condition scales, angle extras (double is ample for a scale).
  const auto inv64 = to_f64(o50.inv_freq);
  std::vector<double> pe_cond(e.size(), 0.0), h_cond(e.size(), 0.0), amp(e.size(), 0.0);
  std::vector<double> angle_extra(e.size(), 0.0);
  std::vector<std::int64_t> el_pos(e.size());
  std::vector<int> channel_freq(static_cast<std::size_t>(d));
  for (int c = 0; c < d; ++c) channel_freq[c] = reference::sinusoidal_freq_of_channel(p, c);
  for (std::int64_t tt = 0; tt < tn; ++tt) {
    const double rho = budgets::position_rel_error_f32(pos[tt]);
    for (int c = 0; c < d; ++c) {
      const std::size_t j = static_cast<std::size_t>(tt * d + c);
      el_pos[j] = pos[tt];
      const int i = channel_freq[c];
      if (i < 0) continue;  // the zero column: scale 0, so only the exact value passes
      pe_cond[j] = 1.0;
      amp[j] = 1.0;
      h_cond[j] = 1.0 + std::fabs(e[j]);
      const double phi = static_cast<double>(abs(mp50(pos[tt]) * o50.inv_freq[i]));
      angle_extra[j] = phi * budgets::product_rel_error(rho, delta[i]) * kSecondOrder * inflation();
    }
  }
  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  tensors.push_back(target_tensor("e", t, {tn, d}, std::vector<mp50>(e.begin(), e.end())));
  std::vector<TensorSpec> inputs = {input_spec(tensors[0]), input_spec(tensors[1])};

  ExpectedTensor ei = expected_tensor("inv_freq", "table", DType::kF32, {n}, CheckKind::kUlp);
  ei.spec.axes = {axis("freq", "", {})};
  ei.values = o50.inv_freq;
  for (const auto& prof : profiles()) ei.spec.check.profiles[prof.name] = sb[prof.name].inv_freq;
  for (const auto& prof : angle_profiles) {
    std::vector<double> x(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) x[i] = delta[i] * inv64[i] * kSecondOrder * inflation();
    ei.extra[prof] = x;
  }
  auto table = [&](const std::string& name, const std::string& stage,
                   const std::vector<mp50>& values, const std::vector<double>& cond, bool is_pe) {
    ExpectedTensor x = expected_tensor(name, stage, t, {tn, d}, CheckKind::kConditioned);
    x.spec.axes = {axis("token", "positions", {}), axis("channel", "", channel_freq)};
    x.values = values;
    x.cond = cond;
    x.amp = amp;
    x.positions = el_pos;
    for (const auto& prof : profiles()) {
      x.spec.check.profiles[prof.name] = is_pe ? sb[prof.name].pe : sb[prof.name].h;
    }
    for (const auto& prof : angle_profiles) x.extra[prof] = angle_extra;
    return x;
  };
  std::vector<TensorSpec> expected;
  expected.push_back(add_expected(&tensors, std::move(ei)));
  expected.push_back(add_expected(&tensors, table("pe", "table", o50.pe, pe_cond, true)));
  expected.push_back(add_expected(&tensors, table("h", "added", o50.h, h_cond, false)));

  const std::string variant = reference::sinusoidal_variant_name(p.variant);
  Json m = manifest_header(def.id, "sinusoidal", variant, "valid", 1);
  m["description"] = "Sinusoidal PE, " +
                     (def.preset.empty() ? std::string("odd d_model") : def.preset) + " (" +
                     variant + ", d_model " + std::to_string(d) + ", base 1e4), target " +
                     std::string(dtype_short(t)) + ", one token per hard position";
  m["citation"] = "A. Vaswani et al., Attention Is All You Need, arXiv:1706.03762v7, Sec. 3.5";
  if (!def.preset.empty()) {
    m["preset"] = {{"name", def.preset},
                   {"hf_model", "none (tensor2tensor transformer_base_v1 hyper-parameters)"},
                   {"source", def.source},
                   {"config", def.config}};
  }
  m["conventions"] = {
      {"layout", layout_text(p.variant)},
      {"inv_freq", inv_freq_text(p.variant)},
      {"angle", "phi[t][i] = positions[t] * inv_freq[i], exact (no float32 rounding; the "
                "profiles budget for a pipeline's)"},
      {"position_origin",
       "positions are the absolute indices PE is evaluated at; the first "
       "token is 0 (fairseq's padding_idx + 1 origin is the caller's shift)"},
      {"h", "h = e + pe, e as given (already scaled by sqrt(d_model) where the model does that)"},
      {"tensor_layout",
       "e, pe, h are [tokens, d_model]; inv_freq is [n_freq]; verify names a "
       "channel's frequency index as its pair, the zero column as tail"}};
  m["params"] = {{"d_model", d}, {"variant", variant}, {"base", p.base},
                 {"n_freq", n},  {"n_tokens", tn},     {"dtype", std::string(dtype_short(t))}};
  m["oracle"] = mp_oracle_json();
  m["seed"] = def.seed;
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = e; e = integer * 2^-24 "
      "(f32) or integer * 2^-8 (bf16), |integer| < 2^24 or 256";
  Json why = Json::array();
  for (const auto& hp : hard_positions()) {
    // A near-pi/2 position's distance in this case's own pair-0 frequency.
    why.push_back({{"position", hp.m},
                   {"why", is_near_half_pi_position(hp.m) ? near_half_pi_why(hp.m, o50.inv_freq[0])
                                                          : hp.why}});
  }
  m["positions"] = why;
  Json inv = Json::array();
  for (int i = 0; i < n; ++i) {
    inv.push_back({{"i", i},
                   {"f32_hex", hex_bits_f32(round_to_f32(o50.inv_freq[i]))},
                   {"decimal", o50.inv_freq[i].str(25, std::ios_base::scientific)}});
  }
  m["tables"] = {{"inv_freq", inv}};
  m["pipelines"] = {
      {"fp32", {{"inv_freq_rel_error_max", *std::max_element(delta.begin(), delta.end())},
                {"model", p.variant == SinusoidalVariant::kPaper
                              ? "inv_freq = 1/powf(base, fl(2i)/fl(d_model)) (every faithful "
                                "powf), phi = fl(fl(m) inv_freq), sinf/cosf within 2 ulp"
                              : "inv_freq = expf(fl(i) * -fl(ln(base)/(n-1))) (every faithful "
                                "expf), phi = fl(fl(m) inv_freq), sinf/cosf within 2 ulp"}}}};
  Json flags = {"SinusoidalConvention", "AnglePrecision", "PositionOffset"};
  if (d % 2 == 1) flags.push_back("OddDModel");
  m["flags"] = flags;
  m["detection"] = Json::array(
      {{{"flag", "PositionOffset"}, {"stages", {"pe", "h"}},
        {"blind", "inv_freq does not depend on the position"}},
       {{"flag", "SinusoidalConvention"}, {"stages", {"inv_freq", "pe", "h"}}, {"blind", ""}}});
  manifest_add_tensors(m, def.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

std::vector<CaseRow> sinusoidal_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : sinusoidal_case_table()) {
    rows.push_back({c.id, (c.preset.empty() ? std::string("odd d_model") : c.preset) + ", " +
                              reference::sinusoidal_variant_name(c.params.variant) + ", d_model " +
                              std::to_string(c.params.d_model) + ", " +
                              std::string(dtype_short(c.dtype))});
  }
  return rows;
}

GoldenCase sinusoidal_generate(const std::string& id) {
  for (const auto& c : sinusoidal_case_table()) {
    if (c.id == id) return sinusoidal_generate_def(c);
  }
  throw_invalid("sinusoidal_generate", "no sinusoidal case has this id", id);
}

// ---- the built-in engine: posenc's optimized kernel, fed and read through files ----------

std::vector<std::string> sinusoidal_mistakes() {
  return {"other-variant", "offset", "sin-cos-swapped"};
}

/// The float32 pipelines of tensor2tensor / fairseq (kConcat) and of a float32 port of the
/// paper's formula (kPaper): frequencies, position, angle, sin and cos all in float.
/// The kernel's tables: a float pipeline that is not one (mutant
/// engine_sinusoidal_pipeline_exact_tables).
void kernel_tables(const SinusoidalParams& p, const std::vector<std::int64_t>& pos,
                   std::vector<float>* inv, std::vector<float>* pe) {
  const auto inv64 = optimized::sinusoidal_inv_freq(p);
  inv->assign(inv64.begin(), inv64.end());
  *pe = optimized::sinusoidal_rows(p, pos);
}

void fp32_pipeline(const SinusoidalParams& p, const std::vector<std::int64_t>& pos,
                   std::vector<float>* inv, std::vector<float>* pe) {
  const int d = p.d_model;
  const int n = reference::sinusoidal_n_freq(p);
  std::vector<float> w(static_cast<std::size_t>(n));
  if (p.variant == SinusoidalVariant::kPaper) {
    for (int i = 0; i < n; ++i) {
      w[i] = 1.0f / std::pow(static_cast<float>(p.base),
                             static_cast<float>(2 * i) / static_cast<float>(d));
    }
  } else {
    const float delta = static_cast<float>(std::log(p.base) / std::max(n - 1, 1));
    for (int i = 0; i < n; ++i) w[i] = std::exp(static_cast<float>(i) * -delta);
  }
  *inv = w;
  if (POSENC_MUTANT("engine_sinusoidal_pipeline_exact_tables")) return kernel_tables(p, pos, inv, pe);
  pe->assign(pos.size() * static_cast<std::size_t>(d), 0.0f);
  for (std::size_t t = 0; t < pos.size(); ++t) {
    for (int i = 0; i < n; ++i) {
      const float phi = static_cast<float>(pos[t]) * w[i];
      float* row = pe->data() + t * d;
      row[reference::sinusoidal_sin_channel(p, i)] = std::sin(phi);
      const int cc = reference::sinusoidal_cos_channel(p, i);
      if (cc >= 0) row[cc] = std::cos(phi);
    }
  }
}

TensorMap sinusoidal_run_engine(const CaseSpec& spec, const TensorMap& golden,
                                const EngineOptions& o) {
  const Json& pj = spec.manifest.at("params");
  SinusoidalParams p;
  p.d_model = pj.at("d_model").get<int>();
  p.base = pj.at("base").get<double>();
  p.variant = pj.at("variant").get<std::string>() == "paper" ? SinusoidalVariant::kPaper
                                                             : SinusoidalVariant::kConcat;
  const int n_case = reference::sinusoidal_n_freq(p);
  const auto& mk = sinusoidal_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("sinusoidal_run_engine",
                  kMistakes.is(o.mistake, MistakeId::kFp32Angles)
                      ? "fp32-angles is a pipeline now: use --pipeline fp32"
                      : "unknown mistake (known: other-variant, offset, sin-cos-swapped)",
                  o.mistake);
  }
  const DType t = golden.at("e").dtype;
  if (pipelines::of(o.pipeline) == Pipeline::kFp32Recurrence) {
    throw_invalid("sinusoidal_run_engine",
                  "pipeline does not apply: ggml engines read sinusoid tables from the model "
                  "file (judge them with strict)", o.pipeline);
  }
  if (const auto why = pipelines::dtype_mismatch(o.pipeline, t); !why.empty()) {
    throw_invalid("sinusoidal_run_engine", why, o.pipeline);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("sinusoidal_run_engine", "mistakes run on the exact pipeline only", o.mistake);
  }
  const std::string mistake = POSENC_MUTANT("engine_mistake_ignored") ? "" : o.mistake;
  const Tensor& tpos = golden.at("positions");
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tpos.numel()));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = tpos.get_i64(static_cast<std::int64_t>(i));
  if (kMistakes.is(mistake, MistakeId::kOffset)) {
    for (auto& m : pos) m += 1;
  }
  if (kMistakes.is(mistake, MistakeId::kOtherVariant)) {
    p.variant = p.variant == SinusoidalVariant::kPaper ? SinusoidalVariant::kConcat
                                                       : SinusoidalVariant::kPaper;
  }
  const int d = p.d_model;
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const std::vector<float> e = tensor_to_f32(golden.at("e"));
  std::vector<float> inv, pe, h(e.size());
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {
    fp32_pipeline(p, pos, &inv, &pe);
    const DType c = pipelines::compute_dtype(o.pipeline);
    for (std::size_t j = 0; j < e.size(); ++j) {
      // eager: the float32 table cast to the compute dtype, one add in it
      h[j] = pipelines::fl(e[j] + pipelines::fl(pe[j], c), c);
    }
  } else {
    const auto inv64 = optimized::sinusoidal_inv_freq(p);
    inv.assign(inv64.begin(), inv64.end());
    pe = optimized::sinusoidal_rows(p, pos);
    optimized::sinusoidal_add(p, pos, e, h);
  }
  if (kMistakes.is(mistake, MistakeId::kSinCosSwapped)) {
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      float* row = pe.data() + tt * d;
      for (int i = 0; i < reference::sinusoidal_n_freq(p); ++i) {
        const int cc = reference::sinusoidal_cos_channel(p, i);
        if (cc >= 0) std::swap(row[reference::sinusoidal_sin_channel(p, i)], row[cc]);
      }
    }
    for (std::size_t j = 0; j < e.size(); ++j) h[j] = e[j] + pe[j];
  }

  TensorMap out;
  auto put = [&](Tensor x) {
    std::string name = x.name;
    out.emplace(name, std::move(x));
  };
  // An engine of the other variant has another number of frequencies when d_model is odd;
  // it then reports only its tables of the case's shape.
  if (static_cast<int>(inv.size()) == n_case) put(engine_tensor("inv_freq", DType::kF32, {n_case}, inv));
  put(engine_tensor("pe", t, {tn, d}, pe));
  put(engine_tensor("h", t, {tn, d}, h));
  return out;
}

}  // namespace

SchemeEntry sinusoidal_scheme() {
  SchemeEntry e{"sinusoidal",
                "sinusoidal absolute encoding (paper interleaved; t2t/fairseq concat)",
                &sinusoidal_cases,
                &sinusoidal_generate,
                &sinusoidal_run_engine,
                &sinusoidal_mistakes};
  e.order = 60;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
