// -----------------------------------------------------------------------------
// RoPE scaling: context extension rules for the RoPE frequencies (reference, closed form)
// -----------------------------------------------------------------------------
// Every rule maps the plain frequencies theta_i = b^(-2i/d) (reference/rope.hpp; d = rotary_dim,
// b = base, i = 0 .. d/2 - 1) to scaled ones, an attention factor a that multiplies cos and sin,
// and a softmax-scale multiplier (DeepSeek MLA). s = factor, L0 = original context,
// L = max_position_embeddings, ln = natural log.
//
//   linear (PI)    theta'_i = theta_i / s;  a = 1     (positions / s: the same angles)
//   ntk            b' = b s^(d/(d-2)), theta'_i = b'^(-2i/d);  a = 1
//   dynamic        l = max(seq_len, L); b' = b (s l / L - (s - 1))^(d/(d-2)); a = 1
//                  (l = L gives b' = b: unchanged up to the trained length)
//   yarn           corr(r) = d ln(Lc / (2 pi r)) / (2 ln b), Lc = L0 (L in HF's early form)
//                  low = max(floor(corr(beta_fast)), 0), high = min(ceil(corr(beta_slow)), d - 1)
//                  (without floor / ceil when truncate is false); high += 0.001 if low == high
//                  rho_i = clamp((i - low) / (high - low), 0, 1)
//                  theta'_i = (theta_i / s) rho_i + theta_i (1 - rho_i)
//                  a = mscale(s, 1) = 0.1 ln s + 1 (s > 1), or explicit, or (HF, DeepSeek config)
//                  mscale(s, mscale) / mscale(s, mscale_all_dim) when both are non-zero;
//                  DeepSeek's official code: a = 1
//                  softmax multiplier (DeepSeek MLA): mscale(s, mscale_all_dim)^2 (HF), or
//                  mscale(s, mscale)^2 (official code); 1 otherwise
//   llama3         lambda_i = 2 pi / theta_i, lambda_hi = L0 / high_freq_factor,
//                  lambda_lo = L0 / low_freq_factor
//                  lambda_i < lambda_hi: theta_i;  lambda_i > lambda_lo: theta_i / s;
//                  else (both edges inclusive) g = (L0 / lambda_i - low) / (high - low),
//                  theta'_i = (1 - g) theta_i / s + g theta_i  (g = 0 when low == high)
//   longrope       theta'_i = theta_i / e_i, e = long_factor or short_factor (switch below);
//                  a = sqrt(1 + ln s / ln L0) (s > 1; s = factor; a config without one means
//                  L / L0, which the config reader fills in), or explicit
//
//   LongRoPE switch (seq_len = the call's largest position + 1):
//     hf_seq_len          long iff seq_len > L0 (HF; a call with position L0 is long)
//     vllm_any_above      long iff some position > L0 (older vLLM: off by one against HF)
//     vllm_max_model_len  long for every call when L > L0 (current vLLM, chosen once)
//   Dynamic NTK: seq_len is the call's (HF: max(position_ids) + 1); the rule is stateless, and
//   an engine's growth / reset policy (DynamicPolicy below) decides which seq_len a call's
//   tables are built for (golden cases state the call).
//
// Sources: S. Chen et al., "Extending Context Window of Large Language Models via Positional
//   Interpolation", arXiv:2306.15595v2, Sec. 2.3 (linear); bloc97, "NTK-Aware Scaled RoPE" (2023;
//   jquesnelle/yarn LlamaNTKScaledRotaryEmbedding, LlamaDynamicScaledRotaryEmbedding);
//   B. Peng et al., "YaRN", arXiv:2309.00071v2, Sec. 3.2-3.4 (eq. 15-20) and jquesnelle/yarn
//   LlamaYaRNScaledRotaryEmbedding; DeepSeek-AI, "DeepSeek-V2", arXiv:2405.04434v5, App. B
//   (YaRN for MLA) and deepseek-ai/DeepSeek-V3 inference/model.py; meta-llama/llama-models
//   models/llama3/model.py apply_scaling; Y. Ding et al., "LongRoPE", arXiv:2402.13753v1, Sec. 3
//   and microsoft Phi-3 (HF _compute_longrope_parameters). Facts: docs/schemes/rope_scaling.md.
// Index note: YaRN's paper counts dimensions d/2 pairs from 0 as here; its ramp is over the
//   pair index i, while the correction range is clamped against d - 1 (as the reference code).
// Names elsewhere: HF rope_type linear / dynamic / yarn / llama3 / longrope (legacy "su"), vLLM
//   get_rope(rope_scaling), ggml freq_scale / ext_factor / attn_factor / beta_fast / beta_slow /
//   rope_freqs (llama3 and LongRoPE factors as a tensor).
// Not modelled: float32 evaluation of any of this (the fp32 profiles budget for it); M-RoPE;
//   an engine's cache policy (which seq_len each call sees); the dynamic YaRN variant.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <boost/math/constants/constants.hpp>

#include "reference/common/errors.hpp"
#include "reference/rope.hpp"

namespace posenc::reference {

enum class RopeScalingType { kNone, kLinear, kNtk, kDynamic, kYarn, kLlama3, kLongRope };
/// Which YaRN code a case follows (docs/schemes/rope_scaling.md).
enum class YarnForm { kPaper, kHfEarly, kHfCurrent, kDeepSeekOfficial };
enum class LongRopePolicy { kHfSeqLen, kVllmAnyAbove, kVllmMaxModelLen };

constexpr const char* rope_scaling_type_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "default";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kNtk: return "ntk";
    case RopeScalingType::kDynamic: return "dynamic";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kLongRope: return "longrope";
  }
  return "?";
}
constexpr const char* yarn_form_name(YarnForm f) {
  switch (f) {
    case YarnForm::kPaper: return "paper";
    case YarnForm::kHfEarly: return "hf_early";
    case YarnForm::kHfCurrent: return "hf_current";
    case YarnForm::kDeepSeekOfficial: return "deepseek_official";
  }
  return "?";
}
constexpr const char* longrope_policy_name(LongRopePolicy p) {
  switch (p) {
    case LongRopePolicy::kHfSeqLen: return "hf_seq_len";
    case LongRopePolicy::kVllmAnyAbove: return "vllm_any_above";
    case LongRopePolicy::kVllmMaxModelLen: return "vllm_max_model_len";
  }
  return "?";
}

/// The scaling rule and everything it reads. Unused fields are ignored by the other rules.
/// Config values (factor, beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim,
/// low_freq_factor, high_freq_factor, the LongRoPE factor lists) enter the oracle as the
/// binary64 number the config's JSON text parses to (Real(double), exact), not as the decimal
/// text: that double is what every engine computes with (Python's json, nlohmann), and configs
/// written by programs print doubles or float32s (Phi-3's 1.0700000524520874 is a float32), so
/// the text is a rendering of the double, not a quantity of its own. A hand-written decimal
/// such as DeepSeek's mscale 0.707 thus enters as 0.70699999999999996181... (2^-53 relative
/// from 0.707). The formulas' own decimal constants (yarn_mscale_coefficient, yarn_ramp_guard
/// below) are exact decimals.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                      // s
  std::int64_t original_max_position = 0;   // L0 (yarn, llama3, longrope)
  std::int64_t max_position = 0;            // L (dynamic, HF early yarn, longrope factor)
  std::int64_t seq_len = 0;                 // the call's largest position + 1 (dynamic, longrope)
  // yarn
  YarnForm yarn_form = YarnForm::kHfCurrent;
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;            // explicit (yarn, longrope); 0 = derive it
  double mscale = 0.0, mscale_all_dim = 0.0;  // 0 = absent
  bool truncate = true;
  bool mla = false;                         // DeepSeek MLA: a softmax-scale multiplier
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  // longrope
  std::vector<double> short_factor, long_factor;
  LongRopePolicy longrope_policy = LongRopePolicy::kHfSeqLen;
};

/// Scaled tables: what the rotation needs, plus what the rule decided on the way.
template <class Real>
struct RopeScaledTables {
  RopeTables<Real> tables;            // scaled inv_freq and the attention factor a
  Real softmax_scale_multiplier = 1;  // multiplies the attention's 1/sqrt(d) (MLA), else 1
  Real ramp_low = 0, ramp_high = 0;   // yarn: the correction range after clamping
  std::vector<int> band;              // llama3: 0 kept, 1 smoothed, 2 divided; yarn: 0 / 1 / 2
  bool long_factors = false;          // longrope: which list
};

/// InvalidArgument naming `function` unless the rule's parameters are usable.
inline void rope_scaling_check(const RopeParams& p, const RopeScaling& s,
                               const char* function = "rope_scaling_check") {
  rope_check(p, function);
  if (s.type == RopeScalingType::kNone) return;
  if (!(s.factor > 0.0) || !std::isfinite(s.factor)) throw_invalid(function, "factor must be finite and > 0", s.factor);
  const int np = p.rotary_dim / 2;
  switch (s.type) {
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamic:
      if (p.rotary_dim <= 2) throw_invalid(function, "ntk scaling needs rotary_dim > 2", p.rotary_dim);
      if (s.type == RopeScalingType::kDynamic && s.max_position <= 0) {
        throw_invalid(function, "dynamic scaling needs max_position_embeddings > 0", s.max_position);
      }
      break;
    case RopeScalingType::kYarn:
      if (s.original_max_position <= 0) {
        throw_invalid(function, "yarn needs original_max_position_embeddings > 0", s.original_max_position);
      }
      if (s.yarn_form == YarnForm::kHfEarly && s.max_position <= 0) {
        throw_invalid(function, "HF's early yarn needs max_position_embeddings > 0", s.max_position);
      }
      if (!(s.beta_fast > 0.0) || !(s.beta_slow > 0.0)) {
        throw_invalid(function, "beta_fast and beta_slow must be > 0", s.beta_fast);
      }
      break;
    case RopeScalingType::kLlama3:
      if (s.original_max_position <= 0) {
        throw_invalid(function, "llama3 needs original_max_position_embeddings > 0", s.original_max_position);
      }
      if (!(s.low_freq_factor > 0.0) || !(s.high_freq_factor > 0.0)) {
        throw_invalid(function, "low_freq_factor and high_freq_factor must be > 0", s.low_freq_factor);
      }
      break;
    case RopeScalingType::kLongRope:
      if (s.original_max_position <= 1) {
        throw_invalid(function, "longrope needs original_max_position_embeddings > 1", s.original_max_position);
      }
      if (s.short_factor.size() != static_cast<std::size_t>(np)) {
        throw_invalid(function, "short_factor must have rotary_dim/2 = " + std::to_string(np) + " entries",
                      s.short_factor.size());
      }
      if (s.long_factor.size() != static_cast<std::size_t>(np)) {
        throw_invalid(function, "long_factor must have rotary_dim/2 = " + std::to_string(np) + " entries",
                      s.long_factor.size());
      }
      for (double e : s.short_factor) if (!(e > 0.0)) throw_invalid(function, "short_factor entries must be > 0", e);
      for (double e : s.long_factor) if (!(e > 0.0)) throw_invalid(function, "long_factor entries must be > 0", e);
      break;
    default:
      break;
  }
}

/// The decimal constants of the formulas above, exact in Real: a ratio of integers rounded
/// once in Real, never a double literal (Real(0.1) would carry the double's 5.6e-18 relative
/// error into every mp50 value and move f64 companions by up to 0.7 ulp).
///   yarn_mscale_coefficient  0.1 of get_mscale = 0.1 m ln s + 1 (YaRN Sec. 3.4; HF, DeepSeek)
///   yarn_ramp_guard          0.001 that HF / DeepSeek add to high when low == high
template <class Real>
Real yarn_mscale_coefficient() {
  return Real(1) / Real(10);
}
template <class Real>
Real yarn_ramp_guard() {
  return Real(1) / Real(1000);
}

/// get_mscale of YaRN and DeepSeek: 1 for s <= 1, else 0.1 m ln s + 1.
template <class Real>
Real yarn_mscale(const Real& s, const Real& m) {
  using std::log;
  if (!(s > Real(1))) return Real(1);
  return yarn_mscale_coefficient<Real>() * m * log(s) + Real(1);
}

/// The YaRN correction dimension of r rotations over the length lc.
template <class Real>
Real yarn_correction_dim(int d, double base, double lc, double r) {
  using std::log;
  const Real pi = boost::math::constants::pi<Real>();
  return Real(d) * log(Real(lc) / (Real(2) * pi * Real(r))) / (Real(2) * log(Real(base)));
}

/// Whether a LongRoPE call uses the long factors, by policy.
inline bool longrope_uses_long(const RopeScaling& s) {
  switch (s.longrope_policy) {
    case LongRopePolicy::kHfSeqLen:
      return s.seq_len > s.original_max_position;
    case LongRopePolicy::kVllmAnyAbove: return s.seq_len - 1 > s.original_max_position;
    case LongRopePolicy::kVllmMaxModelLen: return s.max_position > s.original_max_position;
  }
  return false;
}

/// Which seq_len an engine's dynamic-NTK tables were built for, call after call (spec 2.3).
///   kPerCall    HF v4.38 and the stateless rule: every call uses its own seq_len
///   kGrowReset  HF 4.45+ (dynamic_rope_update): the tables grow to the largest seq_len seen
///               and stay there; a call shorter than L resets them to the original ones
/// Keys already in a KV cache keep the rotation of the call that wrote them (HF does not
/// re-rotate): an engine that does, or that never regrows, follows another policy.
enum class DynamicPolicy { kPerCall, kGrowReset };

struct DynamicNtkState {
  std::int64_t cached = 0;  // the seq_len the current tables were built for; 0 = L (plain)
};

/// The seq_len whose tables a call of `call_seq_len` uses under the policy; updates `state`.
inline std::int64_t dynamic_ntk_call_seq_len(DynamicPolicy policy, DynamicNtkState& state,
                                             std::int64_t call_seq_len, std::int64_t max_position) {
  if (call_seq_len <= 0) throw_invalid("dynamic_ntk_call_seq_len", "call_seq_len must be > 0", call_seq_len);
  if (max_position <= 0) throw_invalid("dynamic_ntk_call_seq_len", "max_position_embeddings must be > 0", max_position);
  if (state.cached == 0) state.cached = max_position;
  if (policy == DynamicPolicy::kPerCall) {
    state.cached = std::max(call_seq_len, max_position);
    return call_seq_len;
  }
  if (call_seq_len > state.cached) {
    state.cached = call_seq_len;  // growth
  } else if (call_seq_len < max_position && state.cached > max_position) {
    state.cached = max_position;  // reset
  }
  return state.cached;
}

/// The scaled tables of a rule, in closed form in Real.
template <class Real>
RopeScaledTables<Real> rope_scaling_tables(const RopeParams& p, const RopeScaling& s) {
  using std::ceil;
  using std::floor;
  using std::log;
  using std::pow;
  using std::sqrt;
  rope_scaling_check(p, s, "rope_scaling_tables");
  const int d = p.rotary_dim, np = d / 2;
  RopeScaledTables<Real> out;
  std::vector<Real> theta = rope_inv_freq<Real>(p);
  Real a = Real(p.attention_factor);
  const Real factor = Real(s.factor);
  out.band.assign(static_cast<std::size_t>(np), 0);
  switch (s.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
      for (auto& t : theta) t /= factor;
      out.band.assign(static_cast<std::size_t>(np), 2);
      break;
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamic: {
      Real scale = factor;
      if (s.type == RopeScalingType::kDynamic) {
        const std::int64_t l = std::max(s.seq_len, s.max_position);
        scale = factor * Real(l) / Real(s.max_position) - (factor - Real(1));
      }
      const Real base = Real(p.base) * pow(scale, Real(d) / Real(d - 2));
      for (int i = 0; i < np; ++i) theta[i] = pow(base, -Real(2 * i) / Real(d));
      break;
    }
    case RopeScalingType::kYarn: {
      const double lc = s.yarn_form == YarnForm::kHfEarly ? static_cast<double>(s.max_position)
                                                          : static_cast<double>(s.original_max_position);
      Real low = yarn_correction_dim<Real>(d, p.base, lc, s.beta_fast);
      Real high = yarn_correction_dim<Real>(d, p.base, lc, s.beta_slow);
      if (s.truncate) {
        low = floor(low);
        high = ceil(high);
      }
      if (low < Real(0)) low = Real(0);
      if (high > Real(d - 1)) high = Real(d - 1);
      if (low == high) high += yarn_ramp_guard<Real>();
      out.ramp_low = low;
      out.ramp_high = high;
      for (int i = 0; i < np; ++i) {
        Real rho = (Real(i) - low) / (high - low);
        if (rho < Real(0)) rho = Real(0);
        if (rho > Real(1)) rho = Real(1);
        theta[i] = theta[i] / factor * rho + theta[i] * (Real(1) - rho);
        out.band[i] = rho == Real(0) ? 0 : (rho == Real(1) ? 2 : 1);
      }
      const Real m1 = yarn_mscale(factor, Real(1));
      switch (s.yarn_form) {
        case YarnForm::kPaper:
          a = m1;
          break;
        case YarnForm::kHfEarly:
          a = s.attention_factor > 0 ? Real(s.attention_factor)
                                     : yarn_mscale_coefficient<Real>() * log(factor) + Real(1);
          break;
        case YarnForm::kHfCurrent:
          if (s.attention_factor > 0) {
            a = Real(s.attention_factor);
          } else if (s.mscale != 0 && s.mscale_all_dim != 0) {
            a = yarn_mscale(factor, Real(s.mscale)) / yarn_mscale(factor, Real(s.mscale_all_dim));
          } else {
            a = m1;
          }
          if (s.mla && s.mscale_all_dim != 0) {
            const Real m = yarn_mscale(factor, Real(s.mscale_all_dim));
            out.softmax_scale_multiplier = m * m;
          }
          break;
        case YarnForm::kDeepSeekOfficial: {
          a = Real(1);
          const Real m = yarn_mscale(factor, Real(s.mscale != 0 ? s.mscale : 1.0));
          out.softmax_scale_multiplier = m * m;
          break;
        }
      }
      break;
    }
    case RopeScalingType::kLlama3: {
      const Real pi = boost::math::constants::pi<Real>();
      const Real l0 = Real(s.original_max_position);
      const Real lo = Real(s.low_freq_factor), hi = Real(s.high_freq_factor);
      const Real wl_hi = l0 / hi, wl_lo = l0 / lo;
      for (int i = 0; i < np; ++i) {
        const Real wl = Real(2) * pi / theta[i];
        // Both edges inclusive in the smoothed band (HF and Meta); the blend is continuous there,
        // so the choice only matters to a float pipeline that rounds wl onto an edge.
        if (wl < wl_hi) {
          out.band[i] = 0;
        } else if (wl > wl_lo) {
          theta[i] = theta[i] / factor;
          out.band[i] = 2;
        } else {
          const Real g = hi == lo ? Real(0) : (l0 / wl - lo) / (hi - lo);
          theta[i] = (Real(1) - g) * theta[i] / factor + g * theta[i];
          out.band[i] = 1;
        }
      }
      break;
    }
    case RopeScalingType::kLongRope: {
      out.long_factors = longrope_uses_long(s);
      const auto& e = out.long_factors ? s.long_factor : s.short_factor;
      for (int i = 0; i < np; ++i) theta[i] = theta[i] / Real(e[i]);
      if (s.attention_factor > 0) {
        a = Real(s.attention_factor);
      } else {
        a = factor > Real(1) ? sqrt(Real(1) + log(factor) / log(Real(s.original_max_position))) : Real(1);
      }
      out.band.assign(static_cast<std::size_t>(np), out.long_factors ? 2 : 0);
      break;
    }
  }
  out.tables = rope_tables<Real>(p, std::move(theta), a);
  return out;
}

}  // namespace posenc::reference
