// Golden cases for RoPE. Formula: see reference/rope.hpp.
//
// Level 1 (committed): real-model presets (spec/schemes.md section 10.1) x target dtypes
// {f32, bf16}, one token per hard position (DESIGN.md), stages:
//   inv_freq [d/2]            table, f32, ulp check
//   cos, sin [T, d/2]         table, target dtype, conditioned (c = a), attention factor folded in
//   q_rot [T, Hq, h], k_rot [T, Hk, h]   rotated, conditioned (c = a (|x_a| + |x_b|); tail c = 0:
//                             tail channels must be bit-identical copies)
//   scores [Hq, T, T]         unscaled q_rot . k_rot, kv head = q head / (Hq / Hk), conditioned
// Expected values: mp50 oracle, rounded once to the target dtype; mp100 must round the same.
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/oracle_tensors.hpp"
#include "golden/hard_positions.hpp"
#include "golden/prng.hpp"
#include "golden/registry.hpp"
#include "optimized/rope.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/rope.hpp"

namespace posenc::golden {
namespace {

using reference::RopeLayout;
using reference::RopeParams;
using Json = nlohmann::json;

struct RopePreset {
  std::string name;      // preset id, as in spec/presets.json where it exists there
  std::string short_id;  // used in the case id
  std::string hf_model;
  std::string source;    // where the config values were read (spec/schemes.md section 10.1)
  RopeParams params;
  int n_q_heads = 2, n_kv_heads = 1;
  Json config;           // the HF config keys that determine RoPE, verbatim
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
                    {"max_position_embeddings", 4096}, {"rope_scaling", nullptr}}});
  RopePreset meta = v.back();
  meta.name = "llama-2-7b-meta";
  meta.short_id = "llama2_7b_meta";
  meta.hf_model = "meta-llama/Llama-2-7b (Meta checkpoint, complex view)";
  meta.source = "spec/schemes.md 1.3 (Meta apply_rotary_emb: interleaved pairs)";
  meta.params.layout = RopeLayout::kInterleaved;
  meta.config = Json{{"dim", 4096}, {"n_heads", 32}, {"rope_theta", 10000.0}};
  v.push_back(meta);
  v.push_back({"llama-3-8b", "llama3_8b", "meta-llama/Meta-Llama-3-8B",
               "spec/schemes.md 10.1 (zakkosi/jhcode-meta-llama3_eng config)",
               half(128, 128, 500000.0), 2, 1,
               Json{{"hidden_size", 4096}, {"num_attention_heads", 32},
                    {"num_key_value_heads", 8}, {"rope_theta", 500000.0},
                    {"max_position_embeddings", 8192}, {"rope_scaling", nullptr}}});
  v.push_back({"gpt-j-6b", "gptj_6b", "EleutherAI/gpt-j-6B",
               "spec/schemes.md 10.1 and 1.6 (base hard-coded 10000)",
               RopeParams{256, 64, 10000.0, RopeLayout::kInterleaved, 1.0}, 2, 2,
               Json{{"n_embd", 4096}, {"n_head", 16}, {"rotary_dim", 64}, {"n_positions", 2048}}});
  v.push_back({"gpt-neox-20b", "neox_20b", "EleutherAI/gpt-neox-20b",
               "spec/schemes.md 10.1 (Dahoas/gptneox-sft-static config)", half(96, 24, 10000.0),
               2, 2,
               Json{{"hidden_size", 6144}, {"num_attention_heads", 64}, {"rotary_pct", 0.25},
                    {"rotary_emb_base", 10000}, {"max_position_embeddings", 2048}}});
  v.push_back({"qwen2-7b", "qwen2_7b", "Qwen/Qwen2-7B", "spec/schemes.md 10.1 (official config)",
               half(128, 128, 1000000.0), 2, 1,
               Json{{"hidden_size", 3584}, {"num_attention_heads", 28},
                    {"num_key_value_heads", 4}, {"rope_theta", 1000000.0},
                    {"max_position_embeddings", 131072}}});
  v.push_back({"codellama-7b-hf", "codellama_7b", "codellama/CodeLlama-7b-hf",
               "spec/schemes.md 10.1 (loubnabnl/CodeLlama-7b-hf config)",
               half(128, 128, 1000000.0), 2, 2,
               Json{{"hidden_size", 4096}, {"num_attention_heads", 32},
                    {"num_key_value_heads", 32}, {"rope_theta", 1000000},
                    {"max_position_embeddings", 16384}, {"rope_scaling", nullptr}}});
  return v;
}

const std::vector<DType>& rope_dtypes() {
  static const std::vector<DType> d = {DType::kF32, DType::kBF16};
  return d;
}

std::string base_tag(double base) {
  const int e = static_cast<int>(std::floor(std::log10(base)));
  const double mant = base / std::pow(10.0, e);
  if (std::fabs(mant - std::round(mant)) < 1e-12) {
    return std::to_string(static_cast<int>(std::round(mant))) + "e" + std::to_string(e);
  }
  return std::to_string(static_cast<long long>(base));
}

std::string case_id(const RopePreset& p, DType t) {
  std::string id = "rope_";
  id += p.params.layout == RopeLayout::kInterleaved ? "inter" : "half";
  id += "_d" + std::to_string(p.params.head_dim);
  if (p.params.rotary_dim != p.params.head_dim) id += "_r" + std::to_string(p.params.rotary_dim);
  id += "_b" + base_tag(p.params.base) + "_" + p.short_id + "_" + std::string(dtype_short(t));
  return id;
}


/// One exactly representable input value: an integer times a power of two, drawn from the
/// counter-based PRNG. bf16 carries 8 significant bits, f32 24.
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
};

std::vector<RopeCaseDef> rope_case_table() {
  std::vector<RopeCaseDef> v;
  std::uint64_t seed = 0x9e3779b9;
  for (const auto& p : rope_presets()) {
    for (DType t : rope_dtypes()) v.push_back({p, t, case_id(p, t), seed++});
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
                             int hk, const std::vector<double>& q, const std::vector<double>& k) {
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
  auto rotate = [&](const std::vector<double>& x, int heads, std::vector<Real>& out) {
    for (std::size_t t = 0; t < t_n; ++t) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t off = (t * heads + hh) * h;
        std::vector<Real> row(x.begin() + off, x.begin() + off + h);
        for (const Real& y : reference::rope_apply(p, tables, pos[t], row)) out.push_back(y);
      }
    }
  };
  rotate(q, hq, o.q_rot);
  rotate(k, hk, o.k_rot);
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

// fp32-angles: an engine that rounds the position, inv_freq (float32 pow: relative error up to
// (1 + ln base) u) and the product m * theta to float32 has |d phi| <= (3 + ln base) u |phi|,
// u = 2^-24; 4 eps_f32 = 8u per unit of bound, and the bounds below are >= 2: 16u >= 3 + ln(1e6).
std::vector<float> to_f32(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// (kPhaseEpsF32 itself lives in golden/oracle_tensors.hpp.)

GoldenCase rope_generate_def(const RopeCaseDef& def) {
  const RopeParams& p = def.preset.params;
  reference::rope_check(p, "rope_generate");
  const int h = p.head_dim, d = p.rotary_dim, np = d / 2;
  const int hq = def.preset.n_q_heads, hk = def.preset.n_kv_heads;
  std::vector<std::int64_t> pos;
  for (const auto& hp : hard_positions()) pos.push_back(hp.m);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const DType t = def.dtype;

  std::vector<double> q(static_cast<std::size_t>(tn * hq * h)), k(static_cast<std::size_t>(tn * hk * h));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = input_value(t, def.seed, 1, i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = input_value(t, def.seed, 2, i);

  const auto o50 = rope_oracle<mp50>(p, pos, hq, hk, q, k);
  const auto o100 = rope_oracle<mp100>(p, pos, hq, hk, q, k);
  cross_check(def.id, "inv_freq", DType::kF32, o50.inv_freq, o100.inv_freq);
  cross_check(def.id, "cos", t, o50.cos, o100.cos);
  cross_check(def.id, "sin", t, o50.sin, o100.sin);
  cross_check(def.id, "q_rot", t, o50.q_rot, o100.q_rot);
  cross_check(def.id, "k_rot", t, o50.k_rot, o100.k_rot);
  cross_check(def.id, "scores", t, o50.scores, o100.scores);

  // Condition scales (double is ample for a scale) and angle sensitivities.
  const double a = p.attention_factor;
  std::vector<double> phi(static_cast<std::size_t>(tn * np));
  const auto inv64 = to_f64(o50.inv_freq);
  for (std::int64_t tt = 0; tt < tn; ++tt) {
    for (int i = 0; i < np; ++i) phi[tt * np + i] = std::fabs(static_cast<double>(pos[tt]) * inv64[i]);
  }
  std::vector<double> table_cond(phi.size(), a), table_phase(phi.size());
  for (std::size_t i = 0; i < phi.size(); ++i) table_phase[i] = a * phi[i];
  auto rot_scales = [&](const std::vector<double>& x, int heads, std::vector<double>& cond,
                        std::vector<double>& phase, std::vector<double>& pair_sum) {
    cond.assign(x.size(), 0.0);
    phase.assign(x.size(), 0.0);
    pair_sum.assign(static_cast<std::size_t>(tn * heads * np), 0.0);
    for (std::int64_t tt = 0; tt < tn; ++tt) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t off = static_cast<std::size_t>((tt * heads + hh) * h);
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
          const double c = a * (std::fabs(x[off + ca]) + std::fabs(x[off + cb]));
          cond[off + ca] = cond[off + cb] = c;
          phase[off + ca] = phase[off + cb] = c * phi[tt * np + i];
          pair_sum[(tt * heads + hh) * np + i] = c;
        }
      }
    }
  };
  std::vector<double> q_cond, q_phase, q_pair, k_cond, k_phase, k_pair;
  rot_scales(q, hq, q_cond, q_phase, q_pair);
  rot_scales(k, hk, k_cond, k_phase, k_pair);
  const int group = hq / hk;
  std::vector<double> s_cond, s_phase;
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < tn; ++i) {
      for (std::int64_t j = 0; j < tn; ++j) {
        double c = 0, ph = 0;
        const std::int64_t qr = i * hq + hh, kr = j * hk + hh / group;
        for (int pi = 0; pi < np; ++pi) {
          const double w = q_pair[qr * np + pi] * k_pair[kr * np + pi];
          c += w;
          ph += w * (phi[i * np + pi] + phi[j * np + pi]);
        }
        for (int ch = d; ch < h; ++ch) c += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
        s_cond.push_back(c);
        s_phase.push_back(ph);
      }
    }
  }

  // Bounds, in units of each element's scale (README "Checks and profiles").
  const double rot_bound = 2.0;
  const double score_bound = t == DType::kF32 ? 4.0 + h / 2.0 : 4.0;
  std::vector<TensorSpec> expected = {
      expected_spec("inv_freq", "table", DType::kF32, {np}, "ulp",
                    {{"strict", 2.0}, {"fp32-angles", 16.0}}, false),
      expected_spec("cos", "table", t, {tn, np}, "conditioned",
                    {{"strict", 1.0}, {"fp32-angles", 2.0}}, true),
      expected_spec("sin", "table", t, {tn, np}, "conditioned",
                    {{"strict", 1.0}, {"fp32-angles", 2.0}}, true),
      expected_spec("q_rot", "rotated", t, {tn, hq, h}, "conditioned",
                    {{"strict", rot_bound}, {"fp32-angles", rot_bound}}, true),
      expected_spec("k_rot", "rotated", t, {tn, hk, h}, "conditioned",
                    {{"strict", rot_bound}, {"fp32-angles", rot_bound}}, true),
      expected_spec("scores", "scores", t, {hq, tn, tn}, "conditioned",
                    {{"strict", score_bound}, {"fp32-angles", score_bound}}, true),
  };
  std::vector<int> channel_pairs(static_cast<std::size_t>(h));
  for (int c = 0; c < h; ++c) channel_pairs[c] = reference::rope_pair_of_channel(p, c);
  std::vector<int> identity_pairs(static_cast<std::size_t>(np));
  for (int i = 0; i < np; ++i) identity_pairs[i] = i;
  expected[0].axes = {{"pair", "", identity_pairs}};
  expected[1].axes = expected[2].axes = {{"token", "positions", {}}, {"pair", "", identity_pairs}};
  expected[3].axes = expected[4].axes = {
      {"token", "positions", {}}, {"head", "", {}}, {"channel", "", channel_pairs}};
  expected[5].axes = {{"head", "", {}}, {"query", "positions", {}}, {"key", "positions", {}}};

  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  auto input_tensor = [&](const std::string& name, std::vector<std::int64_t> shape,
                          const std::vector<double>& x) {
    std::vector<mp50> mx(x.begin(), x.end());
    return target_tensor(name, t, std::move(shape), mx);  // exact: x is representable
  };
  tensors.push_back(input_tensor("q", {tn, hq, h}, q));
  tensors.push_back(input_tensor("k", {tn, hk, h}, k));
  const std::vector<const std::vector<mp50>*> values = {&o50.inv_freq, &o50.cos, &o50.sin,
                                                        &o50.q_rot, &o50.k_rot, &o50.scores};
  const std::vector<const std::vector<double>*> conds = {nullptr, &table_cond, &table_cond,
                                                         &q_cond, &k_cond, &s_cond};
  const std::vector<const std::vector<double>*> phases = {nullptr, &table_phase, &table_phase,
                                                          &q_phase, &k_phase, &s_phase};
  for (std::size_t e = 0; e < expected.size(); ++e) {
    TensorSpec& s = expected[e];
    tensors.push_back(target_tensor(s.name, s.dtype, s.shape, *values[e]));
    s.sha256 = sha256_hex(tensors.back().data);
    tensors.push_back(tensor_from_f64(s.exact, s.shape, to_f64(*values[e])));
    // Scales need no more than float precision: stored as f32 to keep the files small.
    if (!s.cond.empty()) tensors.push_back(tensor_from_f32(s.cond, s.shape, to_f32(*conds[e])));
    if (!s.phase.empty()) tensors.push_back(tensor_from_f32(s.phase, s.shape, to_f32(*phases[e])));
  }

  std::vector<TensorSpec> inputs = {
      {"positions", "input", DType::kI64, {tn}, "", {}, {}, "", "", ""},
      {"q", "input", t, {tn, hq, h}, "", {}, {}, "", "", ""},
      {"k", "input", t, {tn, hk, h}, "", {}, {}, "", "", ""},
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].sha256 = sha256_hex(tensors[i].data);

  Json m = manifest_header(def.id, "rope", reference::rope_layout_name(p.layout), "valid", 1);
  m["description"] = "RoPE, " + def.preset.name + " (" + reference::rope_layout_name(p.layout) +
                     ", head_dim " + std::to_string(h) + ", rotary_dim " + std::to_string(d) +
                     ", base " + base_tag(p.base) + "), target " +
                     std::string(dtype_short(t)) + ", one token per hard position";
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
      {"angle", "phi[t][i] = positions[t] * inv_freq[i], exact (no float32 rounding)"},
      {"inv_freq", "inv_freq[i] = base^(-2i/rotary_dim), i < rotary_dim/2"},
      {"position_origin", "positions are absolute token indices; the first token is 0"},
      {"attention_factor", "multiplies both cos and sin tables (and so the rotated q, k)"},
      {"tail", "channels >= rotary_dim are copied unchanged (bit-identical)"},
      {"layout", "q, k, q_rot, k_rot are [tokens, heads, head_dim]; cos, sin are [tokens, "
                 "rotary_dim/2]; scores are [q_heads, query token, key token]"},
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
              "integer * 2^-24 (f32) or integer * 2^-8 (bf16), |integer| < 2^24 or 256";
  Json why = Json::array();
  for (const auto& hp : hard_positions()) why.push_back({{"position", hp.m}, {"why", hp.why}});
  m["positions"] = why;
  Json inv = Json::array();
  for (int i = 0; i < np; ++i) {
    inv.push_back({{"i", i},
                   {"f32_hex", hex_bits_f32(round_to_f32(o50.inv_freq[i]))},
                   {"decimal", o50.inv_freq[i].str(25, std::ios_base::scientific)}});
  }
  m["tables"] = {{"inv_freq", inv}};
  Json flags = {"PairingLayout", "AnglePrecision", "PositionOffset", "WrongBase"};
  if (d < h) flags.push_back("PartialRotary");
  if (hq != hk) flags.push_back("GroupedQueryHeads");
  m["flags"] = flags;
  manifest_add_tensors(m, def.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

std::vector<CaseRow> rope_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : rope_case_table()) {
    rows.push_back({c.id, c.preset.name + ", " + reference::rope_layout_name(c.preset.params.layout) +
                              ", " + std::string(dtype_short(c.dtype))});
  }
  return rows;
}

GoldenCase rope_generate(const std::string& id) {
  for (const auto& c : rope_case_table()) {
    if (c.id == id) return rope_generate_def(c);
  }
  throw_invalid("rope_generate", "no RoPE case has this id", id);
}

// ---- the built-in engine: posenc's optimized kernel, fed and read through files ----------

std::vector<std::string> rope_mistakes() {
  return {"pairing", "offset", "fp32-angles", "double-rotation", "sin-sign"};
}

Tensor output_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape,
                     const std::vector<double>& v) {
  if (t == DType::kF32) {
    std::vector<float> f(v.begin(), v.end());
    return tensor_from_f32(name, std::move(shape), f);
  }
  if (t == DType::kF64) return tensor_from_f64(name, std::move(shape), v);
  std::vector<std::uint16_t> b;
  for (double x : v) {
    const float f = static_cast<float>(x);
    b.push_back(t == DType::kBF16 ? float_to_bf16(f) : double_to_f16(f));
  }
  return tensor_from_bits16(name, t, std::move(shape), b);
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
  const int hq = pj.at("n_q_heads").get<int>(), hk = pj.at("n_kv_heads").get<int>();
  const auto& mk = rope_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("rope_run_engine", "unknown mistake (known: pairing, offset, fp32-angles, "
                                     "double-rotation, sin-sign)", o.mistake);
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
  optimized::RopeCache cache = optimized::rope_cache_init(p, pos);
  if (o.mistake == "fp32-angles") {  // the HF pipeline: f32 inv_freq, f32 angle, f32 cos/sin
    for (int i = 0; i < np; ++i) {
      const float e = static_cast<float>(2 * i) / static_cast<float>(p.rotary_dim);
      cache.inv_freq[i] = 1.0f / std::pow(static_cast<float>(p.base), e);
    }
    for (std::int64_t t = 0; t < tn; ++t) {
      for (int i = 0; i < np; ++i) {
        const float phi = static_cast<float>(pos[t]) * static_cast<float>(cache.inv_freq[i]);
        cache.cos_f32[t * np + i] = static_cast<float>(p.attention_factor) * std::cos(phi);
        cache.sin_f32[t * np + i] = static_cast<float>(p.attention_factor) * std::sin(phi);
      }
    }
  }
  if (o.mistake == "sin-sign") {
    for (auto& s : cache.sin_f32) s = -s;
  }
  std::vector<float> q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k"));
  std::vector<float> qr(q.size()), kr(k.size());
  const optimized::RopeShape qs{tn, hq, optimized::RopeTensorLayout::kTokensHeadsDim};
  const optimized::RopeShape ks{tn, hk, optimized::RopeTensorLayout::kTokensHeadsDim};
  optimized::rope_apply_qk(p, cache, qs, q, qr, ks, k, kr);
  if (o.mistake == "double-rotation") optimized::rope_apply_qk(p, cache, qs, qr, qr, ks, kr, kr);

  const DType t = golden.at("q").dtype;
  TensorMap out;
  auto put = [&](Tensor x) {
    std::string n = x.name;
    out.emplace(n, std::move(x));
  };
  std::vector<double> inv(cache.inv_freq.begin(), cache.inv_freq.end());
  for (auto& v : inv) v = static_cast<float>(v);
  put(output_tensor("inv_freq", DType::kF32, {np}, inv));
  put(output_tensor("cos", t, {tn, np}, std::vector<double>(cache.cos_f32.begin(), cache.cos_f32.end())));
  put(output_tensor("sin", t, {tn, np}, std::vector<double>(cache.sin_f32.begin(), cache.sin_f32.end())));
  put(output_tensor("q_rot", t, {tn, hq, h}, std::vector<double>(qr.begin(), qr.end())));
  put(output_tensor("k_rot", t, {tn, hk, h}, std::vector<double>(kr.begin(), kr.end())));
  std::vector<double> scores;
  const int group = hq / hk;
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < tn; ++i) {
      for (std::int64_t j = 0; j < tn; ++j) {
        double s = 0;
        const float* a = &qr[(i * hq + hh) * h];
        const float* b = &kr[(j * hk + hh / group) * h];
        for (int c = 0; c < h; ++c) s += static_cast<double>(a[c]) * b[c];
        scores.push_back(s);
      }
    }
  }
  put(output_tensor("scores", t, {hq, tn, tn}, scores));
  return out;
}

}  // namespace

SchemeEntry rope_scheme() {
  return SchemeEntry{"rope", "rotary position embedding (interleaved, half-split, partial)",
                     &rope_cases, &rope_generate, &rope_run_engine, &rope_mistakes};
}

}  // namespace posenc::golden
