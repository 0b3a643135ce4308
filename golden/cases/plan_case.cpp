// One golden case per layer type of a model plan. Stages, inputs and the budgets' derivation:
// golden/cases/plan_case.hpp; formulas: reference/rope.hpp, rope_scaling.hpp,
// rope_proportional.hpp, query_temperature.hpp, attention.hpp.
#include "golden/cases/mistakes.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/plan_case.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "golden/cases/budgets.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/prng.hpp"
#include "optimized/attention.hpp"
#include "reference/common/mutant.hpp"
#include "optimized/qk_norm.hpp"
#include "optimized/query_temperature.hpp"
#include "optimized/rope.hpp"
#include "optimized/rope_proportional.hpp"
#include "optimized/rope_scaling.hpp"
#include "reference/attention.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kGlobalRopeOnSliding, kOtherLayerType, kQkNormMissing, kRopeOnNope, kSinksDropped, kTemperatureP, kTemperaturePPlus1, kYarnTruncate };
const MistakeTable<MistakeId, 8> kMistakes(
    {"plan"},
    {{
     {MistakeId::kGlobalRopeOnSliding, "global-rope-on-sliding"},
     {MistakeId::kOtherLayerType, "other-layer-type", true},  // planted by the other-layer-type controls only
     {MistakeId::kQkNormMissing, "qk-norm-missing"},
     {MistakeId::kRopeOnNope, "rope-on-nope"},
     {MistakeId::kSinksDropped, "sinks-dropped"},
     {MistakeId::kTemperatureP, "temperature-p"},
     {MistakeId::kTemperaturePPlus1, "temperature-p-plus-1"},
     {MistakeId::kYarnTruncate, "yarn-truncate"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::QueryTemperatureRule;
using reference::RopeParams;
using reference::RopeScalingType;

// ---- the layer type -------------------------------------------------------------------------

/// Key j visible to query m under the type's mask (absolute positions).
bool plan_visible(const PlanLayerType& t, std::int64_t m, std::int64_t j) {
  if (j > m) return false;
  if (t.mask == PlanMask::kSliding && !(m - j < t.window)) return false;
  if (t.mask == PlanMask::kChunked && j / t.chunk != m / t.chunk) return false;
  return true;
}

/// The score scale's radicand: query_pre_attn_scalar, else head_dim.
double scale_radicand(const PlanLayerType& t) {
  return t.query_pre_attn_scalar > 0 ? t.query_pre_attn_scalar
                                     : static_cast<double>(t.params.head_dim);
}

void check_modelled(const PlanLayerType& t, const char* function) {
  if (t.mla_rope_dim > 0) {
    throw_invalid(function, "MLA layer types (mla_rope_dim > 0) are not modelled by plan cases yet",
                  t.name);
  }
  if (!(t.logit_softcap >= 0) || !std::isfinite(t.logit_softcap)) {
    throw_invalid(function, "logit_softcap must be finite and >= 0 (0 = none)", t.logit_softcap);
  }
  if (t.mask == PlanMask::kSliding && t.window <= 0)
    throw_invalid(function, "a sliding type needs window > 0", t.window);
  if (t.mask == PlanMask::kChunked && t.chunk <= 0)
    throw_invalid(function, "a chunked type needs chunk > 0", t.chunk);
  if (t.rope == PlanRope::kRope) reference::rope_scaling_check(t.params, t.scaling, function);
  if (t.rope == PlanRope::kProportional)
    reference::rope_proportional_check(t.params, t.proportional, function);
  if (t.params.head_dim <= 0 || t.params.head_dim % 2 != 0) {
    throw_invalid(function, "head_dim must be positive and even", t.params.head_dim);
  }
  if (t.has_temperature) reference::query_temperature_check(t.temperature, function);
  reference::qk_norm_check(t.qk_norm, t.params.head_dim, function);
}

/// The number of pairs the rotation runs over (0 for NoPE) and the live ones (proportional: k).
int rotated_pairs(const PlanLayerType& t) {
  return t.rope == PlanRope::kNone ? 0 : t.params.rotary_dim / 2;
}

// ---- the oracle -----------------------------------------------------------------------------

template <class Real>
struct PlanOracle {
  std::vector<Real> q_rot, k_rot, scores, probs, out;
  std::vector<std::uint8_t> visible;  // [Hq, T, T]
  Real a = Real(1);                   // the attention factor the tables carry
  std::vector<Real> q_in, k_in;       // what the rotation ran on (normalized before RoPE)
  std::vector<Real> q_pre, k_pre;     // rotated, before a norm after RoPE
};

template <class Real>
reference::RopeTables<Real> type_tables(const PlanLayerType& t) {
  if (t.rope == PlanRope::kProportional)
    return reference::rope_proportional_tables<Real>(t.params, t.proportional);
  return reference::rope_scaling_tables<Real>(t.params, t.scaling).tables;
}

/// The type's q/k norm applies to the case's inputs (the case holds the projections).
bool norm_applies(const PlanCaseDef& d, const PlanLayerType& t) {
  return t.qk_norm.kind != reference::QkNormKind::kNone && !d.qk_inputs_normalized;
}

bool norm_after(const PlanCaseDef& d, const PlanLayerType& t) {
  return norm_applies(d, t) && t.qk_norm.position == reference::QkNormPosition::kAfterRope;
}

/// A weighted norm on projections needs head_dim weights for q and for k (none otherwise).
void check_norm_inputs(const PlanCaseDef& d, const PlanLayerType& t, int h) {
  const bool want = norm_applies(d, d.type) && d.type.qk_norm.has_weights();
  for (const auto* w : {&d.q_norm_weight, &d.k_norm_weight}) {
    if (want ? w->size() != static_cast<std::size_t>(h) : !w->empty()) {
      throw_invalid("plan_case_generate",
                    want ? "a weighted q/k norm on projections needs head_dim weights"
                         : "norm weights given for a type without a weighted norm on projections",
                    w->size());
    }
  }
  if (t.qk_norm.kind != reference::QkNormKind::kNone &&
      t.qk_norm.position == reference::QkNormPosition::kAfterRope && d.qk_inputs_normalized) {
    throw_invalid("plan_case_generate",
                  "a norm after RoPE cannot be skipped: qk_inputs must be projections", t.name);
  }
}

/// Every head vector of x [rows, h] normalized (the oracle's q/k norm).
template <class Real>
std::vector<Real> norm_heads(const reference::QkNorm& n, int h, const std::vector<Real>& x,
                             const std::vector<double>& w) {
  const std::vector<Real> wr(w.begin(), w.end());
  std::vector<Real> out;
  out.reserve(x.size());
  for (std::size_t off = 0; off < x.size(); off += static_cast<std::size_t>(h)) {
    const std::vector<Real> row(x.begin() + off, x.begin() + off + h);
    const std::vector<Real> y = reference::qk_norm_apply(n, row, wr);
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

/// x [tokens, heads, h] rotated with the tables cs, sn [tokens, np].
template <class Real>
std::vector<Real> rotate_heads(const RopeParams& p, const std::vector<Real>& cs,
                               const std::vector<Real>& sn, std::size_t tokens,
                               const std::vector<Real>& x, int heads) {
  const int h = p.head_dim, np = p.rotary_dim / 2;
  std::vector<Real> y = x;
  for (std::size_t t = 0; t < tokens; ++t) {
    for (int hh = 0; hh < heads; ++hh) {
      const std::size_t off = (t * heads + hh) * h;
      for (int i = 0; i < np; ++i) {
        const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
        const Real& c = cs[t * np + i];
        const Real& s = sn[t * np + i];
        y[off + ca] = x[off + ca] * c - x[off + cb] * s;
        y[off + cb] = x[off + ca] * s + x[off + cb] * c;
      }
    }
  }
  return y;
}

template <class Real>
PlanOracle<Real> plan_oracle(const PlanCaseDef& d, const PlanLayerType& t,
                             const std::vector<std::int64_t>& pos, const std::vector<double>& q,
                             const std::vector<double>& k, const std::vector<double>& v) {
  using std::cos;
  using std::sin;
  using std::sqrt;
  const std::int64_t T = static_cast<std::int64_t>(pos.size());
  const int h = t.params.head_dim, hq = d.n_q_heads, hk = d.n_kv_heads, group = hq / hk;
  const bool norm = norm_applies(d, t), after = norm_after(d, t);
  PlanOracle<Real> o;
  o.q_in.assign(q.begin(), q.end());
  o.k_in.assign(k.begin(), k.end());
  if (norm && !after) {
    o.q_in = norm_heads(t.qk_norm, h, o.q_in, d.q_norm_weight);
    o.k_in = norm_heads(t.qk_norm, h, o.k_in, d.k_norm_weight);
  }
  if (t.rope == PlanRope::kNone) {
    o.q_rot = o.q_in;
    o.k_rot = o.k_in;
  } else {
    const auto tables = type_tables<Real>(t);
    o.a = tables.attention_factor;
    const int np = t.params.rotary_dim / 2;
    std::vector<Real> cs, sn;
    for (std::int64_t m : pos) {
      for (int i = 0; i < np; ++i) {
        const Real phi = reference::rope_angle(tables, m, i);
        cs.push_back(tables.attention_factor * cos(phi));
        sn.push_back(tables.attention_factor * sin(phi));
      }
    }
    o.q_rot = rotate_heads(t.params, cs, sn, pos.size(), o.q_in, hq);
    o.k_rot = rotate_heads(t.params, cs, sn, pos.size(), o.k_in, hk);
  }
  if (after) {
    o.q_pre = o.q_rot;
    o.k_pre = o.k_rot;
    o.q_rot = norm_heads(t.qk_norm, h, o.q_pre, d.q_norm_weight);
    o.k_rot = norm_heads(t.qk_norm, h, o.k_pre, d.k_norm_weight);
  }
  std::vector<Real> tau(pos.size(), Real(1));
  if (t.has_temperature) {
    for (std::size_t r = 0; r < pos.size(); ++r)
      tau[r] = reference::query_temperature<Real>(t.temperature, pos[r]);
    for (std::size_t x = 0; x < o.q_rot.size(); ++x)
      o.q_rot[x] *= tau[x / (static_cast<std::size_t>(hq) * h)];
  }
  const Real sigma = Real(1) / sqrt(Real(scale_radicand(t)));
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < T; ++i) {
      std::vector<Real> row(static_cast<std::size_t>(T));
      std::vector<bool> vis(static_cast<std::size_t>(T));
      for (std::int64_t j = 0; j < T; ++j) {
        Real sum = 0;
        const std::size_t qo = static_cast<std::size_t>((i * hq + hh) * h),
                          ko = static_cast<std::size_t>((j * hk + hh / group) * h);
        if (pos[i] == pos[j] && o.a == Real(1) && !norm) {
          // the same rotation on both sides: q . k exactly (dyadic inputs), so a value on a
          // rounding tie rounds the same in mp50 and mp100
          for (int c = 0; c < h; ++c) sum += Real(q[qo + c]) * Real(k[ko + c]);
          sum *= tau[i];
        } else {
          for (int c = 0; c < h; ++c) sum += o.q_rot[qo + c] * o.k_rot[ko + c];
        }
        row[j] = sigma * sum;
        if (t.logit_softcap > 0) {
          using std::tanh;
          const Real cap = Real(t.logit_softcap);
          row[j] = cap * tanh(row[j] / cap);
        }
        vis[j] = plan_visible(t, pos[i], pos[j]);
        o.visible.push_back(vis[j] ? 1 : 0);
      }
      o.scores.insert(o.scores.end(), row.begin(), row.end());
      const std::vector<Real> p =
          t.sinks ? reference::attention_softmax_sink(row, vis, Real(d.sinks.at(hh)))
                  : reference::attention_softmax(row, vis);
      o.probs.insert(o.probs.end(), p.begin(), p.end());
    }
  }
  o.out.assign(static_cast<std::size_t>(T * hq * h), Real(0));
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (int c = 0; c < h; ++c) {
        Real acc = 0;
        for (std::int64_t j = 0; j < T; ++j) {
          acc += o.probs[static_cast<std::size_t>((hh * T + i) * T + j)] *
                 Real(v[static_cast<std::size_t>((j * hk + hh / group) * h + c)]);
        }
        o.out[static_cast<std::size_t>((i * hq + hh) * h + c)] = acc;
      }
    }
  }
  return o;
}

// ---- budgets ----------------------------------------------------------------------------------
// r = eps_f32 / eps_t; K = optimized::kAttentionMaxError; s = 1.01 (second order).
//   q_rot   RoPE's rotated budget (bound B_rot, ulps) + the temperature's tau_b r, cond
//           tau a (|x_a| + |x_b|) per pair (tau |x_c| for NoPE channels); extras cond * E(m, i)
//           (the profile's angle error bound at the token's position, 0 on a proportional
//           type's zero pairs and under strict); tau_b = kQueryTemperatureMaxError (strict), 2.5
//           for a float32 tau (log1p, the product with c, + 1: three roundings and log1pf's ulp)
//   k_rot   the same without tau
//   scores  S_ij = sigma tau_i (sum_pairs a^2 (|q_a| + |q_b|)(|k_a| + |k_b|) + sum_NoPE |q_c k_c|):
//           RoPE's scores bound + (tau_b + 1) r (the scale's rounding and its product), extras
//           sigma tau_i sum_pairs w (E(m_i) + E(m_j))
//   probs   cond p_ij (1 + S_ij + sum_k p_ik S_ik) (S bounds the attention kernel's own score
//           sensitivity sigma tau sum |q_c k_c|), bound K r s; extra p_ij (e_ij + sum_k p_ik e_ik),
//           e_ij = the scores' absolute budget (bound eps_t S_ij + extra_ij): the error the
//           engine's own rotated q and k bring into its scores, first order through the softmax
//           (with or without a sink, which is exact)
//   out     cond sum_j p_ij |v_jc| + sum_j p_ij |v_jc - o_ic| S_ij, bound K r s; extra
//           sum_j p_ij e_ij |v_jc - o_ic|

/// Per row (token, head) of a tensor normalized after RoPE: r = 1 / rms of the exact rotated
/// row y, rho_b = sum |y| cond0 / sum y^2 (cond0 the rotation's condition, without tau; at most
/// 2) and per profile rho_e = sum |y| cond0 E / sum y^2: the first-order relative error of r
/// that the rotation's bound and its angle extras bring (dr / r <= sum |y| |e| / sum y^2).
struct NormRows {
  std::vector<double> r, rho_b;
  std::map<std::string, std::vector<double>> rho_e;
  double rho_b_max = 0;
};

struct PlanView {
  const PlanCaseDef& d;
  const PlanLayerType& t;
  std::vector<std::int64_t> pos;
  std::vector<double> q, k, v;
  std::vector<double> qc, kc;  // the rotation's inputs: q, k, normalized when the norm is before
  std::vector<double> yq, yk;  // the exact rotated q, k before a norm after RoPE
  NormRows nq, nk;             // a norm after RoPE (empty otherwise)
  bool norm = false, after = false;
  std::int64_t T = 0;
  int h = 0, hq = 0, hk = 0, group = 1, np = 0, live = 0;
  double a = 1, sigma = 1;
  std::vector<double> tau;  // [T]
};

/// delta_n: the q/k norm's own relative error in eps_f32, per profile: posenc's kernel
/// (kQkNormMaxError) under strict; a float32 norm's under the float profiles: the squares and
/// the h - 1 additions of nonnegative terms (h u in any order, u = eps_f32 / 2), the mean and
/// + eps (2 u), all halved by the square root, rsqrt (2 ulp, CUDA's rsqrtf), the product and the
/// weight's product (2 u): (h / 4 + 3.5) eps_f32, written h / 4 + 4 with 1 % for second order.
double norm_bound(const PlanView& g, const std::string& profile) {
  if (!g.norm || POSENC_MUTANT("gold_plan_norm_bound_dropped")) return 0.0;
  if (profile == "strict") return optimized::kQkNormMaxError;
  return (g.h / 4.0 + 4.0) * 1.01;
}

double temperature_bound(const PlanLayerType& t, const std::string& profile) {
  if (!t.has_temperature) return 0.0;
  return profile == "strict" ? optimized::kQueryTemperatureMaxError : 2.5;
}

/// Per profile: the angle error bound E [T, np] (empty under strict or without a rotation).
std::map<std::string, std::vector<double>> plan_angle_errors(const PlanView& g) {
  std::map<std::string, std::vector<double>> out;
  if (g.t.rope == PlanRope::kNone) return out;
  for (const auto& prof : profiles()) {
    if (prof.name == "strict" || !activation_na(prof.name, g.d.dtype).empty()) continue;
    RopeParams p = g.t.params;
    reference::RopeScaling s = g.t.rope == PlanRope::kRope ? g.t.scaling : reference::RopeScaling{};
    std::vector<double> e = rope_pipeline_angle_errors(prof.name, p, s, g.pos).angle;
    for (std::int64_t r = 0; r < g.T; ++r) {
      for (int i = g.live; i < g.np; ++i)
        e[static_cast<std::size_t>(r * g.np + i)] = 0.0;  // zero frequencies: exact
    }
    out[prof.name] = std::move(e);
  }
  return out;
}

/// cond of a rotated tensor [T, heads, h]: factor(row) a (|x_a| + |x_b|) on rotated pairs,
/// factor |x_c| elsewhere; pair_sum [T * heads, np] = a (|x_a| + |x_b|).
void rotated_cond(const PlanView& g, const std::vector<double>& x, int heads, bool with_tau,
                  std::vector<double>* cond, std::vector<double>* pair_sum) {
  cond->assign(x.size(), 0.0);
  pair_sum->assign(static_cast<std::size_t>(g.T * heads * g.np), 0.0);
  for (std::int64_t r = 0; r < g.T * heads; ++r) {
    const double f = with_tau ? g.tau[static_cast<std::size_t>(r / heads)] : 1.0;
    for (int c = 0; c < g.h; ++c) (*cond)[r * g.h + c] = f * std::fabs(x[r * g.h + c]);
    for (int i = 0; i < g.np; ++i) {
      const int ca = reference::rope_pair_a(g.t.params, i),
                cb = reference::rope_pair_b(g.t.params, i);
      const double c = g.a * (std::fabs(x[r * g.h + ca]) + std::fabs(x[r * g.h + cb]));
      (*cond)[r * g.h + ca] = (*cond)[r * g.h + cb] = f * c;
      (*pair_sum)[r * g.np + i] = c;
    }
  }
}

struct PlanBudgetSet {
  std::map<std::string, RopeStageBudgets> rb;
  std::map<std::string, std::vector<double>> E;
};

ExpectedTensor rotated_expected(const PlanView& g, const PlanBudgetSet& b, const std::string& name,
                                const std::vector<mp50>& values, const std::vector<double>& x,
                                int heads, bool with_tau) {
  std::vector<int> channel_pairs(static_cast<std::size_t>(g.h), -1);
  if (g.np > 0) {
    for (int c = 0; c < g.h; ++c) channel_pairs[c] = reference::rope_pair_of_channel(g.t.params, c);
  }
  ExpectedTensor e =
      expected_tensor(name, "rotated", g.d.dtype, {g.T, heads, g.h}, CheckKind::kConditioned,
                      {{"token", "positions", {}, {}},
                       {"head", "", {}, {}},
                       {"channel", "", g.np > 0 ? channel_pairs : std::vector<int>{}, {}}});
  e.values = values;
  std::vector<double> pair_sum;
  rotated_cond(g, x, heads, with_tau, &e.cond, &pair_sum);
  const double r = budgets::f32_in(g.d.dtype);
  for (const auto& [prof, rb] : b.rb) {
    ProfileBudget pb = rb.rotated;
    if (pb.applies && with_tau) pb.bound += temperature_bound(g.t, prof) * r * 1.01;
    e.spec.check.profiles[prof] = pb;
  }
  for (const auto& [prof, ang] : b.E) {
    std::vector<double> ex(values.size(), 0.0);
    for (std::int64_t row = 0; row < g.T * heads; ++row) {
      for (int c = 0; c < g.h; ++c) {
        const int pi = channel_pairs[c];
        if (pi >= 0) ex[row * g.h + c] = e.cond[row * g.h + c] * ang[(row / heads) * g.np + pi];
      }
    }
    e.extra[prof] = std::move(ex);
  }
  return e;
}

/// The scores' sensitivity S [Hq, T, T] and, per profile, their angle extras.
void score_scales(const PlanView& g, const PlanBudgetSet& b, std::vector<double>* S,
                  std::map<std::string, std::vector<double>>* extra) {
  std::vector<double> qc, qs, kc, ks;
  rotated_cond(g, g.qc, g.hq, false, &qc, &qs);
  rotated_cond(g, g.kc, g.hk, false, &kc, &ks);
  std::vector<bool> rotated(static_cast<std::size_t>(g.h), false);
  for (int i = 0; i < g.np; ++i) {
    rotated[reference::rope_pair_a(g.t.params, i)] =
        rotated[reference::rope_pair_b(g.t.params, i)] = true;
  }
  S->assign(static_cast<std::size_t>(g.hq * g.T * g.T), 0.0);
  for (const auto& [prof, ang] : b.E) (*extra)[prof].assign(S->size(), 0.0);
  for (int hh = 0; hh < g.hq; ++hh) {
    for (std::int64_t i = 0; i < g.T; ++i) {
      const double f = g.sigma * g.tau[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < g.T; ++j) {
        const std::size_t flat = static_cast<std::size_t>((hh * g.T + i) * g.T + j);
        const std::int64_t qr = i * g.hq + hh, kr = j * g.hk + hh / g.group;
        double c = 0;
        for (int pi = 0; pi < g.np; ++pi) {
          const double w = qs[qr * g.np + pi] * ks[kr * g.np + pi];
          c += w;
          for (const auto& [prof, ang] : b.E)
            (*extra)[prof][flat] += f * w * (ang[i * g.np + pi] + ang[j * g.np + pi]);
        }
        for (int ch = 0; ch < g.h; ++ch) {
          if (!rotated[ch]) c += std::fabs(g.qc[qr * g.h + ch] * g.kc[kr * g.h + ch]);
        }
        (*S)[flat] = f * c;
      }
    }
  }
}

/// NormRows of a rotated tensor [T, heads, h] normalized after RoPE (x: the rotation's input,
/// y: the exact rotated values).
NormRows norm_rows(const PlanView& g, const PlanBudgetSet& b, const std::vector<double>& x,
                   const std::vector<double>& y, int heads) {
  NormRows n;
  std::vector<double> cond0, pair_sum;
  rotated_cond(g, x, heads, false, &cond0, &pair_sum);
  const std::int64_t rows = g.T * heads;
  n.r.assign(static_cast<std::size_t>(rows), 0.0);
  n.rho_b.assign(n.r.size(), 0.0);
  for (const auto& [prof, ang] : b.E) n.rho_e[prof].assign(n.r.size(), 0.0);
  for (std::int64_t row = 0; row < rows; ++row) {
    double sq = 0, yb = 0;
    std::map<std::string, double> ye;
    for (int c = 0; c < g.h; ++c) {
      const std::size_t i = static_cast<std::size_t>(row * g.h + c);
      sq += y[i] * y[i];
      yb += std::fabs(y[i]) * cond0[i];
      const int pi = g.np > 0 ? reference::rope_pair_of_channel(g.t.params, c) : -1;
      if (pi < 0) continue;
      for (const auto& [prof, ang] : b.E)
        ye[prof] += std::fabs(y[i]) * cond0[i] * ang[(row / heads) * g.np + pi];
    }
    n.r[row] = 1.0 / std::sqrt(sq / g.h + g.t.qk_norm.eps);
    n.rho_b[row] = sq > 0 ? yb / sq : 0.0;
    n.rho_b_max = std::max(n.rho_b_max, n.rho_b[row]);
    for (auto& [prof, v] : n.rho_e) v[row] = sq > 0 ? ye[prof] / sq : 0.0;
  }
  return n;
}

/// A rotated tensor's budget under the type's q/k norm: delta_n more under every profile; after
/// RoPE also the rotation's bound carried into r (B rho_b), the condition scaled by r and the
/// extras by r with the angle error carried into r (f |y| rho_e, f = tau or 1).
void norm_rotated(const PlanView& g, const PlanBudgetSet& b, const NormRows& nr,
                  const std::vector<double>& y, int heads, bool with_tau, ExpectedTensor& e) {
  for (auto& [prof, pb] : e.spec.check.profiles) {
    if (!pb.applies) continue;
    pb.bound += norm_bound(g, prof) * budgets::f32_in(g.d.dtype);
    if (g.after) pb.bound += b.rb.at(prof).rotated.bound * nr.rho_b_max * 1.01;
  }
  if (!g.after) return;
  for (std::int64_t row = 0; row < g.T * heads; ++row) {
    const double f = with_tau ? g.tau[static_cast<std::size_t>(row / heads)] : 1.0;
    for (int c = 0; c < g.h; ++c) {
      const std::size_t i = static_cast<std::size_t>(row * g.h + c);
      e.cond[i] *= nr.r[row];
      for (auto& [prof, ex] : e.extra)
        ex[i] = nr.r[row] * (ex[i] + f * std::fabs(y[i]) * nr.rho_e.at(prof)[row]) * 1.01;
    }
  }
}

/// The scores' sensitivity and extras under a q/k norm after RoPE: S' = r_q r_k S, extras
/// r_q r_k extra + S' (rho_e_q + rho_e_k).
void norm_scores(const PlanView& g, std::vector<double>& S,
                 std::map<std::string, std::vector<double>>& extra) {
  if (!g.after) return;
  for (int hh = 0; hh < g.hq; ++hh) {
    for (std::int64_t i = 0; i < g.T; ++i) {
      for (std::int64_t j = 0; j < g.T; ++j) {
        const std::size_t flat = static_cast<std::size_t>((hh * g.T + i) * g.T + j);
        const std::size_t qr = static_cast<std::size_t>(i * g.hq + hh),
                          kr = static_cast<std::size_t>(j * g.hk + hh / g.group);
        S[flat] *= g.nq.r[qr] * g.nk.r[kr];
        for (auto& [prof, ex] : extra) {
          ex[flat] = (ex[flat] * g.nq.r[qr] * g.nk.r[kr] +
                      S[flat] * (g.nq.rho_e.at(prof)[qr] + g.nk.rho_e.at(prof)[kr])) *
                     1.01;
        }
      }
    }
  }
}

// ---- the case --------------------------------------------------------------------------------

double input_value(DType t, double range, std::uint64_t seed, std::uint64_t stream,
                   std::uint64_t i) {
  const int bits = t == DType::kBF16 ? 7 : (t == DType::kF16 ? 10 : 23);
  const std::int64_t lim = (std::int64_t{1} << bits) - 1;
  return range * std::ldexp(static_cast<double>(prng_int(seed, stream, i, lim)), -bits);
}

Json plan_params(const PlanCaseDef& d, const PlanView& g) {
  Json types = Json::array();
  for (const auto& t : d.plan_types) types.push_back(plan_type_to_json(t));
  return {{"type", plan_type_to_json(d.type)},
          {"n_q_heads", d.n_q_heads},
          {"n_kv_heads", d.n_kv_heads},
          {"head_dim", g.h},
          {"value_dim", g.h},
          {"n_tokens", g.T},
          {"scale", g.sigma},
          {"qk_inputs", d.qk_inputs_normalized ? "normalized" : "projections"},
          {"dtype", std::string(dtype_short(d.dtype))},
          {"plan",
           {{"model", d.model}, {"n_layers", d.n_layers}, {"layers", d.layers}, {"types", types}}}};
}

void describe(Json& m, const PlanCaseDef& d, const PlanView& g) {
  const PlanLayerType& t = d.type;
  std::string desc = "model plan, " + d.model_words + ": layer type " + t.name + " (" +
                     plan_rope_name(t.rope) + ", " + plan_mask_name(t.mask);
  if (t.mask == PlanMask::kSliding) desc += " " + std::to_string(t.window);
  if (t.mask == PlanMask::kChunked) desc += " " + std::to_string(t.chunk);
  if (t.has_temperature)
    desc += std::string(", ") + reference::query_temperature_rule_name(t.temperature.rule) +
            " temperature";
  if (t.sinks) desc += ", sinks";
  if (t.qk_norm.kind != reference::QkNormKind::kNone) {
    desc += std::string(", q/k norm ") + reference::qk_norm_kind_name(t.qk_norm.kind) + " " +
            reference::qk_norm_position_name(t.qk_norm.position);
  }
  desc += "), " + std::to_string(d.layers.size()) + " of " + std::to_string(d.n_layers) +
          " layers, " + std::to_string(g.T) + " tokens, target " +
          std::string(dtype_short(d.dtype));
  if (!d.convention.empty()) desc += "; convention " + d.convention + " (" + d.result + ")";
  m["description"] = desc;
  m["conventions"] = {
      {"positions",
       "token r is at absolute position positions[r]; every token is a query and a key"},
      {"cache",
       "positions are absolute and sparse: the tokens are a prefill over a cache that holds "
       "exactly these T tokens at their positions (slot r holds position positions[r]); token r "
       "attends to the cached tokens with positions[j] <= positions[r] that the mask lets it "
       "see, so an engine whose cache is indexed by position needs positions[r] + 1 entries "
       "for token r (max(positions) + 1 in all), of which only the listed ones are filled; "
       "never renumber the positions 0 .. T - 1"},
      {"qk_norm",
       d.qk_inputs_normalized
           ? "params.qk_inputs = normalized: q and k are already past the type's q/k "
             "normalization (params.type.qk_norm); an engine feeds them to the rotation and "
             "skips its norm"
           : "params.qk_inputs = projections: q and k are the projections; the type's q/k "
             "normalization (params.type.qk_norm, reference/qk_norm.hpp; weights "
             "q_norm_weight, k_norm_weight where it has them) applies per head, before or "
             "after the rotation as its position says, and q_rot, k_rot hold the result"},
      {"mask",
       "key j visible to query i iff positions[j] <= positions[i], and for a sliding type "
       "positions[i] - positions[j] < window, for a chunked type floor(positions[j] / chunk) "
       "== floor(positions[i] / chunk)"},
      {"rotation",
       "params.type.rope: rope (the scaling rule's tables, attention factor folded into "
       "cos and sin), proportional (base^(-2i/h) for i < floor(p h / 2), else 0, over the "
       "whole head) or none"},
      {"temperature",
       "q_rot row r is multiplied by tau(positions[r]) after the rotation "
       "(reference/query_temperature.hpp); keys never"},
      {"scores",
       "sigma * (q_rot . k_rot), sigma = params.scale = 1/sqrt(query_pre_attn_scalar or "
       "head_dim), for every pair, masked or not; kv head = q head / (n_q_heads / n_kv_heads)"},
      {"sinks",
       "the head's sink logit joins the softmax denominator only (no key, no value); "
       "it is not multiplied by sigma"},
      {"layout",
       "q, k, v, q_rot, k_rot [tokens, heads, head_dim]; scores, probs [q heads, query, key]; "
       "out [tokens, q heads, head_dim]"}};
  if (!d.convention.empty()) {
    m["negative_control"] = {
        {"convention", d.convention}, {"reason", d.reason}, {"mistake", d.mistake}};
  }
  Json why = Json::array();
  for (const auto& p : d.positions) why.push_back({{"position", p.m}, {"why", p.why}});
  m["positions_why"] = why;
}

/// The condition scales and per-profile extras of probs and out (the budget block above): S the
/// scores' sensitivity, e_ij = score_bound eps S_ij + the scores' extra.
struct AttentionConds {
  std::vector<double> pc, oc;
  std::map<std::string, std::vector<double>> pe, oe;
};

AttentionConds attention_conds(const PlanView& g, const PlanBudgetSet& b,
                               const PlanOracle<mp50>& o50, const std::vector<double>& S,
                               const std::map<std::string, std::vector<double>>& s_extra,
                               const std::map<std::string, double>& score_bound, double eps) {
  const std::int64_t T = g.T;
  const std::vector<double> p64 = to_f64(o50.probs), o64 = to_f64(o50.out);
  AttentionConds a;
  a.pc.assign(p64.size(), 0.0);
  a.oc.assign(o64.size(), 0.0);
  auto &pc = a.pc, &oc = a.oc;
  auto &pe = a.pe, &oe = a.oe;
  for (const auto& prof : profiles()) {
    if (!b.rb.at(prof.name).scores.applies) continue;
    pe[prof.name].assign(p64.size(), 0.0);
    oe[prof.name].assign(o64.size(), 0.0);
  }
  for (int hh = 0; hh < g.hq; ++hh) {
    for (std::int64_t i = 0; i < T; ++i) {
      const std::size_t row = static_cast<std::size_t>((hh * T + i) * T);
      double meanS = 0;
      std::map<std::string, std::vector<double>> e;  // profile -> e_ij
      std::map<std::string, double> mean_e;
      for (std::int64_t j = 0; j < T; ++j) meanS += p64[row + j] * S[row + j];
      for (auto& [prof, x] : pe) {
        auto& ev = e[prof];
        ev.assign(static_cast<std::size_t>(T), 0.0);
        for (std::int64_t j = 0; j < T; ++j) {
          ev[j] = score_bound.at(prof) * eps * S[row + j] +
                  (s_extra.count(prof) ? s_extra.at(prof)[row + j] : 0.0);
          mean_e[prof] += p64[row + j] * ev[j];
        }
      }
      for (std::int64_t j = 0; j < T; ++j) {
        if (!o50.visible[row + j]) continue;
        pc[row + j] = p64[row + j] * (1 + S[row + j] + meanS);
        for (auto& [prof, x] : pe) x[row + j] = p64[row + j] * (e[prof][j] + mean_e[prof]);
      }
      for (int c = 0; c < g.h; ++c) {
        const std::size_t oi = static_cast<std::size_t>((i * g.hq + hh) * g.h + c);
        double A = 0, B = 0;
        std::map<std::string, double> ex;
        for (std::int64_t j = 0; j < T; ++j) {
          if (!o50.visible[row + j]) continue;
          const double vj = g.v[static_cast<std::size_t>((j * g.hk + hh / g.group) * g.h + c)];
          A += p64[row + j] * std::fabs(vj);
          B += p64[row + j] * std::fabs(vj - o64[oi]) * S[row + j];
          for (auto& [prof, x] : oe)
            ex[prof] += p64[row + j] * e[prof][j] * std::fabs(vj - o64[oi]);
        }
        oc[oi] = A + B;
        for (auto& [prof, x] : oe) x[oi] = ex[prof];
      }
    }
  }
  return a;
}

/// The case's view before the oracle: positions, shapes, the scale, the inputs (drawn from the
/// seed, or given), the norm's place.
PlanView plan_view_of(const PlanCaseDef& d) {
  const PlanLayerType& te = d.expected;
  PlanView g{d, te};
  for (const auto& p : d.positions) g.pos.push_back(p.m);
  for (std::size_t r = 1; r < g.pos.size(); ++r) {
    if (g.pos[r] <= g.pos[r - 1])
      throw_invalid("plan_case_generate", "positions must be sorted and distinct", g.pos[r]);
  }
  g.T = static_cast<std::int64_t>(g.pos.size());
  g.h = te.params.head_dim;
  g.hq = d.n_q_heads;
  g.hk = d.n_kv_heads;
  g.group = g.hq / g.hk;
  g.np = rotated_pairs(te);
  g.live = te.rope == PlanRope::kProportional
               ? reference::rope_proportional_live_pairs(te.params, te.proportional)
               : g.np;
  // the correctly rounded 1/sqrt(radicand) (two double roundings can be one ulp off)
  g.sigma = POSENC_MUTANT("gold_plan_scale_double_rounded")
                ? 1.0 / std::sqrt(scale_radicand(te))
                : round_to_f64(mp50(1) / sqrt(mp50(scale_radicand(te))));
  g.q.resize(static_cast<std::size_t>(g.T * g.hq * g.h));
  g.k.resize(static_cast<std::size_t>(g.T * g.hk * g.h));
  g.v.resize(g.k.size());
  for (std::size_t i = 0; i < g.q.size(); ++i) g.q[i] = input_value(d.dtype, 2.0, d.seed, 1, i);
  for (std::size_t i = 0; i < g.k.size(); ++i) g.k[i] = input_value(d.dtype, 2.0, d.seed, 2, i);
  for (std::size_t i = 0; i < g.v.size(); ++i) g.v[i] = input_value(d.dtype, 1.0, d.seed, 3, i);
  if (!d.q.empty() || !d.k.empty() || !d.v.empty()) {
    if (d.q.size() != g.q.size() || d.k.size() != g.k.size() || d.v.size() != g.v.size())
      throw_invalid("plan_case_generate", "given q, k, v must have the case's shapes", d.q.size());
    g.q = d.q;
    g.k = d.k;
    g.v = d.v;
  }
  check_norm_inputs(d, te, g.h);
  g.norm = norm_applies(d, te);
  g.after = norm_after(d, te);

  return g;
}

/// Per profile the RoPE stage budgets and the angle extras; after RoPE the norm's rows (g.nq,
/// g.nk).
PlanBudgetSet plan_budget_set(PlanView& g) {
  const PlanLayerType& te = g.t;
  const PlanCaseDef& d = g.d;
  PlanBudgetSet b;
  for (const auto& prof : profiles()) {
    double A = 0;
    if (prof.name != "strict" && te.rope == PlanRope::kRope &&
        activation_na(prof.name, d.dtype).empty()) {
      A = rope_pipeline_angle_errors(prof.name, te.params, te.scaling, {g.pos.front()}).A;
    }
    b.rb[prof.name] = rope_stage_budgets(prof.name, d.dtype, A, g.h);
  }
  b.E = plan_angle_errors(g);
  if (g.after) {
    g.nq = norm_rows(g, b, g.qc, g.yq, g.hq);
    g.nk = norm_rows(g, b, g.kc, g.yk, g.hk);
  }

  return b;
}

}  // namespace

GoldenCase plan_case_generate(const PlanCaseDef& d) {
  check_modelled(d.type, "plan_case_generate");
  check_modelled(d.expected, "plan_case_generate");
  if (d.n_q_heads <= 0 || d.n_kv_heads <= 0 || d.n_q_heads % d.n_kv_heads != 0) {
    throw_invalid("plan_case_generate", "n_kv_heads must divide n_q_heads", d.n_kv_heads);
  }
  if (d.type.sinks && d.sinks.size() != static_cast<std::size_t>(d.n_q_heads)) {
    throw_invalid("plan_case_generate", "a type with sinks needs one sink logit per q head",
                  d.sinks.size());
  }
  const PlanLayerType& te = d.expected;
  PlanView g = plan_view_of(d);
  const auto o50 = plan_oracle<mp50>(d, te, g.pos, g.q, g.k, g.v);
  g.qc = norm_applies(d, te) && !g.after ? to_f64(o50.q_in) : g.q;
  g.kc = norm_applies(d, te) && !g.after ? to_f64(o50.k_in) : g.k;
  if (g.after) {
    g.yq = to_f64(o50.q_pre);
    g.yk = to_f64(o50.k_pre);
  }
  if (d.cross_check) {
    const auto o100 = plan_oracle<mp100>(d, te, g.pos, g.q, g.k, g.v);
    for (const auto& [name, a, b] :
         {std::tuple{"q_rot", &o50.q_rot, &o100.q_rot},
          std::tuple{"k_rot", &o50.k_rot, &o100.k_rot},
          std::tuple{"scores", &o50.scores, &o100.scores},
          std::tuple{"probs", &o50.probs, &o100.probs}, std::tuple{"out", &o50.out, &o100.out}}) {
      cross_check(d.id, name, d.dtype, *a, *b);
    }
  }
  g.a = round_to_f64(o50.a);
  g.tau.assign(g.pos.size(), 1.0);
  if (te.has_temperature) {
    for (std::size_t r = 0; r < g.pos.size(); ++r)
      g.tau[r] = round_to_f64(reference::query_temperature<mp50>(te.temperature, g.pos[r]));
  }

  const PlanBudgetSet b = plan_budget_set(g);
  std::vector<Tensor> tensors;
  std::vector<TensorSpec> inputs, expected;
  tensors.push_back(tensor_from_i64("positions", {g.T}, g.pos));
  tensors.push_back(input_tensor("q", d.dtype, {g.T, g.hq, g.h}, g.q));
  tensors.push_back(input_tensor("k", d.dtype, {g.T, g.hk, g.h}, g.k));
  tensors.push_back(input_tensor("v", d.dtype, {g.T, g.hk, g.h}, g.v));
  if (d.type.sinks) tensors.push_back(input_tensor("sinks", DType::kF32, {g.hq}, d.sinks));
  if (!d.q_norm_weight.empty()) {
    tensors.push_back(input_tensor("q_norm_weight", DType::kF32, {g.h}, d.q_norm_weight));
    tensors.push_back(input_tensor("k_norm_weight", DType::kF32, {g.h}, d.k_norm_weight));
  }
  for (const auto& x : tensors) inputs.push_back(input_spec(x));

  ExpectedTensor eq = rotated_expected(g, b, "q_rot", o50.q_rot, g.qc, g.hq, true);
  ExpectedTensor ek = rotated_expected(g, b, "k_rot", o50.k_rot, g.kc, g.hk, false);
  norm_rotated(g, b, g.nq, g.yq, g.hq, true, eq);
  norm_rotated(g, b, g.nk, g.yk, g.hk, false, ek);
  expected.push_back(add_expected(&tensors, std::move(eq)));
  expected.push_back(add_expected(&tensors, std::move(ek)));

  // scores
  std::vector<double> S;
  std::map<std::string, std::vector<double>> s_extra;
  score_scales(g, b, &S, &s_extra);
  norm_scores(g, S, s_extra);
  const double r = budgets::f32_in(d.dtype), eps = dtype_eps(d.dtype);
  const std::vector<AxisSpec> qk_axes = {
      {"head", "", {}, {}}, {"query", "positions", {}, {}}, {"key", "positions", {}, {}}};
  ExpectedTensor es = expected_tensor("scores", "scores", d.dtype, {g.hq, g.T, g.T},
                                      CheckKind::kConditioned, qk_axes);
  es.values = o50.scores;
  es.cond = S;
  std::map<std::string, double> score_bound;
  for (const auto& [prof, rb] : b.rb) {
    ProfileBudget pb = rb.scores;
    // the scale's rounding and product; a soft cap (slope <= 1) adds its division, tanh (2 ulp)
    // and product, each within eps of |cap tanh(s / cap)| <= |s| <= S
    if (pb.applies) {
      pb.bound +=
          (temperature_bound(te, prof) + 1.0 + (te.logit_softcap > 0 ? 3.0 : 0.0)) * r * 1.01;
      // the norm's error on both sides (and after RoPE the rotation's, carried into r)
      pb.bound += 2 * norm_bound(g, prof) * r;
      if (g.after)
        pb.bound += b.rb.at(prof).rotated.bound * (g.nq.rho_b_max + g.nk.rho_b_max) * 1.01;
    }
    score_bound[prof] = pb.bound;
    es.spec.check.profiles[prof] = pb;
  }
  es.extra = s_extra;
  expected.push_back(add_expected(&tensors, std::move(es)));

  // probs and out: the attention core's budget plus the scores' error, first order
  const std::int64_t T = g.T;
  const double K = optimized::kAttentionMaxError, sk = 1.01;
  AttentionConds ac = attention_conds(g, b, o50, S, s_extra, score_bound, eps);
  auto attention_expected =
      [&](const std::string& name, const std::string& stage, std::vector<std::int64_t> shape,
          const std::vector<mp50>& values, std::vector<double> cond,
          std::map<std::string, std::vector<double>> extra, std::vector<AxisSpec> axes) {
        ExpectedTensor e = expected_tensor(name, stage, d.dtype, std::move(shape),
                                           CheckKind::kConditioned, std::move(axes));
        e.values = values;
        e.cond = std::move(cond);
        e.extra = std::move(extra);
        for (const auto& prof : profiles()) {
          const std::string na = activation_na(prof.name, d.dtype);
          e.spec.check.profiles[prof.name] =
              na.empty() ? bound_of(K * r * sk, budgets::cast_to(d.dtype)) : not_applicable(na);
        }
        return e;
      };
  expected.push_back(
      add_expected(&tensors, attention_expected("probs", "probabilities", {g.hq, T, T}, o50.probs,
                                                std::move(ac.pc), std::move(ac.pe), qk_axes)));
  expected.push_back(add_expected(
      &tensors,
      attention_expected(
          "out", "output", {T, g.hq, g.h}, o50.out, std::move(ac.oc), std::move(ac.oe),
          {{"query", "positions", {}, {}}, {"head", "", {}, {}}, {"channel", "", {}, {}}})));

  Json m = manifest_header(d.id, "plan", d.type.name, d.result, 1);
  describe(m, d, g);
  m["params"] = plan_params(d, g);
  m["citation"] =
      "Gemma Team, Gemma 3 Technical Report, arXiv:2503.19786v1, Sec. 2; Meta Llama 4 (HF "
      "Llama4TextAttention); OpenAI gpt-oss model card, arXiv:2508.10925v1, Sec. 2; HF "
      "transformers "
      "layer_types and per-type rope_parameters";
  if (!d.preset.is_null()) m["preset"] = d.preset;
  m["oracle"] = mp_oracle_json();
  m["seed"] = d.seed;
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k (in [-2, 2]), 3 = v (in "
      "[-1, 1]), "
      "4 = sinks (k * 2^-8 - 1), 5 = q_norm_weight, 6 = k_norm_weight (w = k * 2^-8 + 1 - o, "
      "o = weight_offset, k in [-128, 128]: o + w in [1/2, 3/2])";
  manifest_add_tensors(m, d.id, inputs, expected);
  GoldenCase out;
  out.manifest = std::move(m);
  out.tensors = std::move(tensors);
  return out;
}

PlanCaseDef plan_case_def_of(const CaseSpec& spec, const TensorMap& golden) {
  const Json& m = spec.manifest;
  const Json& p = m.at("params");
  const std::string src = spec.id + " params";
  PlanCaseDef d;
  d.id = spec.id;
  d.model = p.at("plan").at("model").get<std::string>();
  d.model_words = d.model;
  d.type = plan_type_from_json(p.at("type"), src);
  d.expected = d.type;
  for (const Json& t : p.at("plan").at("types"))
    d.plan_types.push_back(plan_type_from_json(t, src));
  d.layers = p.at("plan").at("layers").get<std::vector<int>>();
  d.n_layers = p.at("plan").at("n_layers").get<int>();
  d.n_q_heads = p.at("n_q_heads").get<int>();
  d.n_kv_heads = p.at("n_kv_heads").get<int>();
  const Tensor& pt = golden.at("positions");
  for (std::int64_t r = 0; r < pt.numel(); ++r) d.positions.push_back({pt.get_i64(r), ""});
  if (auto it = golden.find("sinks"); it != golden.end()) d.sinks = tensor_to_f64(it->second);
  d.dtype = golden.at("q").dtype;
  d.seed = m.value("seed", std::uint64_t{0});
  d.qk_inputs_normalized = p.value("qk_inputs", std::string("projections")) == "normalized";
  if (auto it = golden.find("q_norm_weight"); it != golden.end())
    d.q_norm_weight = tensor_to_f64(it->second);
  if (auto it = golden.find("k_norm_weight"); it != golden.end())
    d.k_norm_weight = tensor_to_f64(it->second);
  d.q = tensor_to_f64(golden.at("q"));
  d.k = tensor_to_f64(golden.at("k"));
  d.v = tensor_to_f64(golden.at("v"));
  return d;
}

PlanOracleRun plan_case_oracle_run(const CaseSpec& spec, const TensorMap& golden,
                                   const PlanLayerType& t) {
  PlanCaseDef d = plan_case_def_of(spec, golden);
  d.expected = t;
  d.cross_check = false;
  GoldenCase g = plan_case_generate(d);
  load_spilled(g);
  std::set<std::string> inputs;
  for (const auto& i : spec.inputs) inputs.insert(i.name);
  PlanOracleRun r;
  r.spec = case_spec_from_json(g.manifest, spec.id + " (a diagnose hypothesis)");
  for (auto& x : g.tensors) {
    if (!inputs.count(x.name)) r.run.emplace(x.name, std::move(x));
  }
  return r;
}

// ---- positions, JSON, the case of a plan's type ------------------------------------------------

std::vector<HardPosition> plan_type_positions(const PlanLayerType& t, std::int64_t max_position) {
  std::map<std::int64_t, std::string> pos;
  auto add = [&](std::int64_t m, const std::string& why) {
    if (m >= 0 && (max_position <= 0 || m < max_position)) pos.emplace(m, why);
  };
  for (std::int64_t m = 0; m < 4; ++m) add(m, "start of the sequence");
  if (t.mask == PlanMask::kSliding) {
    const std::string w = std::to_string(t.window);
    for (std::int64_t d = -3; d <= 2; ++d) {
      add(t.window + d, d == 0 ? "W = " + w + ": the first query that no longer sees position 0"
                               : "window edge W = " + w + " (W" + (d < 0 ? " - " : " + ") +
                                     std::to_string(d < 0 ? -d : d) + ")");
    }
  }
  if (t.mask == PlanMask::kChunked) {
    const std::string c = std::to_string(t.chunk);
    for (std::int64_t d = -3; d <= 2; ++d) {
      add(t.chunk + d, d == 0 ? "C = " + c + ": the first position of the second chunk"
                              : "chunk boundary C = " + c +
                                    (d < 0 ? " (last chunk-0 positions)" : " (chunk 1)"));
    }
  }
  if (t.has_temperature) {
    const std::int64_t L = t.temperature.length;
    const bool l4 = t.temperature.rule == QueryTemperatureRule::kLlama4;
    for (std::int64_t k = 1; k <= 2; ++k) {
      const std::int64_t step = l4 ? k * L - 1 : k * L;  // the first position with n = k
      add(step - 1, "below temperature step " + std::to_string(k));
      add(step, std::string("temperature step ") + std::to_string(k) +
                    (l4 ? " at k F - 1 (p + 1)" : " at k L0 (p)"));
      add(step + 1, "after temperature step " + std::to_string(k));
    }
  }
  if (max_position > 0) {
    add(max_position - 2, "end of the context (max_position_embeddings - 2)");
    add(max_position - 1, "end of the context (max_position_embeddings - 1)");
  }
  std::vector<HardPosition> v;
  for (const auto& [m, why] : pos) v.push_back({m, why});
  return v;
}

PlanCaseDef plan_case_for(const ModelPlan& plan, int type_index, const std::string& model_name,
                          DType t) {
  if (type_index < 0 || type_index >= static_cast<int>(plan.types.size())) {
    throw_invalid("plan_case_for", "type index out of range", type_index);
  }
  PlanCaseDef d;
  d.model = model_name;
  d.model_words = plan.model.id.empty() ? model_name : plan.model.id;
  d.type = d.expected = plan.types[type_index];
  d.plan_types = plan.types;
  d.n_layers = static_cast<int>(plan.layer_type.size());
  for (int l = 0; l < d.n_layers; ++l) {
    if (plan.layer_type[l] == type_index) d.layers.push_back(l);
  }
  d.dtype = t;
  d.positions = plan_type_positions(d.type, plan.model.max_position);
  d.id = "plan_" + model_name + "_" + d.type.name + "_" + std::string(dtype_short(t));
  d.seed = rope_seed_of(d.id);
  // q/k: the projections, unless the type also normalizes its values (Gemma 4's v_norm, not
  // modelled): then q, k and v are past the norms and an engine skips them
  d.qk_inputs_normalized = d.type.qk_norm.kind != reference::QkNormKind::kNone && d.type.v_norm;
  if (d.type.qk_norm.has_weights() && !d.qk_inputs_normalized) {
    const double o = d.type.qk_norm.weight_offset;
    for (int c = 0; c < d.type.params.head_dim; ++c) {
      d.q_norm_weight.push_back(std::ldexp(static_cast<double>(prng_int(d.seed, 5, c, 128)), -8) +
                                1.0 - o);
      d.k_norm_weight.push_back(std::ldexp(static_cast<double>(prng_int(d.seed, 6, c, 128)), -8) +
                                1.0 - o);
    }
  }
  if (!plan.model.config.is_null()) {
    d.preset = {{"name", plan.model.id},
                {"hf_model", plan.model.hf_model},
                {"source", plan.model.source},
                {"config", plan.model.config}};
  }
  if (d.type.sinks) {
    for (int h = 0; h < d.n_q_heads; ++h) {
      d.sinks.push_back(
          std::ldexp(static_cast<double>(prng_int(d.seed, 4, h, 384) + 128), -8));  // [-1, 2]
    }
  }
  return d;
}

// ---- mistakes and the built-in engine ----------------------------------------------------------

std::vector<std::string> plan_case_mistakes() {
  return {"global-rope-on-sliding", "rope-on-nope",  "temperature-p",  "temperature-p-plus-1",
          "yarn-truncate",          "sinks-dropped", "qk-norm-missing"};
}

std::string plan_case_mistake_words(const std::string& mistake) {
  if (kMistakes.is(mistake, MistakeId::kGlobalRopeOnSliding))
    return "sliding-window layers rotated with the global layers' (scaled) RoPE";
  if (kMistakes.is(mistake, MistakeId::kRopeOnNope)) return "RoPE applied on a NoPE layer";
  if (kMistakes.is(mistake, MistakeId::kTemperatureP))
    return "query temperature with floor(p / F) instead of floor((p + 1) / F) (Llama 4)";
  if (kMistakes.is(mistake, MistakeId::kTemperaturePPlus1))
    return "query temperature with floor((p + 1) / L0) instead of floor(p / L0) (Mistral)";
  if (kMistakes.is(mistake, MistakeId::kYarnTruncate))
    return "YaRN's truncate flipped: the correction range floored and ceiled where the model has "
           "truncate = false, or left fractional where it has true";
  if (kMistakes.is(mistake, MistakeId::kOtherLayerType))
    return "the layer computed as the plan's other layer type (rotation, mask, temperature, "
           "sinks, q/k norm and scale of the other type: a layer pattern off by one, or the "
           "wrong type's layer picked)";
  if (kMistakes.is(mistake, MistakeId::kSinksDropped)) return "the learned sink logits left out of the softmax";
  if (kMistakes.is(mistake, MistakeId::kQkNormMissing))
    return "the q/k normalization left out (Llama 4's L2 norm after RoPE, Gemma 3's q_norm / "
           "k_norm before it)";
  return "";
}

namespace {

/// The type an engine with `mistake` computes in place of `t` (plan: the model's types);
/// InvalidArgument when the mistake does not apply to this type.
PlanLayerType type_with_mistake(const PlanLayerType& t, const std::vector<PlanLayerType>& plan,
                                const std::string& mistake) {
  const char* fn = "plan_case_run_engine";
  PlanLayerType x = t;
  auto rotation = [](const PlanLayerType& y) {  // what the rotation of a type is, as JSON
    Json j = plan_type_to_json(y);
    for (const char* k : {"name", "mask", "window", "chunk", "temperature", "sinks",
                          "query_pre_attn_scalar", "logit_softcap"}) {
      j.erase(k);
    }
    return j;
  };
  auto other_rope = [&](bool want_non_sliding) -> const PlanLayerType* {
    for (const auto& o : plan) {
      if (o.name == t.name || o.rope == PlanRope::kNone || o.params.head_dim != t.params.head_dim)
        continue;
      if (rotation(o) == rotation(t)) continue;  // the same rotation: nothing to mistake
      if (want_non_sliding && o.mask == PlanMask::kSliding) continue;
      return &o;
    }
    return nullptr;
  };
  if (kMistakes.is(mistake, MistakeId::kGlobalRopeOnSliding)) {
    const PlanLayerType* g = other_rope(true);
    if (t.mask != PlanMask::kSliding || t.rope == PlanRope::kNone || g == nullptr) {
      throw_invalid(fn,
                    "global-rope-on-sliding needs a sliding RoPE type and a global RoPE type of "
                    "the same head_dim and another rotation",
                    t.name);
    }
    x.rope = g->rope;
    x.params = g->params;
    x.scaling = g->scaling;
    x.proportional = g->proportional;
  } else if (kMistakes.is(mistake, MistakeId::kRopeOnNope)) {
    const PlanLayerType* g = other_rope(false);
    if (t.rope != PlanRope::kNone || g == nullptr) {
      throw_invalid(fn, "rope-on-nope needs a NoPE type and a RoPE type of the same head_dim",
                    t.name);
    }
    x.rope = g->rope;
    x.params = g->params;
    x.scaling = g->scaling;
    x.proportional = g->proportional;
  } else if (kMistakes.is(mistake, MistakeId::kTemperatureP) || kMistakes.is(mistake, MistakeId::kTemperaturePPlus1)) {
    const auto from =
        kMistakes.is(mistake, MistakeId::kTemperatureP) ? QueryTemperatureRule::kLlama4 : QueryTemperatureRule::kMistral;
    if (!t.has_temperature || t.temperature.rule != from) {
      throw_invalid(fn,
                    mistake + " needs a " + reference::query_temperature_rule_name(from) +
                        " query temperature",
                    t.name);
    }
    x.temperature.rule = from == QueryTemperatureRule::kLlama4 ? QueryTemperatureRule::kMistral
                                                               : QueryTemperatureRule::kLlama4;
  } else if (kMistakes.is(mistake, MistakeId::kYarnTruncate)) {
    if (t.rope != PlanRope::kRope || t.scaling.type != RopeScalingType::kYarn)
      throw_invalid(fn, "yarn-truncate needs a YaRN type", t.name);
    x.scaling.truncate = !t.scaling.truncate;
  } else if (kMistakes.is(mistake, MistakeId::kOtherLayerType)) {
    const PlanLayerType* o = nullptr;
    for (const auto& y : plan) {
      if (y.name == t.name || y.params.head_dim != t.params.head_dim) continue;
      Json a = plan_type_to_json(y), b = plan_type_to_json(t);
      a.erase("name");
      b.erase("name");
      if (a == b) continue;
      o = &y;
      break;
    }
    if (o == nullptr || plan.size() != 2) {
      throw_invalid(fn,
                    "other-layer-type needs a plan of two layer types of the same head_dim that "
                    "compute differently",
                    t.name);
    }
    x = *o;
  } else if (kMistakes.is(mistake, MistakeId::kSinksDropped)) {
    if (!t.sinks) throw_invalid(fn, "sinks-dropped needs a type with sinks", t.name);
    x.sinks = false;
  } else if (kMistakes.is(mistake, MistakeId::kQkNormMissing)) {
    if (t.qk_norm.kind == reference::QkNormKind::kNone)
      throw_invalid(fn, "qk-norm-missing needs a type with a q/k norm", t.name);
    x.qk_norm = reference::QkNorm{};
  } else if (!mistake.empty()) {
    throw_invalid(fn,
                  "unknown mistake (known: global-rope-on-sliding, rope-on-nope, temperature-p, "
                  "temperature-p-plus-1, yarn-truncate, sinks-dropped, qk-norm-missing, "
                  "other-layer-type)",
                  mistake);
  }
  return x;
}

struct EngineInputs {
  PlanLayerType type;
  std::vector<PlanLayerType> plan;
  std::vector<std::int64_t> pos;
  std::vector<float> q, k, v, sinks, q_norm_weight, k_norm_weight;
  bool qk_inputs_normalized = false;
  std::function<double(std::int64_t)> tau;  // replaces the type's temperature when set
  std::int64_t T = 0;
  int hq = 0, hk = 0, h = 0;
  double sigma = 1;
};

EngineInputs engine_inputs(const CaseSpec& spec, const TensorMap& golden) {
  const Json& pj = spec.manifest.at("params");
  const std::string src = spec.id + " params";
  EngineInputs e;
  e.type = plan_type_from_json(pj.at("type"), src);
  for (const Json& t : pj.at("plan").at("types")) e.plan.push_back(plan_type_from_json(t, src));
  const Tensor& pt = golden.at("positions");
  for (std::int64_t r = 0; r < pt.numel(); ++r) e.pos.push_back(pt.get_i64(r));
  e.T = static_cast<std::int64_t>(e.pos.size());
  e.q = tensor_to_f32(golden.at("q"));
  e.k = tensor_to_f32(golden.at("k"));
  e.v = tensor_to_f32(golden.at("v"));
  if (auto it = golden.find("sinks"); it != golden.end()) e.sinks = tensor_to_f32(it->second);
  if (auto it = golden.find("q_norm_weight"); it != golden.end())
    e.q_norm_weight = tensor_to_f32(it->second);
  if (auto it = golden.find("k_norm_weight"); it != golden.end())
    e.k_norm_weight = tensor_to_f32(it->second);
  e.qk_inputs_normalized = pj.value("qk_inputs", std::string("projections")) == "normalized";
  e.hq = pj.at("n_q_heads").get<int>();
  e.hk = pj.at("n_kv_heads").get<int>();
  e.h = pj.at("head_dim").get<int>();
  return e;
}

/// A float32 pipeline's tables [T, np] (cos, sin, attention factor folded in) of a rotating
/// type: HF's (fp32) or ggml's theta recurrence (fp32-recurrence).
void float_tables(const std::string& pipeline, const PlanLayerType& t,
                  const std::vector<std::int64_t>& pos, std::vector<float>* cs,
                  std::vector<float>* sn) {
  if (t.rope == PlanRope::kRope) {
    const auto tb = rope_pipeline_tables(pipeline, t.params, t.scaling, t.params.head_dim, pos);
    *cs = tb.cos;
    *sn = tb.sin;
    return;
  }
  const auto tb =
      rope_pipeline_tables(pipeline, t.params, reference::RopeScaling{}, t.params.head_dim, pos);
  *cs = tb.cos;
  *sn = tb.sin;
  const int np = t.params.rotary_dim / 2,
            live = reference::rope_proportional_live_pairs(t.params, t.proportional);
  for (std::size_t r = 0; r < pos.size(); ++r) {
    for (int i = live; i < np; ++i) {
      (*cs)[r * np + i] = 1.0f;
      (*sn)[r * np + i] = 0.0f;
    }
  }
}

/// Every head_dim row of x normalized in place the pipeline's way: posenc's kernel (exact), or
/// HF's float32 RMSNorm (fp32 pipelines): x.pow(2).mean(-1) + eps, rsqrt, x * it, * (o + w).
void engine_norm(const std::string& pipeline, const reference::QkNorm& n, int h,
                 const std::vector<float>& w, std::vector<float>& x) {
  if (n.kind == reference::QkNormKind::kNone || POSENC_MUTANT("engine_plan_qk_norm_skipped"))
    return;
  if (pipelines::of(pipeline) == Pipeline::kExact) {
    optimized::qk_norm_apply_rows(n, h, x, w, x);
    return;
  }
  const float eps = static_cast<float>(n.eps);
  for (std::size_t off = 0; off < x.size(); off += static_cast<std::size_t>(h)) {
    float sum = 0;
    for (int c = 0; c < h; ++c) sum += x[off + c] * x[off + c];
    const float r = 1.0f / std::sqrt(sum / static_cast<float>(h) + eps);
    for (int c = 0; c < h; ++c) {
      x[off + c] *= r;
      if (n.has_weights()) x[off + c] *= static_cast<float>(n.weight_offset) + w[c];
    }
  }
}

/// q and k normalized (before or after RoPE as the type says), rotated and q scaled by the
/// temperature, the pipeline's way.
void engine_rotate(const std::string& pipeline, const PlanLayerType& t, EngineInputs& e,
                   std::vector<float>* qr, std::vector<float>* kr) {
  const bool norm = t.qk_norm.kind != reference::QkNormKind::kNone && !e.qk_inputs_normalized;
  const bool after = norm && t.qk_norm.position == reference::QkNormPosition::kAfterRope;
  if (norm && !after) {
    engine_norm(pipeline, t.qk_norm, e.h, e.q_norm_weight, e.q);
    engine_norm(pipeline, t.qk_norm, e.h, e.k_norm_weight, e.k);
  }
  *qr = e.q;
  *kr = e.k;
  if (t.rope != PlanRope::kNone) {
    if (pipelines::of(pipeline) == Pipeline::kExact) {
      const auto cache =
          t.rope == PlanRope::kProportional
              ? optimized::rope_proportional_cache_init(t.params, t.proportional, e.pos)
              : optimized::rope_scaling_cache_init(t.params, t.scaling, e.pos);
      optimized::rope_apply(t.params, cache,
                            {e.T, e.hq, optimized::RopeTensorLayout::kTokensHeadsDim}, e.q, *qr);
      optimized::rope_apply(t.params, cache,
                            {e.T, e.hk, optimized::RopeTensorLayout::kTokensHeadsDim}, e.k, *kr);
    } else {
      std::vector<float> cs, sn;
      float_tables(pipeline, t, e.pos, &cs, &sn);
      const int np = t.params.rotary_dim / 2, h = e.h;
      auto rotate = [&](const std::vector<float>& x, int heads, std::vector<float>& y) {
        for (std::int64_t r = 0; r < e.T * heads; ++r) {
          const std::int64_t tt = r / heads;
          for (int i = 0; i < np; ++i) {
            const int ca = reference::rope_pair_a(t.params, i),
                      cb = reference::rope_pair_b(t.params, i);
            const float c = cs[tt * np + i], s = sn[tt * np + i], xa = x[r * h + ca],
                        xb = x[r * h + cb];
            y[r * h + ca] = xa * c + (-xb) * s;  // q * cos + rotate_half(q) * sin
            y[r * h + cb] = xb * c + xa * s;
          }
        }
      };
      rotate(e.q, e.hq, *qr);
      rotate(e.k, e.hk, *kr);
    }
  }
  if (after) {
    engine_norm(pipeline, t.qk_norm, e.h, e.q_norm_weight, *qr);
    engine_norm(pipeline, t.qk_norm, e.h, e.k_norm_weight, *kr);
  }
  if (e.tau) {  // a fitted temperature (plan_fit.cpp): tau(m) in double, rounded, one product
    const std::size_t row = static_cast<std::size_t>(e.hq) * e.h;
    for (std::int64_t r = 0; r < e.T; ++r) {
      const float tau = static_cast<float>(e.tau(e.pos[r]));
      for (std::size_t c = 0; c < row; ++c) (*qr)[r * row + c] *= tau;
    }
    return;
  }
  if (!t.has_temperature) return;
  if (pipelines::of(pipeline) == Pipeline::kExact) {
    optimized::query_temperature_apply(t.temperature, e.pos, *qr);
    return;
  }
  const std::size_t row = static_cast<std::size_t>(e.hq) * e.h;
  for (std::int64_t r = 0; r < e.T; ++r) {  // HF: log1p(floor(...)) * c + 1 in float32
    const std::int64_t n = reference::query_temperature_steps(t.temperature, e.pos[r]);
    const float tau =
        std::log1p(static_cast<float>(n)) * static_cast<float>(t.temperature.coefficient) + 1.0f;
    for (std::size_t c = 0; c < row; ++c) (*qr)[r * row + c] *= tau;
  }
}

TensorMap run_plan_engine(const std::string& pipeline, EngineInputs& e, DType dt);

}  // namespace

TensorMap plan_case_run_engine(const CaseSpec& spec, const TensorMap& golden,
                               const EngineOptions& o) {
  if (pipelines::of(o.pipeline) != Pipeline::kExact && pipelines::of(o.pipeline) != Pipeline::kFp32 && pipelines::of(o.pipeline) != Pipeline::kFp32Recurrence) {
    throw_invalid("plan_case_run_engine",
                  "plan cases emulate the exact, fp32 and fp32-recurrence pipelines only",
                  o.pipeline);
  }
  EngineInputs e = engine_inputs(spec, golden);
  if (kMistakes.is(o.mistake, MistakeId::kQkNormMissing) && e.qk_inputs_normalized) {
    throw_invalid("plan_case_run_engine",
                  "qk-norm-missing needs a case whose q and k are projections (qk_inputs)",
                  spec.id);
  }
  e.type = type_with_mistake(e.type, e.plan, o.mistake);
  return run_plan_engine(o.pipeline, e, golden.at("q").dtype);
}

TensorMap plan_case_run_type(const CaseSpec& spec, const TensorMap& golden, const PlanLayerType& t,
                             const std::string& pipeline,
                             const std::function<double(std::int64_t)>& tau) {
  EngineInputs e = engine_inputs(spec, golden);
  e.type = t;
  e.tau = tau;
  return run_plan_engine(pipeline, e, golden.at("q").dtype);
}

namespace {

/// The engine on e (its type as given): rotation, scores, softmax, output the pipeline's way.
TensorMap run_plan_engine(const std::string& pipeline, EngineInputs& e, DType dt) {
  const EngineOptions o{"", pipeline};
  const PlanLayerType& t = e.type;
  check_modelled(t, "plan_case_run_engine");
  std::vector<float> qr, kr;
  engine_rotate(o.pipeline, t, e, &qr, &kr);
  const std::int64_t T = e.T;
  const int h = e.h, hq = e.hq, hk = e.hk, group = hq / hk;
  const double sigma = 1.0 / std::sqrt(scale_radicand(t));
  std::vector<float> scores(static_cast<std::size_t>(hq * T * T));
  reference::AttentionMask mask;
  mask.allowed.resize(static_cast<std::size_t>(T * T));
  for (std::int64_t i = 0; i < T; ++i) {
    for (std::int64_t j = 0; j < T; ++j)
      mask.allowed[i * T + j] = plan_visible(t, e.pos[i], e.pos[j]) ? 1 : 0;
  }
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        const float* x = &qr[(i * hq + hh) * h];
        const float* y = &kr[(j * hk + hh / group) * h];
        if (pipelines::of(o.pipeline) == Pipeline::kExact) {
          double sum = 0;
          for (int c = 0; c < h; ++c) sum += static_cast<double>(x[c]) * y[c];
          sum *= sigma;
          if (t.logit_softcap > 0) sum = t.logit_softcap * std::tanh(sum / t.logit_softcap);
          scores[(hh * T + i) * T + j] = static_cast<float>(sum);
        } else {
          float sum = 0;
          for (int c = 0; c < h; ++c) sum += x[c] * y[c];
          sum *= static_cast<float>(sigma);
          if (t.logit_softcap > 0) {  // HF Gemma 2: / cap, tanh, * cap in float32
            const float cap = static_cast<float>(t.logit_softcap);
            sum = std::tanh(sum / cap) * cap;
          }
          scores[(hh * T + i) * T + j] = sum;
        }
      }
    }
  }
  std::vector<float> probs(scores.size()), out(static_cast<std::size_t>(T * hq * h));
  if (pipelines::of(o.pipeline) == Pipeline::kExact &&
      t.logit_softcap > 0) {  // the kernel has no soft cap: softmax in double
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < T; ++i) {
        const std::size_t row = static_cast<std::size_t>((hh * T + i) * T);
        double mx = t.sinks ? e.sinks[hh] : -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < T; ++j) {
          if (mask.allowed[i * T + j]) mx = std::max(mx, static_cast<double>(scores[row + j]));
        }
        double sum = t.sinks ? std::exp(e.sinks[hh] - mx) : 0.0;
        std::vector<double> pr(static_cast<std::size_t>(T), 0.0);
        for (std::int64_t j = 0; j < T; ++j) {
          if (mask.allowed[i * T + j])
            sum += pr[j] = std::exp(static_cast<double>(scores[row + j]) - mx);
        }
        for (std::int64_t j = 0; j < T; ++j) probs[row + j] = static_cast<float>(pr[j] /= sum);
        for (int c = 0; c < h; ++c) {
          double acc = 0;
          for (std::int64_t j = 0; j < T; ++j) acc += pr[j] * e.v[(j * hk + hh / group) * h + c];
          out[(i * hq + hh) * h + c] = static_cast<float>(acc);
        }
      }
    }
  } else if (pipelines::of(o.pipeline) == Pipeline::kExact) {
    reference::AttentionParams p;
    p.n_heads = hq;
    p.n_kv_heads = hk;
    p.head_dim = p.value_dim = h;
    p.scale_kind = reference::AttentionScale::kGiven;
    p.scale = sigma;
    if (t.sinks) p.sinks.assign(e.sinks.begin(), e.sinks.end());
    optimized::attention_forward(p, mask, T, T, qr, kr, e.v, out, nullptr);
    optimized::attention_probs(p, mask, T, T, qr, kr, probs, nullptr);
  } else {  // eager float32: softmax over the visible scores and the sink, then probs @ v
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < T; ++i) {
        const std::size_t row = static_cast<std::size_t>((hh * T + i) * T);
        float mx = t.sinks ? e.sinks[hh] : -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < T; ++j) {
          if (mask.allowed[i * T + j]) mx = std::max(mx, scores[row + j]);
        }
        float sum = t.sinks ? std::exp(e.sinks[hh] - mx) : 0.0f;
        for (std::int64_t j = 0; j < T; ++j) {
          probs[row + j] = mask.allowed[i * T + j] ? std::exp(scores[row + j] - mx) : 0.0f;
          sum += probs[row + j];
        }
        for (std::int64_t j = 0; j < T; ++j) probs[row + j] /= sum;
        for (int c = 0; c < h; ++c) {
          float acc = 0;
          for (std::int64_t j = 0; j < T; ++j)
            acc += probs[row + j] * e.v[(j * hk + hh / group) * h + c];
          out[(i * hq + hh) * h + c] = acc;
        }
      }
    }
  }
  TensorMap res;
  res.emplace("q_rot", engine_tensor("q_rot", dt, {T, hq, h}, qr));
  res.emplace("k_rot", engine_tensor("k_rot", dt, {T, hk, h}, kr));
  res.emplace("scores", engine_tensor("scores", dt, {hq, T, T}, scores));
  res.emplace("probs", engine_tensor("probs", dt, {hq, T, T}, probs));
  res.emplace("out", engine_tensor("out", dt, {T, hq, h}, out));
  return res;
}

}  // namespace

/// The type of a negative control: `t` computed with `mistake` (plan: the model's types).
PlanLayerType plan_type_with_mistake(const PlanLayerType& t, const std::vector<PlanLayerType>& plan,
                                     const std::string& mistake) {
  return type_with_mistake(t, plan, mistake);
}

ConfigCases plan_config_cases(const ModelPlan& plan, const std::string& name, DType t) {
  ConfigCases out;
  out.model = (plan.model.id.empty() ? name : plan.model.id) + " (cases named " + name +
              "): a plan of " + std::to_string(plan.layer_type.size()) + " layers, " +
              std::to_string(plan.types.size()) + " layer types";
  for (std::size_t ti = 0; ti < plan.types.size(); ++ti) {
    const PlanLayerType& ty = plan.types[ti];
    out.model += std::string(ti == 0 ? ": " : "; ") + ty.name + " (" + plan_rope_name(ty.rope) +
                 ", " + plan_mask_name(ty.mask) + (ty.has_temperature ? ", temperature" : "") +
                 (ty.sinks ? ", sinks" : "") +
                 (ty.qk_norm.kind == reference::QkNormKind::kNone
                      ? ""
                      : std::string(", q/k norm ") + reference::qk_norm_kind_name(ty.qk_norm.kind) +
                            " " + reference::qk_norm_position_name(ty.qk_norm.position)) +
                 ")";
  }
  out.notes = plan.notes;
  std::vector<std::string> ids;
  for (int ti = 0; ti < static_cast<int>(plan.types.size()); ++ti) {
    const PlanCaseDef d = plan_case_for(plan, ti, config_name_sanitize(name), t);
    check_modelled(d.type, "plan_config_cases");
    ids.push_back(d.id);
    ConfigCase c{
        "plan", d.id,
        "layer type " + d.type.name + ": " + std::to_string(d.positions.size()) + " tokens",
        [d] { return plan_case_generate(d); }};
    const std::uint64_t T = d.positions.size(),
                        h = static_cast<std::uint64_t>(d.type.params.head_dim),
                        hq = static_cast<std::uint64_t>(d.n_q_heads),
                        hk = static_cast<std::uint64_t>(d.n_kv_heads);
    const std::uint64_t expected = (2 * hq + hk) * T * h + 2 * hq * T * T;
    c.largest_tensor_bytes = 8 * std::max(hq * T * h, hq * T * T);
    c.file_bytes = 40 * expected + 65536;
    c.seconds = 1e-5 * static_cast<double>(hq * T * T * h) + 0.05;
    out.cases.push_back(std::move(c));
  }
  out.plan = plan_manifest_json(plan, name, ids);
  return out;
}

}  // namespace posenc::golden
