// Golden cases for the sinusoidal encoding. Formula: see reference/sinusoidal.hpp.
//
// Level 1 (committed): Transformer base (d_model 512, spec/schemes.md section 10.5) in both
// variants x target dtypes {f32, bf16}, plus an odd d_model (33) in both variants (f32), which
// pins the lone sin channel of kPaper and the zero column of kConcat. One token per hard
// position (DESIGN.md). Stages:
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

#include "golden/oracle_tensors.hpp"
#include "golden/hard_positions.hpp"
#include "golden/prng.hpp"
#include "golden/registry.hpp"
#include "optimized/sinusoidal.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/sinusoidal.hpp"

namespace posenc::golden {
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
                       ? "spec/schemes.md 10.5 (Vaswani et al. Transformer base) and section 8"
                       : "spec/schemes.md 10.5 (tensor2tensor transformer_base_v1) and section 8 "
                         "(get_timing_signal_1d)",
                   config, p, t, seed++});
    }
  }
  for (SinusoidalVariant var : {SinusoidalVariant::kPaper, SinusoidalVariant::kConcat}) {
    const SinusoidalParams p{33, var, 10000.0};
    v.push_back({case_id(p, "odd", DType::kF32), "",
                 "spec/schemes.md section 8 (odd d_model rule of the variant)", nullptr, p,
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

// Bounds, in units of each element's scale (README "Checks"). Derived worst cases for a
// pipeline that rounds a double-accurate value once (table) and adds in the target dtype or
// in float: pe <= 0.25 + 0.06 (the double angle's error at 2^24 + 1) = 0.32, h <= 0.32 +
// 0.5 (1 + |e|) / (1 + |e|) = 0.82 of a unit (bf16: 0.25 and 0.75). Measured with posenc's own
// kernel over these cases: pe 0.25, h 0.72 (f32) / 0.50 (bf16), inv_freq 0.50 ulp. Hence
// strict = 1 for pe and h, and 2 ulp for inv_freq (correct rounding from double is <= 0.5).
//
// fp32-angles: a float32 pipeline (t2t exp(-i * ln(base) / (n - 1)), fairseq, or
// 1 / powf(base, 2i/d)) carries a relative frequency error <= (2 ln base + 2) u, u = 2^-24
// (the exponent's rounding is amplified by ln base = 9.21), and the float32 position and product
// add 2u: |d phi| <= (2 ln base + 4) u |phi| = 22.4 u |phi|. With the angle epsilon
// kPhaseEpsF32 = 4 eps_f32 = 8u per unit and bound 4, the budget is 32u |phi| plus 4 eps for
// sinf/cosf's own rounding; inv_freq alone is off by <= 20.4u relative, <= 21 ulp: bound 24.
// `posenc engine --mistake fp32-angles` emulates these pipelines (a test checks it passes);
// measured over these cases they use at most 0.35 of the fp32-angles bounds.
// (kPhaseEpsF32 itself lives in golden/oracle_tensors.hpp.)

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

  // Condition scales and angle sensitivities (double is ample for a scale).
  const auto inv64 = to_f64(o50.inv_freq);
  std::vector<double> pe_cond(e.size()), pe_phase(e.size()), h_cond(e.size());
  std::vector<int> channel_freq(static_cast<std::size_t>(d));
  for (int c = 0; c < d; ++c) channel_freq[c] = reference::sinusoidal_freq_of_channel(p, c);
  for (std::int64_t tt = 0; tt < tn; ++tt) {
    for (int c = 0; c < d; ++c) {
      const std::size_t j = static_cast<std::size_t>(tt * d + c);
      const int i = channel_freq[c];
      if (i < 0) continue;  // the zero column: scale 0, so only the exact value passes
      pe_cond[j] = 1.0;
      pe_phase[j] = std::fabs(static_cast<double>(pos[tt]) * inv64[i]);
      h_cond[j] = 1.0 + std::fabs(e[j]);
    }
  }

  std::vector<TensorSpec> expected = {
      expected_spec("inv_freq", "table", DType::kF32, {n}, "ulp",
                    {{"strict", 2.0}, {"fp32-angles", 24.0}}, false),
      expected_spec("pe", "table", t, {tn, d}, "conditioned",
                    {{"strict", 1.0}, {"fp32-angles", 4.0}}, true),
      expected_spec("h", "added", t, {tn, d}, "conditioned",
                    {{"strict", 1.0}, {"fp32-angles", 4.0}}, true),
  };
  expected[0].axes = {axis("freq", "", {})};
  expected[1].axes =
      expected[2].axes = {axis("token", "positions", {}), axis("channel", "", channel_freq)};

  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  tensors.push_back(target_tensor("e", t, {tn, d}, std::vector<mp50>(e.begin(), e.end())));
  const std::vector<const std::vector<mp50>*> values = {&o50.inv_freq, &o50.pe, &o50.h};
  const std::vector<const std::vector<double>*> conds = {nullptr, &pe_cond, &h_cond};
  const std::vector<const std::vector<double>*> phases = {nullptr, &pe_phase, &pe_phase};
  for (std::size_t k = 0; k < expected.size(); ++k) {
    TensorSpec& s = expected[k];
    tensors.push_back(target_tensor(s.name, s.dtype, s.shape, *values[k]));
    s.sha256 = sha256_hex(tensors.back().data);
    tensors.push_back(tensor_from_f64(s.exact, s.shape, to_f64(*values[k])));
    // Scales need no more than float precision: f32 keeps the files small.
    auto f32 = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    if (!s.cond.empty()) tensors.push_back(tensor_from_f32(s.cond, s.shape, f32(*conds[k])));
    if (!s.phase.empty()) tensors.push_back(tensor_from_f32(s.phase, s.shape, f32(*phases[k])));
  }

  std::vector<TensorSpec> inputs = {
      {"positions", "input", DType::kI64, {tn}, "", {}, {}, "", "", ""},
      {"e", "input", t, {tn, d}, "", {}, {}, "", "", ""},
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].sha256 = sha256_hex(tensors[i].data);

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
      {"angle", "phi[t][i] = positions[t] * inv_freq[i], exact (no float32 rounding)"},
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
  for (const auto& hp : hard_positions()) why.push_back({{"position", hp.m}, {"why", hp.why}});
  m["positions"] = why;
  Json inv = Json::array();
  for (int i = 0; i < n; ++i) {
    inv.push_back({{"i", i},
                   {"f32_hex", hex_bits_f32(round_to_f32(o50.inv_freq[i]))},
                   {"decimal", o50.inv_freq[i].str(25, std::ios_base::scientific)}});
  }
  m["tables"] = {{"inv_freq", inv}};
  Json flags = {"SinusoidalConvention", "AnglePrecision", "PositionOffset"};
  if (d % 2 == 1) flags.push_back("OddDModel");
  m["flags"] = flags;
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
  return {"other-variant", "offset", "fp32-angles", "sin-cos-swapped"};
}

Tensor output_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape,
                     const std::vector<float>& v) {
  if (t == DType::kF32) return tensor_from_f32(name, std::move(shape), v);
  std::vector<std::uint16_t> b;
  for (float x : v) b.push_back(t == DType::kBF16 ? float_to_bf16(x) : double_to_f16(x));
  return tensor_from_bits16(name, t, std::move(shape), b);
}

/// The float32 pipelines of tensor2tensor / fairseq (kConcat) and of a float32 port of the
/// paper's formula (kPaper): frequencies, position, angle, sin and cos all in float.
void fp32_pipeline(const SinusoidalParams& p, const std::vector<std::int64_t>& pos,
                   std::vector<double>* inv, std::vector<float>* pe) {
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
  inv->assign(w.begin(), w.end());
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
                  "unknown mistake (known: other-variant, offset, "
                  "fp32-angles, sin-cos-swapped)",
                  o.mistake);
  }
  const std::string mistake = POSENC_MUTANT("gold_mistake_ignored") ? "" : o.mistake;
  const Tensor& tpos = golden.at("positions");
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tpos.numel()));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = tpos.get_i64(static_cast<std::int64_t>(i));
  if (mistake == "offset") {
    for (auto& m : pos) m += 1;
  }
  if (mistake == "other-variant") {
    p.variant = p.variant == SinusoidalVariant::kPaper ? SinusoidalVariant::kConcat
                                                       : SinusoidalVariant::kPaper;
  }
  const int d = p.d_model;
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const std::vector<float> e = tensor_to_f32(golden.at("e"));
  std::vector<double> inv;
  std::vector<float> pe, h(e.size());
  if (mistake == "fp32-angles") {
    fp32_pipeline(p, pos, &inv, &pe);
    for (std::size_t j = 0; j < e.size(); ++j) h[j] = e[j] + pe[j];
  } else {
    inv = optimized::sinusoidal_inv_freq(p);
    pe = optimized::sinusoidal_rows(p, pos);
    optimized::sinusoidal_add(p, pos, e, h);
  }
  if (mistake == "sin-cos-swapped") {
    for (std::int64_t t = 0; t < tn; ++t) {
      float* row = pe.data() + t * d;
      for (int i = 0; i < reference::sinusoidal_n_freq(p); ++i) {
        const int cc = reference::sinusoidal_cos_channel(p, i);
        if (cc >= 0) std::swap(row[reference::sinusoidal_sin_channel(p, i)], row[cc]);
      }
    }
    for (std::size_t j = 0; j < e.size(); ++j) h[j] = e[j] + pe[j];
  }

  const DType t = golden.at("e").dtype;
  TensorMap out;
  auto put = [&](Tensor x) {
    std::string name = x.name;
    out.emplace(name, std::move(x));
  };
  // An engine of the other variant has another number of frequencies when d_model is odd;
  // it then reports only its tables of the case's shape.
  if (static_cast<int>(inv.size()) == n_case) {
    const std::vector<float> inv32(inv.begin(), inv.end());
    put(output_tensor("inv_freq", DType::kF32, {n_case}, inv32));
  }
  put(output_tensor("pe", t, {tn, d}, pe));
  put(output_tensor("h", t, {tn, d}, h));
  return out;
}

}  // namespace

SchemeEntry sinusoidal_scheme() {
  return SchemeEntry{"sinusoidal",
                     "sinusoidal absolute encoding (paper interleaved; t2t/fairseq concat)",
                     &sinusoidal_cases,
                     &sinusoidal_generate,
                     &sinusoidal_run_engine,
                     &sinusoidal_mistakes};
}

}  // namespace posenc::golden
