// Golden cases for MLA decoupled RoPE (DeepSeek-V2/V3, Kimi K2) as DeepSeek's attention computes
// the scores. Formula, de-interleave and softmax factor: reference/mla.hpp; facts:
// docs/schemes/plans.md (MLA).
//
// Level 1 (committed): DeepSeek-V3 (golden/presets/deepseek-v3.json, read by the HF config reader:
// YaRN x40, mscale_all_dim 1, qk_nope_head_dim dn = 128, qk_rope_head_dim dr = 64), 2 heads, one
// call over the hard positions and YaRN's boundaries (ramp edges L0 / beta_fast, L0 / beta_slow
// and L - 1), float32. Inputs, head-major as HF holds them after the projections:
//   positions [T] int64
//   q_nope [H, T, dn], q_pe [H, T, dr]   q_pe in the checkpoint's interleaved channel order
//   k_nope [H, T, dn], k_pe [1, T, dr]   k_pe: ONE head, shared by every q head
// Stages:
//   softmax_scale [1]      f32   sigma = mscale(s, mscale_all_dim)^2 / sqrt(dn + dr)
//   q_pe_rot [H, T, dr]    rotated  de-interleaved (P x = even channels, then odd), then rotated
//                                   half-split: HF's order, which the output keeps
//   k_pe_rot [1, T, dr]    rotated  the shared head, rotated once
//   scores [H, T, T]       sigma (q_nope . k_nope + q_pe_rot . k_pe_rot) (before any mask)
// Negative controls (result "invalid", the twins of the valid case with its inputs), one per
// engine mistake: softmax-scale-missing (sigma without mscale^2, transformers #47435),
// no-deinterleave (the interleaved q_pe / k_pe rotated half-split as stored), k-pe-per-head (the
// shared k_pe rotated in place inside the per-head loop: H rotations, (R(n) P)^H x).
//
// Budgets (docs/profiles.md): the RoPE stages' (rope_stage_budgets, golden/cases/rope_budgets.cpp)
// with h = dr for the rotations and h = dn + dr for the scores, the angle errors of the rule on
// the dr channels (rope_pipeline_angle_errors: HF's float32 angle, ggml's recurrence):
//   q_pe_rot, k_pe_rot  cond c = a (|x_a| + |x_b|) of the channel's pair, extra c E(p, i)
//   scores    cond sigma (sum_c |qn_c kn_c| + sum_i w_i), w_i = a^2 (|q_a|+|q_b|)(|k_a|+|k_b|),
//             extra sigma sum_i w_i (E_i(p_q) + E_i(p_k)); the bound gets 1.5 r more: sigma's own
//             float32 error (1 eps_f32 relative: a double rounded once, or a float32 formula's
//             interval below) and the product's rounding (0.5 eps_f32)
//   softmax_scale  strict 0.5 ulp + 2^-28; float pipelines: extra = the distance of the
//             pipeline's float32 value (HF: fl of the double; ggml: its float32 formula in
//             interval arithmetic, golden/cases/pipelines.hpp) from the exact sigma
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/float_interval.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/prng.hpp"
#include "optimized/mla.hpp"
#include "optimized/rope_scaling.hpp"
#include "reference/common/errors.hpp"
#include "reference/mla.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kKPePerHead, kKPeRotatedTwice, kKPeUnrotated, kKqScaleLogMulNotUndone, kKqScaleLogMulTwice, kNoDeinterleave, kRopeMscaleNotCancelled, kSoftmaxScaleMissing };
const MistakeTable<MistakeId, 8> kMistakes(
    {"mla"},
    {{
     {MistakeId::kKPePerHead, "k-pe-per-head"},
     {MistakeId::kKPeRotatedTwice, "k-pe-rotated-twice"},
     {MistakeId::kKPeUnrotated, "k-pe-unrotated"},
     {MistakeId::kKqScaleLogMulNotUndone, "kq-scale-log-mul-not-undone"},
     {MistakeId::kKqScaleLogMulTwice, "kq-scale-log-mul-twice"},
     {MistakeId::kNoDeinterleave, "no-deinterleave"},
     {MistakeId::kRopeMscaleNotCancelled, "rope-mscale-not-cancelled"},
     {MistakeId::kSoftmaxScaleMissing, "softmax-scale-missing"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::MlaParams;
using reference::RopeParams;
using reference::RopeScaling;

/// What the expected values follow: the model's computation, or one engine mistake.
struct MlaKnobs {
  bool softmax_missing = false, no_deinterleave = false, k_pe_per_head = false;
  // Engine-only mistakes: k_pe rotated another number of times (0, 2), llama.cpp's kq_scale
  // conventions (1: the GGUF's log multiplier not undone, 2: undone twice), ggml's internal
  // YaRN factor left on q_pe and k_pe.
  int k_pe_turns = 1, kq_scale = 0;
  bool rope_mscale = false;
};

struct MlaCaseDef {
  std::string id, twin, mistake, reason;  // twin, mistake, reason: negative controls
  RopeModelConfig model;
  MlaParams p;
  std::vector<HardPosition> positions;
  std::string result = "valid";
  MlaKnobs knobs;
  std::uint64_t seed = 0;
};

const std::vector<std::pair<std::string, std::string>>& mistake_table() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"softmax-scale-missing", "the softmax scale left at 1/sqrt(dn + dr), without mscale^2"},
      {"no-deinterleave", "q_pe and k_pe rotated half-split in the checkpoint's interleaved order"},
      {"k-pe-per-head", "the shared k_pe rotated in place once per q head"},
      {"k-pe-unrotated", "k_pe cached and used without its rotation"},
      {"k-pe-rotated-twice", "the shared k_pe rotated twice (once when written, once when read)"},
      {"kq-scale-log-mul-not-undone",
       "llama.cpp's kq_scale = mscale^2 / sqrt(d) with mscale = 1 + 0.1 L ln s fed the GGUF's "
       "yarn_log_multiplier L = 0.1 mscale_all_dim as written (the loader's division by 0.1 "
       "missing)"},
      {"kq-scale-log-mul-twice",
       "ik_llama.cpp's mscale = 1 + L ln s fed mainline's divided L = mscale_all_dim (the 0.1 "
       "removed twice)"},
      {"rope-mscale-not-cancelled",
       "ggml's internal YaRN factor 1 + 0.1 ln s left on q_pe and k_pe (attn_factor not "
       "pre-divided) while kq_scale keeps mscale^2"}};
  return v;
}

std::vector<std::string> mistakes() {
  std::vector<std::string> v;
  for (const auto& m : mistake_table()) v.push_back(m.first);
  return v;
}

std::string mistake_words(const std::string& mistake) {
  for (const auto& m : mistake_table()) {
    if (m.first == mistake) return m.second;
  }
  return "";
}

MlaKnobs knobs_of(const std::string& mistake) {
  MlaKnobs k;
  if (mistake.empty()) return k;
  if (kMistakes.is(mistake, MistakeId::kSoftmaxScaleMissing)) {
    k.softmax_missing = true;
  } else if (kMistakes.is(mistake, MistakeId::kNoDeinterleave)) {
    k.no_deinterleave = true;
  } else if (kMistakes.is(mistake, MistakeId::kKPePerHead)) {
    k.k_pe_per_head = true;
  } else if (kMistakes.is(mistake, MistakeId::kKPeUnrotated)) {
    k.k_pe_turns = 0;
  } else if (kMistakes.is(mistake, MistakeId::kKPeRotatedTwice)) {
    k.k_pe_turns = 2;
  } else if (kMistakes.is(mistake, MistakeId::kKqScaleLogMulNotUndone)) {
    k.kq_scale = 1;
  } else if (kMistakes.is(mistake, MistakeId::kKqScaleLogMulTwice)) {
    k.kq_scale = 2;
  } else if (kMistakes.is(mistake, MistakeId::kRopeMscaleNotCancelled)) {
    k.rope_mscale = true;
  } else {
    std::string list;
    for (const auto& m : mistakes()) list += (list.empty() ? "" : ", ") + m;
    throw_invalid("mla_run_engine", "unknown mistake for an mla case (known: " + list + ")",
                  mistake);
  }
  return k;
}

/// The inputs: dyadic float32 values in (-1, 1) from the seed (stream 1..4: q_nope, q_pe, k_nope,
/// k_pe).
struct MlaInputs {
  std::vector<double> q_nope, q_pe, k_nope, k_pe;  // [H, T, dn], [H, T, dr], [H, T, dn], [T, dr]
};

MlaInputs draw_inputs(const MlaCaseDef& d, std::int64_t T) {
  const std::size_t H = static_cast<std::size_t>(d.p.n_heads), n = static_cast<std::size_t>(T);
  const std::size_t dn = static_cast<std::size_t>(d.p.nope_dim),
                    dr = static_cast<std::size_t>(d.p.rope_dim);
  auto draw = [&](std::uint64_t stream, std::size_t count) {
    std::vector<double> v(count);
    for (std::size_t i = 0; i < count; ++i) {
      v[i] = std::ldexp(static_cast<double>(prng_int(d.seed, stream, i, (1 << 24) - 1)), -24);
    }
    return v;
  };
  return {draw(1, H * n * dn), draw(2, H * n * dr), draw(3, H * n * dn), draw(4, n * dr)};
}

/// The rule of the rotated part: the model's scaling on dr channels, half-split.
RopeParams rope_params_of(const MlaParams& p) { return reference::mla_rope_params(p); }

template <class Real>
struct MlaOracle {
  Real sigma, a;
  std::vector<Real> q_pe_rot, k_pe_rot, scores;
};

/// The expected values (reference/mla.hpp), under the knobs.
template <class Real>
MlaOracle<Real> mla_oracle(const MlaCaseDef& d, const RopeScaling& s,
                           const std::vector<std::int64_t>& pos, const MlaInputs& x) {
  MlaParams p = d.p;
  p.interleaved_checkpoint = d.p.interleaved_checkpoint && !d.knobs.no_deinterleave;
  const auto st = reference::rope_scaling_tables<Real>(rope_params_of(p), s);
  MlaOracle<Real> o;
  o.a = st.tables.attention_factor;
  o.sigma = reference::mla_softmax_scale(
      p, d.knobs.softmax_missing ? Real(1) : st.softmax_scale_multiplier);
  const std::int64_t T = static_cast<std::int64_t>(pos.size());
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim;
  const int turns = d.knobs.k_pe_per_head ? H : 1;
  for (std::int64_t j = 0; j < T; ++j) {
    std::vector<Real> v(x.k_pe.begin() + j * dr, x.k_pe.begin() + (j + 1) * dr);
    for (int r = 0; r < turns; ++r) v = reference::mla_rope_apply(p, st.tables, pos[j], v);
    o.k_pe_rot.insert(o.k_pe_rot.end(), v.begin(), v.end());
  }
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < T; ++i) {
      const auto b = x.q_pe.begin() + (h * T + i) * dr;
      const auto v = reference::mla_rope_apply(p, st.tables, pos[i], std::vector<Real>(b, b + dr));
      o.q_pe_rot.insert(o.q_pe_rot.end(), v.begin(), v.end());
    }
  }
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        Real sum = Real(0);
        for (int c = 0; c < dn; ++c)
          sum += Real(x.q_nope[(h * T + i) * dn + c]) * Real(x.k_nope[(h * T + j) * dn + c]);
        for (int c = 0; c < dr; ++c)
          sum += o.q_pe_rot[(h * T + i) * dr + c] * o.k_pe_rot[j * dr + c];
        o.scores.push_back(o.sigma * sum);
      }
    }
  }
  return o;
}

/// The expected tensors of one case and their budgets.
struct MlaGen {
  const MlaCaseDef& d;
  const int H = d.p.n_heads, dn = d.p.nope_dim, dr = d.p.rope_dim, np = d.p.rope_dim / 2;
  std::int64_t T = 0;
  RopeScaling s;
  std::vector<std::int64_t> pos;
  MlaInputs x;
  double a = 1, sigma = 0;
  std::map<std::string, RopeStageBudgets> rot_b, score_b;
  std::map<std::string, std::vector<double>> E;  // profile -> [T, np] angle error bound
  // k-pe-per-head's control: an engine following it rotates k_pe H times, each turn with the
  // error of one (on a pair whose |x_a| + |x_b| may grow by sqrt 2): its k_pe_rot and scores
  // budgets (bound and extra) are H sqrt 2 times the single rotation's.
  const double k_turns = d.knobs.k_pe_per_head ? d.p.n_heads * std::sqrt(2.0) : 1.0;

  void widen(ExpectedTensor& e) const {
    if (k_turns == 1.0) return;
    for (auto& [prof, b] : e.spec.check.profiles) {
      if (b.applies) b.bound *= k_turns;
    }
    for (auto& [prof, ex] : e.extra) {
      for (double& v : ex) v *= k_turns;
    }
  }

  /// Input channels of rotated pair i: (2i, 2i + 1) de-interleaved, else (i, i + np).
  int chan_a(int i) const { return d.knobs.no_deinterleave ? i : 2 * i; }
  int chan_b(int i) const { return d.knobs.no_deinterleave ? i + np : 2 * i + 1; }
  /// |x_a| + |x_b| of every pair of n rows of dr channels.
  std::vector<double> pair_sums(const std::vector<double>& v, std::int64_t rows) const {
    std::vector<double> out;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int i = 0; i < np; ++i)
        out.push_back(std::fabs(v[r * dr + chan_a(i)]) + std::fabs(v[r * dr + chan_b(i)]));
    }
    return out;
  }

  ExpectedTensor rotated(const std::string& name, const std::vector<mp50>& v,
                         const std::vector<double>& in, std::int64_t heads) {
    // rows are (head, token) in q_pe_rot [H, T, dr], token in k_pe_rot [1, T, dr]
    ExpectedTensor e =
        expected_tensor(name, "rotated", DType::kF32, {heads, T, dr}, CheckKind::kConditioned,
                        {{"head", "", {}, {}}, {"token", "", {}, {}}, {"channel", "", {}, {}}});
    e.values = v;
    const std::vector<double> ps = pair_sums(in, heads * T);
    e.cond.assign(v.size(), 0.0);
    for (std::int64_t r = 0; r < heads * T; ++r) {
      for (int c = 0; c < dr; ++c) e.cond[r * dr + c] = a * ps[r * np + c % np];
    }
    for (const auto& [prof, b] : rot_b) e.spec.check.profiles[prof] = b.rotated;
    for (const auto& [prof, ang] : E) {
      std::vector<double> ex(v.size());
      for (std::int64_t r = 0; r < heads * T; ++r) {
        for (int c = 0; c < dr; ++c)
          ex[r * dr + c] = e.cond[r * dr + c] * ang[(r % T) * np + c % np];
      }
      e.extra[prof] = std::move(ex);
    }
    if (name == "k_pe_rot") widen(e);
    return e;
  }

  ExpectedTensor scores(const std::vector<mp50>& v) {
    ExpectedTensor e =
        expected_tensor("scores", "scores", DType::kF32, {H, T, T}, CheckKind::kConditioned,
                        {{"head", "", {}, {}}, {"query", "", {}, {}}, {"key", "", {}, {}}});
    e.values = v;
    const std::vector<double> qs = pair_sums(x.q_pe, H * T), ks = pair_sums(x.k_pe, T);
    for (const auto& [prof, b] : score_b) e.spec.check.profiles[prof] = b.scores;
    for (const auto& [prof, ang] : E) e.extra[prof].assign(v.size(), 0.0);
    e.cond.assign(v.size(), 0.0);
    for (int h = 0; h < H; ++h) {
      for (std::int64_t i = 0; i < T; ++i) {
        for (std::int64_t j = 0; j < T; ++j) {
          const std::size_t flat = static_cast<std::size_t>((h * T + i) * T + j);
          double c = 0;
          for (int ch = 0; ch < dn; ++ch)
            c += std::fabs(x.q_nope[(h * T + i) * dn + ch] * x.k_nope[(h * T + j) * dn + ch]);
          for (int pi = 0; pi < np; ++pi) {
            const double w = a * a * qs[(h * T + i) * np + pi] * ks[j * np + pi];
            c += w;
            for (auto& [prof, ang] : E)
              e.extra[prof][flat] += sigma * w * (ang[i * np + pi] + ang[j * np + pi]);
          }
          e.cond[flat] = sigma * c;
        }
      }
    }
    widen(e);
    return e;
  }

  ExpectedTensor softmax_scale(const mp50& v) {
    ExpectedTensor e = expected_tensor("softmax_scale", "table", DType::kF32, {1}, CheckKind::kUlp);
    e.values = {v};
    for (const auto& [prof, b] : rot_b) {
      e.spec.check.profiles[prof] = b.scalar;
      if (prof == "strict" || !b.scalar.applies) continue;
      // the float32 value the pipeline computes (ggml: its own formula; without the multiplier,
      // and in HF, the double rounded once)
      const F32Interval f =
          prof == "fp32-recurrence" && !d.knobs.softmax_missing
              ? pipelines::ggml_softmax_scale<F32Interval>(s, d.model.softmax_head_dim)
              : pipelines::hf_softmax_scale<F32Interval>(sigma);
      e.extra[prof] = {1.01 * std::max(std::fabs(f.lo() - sigma), std::fabs(f.hi() - sigma))};
    }
    return e;
  }
};

void describe(Json& m, const MlaCaseDef& d, const MlaGen& g) {
  std::string desc = d.model.id + " MLA decoupled RoPE: " + std::to_string(d.p.n_heads) +
                     " heads, qk_nope_head_dim " + std::to_string(d.p.nope_dim) +
                     ", qk_rope_head_dim " + std::to_string(d.p.rope_dim) +
                     " (one shared k_pe head), YaRN x" + Json(g.s.factor).dump() + ", " +
                     std::to_string(g.T) + " positions up to " + std::to_string(g.pos.back());
  if (d.result == "invalid") desc += "; negative control: " + mistake_words(d.mistake);
  m["description"] = desc;
  m["citation"] =
      "DeepSeek-AI, DeepSeek-V2, arXiv:2405.04434v5, Sec. 2.1.3 (decoupled RoPE) and App. B (YaRN, "
      "the softmax factor); HF transformers DeepseekV3Attention (apply_rotary_pos_emb_interleave)";
  m["preset"] = {{"name", d.model.id},
                 {"hf_model", d.model.hf_model},
                 {"source", d.model.source},
                 {"config", d.model.config}};
  m["conventions"] = {
      {"inputs",
       "q_nope [H, T, dn], q_pe [H, T, dr], k_nope [H, T, dn], k_pe [1, T, dr] (one head shared "
       "by every q head), as the projections give them; q_pe and k_pe in the checkpoint's "
       "interleaved order: pair i = channels (2i, 2i+1)"},
      {"deinterleave",
       "rope_interleave: P x = [x0, x2, ..., x_{dr-2}, x1, x3, ..., x_{dr-1}], then RoPE "
       "half-split (pair i = channels i, i + dr/2); q_pe_rot and k_pe_rot stay in that order"},
      {"rotation",
       "y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos, angle positions[t] * inv_freq[i] of the "
       "scaling rule on dr channels, the rule's attention factor on cos and sin"},
      {"k_pe", "rotated once per token and broadcast to every head"},
      {"softmax_scale", "mscale(s, mscale_all_dim)^2 / sqrt(qk_nope_head_dim + qk_rope_head_dim)"},
      {"scores",
       "softmax_scale * (q_nope . k_nope + q_pe_rot . k_pe_rot), [head, query token, key "
       "token], before any mask"}};
  m["positions_why"] = Json::array();
  for (const auto& hp : d.positions)
    m["positions_why"].push_back({{"position", hp.m}, {"why", hp.why}});
  m["params"] = {{"n_heads", d.p.n_heads},
                 {"qk_nope_head_dim", d.p.nope_dim},
                 {"qk_rope_head_dim", d.p.rope_dim},
                 {"base", d.p.base},
                 {"rope_interleave", d.p.interleaved_checkpoint},
                 {"n_tokens", g.T},
                 {"dtype", "f32"},
                 {"scaling", rope_scaling_to_json(d.model.scaling)},
                 {"derived", {{"attention_factor", g.a}, {"softmax_scale", g.sigma}}}};
  if (d.result == "invalid") {
    m["negative_control"] = {{"mistake", d.mistake}, {"twin", d.twin}, {"reason", d.reason}};
  }
}

GoldenCase mla_case_generate(const MlaCaseDef& d) {
  MlaGen g{d};
  for (const auto& hp : d.positions) g.pos.push_back(hp.m);
  g.T = static_cast<std::int64_t>(g.pos.size());
  g.s = d.model.scaling;
  g.s.seq_len = g.pos.back() + 1;
  g.x = draw_inputs(d, g.T);
  const auto o50 = mla_oracle<mp50>(d, g.s, g.pos, g.x);
  const auto o100 = mla_oracle<mp100>(d, g.s, g.pos, g.x);
  cross_check(d.id, "softmax_scale", DType::kF32, {o50.sigma}, {o100.sigma});
  cross_check(d.id, "q_pe_rot", DType::kF32, o50.q_pe_rot, o100.q_pe_rot);
  cross_check(d.id, "k_pe_rot", DType::kF32, o50.k_pe_rot, o100.k_pe_rot);
  cross_check(d.id, "scores", DType::kF32, o50.scores, o100.scores);
  g.a = round_to_f64(o50.a);
  g.sigma = round_to_f64(o50.sigma);
  const RopeParams rp = rope_params_of(d.p);
  for (const auto& prof : profiles()) {
    const RopeAngleErrors ae = rope_pipeline_angle_errors(prof.name, rp, g.s, g.pos);
    g.rot_b[prof.name] = rope_stage_budgets(prof.name, DType::kF32, ae.A, g.dr);
    RopeStageBudgets sb = rope_stage_budgets(prof.name, DType::kF32, ae.A, g.dn + g.dr);
    if (sb.scores.applies) sb.scores.bound += 1.5 * 1.01;  // sigma's float32 error and the product
    g.score_b[prof.name] = sb;
    if (prof.name != "strict" && sb.table.applies) g.E[prof.name] = ae.angle;
  }

  std::vector<Tensor> tensors;
  std::vector<TensorSpec> inputs, expected;
  const std::int64_t H = g.H, T = g.T, dn = g.dn, dr = g.dr;
  tensors.push_back(tensor_from_i64("positions", {T}, g.pos));
  tensors.push_back(input_tensor("q_nope", DType::kF32, {H, T, dn}, g.x.q_nope));
  tensors.push_back(input_tensor("q_pe", DType::kF32, {H, T, dr}, g.x.q_pe));
  tensors.push_back(input_tensor("k_nope", DType::kF32, {H, T, dn}, g.x.k_nope));
  tensors.push_back(input_tensor("k_pe", DType::kF32, {1, T, dr}, g.x.k_pe));
  for (const auto& t : tensors) inputs.push_back(input_spec(t));
  expected.push_back(add_expected(&tensors, g.softmax_scale(o50.sigma)));
  expected.push_back(add_expected(&tensors, g.rotated("q_pe_rot", o50.q_pe_rot, g.x.q_pe, H)));
  expected.push_back(add_expected(&tensors, g.rotated("k_pe_rot", o50.k_pe_rot, g.x.k_pe, 1)));
  expected.push_back(add_expected(&tensors, g.scores(o50.scores)));

  Json m = manifest_header(d.id, "mla", "deepseek", d.result, 1);
  describe(m, d, g);
  m["oracle"] = mp_oracle_json();
  m["seed"] = d.seed;
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q_nope, 2 = q_pe, 3 = k_nope, 4 = "
      "k_pe; "
      "integer * 2^-24, |integer| < 2^24";
  manifest_add_tensors(m, d.id, inputs, expected);
  GoldenCase out;
  out.manifest = std::move(m);
  out.tensors = std::move(tensors);
  return out;
}

// ---- the catalog ------------------------------------------------------------------------------

const std::vector<MlaCaseDef>& case_table() {
  static const std::vector<MlaCaseDef> table = [] {
    MlaCaseDef v;
    v.model = rope_config_read(default_presets_dir() / "deepseek-v3.json");
    const auto& c = v.model.config;
    v.p.n_heads = 2;
    v.p.nope_dim = c.at("qk_nope_head_dim").get<int>();
    v.p.rope_dim = c.at("qk_rope_head_dim").get<int>();
    v.p.base = v.model.params.base;
    v.p.interleaved_checkpoint = true;  // DeepSeek's checkpoints (HF v5: rope_interleave true)
    const std::int64_t last = v.model.max_position - 1;
    v.positions = rope_call_positions(last, rope_scaling_edges(v.model, last));
    v.id = "mla_deepseek_v3_h2_f32";
    v.seed = rope_seed_of(v.id);
    std::vector<MlaCaseDef> t = {v};
    const std::vector<std::pair<std::string, std::string>> controls = {
        {"softmax-scale-missing",
         "the softmax scale without YaRN's mscale(s, mscale_all_dim)^2 (transformers #47435): "
         "0.072169 "
         "instead of 0.135234 for s = 40, every logit 1.87x too small"},
        {"no-deinterleave",
         "rope_interleave ignored: the checkpoint's interleaved q_pe and k_pe rotated half-split "
         "as stored, "
         "so pair i mixes channels i and i + 32, which the weights never trained together"},
        {"k-pe-per-head",
         "the one shared k_pe rotated in place inside the per-head loop: rotated H times (angle H "
         "n), "
         "wrong for every head from the second rotation on"}};
    for (const auto& [mistake, reason] : controls) {
      MlaCaseDef n = v;  // the twin's inputs: same seed
      std::string tag = mistake;
      std::replace(tag.begin(), tag.end(), '-', '_');
      n.id = "mla_deepseek_v3_h2_" + tag + "_invalid_f32";
      n.twin = v.id;
      n.mistake = mistake;
      n.reason = reason;
      n.result = "invalid";
      n.knobs = knobs_of(mistake);
      t.push_back(n);
    }
    return t;
  }();
  return table;
}

std::vector<CaseRow> cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : case_table()) {
    std::string desc =
        c.model.id + ", " + std::to_string(c.p.n_heads) + " heads, YaRN boundaries, f32";
    if (c.result == "invalid") desc += ", invalid convention " + c.mistake;
    rows.push_back({c.id, desc});
  }
  return rows;
}

GoldenCase generate(const std::string& id) {
  for (const auto& c : case_table()) {
    if (c.id == id) return mla_case_generate(c);
  }
  throw_invalid("mla_generate", "no MLA case has this id", id);
}

// ---- the built-in engine ----------------------------------------------------------------------

/// posenc's kernels (optimized/mla.hpp, `exact`) or a float32 pipeline (`fp32`: HF's float32
/// tables and rotations; `fp32-recurrence`: ggml's), the scores accumulated in float32 and
/// multiplied by the pipeline's float32 softmax scale.
TensorMap run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const MlaKnobs k = knobs_of(o.mistake);
  if (const std::string why = pipelines::dtype_mismatch(o.pipeline, DType::kF32); !why.empty()) {
    throw_invalid("mla_run_engine", why, o.pipeline);
  }
  pipelines::profile_of(o.pipeline);  // an unknown pipeline is an InvalidArgument
  const Json& pj = spec.manifest.at("params");
  MlaParams p;
  p.n_heads = pj.at("n_heads").get<int>();
  p.nope_dim = pj.at("qk_nope_head_dim").get<int>();
  p.rope_dim = pj.at("qk_rope_head_dim").get<int>();
  p.base = pj.at("base").get<double>();
  p.interleaved_checkpoint = pj.at("rope_interleave").get<bool>() && !k.no_deinterleave;
  RopeScaling s = rope_scaling_from_json(pj.at("scaling"));
  const Tensor& pt = golden.at("positions");
  std::vector<std::int64_t> pos;
  for (std::int64_t i = 0; i < pt.numel(); ++i) pos.push_back(pt.get_i64(i));
  const std::int64_t T = static_cast<std::int64_t>(pos.size());
  s.seq_len = pos.empty() ? 0 : *std::max_element(pos.begin(), pos.end()) + 1;
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim, dq = dn + dr;
  const RopeParams rp = rope_params_of(p);
  const auto qn = tensor_to_f32(golden.at("q_nope")), qp = tensor_to_f32(golden.at("q_pe"));
  const auto kn = tensor_to_f32(golden.at("k_nope"));
  std::vector<float> kpe = tensor_to_f32(golden.at("k_pe"));
  // q [T, H, dn + dr] and k_nope [T, H, dn], the kernels' layout
  std::vector<float> q(static_cast<std::size_t>(T * H * dq)),
      knt(static_cast<std::size_t>(T * H * dn));
  for (int h = 0; h < H; ++h) {
    for (std::int64_t t = 0; t < T; ++t) {
      std::copy_n(&qn[(h * T + t) * dn], dn, &q[(t * H + h) * dq]);
      std::copy_n(&qp[(h * T + t) * dr], dr, &q[(t * H + h) * dq + dn]);
      std::copy_n(&kn[(h * T + t) * dn], dn, &knt[(t * H + h) * dn]);
    }
  }
  const auto st = optimized::rope_scaling_tables(rp, s);
  double mult = k.softmax_missing ? 1.0 : st.softmax_scale_multiplier;
  double a = st.attention_factor;
  const double ln_s = s.factor > 1 ? std::log(s.factor) : 0.0;
  if (k.kq_scale == 1) mult = std::pow(1 + 0.1 * (0.1 * s.mscale_all_dim) * ln_s, 2);
  if (k.kq_scale == 2) mult = std::pow(1 + s.mscale_all_dim * ln_s, 2);
  if (k.rope_mscale) a *= 1 + 0.1 * ln_s;
  float sigma = static_cast<float>(mult / std::sqrt(static_cast<double>(dq)));
  optimized::RopeCache cache = optimized::rope_cache_init(rp, pos, st.inv_freq, a);
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {  // the pipeline's float32 tables, same kernel arithmetic
    RopeMagnitude mag;
    if (mult != st.softmax_scale_multiplier) mag.softmax_multiplier = mult;
    if (a != st.attention_factor) mag.a = a;
    const RopePipelineTables tb = rope_pipeline_tables(o.pipeline, rp, s, dq, pos, mag);
    cache.cos_f32 = tb.cos;
    cache.sin_f32 = tb.sin;
    sigma = tb.softmax;
  }
  const std::vector<float> kpe_raw = kpe;
  optimized::mla_rope_apply(p, cache, q, kpe);
  const int turns = k.k_pe_per_head ? H : k.k_pe_turns;
  if (turns > 1) {  // the shared head rotated again
    std::vector<float> none(q.size(), 0.0f);
    for (int h = 1; h < turns; ++h) optimized::mla_rope_apply(p, cache, none, kpe);
  }
  if (turns == 0) kpe = kpe_raw;
  std::vector<float> keys(static_cast<std::size_t>(T * H * dq));
  optimized::mla_assemble_keys(p, T, knt, kpe, keys);
  std::vector<float> qr, scores;
  for (int h = 0; h < H; ++h) {
    for (std::int64_t t = 0; t < T; ++t) {
      const float* r = &q[(t * H + h) * dq + dn];
      qr.insert(qr.end(), r, r + dr);
    }
  }
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        float sum = 0.0f;
        for (int c = 0; c < dq; ++c) sum += q[(i * H + h) * dq + c] * keys[(j * H + h) * dq + c];
        scores.push_back(sum * sigma);
      }
    }
  }
  TensorMap out;
  out.emplace("softmax_scale", engine_tensor("softmax_scale", DType::kF32, {1}, {sigma}));
  out.emplace("q_pe_rot", engine_tensor("q_pe_rot", DType::kF32, {H, T, dr}, qr));
  out.emplace("k_pe_rot", engine_tensor("k_pe_rot", DType::kF32, {1, T, dr}, kpe));
  out.emplace("scores", engine_tensor("scores", DType::kF32, {H, T, T}, scores));
  return out;
}

}  // namespace

SchemeEntry mla_scheme() {
  SchemeEntry e{
      "mla",
      "MLA decoupled RoPE (DeepSeek-V3): interleaved q_pe, one shared k_pe, YaRN tables, "
      "scores with the mscale^2 softmax factor",
      &cases,
      &generate,
      &run_engine,
      &mistakes,
      &mistake_words};
  e.order = 150;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
