// Shared attention-case generator and engine. Formula: see reference/attention.hpp.
#include "golden/cases/attention_case.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "golden/cases/budgets.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/format/prng.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {
namespace {

using Json = nlohmann::json;
using reference::AttentionParams;

const char* scale_name(reference::AttentionScale s) {
  switch (s) {
    case reference::AttentionScale::kInvSqrtHeadDim: return "inv_sqrt_head_dim";
    case reference::AttentionScale::kNone: return "none";
    case reference::AttentionScale::kGiven: return "given";
  }
  return "?";
}

/// Dyadic input exactly representable in the target dtype, in [-range, range].
double input_value(DType t, double range, std::uint64_t seed, std::uint64_t stream,
                   std::uint64_t i) {
  const int bits = t == DType::kBF16 ? 7 : (t == DType::kF16 ? 10 : 23);
  const std::int64_t lim = (std::int64_t{1} << bits) - 1;
  return range * std::ldexp(static_cast<double>(prng_int(seed, stream, i, lim)), -bits);
}

template <class Real>
struct Oracle {
  std::vector<Real> probs, out;  // [H, Tq, Tk], [Tq, H, dv]
  std::vector<std::uint8_t> visible;  // [H, Tq, Tk]
};

template <class Real>
Oracle<Real> oracle(const AttentionCaseDef& c, const std::vector<double>& q,
                    const std::vector<double>& k, const std::vector<double>& v,
                    const std::function<Real(int, std::int64_t, std::int64_t)>& bias,
                    const decltype(reference::AttentionHooks<Real>::value_hook)& value_hook) {
  const AttentionParams& p = c.params;
  reference::AttentionMask mask;
  mask.key_padding = c.key_padding;
  reference::AttentionHooks<Real> hooks;
  hooks.bias = bias;
  hooks.value_hook = value_hook;
  if (c.scale_radicand > 0) {
    using std::sqrt;
    hooks.scale = Real(1) / sqrt(Real(c.scale_radicand));
  }
  const std::vector<Real> qr(q.begin(), q.end()), kr(k.begin(), k.end()), vr(v.begin(), v.end());
  Oracle<Real> o;
  o.out.assign(static_cast<std::size_t>(c.tq * p.n_heads * p.value_dim), Real(0));
  const int group = p.n_heads / p.n_kv_heads;
  for (int h = 0; h < p.n_heads; ++h) {
    const auto r = reference::attention_head<Real>(
        p, mask, h, reference::attention_slice(qr, c.tq, p.n_heads, p.head_dim, h),
        reference::attention_slice(kr, c.tk, p.n_kv_heads, p.head_dim, h / group),
        reference::attention_slice(vr, c.tk, p.n_kv_heads, p.value_dim, h / group), hooks);
    for (std::int64_t i = 0; i < c.tq; ++i) {
      for (std::int64_t j = 0; j < c.tk; ++j) o.probs.push_back(r.probs(i, j));
      for (int cc = 0; cc < p.value_dim; ++cc) {
        o.out[static_cast<std::size_t>((i * p.n_heads + h) * p.value_dim + cc)] = r.out(i, cc);
      }
    }
    o.visible.insert(o.visible.end(), r.visible.begin(), r.visible.end());
  }
  return o;
}

// ---- budgets (docs/profiles.md) ---------------------------------------------------------
// r = eps_f32 / eps_t, K = optimized::kAttentionMaxError (16: the float32 attention kernel's
// bound in eps_f32 * cond, empirical, see optimized/attention.hpp), T = number of keys.
//   strict, fp32, fp32-recurrence: float32 attention, outputs cast once to t: bound K r, ulps
//     the cast (0.5 for a 16-bit target). fp32 and fp32-recurrence differ from strict only in
//     the bias their pipelines compute (ALiBi slopes from a rounded base, an f16 KQ mask): a
//     relative bias error rho_ij moves score ij by rho_ij |b_ij| (plus a pipeline's absolute
//     bias error a_ij, AttentionCaseDef::bias_abs_error), db_ij = rho_ij |b_ij| + a_ij, hence
//     the extras (first order)
//       probs  p_ij (db_ij + sum_k p_ik db_ik)
//       out    sum_j p_ij db_ij |v_jc - o_ic|
//   bf16, f16 (PyTorch eager in t): each score is rounded four times in t (q@k^T, * scale, the
//     cast bias, + bias), each within u_t S_ij = eps_t S_ij / 2, so |ds_ij| <= 2 eps_t S_ij and
//     |dp_ij| <= p_ij (|ds_ij| + sum_k p_ik |ds_ik|) <= 2 eps_t cond_ij; the float32 softmax adds
//     K r and the cast of p 0.5 ulp: probs bound 2 + K r, ulps 0.5. out: the scores' part
//     sum_j p_ij ds_ij (v_jc - o_ic) <= 2 eps_t B, the casts of p 0.5 eps_t A, the float32
//     softmax K r, the float32 sum over T keys gamma_T A = (T/2) r A and the final cast:
//     bound 2.5 + (K + T/2) r, ulps 0.5. Extras as fp32 (HF builds slopes in float32).
// Every bound gets 1% for second-order terms.

struct AttentionBudgets {
  ProfileBudget probs, out;
};

AttentionBudgets attention_budgets(const std::string& profile, DType t, std::int64_t tk,
                                   double eager_out_extra = 0) {
  const double r = budgets::f32_in(t), K = optimized::kAttentionMaxError, s = 1.01;
  AttentionBudgets b;
  if (profile == "strict" || profile == "fp32" || profile == "fp32-recurrence") {
    b.probs = bound_of(K * r * s, budgets::cast_to(t));
    b.out = bound_of(K * r * s, budgets::cast_to(t));
    return b;
  }
  const std::string na = activation_na(profile, t);
  if (!na.empty()) {
    b.probs = b.out = not_applicable(na);
    return b;
  }
  b.probs = bound_of((2.0 + K * r) * s, 0.5);
  b.out = bound_of((2.5 + eager_out_extra + (K + tk / 2.0) * r) * s, 0.5);
  if (POSENC_MUTANT("gold_attention_eager_score_roundings_dropped")) b.probs.bound = b.out.bound = K * r * s;
  return b;
}

}  // namespace

AttentionCaseInputs attention_case_inputs(const AttentionCaseDef& c) {
  const AttentionParams& p = c.params;
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const DType t = c.dtype;
  AttentionCaseInputs in;
  in.q.resize(static_cast<std::size_t>(c.tq * H * d));
  in.k.resize(static_cast<std::size_t>(c.tk * Hkv * d));
  in.v.resize(static_cast<std::size_t>(c.tk * Hkv * dv));
  for (std::size_t i = 0; i < in.q.size(); ++i) in.q[i] = input_value(t, c.value_range, c.seed, 1, i);
  for (std::size_t i = 0; i < in.k.size(); ++i) in.k[i] = input_value(t, c.value_range, c.seed, 2, i);
  for (std::size_t i = 0; i < in.v.size(); ++i) in.v[i] = input_value(t, 1.0, c.seed, 3, i);
  return in;
}

namespace {

// ---- the generator's stages: budgets, masked-row alternatives, tensors, manifest -----------

/// A case, its inputs and its mp50 oracle, as the budget stages read them.
struct CaseView {
  CaseView(const AttentionCaseDef& def, const AttentionCaseInputs& in, const Oracle<mp50>& o)
      : c(def), q(in.q), k(in.k), v(in.v), o50(o), H(def.params.n_heads), Hkv(def.params.n_kv_heads),
        d(def.params.head_dim), dv(def.params.value_dim), group(H / Hkv),
        scale(static_cast<double>(reference::attention_scale<mp50>(def.params))) {}
  const AttentionCaseDef& c;
  const std::vector<double>&q, &k, &v;
  const Oracle<mp50>& o50;
  const int H, Hkv, d, dv, group;
  const double scale;
};

/// The budgets of probs and out: each profile's bound and, per element, the condition scale and
/// the bias extras of the profiles whose pipelines compute the bias with an error.
struct CaseBudgets {
  std::map<std::string, AttentionBudgets> ab;
  std::vector<std::string> bias_profiles;
  std::vector<double> p_cond, o_cond;
  std::map<std::string, std::vector<double>> p_extra, o_extra;
  std::vector<std::uint8_t> row_masked;  // [H, Tq]: the row has no visible key
};

/// Per key of one score row (head h, query i): its sensitivity S_ij and its bias.
struct ScoreRow {
  std::vector<double> sens, bias;
};

/// The sensitivities of row (h, i); writes its probs' condition scales and whether it is masked.
ScoreRow score_row(const CaseView& cv, int h, std::int64_t i, CaseBudgets& cb) {
  const AttentionCaseDef& c = cv.c;
  const auto& q = cv.q;
  const auto& k = cv.k;
  const auto& o50 = cv.o50;
  const int H = cv.H, Hkv = cv.Hkv, d = cv.d, group = cv.group;
  ScoreRow sr{std::vector<double>(static_cast<std::size_t>(c.tk)), std::vector<double>(static_cast<std::size_t>(c.tk), 0.0)};
  auto& sens = sr.sens;
  auto& bias = sr.bias;
  double mean_sens = 0;
  bool any_visible = false;
  const std::size_t row = (static_cast<std::size_t>(h) * c.tq + i) * c.tk;
  for (std::int64_t j = 0; j < c.tk; ++j) {
    double s = 0;
    for (int x = 0; x < d; ++x) {
      s += std::fabs(q[(i * H + h) * d + x] * k[(j * Hkv + h / group) * d + x]);
    }
    s *= cv.scale;
    if (c.bias50) bias[j] = static_cast<double>(c.bias50(h, i, j));
    s += c.bias_cond ? c.bias_cond(h, i, j) : std::fabs(bias[j]);
    sens[j] = s;
    mean_sens += static_cast<double>(o50.probs[row + j]) * s;
    any_visible |= o50.visible[row + j] != 0;
  }
  cb.row_masked[h * c.tq + i] = !any_visible;
  for (std::int64_t j = 0; j < c.tk; ++j) {
    const double pij = static_cast<double>(o50.probs[row + j]);
    cb.p_cond[row + j] = o50.visible[row + j] ? pij * (1 + sens[j] + mean_sens) : 0.0;
  }
  return sr;
}

/// The bias extras of row (h, i), probs and out, for each profile with a bias error.
void bias_extras_of_row(const CaseView& cv, int h, std::int64_t i, const ScoreRow& sr, CaseBudgets& cb) {
  const AttentionCaseDef& c = cv.c;
  const auto& v = cv.v;
  const auto& o50 = cv.o50;
  const auto& bias = sr.bias;
  const int H = cv.H, Hkv = cv.Hkv, dv = cv.dv, group = cv.group;
  const std::size_t row = (static_cast<std::size_t>(h) * c.tq + i) * c.tk;
  for (const auto& prof : cb.bias_profiles) {
    std::vector<double> db(static_cast<std::size_t>(c.tk));  // |bias error| bound per key
    double mean_db = 0;
    for (std::int64_t j = 0; j < c.tk; ++j) {
      db[j] = c.bias_rel_error(prof, h, i, j) * std::fabs(bias[j]);
      if (c.bias_abs_error) db[j] += c.bias_abs_error(prof, h, i, j);
      mean_db += static_cast<double>(o50.probs[row + j]) * db[j];
    }
    for (std::int64_t j = 0; j < c.tk; ++j) {
      cb.p_extra[prof][row + j] = static_cast<double>(o50.probs[row + j]) * (db[j] + mean_db) * 1.01;
    }
    for (int cc = 0; cc < dv; ++cc) {
      const std::size_t oi = static_cast<std::size_t>((i * H + h) * dv + cc);
      const double oic = static_cast<double>(o50.out[oi]);
      double x = 0;
      for (std::int64_t j = 0; j < c.tk; ++j) {
        x += static_cast<double>(o50.probs[row + j]) * db[j] *
             std::fabs(v[(j * Hkv + h / group) * dv + cc] - oic);
      }
      cb.o_extra[prof][oi] = x * 1.01;
    }
  }
}

/// The output's condition scales of row (h, i): A + B over the keys (value offsets included).
void out_cond_of_row(const CaseView& cv, int h, std::int64_t i, const ScoreRow& sr, CaseBudgets& cb) {
  const AttentionCaseDef& c = cv.c;
  const auto& v = cv.v;
  const auto& o50 = cv.o50;
  const auto& sens = sr.sens;
  const int H = cv.H, Hkv = cv.Hkv, dv = cv.dv, group = cv.group;
  const std::size_t row = (static_cast<std::size_t>(h) * c.tq + i) * c.tk;
  for (int cc = 0; cc < dv; ++cc) {
    const std::size_t oi = static_cast<std::size_t>((i * H + h) * dv + cc);
    const double oic = static_cast<double>(o50.out[oi]);
    double a = 0, b = 0;
    for (std::int64_t j = 0; j < c.tk; ++j) {
      const double pij = static_cast<double>(o50.probs[row + j]);
      const double vj = v[(j * Hkv + h / group) * dv + cc];
      if (c.value_offset) {
        const double off = c.value_offset(h, i, j, cc);
        a += pij * (std::fabs(vj) + std::fabs(off));
        b += pij * std::fabs(vj + off - oic) * sens[j];
        continue;
      }
      a += pij * std::fabs(vj);
      b += pij * std::fabs(vj - oic) * sens[j];
    }
    cb.o_cond[oi] = a + b;
  }
}

/// Condition scales (double is ample for a scale) and, per profile, the bias extras.
CaseBudgets case_budgets(const CaseView& cv) {
  const AttentionCaseDef& c = cv.c;
  const auto& o50 = cv.o50;
  CaseBudgets cb;
  for (const auto& prof : profiles()) {
    cb.ab[prof.name] = attention_budgets(prof.name, c.dtype, c.tk, c.eager_out_extra);
    if (c.bias_rel_error && prof.name != "strict" && cb.ab[prof.name].probs.applies) {
      cb.bias_profiles.push_back(prof.name);
    }
  }
  cb.p_cond.resize(o50.probs.size());
  cb.o_cond.assign(o50.out.size(), 0.0);
  for (const auto& prof : cb.bias_profiles) {
    cb.p_extra[prof].assign(o50.probs.size(), 0.0);
    cb.o_extra[prof].assign(o50.out.size(), 0.0);
  }
  cb.row_masked.assign(static_cast<std::size_t>(cv.H * c.tq), 0);
  for (int h = 0; h < cv.H; ++h) {
    for (std::int64_t i = 0; i < c.tq; ++i) {
      const ScoreRow sr = score_row(cv, h, i, cb);
      bias_extras_of_row(cv, h, i, sr, cb);
      out_cond_of_row(cv, h, i, sr, cb);
    }
  }
  return cb;
}

/// The declared alternative of probs and out for fully masked rows (when the case has any).
struct MaskedRowAlternatives {
  bool any = false;
  ExpectedTensor::Alternative p, o;
};

/// The declared alternative for fully masked rows: PyTorch eager attention fills masked scores
/// with the dtype's minimum, so a row with no visible key becomes uniform over all keys.
MaskedRowAlternatives masked_row_alternatives(const CaseView& cv, const CaseBudgets& cb) {
  const AttentionCaseDef& c = cv.c;
  const auto& v = cv.v;
  const auto& o50 = cv.o50;
  const int H = cv.H, Hkv = cv.Hkv, dv = cv.dv, group = cv.group;
  MaskedRowAlternatives alts;
  bool& any_masked_row = alts.any;
  auto& alt_p = alts.p;
  auto& alt_o = alts.o;
  for (auto m : cb.row_masked) any_masked_row |= m != 0;
  if (any_masked_row) {
    alt_p = {"uniform_masked_rows",
             "a row with no visible key is uniform over all keys, as PyTorch eager attention "
             "gives with dtype-min masking (HF eager_attention_forward); posenc's default is "
             "zeros",
             to_f64(o50.probs), cb.p_cond};
    alt_o = {alt_p.name, alt_p.description, to_f64(o50.out), cb.o_cond};
    for (int h = 0; h < H; ++h) {
      for (std::int64_t i = 0; i < c.tq; ++i) {
        if (!cb.row_masked[h * c.tq + i]) continue;
        const std::size_t row = (static_cast<std::size_t>(h) * c.tq + i) * c.tk;
        for (std::int64_t j = 0; j < c.tk; ++j) {
          alt_p.exact[row + j] = 1.0 / static_cast<double>(c.tk);
          alt_p.cond[row + j] = 1.0 / static_cast<double>(c.tk);
        }
        for (int cc = 0; cc < dv; ++cc) {
          const std::size_t oi = static_cast<std::size_t>((i * H + h) * dv + cc);
          mp50 sum = 0;
          double a = 0;
          for (std::int64_t j = 0; j < c.tk; ++j) {
            sum += mp50(v[(j * Hkv + h / group) * dv + cc]);
            a += std::fabs(v[(j * Hkv + h / group) * dv + cc]);
          }
          alt_o.exact[oi] = round_to_f64(sum / mp50(c.tk));
          alt_o.cond[oi] = a / static_cast<double>(c.tk);
        }
      }
    }
  }
  return alts;
}

/// The input tensors: query and key positions, q, k, v and the key padding.
std::vector<Tensor> attention_input_tensors(const AttentionCaseDef& c, const AttentionCaseInputs& in) {
  const AttentionParams& p = c.params;
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const DType t = c.dtype;
  std::vector<Tensor> tensors;
  std::vector<std::int64_t> qpos(static_cast<std::size_t>(c.tq)), kpos(static_cast<std::size_t>(c.tk));
  for (std::int64_t i = 0; i < c.tq; ++i) qpos[i] = p.query_offset + i;
  for (std::int64_t j = 0; j < c.tk; ++j) kpos[j] = j;
  tensors.push_back(tensor_from_i64("query_positions", {c.tq}, qpos));
  tensors.push_back(tensor_from_i64("key_positions", {c.tk}, kpos));
  tensors.push_back(input_tensor("q", t, {c.tq, H, d}, in.q));
  tensors.push_back(input_tensor("k", t, {c.tk, Hkv, d}, in.k));
  tensors.push_back(input_tensor("v", t, {c.tk, Hkv, dv}, in.v));
  if (!c.key_padding.empty()) {
    std::vector<std::int32_t> kp(c.key_padding.begin(), c.key_padding.end());
    tensors.push_back(tensor_from_i32("key_padding", {c.tk}, kp));
  }
  return tensors;
}

/// Appends the expected probs and out (oracle values, budgets, alternatives) to `tensors`;
/// returns their specs.
std::vector<TensorSpec> add_expected_outputs(const CaseView& cv, CaseBudgets& cb, const MaskedRowAlternatives& alts,
                                             std::vector<Tensor>& tensors) {
  const AttentionCaseDef& c = cv.c;
  const auto& o50 = cv.o50;
  const int H = cv.H, dv = cv.dv;
  const DType t = c.dtype;
  auto& ab = cb.ab;
  auto expected = [&](const std::string& name, const std::string& stage,
                      std::vector<std::int64_t> shape, const std::vector<mp50>& values,
                      const std::vector<double>& cond,
                      std::map<std::string, std::vector<double>> extra, bool is_probs) {
    ExpectedTensor e = expected_tensor(name, stage, t, std::move(shape), CheckKind::kConditioned);
    for (const auto& prof : profiles()) {
      e.spec.check.profiles[prof.name] = is_probs ? ab[prof.name].probs : ab[prof.name].out;
    }
    e.values = values;
    e.cond = cond;
    e.extra = std::move(extra);
    if (alts.any) e.alternatives.push_back(is_probs ? alts.p : alts.o);
    return e;
  };
  ExpectedTensor ep = expected("probs", "probabilities", {H, c.tq, c.tk}, o50.probs, cb.p_cond,
                               std::move(cb.p_extra), true);
  ep.spec.axes = {{"head", "", {}, {}}, {"query", "query_positions", {}, {}},
                  {"key", "key_positions", {}, {}}};
  ExpectedTensor eo = expected("out", "output", {c.tq, H, dv}, o50.out, cb.o_cond, std::move(cb.o_extra), false);
  eo.spec.axes = {{"query", "query_positions", {}, {}}, {"head", "", {}, {}}, {"channel", "", {}, {}}};
  return {add_expected(&tensors, std::move(ep)), add_expected(&tensors, std::move(eo))};
}

/// The manifest (without its tensors): conventions, parameters, oracle, seed, the case's extras.
Json attention_manifest(const AttentionCaseDef& c, bool any_masked_row) {
  const AttentionParams& p = c.params;
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const DType t = c.dtype;
  Json m = manifest_header(c.id, c.scheme, c.variant, "valid", 1);
  m["description"] = c.description;
  m["conventions"] = {
      {"scores", "s_ij = scale * (q_i . k_j) + bias_ij; masked entries excluded from the softmax"},
      {"positions", "query i is at absolute position query_offset + i, key j at position j"},
      {"causal", "key j visible to query i iff j <= query_offset + i"},
      {"window", "when window w > 0: key j visible iff query_offset + i - w < j"},
      {"key_padding", "key j hidden when key_padding[j] != 0"},
      {"fully_masked_row", any_masked_row
                               ? "probabilities all 0 and output the zero vector (default); "
                                 "accepted alternative uniform_masked_rows: uniform over all "
                                 "keys (PyTorch eager, dtype-min masking)"
                               : "probabilities all 0 and output the zero vector (no such row here)"},
      {"heads", "kv head of query head h = h / (n_heads / n_kv_heads)"},
      {"layout", "q [Tq, H, d], k [Tk, Hkv, d], v [Tk, Hkv, dv], out [Tq, H, dv], probs [H, Tq, Tk]"}};
  Json params = {{"n_heads", H},
                 {"n_kv_heads", Hkv},
                 {"head_dim", d},
                 {"value_dim", dv},
                 {"scale_kind", scale_name(p.scale_kind)},
                 {"causal", p.causal},
                 {"window", p.window},
                 {"query_offset", p.query_offset},
                 {"tq", c.tq},
                 {"tk", c.tk},
                 {"dtype", std::string(dtype_short(t))}};
  if (p.scale_kind == reference::AttentionScale::kGiven) params["scale"] = p.scale;
  m["params"] = params;
  m["oracle"] = mp_oracle_json();
  m["seed"] = c.seed;
  m["prng"] = "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k, 3 = v";
  for (const auto& [key, val] : c.extra.items()) m[key] = val;
  return m;
}

}  // namespace

GoldenCase attention_case_generate(const AttentionCaseDef& c) {
  reference::attention_check(c.params, c.tq, c.tk, "attention_case_generate");
  const DType t = c.dtype;
  const AttentionCaseInputs in = attention_case_inputs(c);
  const std::vector<double>&q = in.q, &k = in.k, &v = in.v;

  const auto o50 = oracle<mp50>(c, q, k, v, c.bias50, c.value_hook50);
  const auto o100 = oracle<mp100>(c, q, k, v, c.bias100, c.value_hook100);
  cross_check(c.id, "probs", t, o50.probs, o100.probs);
  cross_check(c.id, "out", t, o50.out, o100.out);

  const CaseView cv(c, in, o50);
  CaseBudgets cb = case_budgets(cv);
  const MaskedRowAlternatives alts = masked_row_alternatives(cv, cb);
  std::vector<Tensor> tensors = attention_input_tensors(c, in);
  std::vector<TensorSpec> inputs;
  for (const auto& x : tensors) inputs.push_back(input_spec(x));
  const std::vector<TensorSpec> exp = add_expected_outputs(cv, cb, alts, tensors);
  Json m = attention_manifest(c, alts.any);
  manifest_add_tensors(m, c.id, inputs, exp);
  return GoldenCase{m, std::move(tensors)};
}

AttentionParams attention_params_from_manifest(const Json& m) {
  const Json& pj = m.at("params");
  AttentionParams p;
  p.n_heads = pj.at("n_heads").get<int>();
  p.n_kv_heads = pj.at("n_kv_heads").get<int>();
  p.head_dim = pj.at("head_dim").get<int>();
  p.value_dim = pj.at("value_dim").get<int>();
  const std::string sk = pj.at("scale_kind").get<std::string>();
  p.scale_kind = sk == "none" ? reference::AttentionScale::kNone
                 : sk == "given" ? reference::AttentionScale::kGiven
                                 : reference::AttentionScale::kInvSqrtHeadDim;
  if (p.scale_kind == reference::AttentionScale::kGiven) p.scale = pj.at("scale").get<double>();
  p.causal = pj.at("causal").get<bool>();
  p.window = pj.at("window").get<std::int64_t>();
  p.query_offset = pj.at("query_offset").get<std::int64_t>();
  return p;
}

namespace {

reference::AttentionMask mask_from(const TensorMap& golden) {
  reference::AttentionMask mask;
  if (auto it = golden.find("key_padding"); it != golden.end()) {
    for (std::int64_t j = 0; j < it->second.numel(); ++j) {
      mask.key_padding.push_back(it->second.get_i64(j) != 0);
    }
  }
  return mask;
}

}  // namespace

TensorMap attention_case_run_engine(const CaseSpec& spec, const TensorMap& golden,
                                    const optimized::AttentionBias* bias,
                                    const AttentionParams& p) {
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  const reference::AttentionMask mask = mask_from(golden);
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k")),
             v = tensor_to_f32(golden.at("v"));
  std::vector<float> out(static_cast<std::size_t>(tq * p.n_heads * p.value_dim));
  std::vector<float> probs(static_cast<std::size_t>(p.n_heads * tq * tk));
  optimized::attention_forward(p, mask, tq, tk, q, k, v, out, bias);
  optimized::attention_probs(p, mask, tq, tk, q, k, probs, bias);
  const DType t = golden.at("q").dtype;
  TensorMap res;
  res.emplace("out", engine_tensor("out", t, {tq, p.n_heads, p.value_dim}, out));
  res.emplace("probs", engine_tensor("probs", t, {p.n_heads, tq, tk}, probs));
  return res;
}

TensorMap attention_case_run_pipeline(const CaseSpec& spec, const TensorMap& golden,
                                      const std::string& pipeline, const PipelineBias& bias,
                                      const AttentionParams& p) {
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  const DType t = golden.at("q").dtype;
  if (const auto why = pipelines::dtype_mismatch(pipeline, t); !why.empty()) {
    throw_invalid("attention_case_run_pipeline", why, pipeline);
  }
  const DType c = pipelines::compute_dtype(pipeline);
  const reference::AttentionMask mask = mask_from(golden);
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k")),
             v = tensor_to_f32(golden.at("v"));
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const int group = H / Hkv;
  const float scale = static_cast<float>(static_cast<double>(reference::attention_scale<mp50>(p)));
  const bool scaled = p.scale_kind != reference::AttentionScale::kNone;
  const float lowest = c == DType::kF32 ? std::numeric_limits<float>::lowest()
                       : c == DType::kBF16 ? bf16_to_float(0xff7f)
                                           : -65504.0f;
  std::vector<float> probs(static_cast<std::size_t>(H * tq * tk)), out(static_cast<std::size_t>(tq * H * dv));
  using pipelines::fl;
  for (int h = 0; h < H; ++h) {
    const int kh = h / group;
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<float> s(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        float dot = 0;  // q @ k^T: a float32 accumulation, output in the compute dtype
        for (int x = 0; x < d; ++x) dot += q[(i * H + h) * d + x] * k[(j * Hkv + kh) * d + x];
        float sc = fl(dot, c);
        if (scaled) sc = fl(sc * scale, c);
        if (bias) sc = fl(sc + fl(bias(h, i, j), c), c);
        if (!reference::attention_visible(p, mask, tk, i, j)) sc = fl(sc + lowest, c);
        s[j] = sc;
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (float x : s) mx = std::max(mx, x);
      float sum = 0;
      std::vector<float> e(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        e[j] = std::exp(s[j] - mx);
        sum += e[j];
      }
      float* prow = &probs[(static_cast<std::size_t>(h) * tq + i) * tk];
      for (std::int64_t j = 0; j < tk; ++j) prow[j] = fl(e[j] / sum, c);  // softmax(float32).to(t)
      for (int cc = 0; cc < dv; ++cc) {
        float acc = 0;
        for (std::int64_t j = 0; j < tk; ++j) acc += prow[j] * v[(j * Hkv + kh) * dv + cc];
        out[(i * H + h) * dv + cc] = fl(acc, c);
      }
    }
  }
  TensorMap res;
  res.emplace("out", engine_tensor("out", t, {tq, H, dv}, out));
  res.emplace("probs", engine_tensor("probs", t, {H, tq, tk}, probs));
  return res;
}

}  // namespace posenc::golden
