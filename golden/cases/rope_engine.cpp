// The RoPE family's built-in engine: posenc's kernels and the emulated pipelines, through
// files, with the named mistakes (golden/cases/rope_case.hpp, rope_case_run_engine).
#include "golden/cases/mistakes.hpp"
#include "golden/cases/rope_kit.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kDoubleRotation, kDynamicNtk, kFactorInverted, kFp32Angles, kKqScaleLogMulNotUndone, kMscaleOnRotation, kNoMscale, kOffset, kPairing, kSinSign, kSoftmaxScaleMissing, kSoftmaxScaleUnsquared, kUnscaled, kYarnTruncateFlipped };
const MistakeTable<MistakeId, 14> kMistakes(
    {"rope", "rope_scaling"},
    {{
     {MistakeId::kDoubleRotation, "double-rotation"},
     {MistakeId::kDynamicNtk, "dynamic-ntk"},
     {MistakeId::kFactorInverted, "factor-inverted"},
     {MistakeId::kFp32Angles, "fp32-angles", true},  // retired: now a pipeline
     {MistakeId::kKqScaleLogMulNotUndone, "kq-scale-log-mul-not-undone"},
     {MistakeId::kMscaleOnRotation, "mscale-on-rotation"},
     {MistakeId::kNoMscale, "no-mscale"},
     {MistakeId::kOffset, "offset"},
     {MistakeId::kPairing, "pairing"},
     {MistakeId::kSinSign, "sin-sign"},
     {MistakeId::kSoftmaxScaleMissing, "softmax-scale-missing"},
     {MistakeId::kSoftmaxScaleUnsquared, "softmax-scale-unsquared"},
     {MistakeId::kUnscaled, "unscaled"},
     {MistakeId::kYarnTruncateFlipped, "yarn-truncate-flipped"}}});

}  // namespace


using namespace rope_kit;
using reference::LongRopePolicy;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;
namespace bud = budgets;

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
  if (pipelines::of(pipeline) == Pipeline::kFp32Recurrence) {  // ggml: theta *= theta_scale along the pairs
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
    throw_invalid("rope_run_engine", kMistakes.is(o.mistake, MistakeId::kFp32Angles)
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
  if (kMistakes.is(o.mistake, MistakeId::kOffset)) {
    for (auto& m : pos) m += 1;
  }
  if (kMistakes.is(o.mistake, MistakeId::kPairing)) {
    p.layout = p.layout == RopeLayout::kInterleaved ? RopeLayout::kHalfSplit
                                                    : RopeLayout::kInterleaved;
  }
  // The call's seq_len, as HF reads it: max(position_ids) + 1.
  std::int64_t last = 0;
  for (auto m : pos) last = std::max(last, m);
  s.seq_len = last + 1;
  if (kMistakes.is(o.mistake, MistakeId::kUnscaled)) s = RopeScaling{};
  if (kMistakes.is(o.mistake, MistakeId::kFactorInverted)) s.factor = 1.0 / s.factor;
  // YaRN's correction range with the other `truncate` (integer ramp ends <-> fractional).
  if (kMistakes.is(o.mistake, MistakeId::kYarnTruncateFlipped) && s.type == reference::RopeScalingType::kYarn)
    s.truncate = !s.truncate;
  // Static NTK on a dynamic case: the base scaled by the factor whatever the call's length.
  if (kMistakes.is(o.mistake, MistakeId::kDynamicNtk) && s.type == reference::RopeScalingType::kDynamic) {
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
  if (pipelines::of(o.pipeline) == Pipeline::kExact) {
    // Plain RoPE: the kernel's own tables; scaled: the rule's tables through the kernel's hook.
    optimized::RopeScaledTablesF64 st;
    st.attention_factor = p.attention_factor;
    if (is_scaled) st = optimized::rope_scaling_tables(p, s);
    magnitude(st.attention_factor, st.softmax_scale_multiplier);
    optimized::RopeCache cache = is_scaled ? optimized::rope_cache_init(p, pos, st.inv_freq, st.attention_factor)
                                           : optimized::rope_cache_init(p, pos);
    if (kMistakes.is(o.mistake, MistakeId::kSinSign)) {
      for (auto& x : cache.sin_f32) x = -x;
    }
    const optimized::RopeShape qs{tn, hq, optimized::RopeTensorLayout::kTokensHeadsDim};
    const optimized::RopeShape ks{tn, hk, optimized::RopeTensorLayout::kTokensHeadsDim};
    optimized::rope_apply_qk(p, cache, qs, q, qr, ks, k, kr);
    if (kMistakes.is(o.mistake, MistakeId::kDoubleRotation)) optimized::rope_apply_qk(p, cache, qs, qr, qr, ks, kr, kr);
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
  if (kMistakes.is(o.mistake, MistakeId::kNoMscale)) {  // the rule's magnitude left out: cos/sin factor and MLA multiplier
    a = 1.0;
    multiplier = 1.0;
  } else if (kMistakes.is(o.mistake, MistakeId::kSoftmaxScaleMissing)) {  // DeepSeek MLA's m^2 left out of the softmax
    multiplier = 1.0;
  } else if (kMistakes.is(o.mistake, MistakeId::kSoftmaxScaleUnsquared)) {  // m instead of m^2
    multiplier = std::sqrt(multiplier);
  } else if (kMistakes.is(o.mistake, MistakeId::kMscaleOnRotation)) {  // m on cos and sin (q and k) instead of m^2 on the softmax
    a *= std::sqrt(multiplier);
    multiplier = 1.0;
  }
  // llama.cpp's DeepSeek kq_scale conventions (docs/schemes/rope_scaling.md): kq_scale =
  // mscale^2 / sqrt(d), mscale = 1 + 0.1 L ln s with L the loaded rope_yarn_log_mul.
  if (!s.mla || s.mscale_all_dim == 0 || !(s.factor > 1)) return;
  const double ln_s = std::log(s.factor);
  auto sq = [](double x) { return x * x; };
  if (kMistakes.is(o.mistake, MistakeId::kKqScaleLogMulNotUndone)) {  // the GGUF's 0.1 mscale_all_dim, not divided
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
  if (kMistakes.is(o.mistake, MistakeId::kSinSign)) {
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
  if (kMistakes.is(o.mistake, MistakeId::kDoubleRotation)) {
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
          if (pipelines::of(o.pipeline) == Pipeline::kExact) {  // posenc: an accurate dot product of the float rows
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
