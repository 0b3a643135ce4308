// Float emulations of the engine pipelines that the profiles model (golden/format/profiles.hpp):
// the steps several schemes' built-in engines share under `posenc engine --pipeline`. These are
// convention models, never the oracle: each reproduces, operation by operation, how a widely
// used engine computes, so that the budgets can be shown to hold and to be tight.
//
// Every operation is a separate float32 (or bf16/f16) rounding, as in the engines' eager code:
// the golden library is compiled with -ffp-contract=off so that no product and sum is fused.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "golden/format/format.hpp"
#include "golden/cases/float_interval.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/dtype.hpp"
#include "reference/common/errors.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::golden {

/// The engine pipelines posenc emulates (`posenc engine --pipeline`, EngineOptions::pipeline),
/// one per profile: exact (posenc's optimized kernels), fp32 (HF's float32 pipeline),
/// fp32-recurrence (ggml's recurrence), bf16 and f16 (the eager half-precision pipelines).
enum class Pipeline { kExact, kFp32, kFp32Recurrence, kBf16, kF16 };

}  // namespace posenc::golden

namespace posenc::golden::pipelines {

/// The pipeline a name names; InvalidArgument naming pipelines::of and the known names otherwise.
inline Pipeline of(const std::string& name) {
  static const std::pair<const char*, Pipeline> kNames[] = {
      {"exact", Pipeline::kExact},
      {"fp32", Pipeline::kFp32},
      {"fp32-recurrence", Pipeline::kFp32Recurrence},
      {"bf16", Pipeline::kBf16},
      {"f16", Pipeline::kF16}};
  for (const auto& [n, p] : kNames) {
    if (name == n) return p;
  }
  throw_invalid("pipelines::of", "pipeline must be one of exact, fp32, fp32-recurrence, bf16, f16",
                name);
}

/// The pipeline names `posenc engine --pipeline` accepts, one per profile, in profile order.
inline std::vector<std::string> names() {
  std::vector<std::string> v;
  for (const auto& p : profiles()) v.push_back(p.pipeline);
  return v;
}

/// The profile a pipeline's outputs are judged by (exact -> strict, fp32 -> fp32, ...).
inline std::string profile_of(const std::string& pipeline) {
  for (const auto& p : profiles()) {
    if (p.pipeline == pipeline) return p.name;
  }
  throw_invalid("pipelines::profile_of", "pipeline must be one of exact, fp32, fp32-recurrence, "
                "bf16, f16", pipeline);
}

/// The dtype a pipeline computes its activations in: bf16 / f16 for the eager pipelines,
/// float32 otherwise.
inline DType compute_dtype(const std::string& pipeline) {
  if (of(pipeline) == Pipeline::kBf16) return DType::kBF16;
  if (of(pipeline) == Pipeline::kF16) return DType::kF16;
  return DType::kF32;
}

/// The dtype q_rot and k_rot are held in when a pipeline takes their dot product (the scores)
/// on a case whose target dtype is t: the eager pipelines' compute dtype; llama.cpp's
/// (fp32-recurrence) KV-cache dtype, which the case's target stands for (k is stored in it and,
/// on CPU, q is converted to it for the float32-accumulated dot product); float32 for HF's
/// float32 pipeline (its attention runs on the float32 rotations).
inline DType score_operand_dtype(const std::string& pipeline, DType t) {
  if (of(pipeline) == Pipeline::kFp32Recurrence) return t;
  return compute_dtype(pipeline);
}

/// x rounded to dtype t (nearest even) and returned as a float: one operation in t.
inline float fl(float x, DType t) {
  if (t == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (t == DType::kF16) return static_cast<float>(f16_to_double(double_to_f16(x)));
  return x;
}

/// HF / Meta / vLLM inverse frequencies: 1 / powf(fl(base), fl(2i) / fl(d)), all float32.
inline std::vector<float> hf_inv_freq(double base, int d) {
  std::vector<float> w(static_cast<std::size_t>(d / 2));
  const float b = static_cast<float>(base);
  for (int i = 0; i < d / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(d);
    w[i] = 1.0f / std::pow(b, e);
  }
  return w;
}

/// ggml's theta_scale = powf(fl(base), -2.0f / n_dims).
inline float ggml_theta_scale(double base, int d) {
  return std::pow(static_cast<float>(base), -2.0f / static_cast<float>(d));
}

/// ggml's angles for one position: theta_0 = float(p), theta_i = theta_{i-1} * ts (float32).
inline std::vector<float> ggml_thetas(std::int64_t p, float ts, int n) {
  std::vector<float> t(static_cast<std::size_t>(n));
  float theta = static_cast<float>(p);
  for (int i = 0; i < n; ++i) {
    t[i] = theta;
    theta = theta * ts;
  }
  return t;
}

/// BLOOM's float32 ALiBi slopes (HF build_alibi_tensor): base = fl32(2^(-8/c)) computed in
/// double, slopes base^1..base^c by torch.pow in float32; the extra heads use fl32(2^(-4/c))
/// and the odd powers 1, 3, 5, ...; c = 2^floor(log2 n), or c_rule when > 0 (the naive rule
/// 2^(-8k/n) of a negative control is this code with c = n).
inline std::vector<float> bloom_slopes(int n, int c_rule = 0) {
  int c = 1;
  while (2 * c <= n) c *= 2;
  if (c_rule > 0) c = c_rule;
  const float base = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(c) - 3))));
  const float extra = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(2 * c) - 3))));
  std::vector<float> m;
  for (int k = 1; k <= c && static_cast<int>(m.size()) < n; ++k) {
    m.push_back(std::pow(base, static_cast<float>(k)));
  }
  for (int k = 1; static_cast<int>(m.size()) < n; k += 2) {
    m.push_back(std::pow(extra, static_cast<float>(k)));
  }
  return m;
}

/// ggml's float32 ALiBi slopes (ggml_soft_max_ext, max_bias 8): m0 = powf(2, -8/c),
/// m1 = powf(2, -4/c), slope_h = powf(m0, h + 1) for h < c, else powf(m1, 2 (h - c) + 1);
/// c = 2^floor(log2 n), or c_rule when > 0 (as bloom_slopes).
inline std::vector<float> ggml_slopes(int n, int c_rule = 0) {
  int c = 1;
  while (2 * c <= n) c *= 2;
  if (c_rule > 0) c = c_rule;
  const float max_bias = 8.0f;
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(c));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(c));
  std::vector<float> m(static_cast<std::size_t>(n));
  for (int h = 0; h < n; ++h) {
    m[h] = h < c ? std::pow(m0, static_cast<float>(h + 1))
                 : std::pow(m1, static_cast<float>(2 * (h - c) + 1));
  }
  return m;
}

/// HF's float32 T5 bucket (T5Attention._relative_position_bucket): the int64 distance as
/// float32, / max_exact, torch.log in float32, / the Python double ln(D/E) as a float32 operand,
/// * (N' - E) in float32, then .to(torch.long) (truncation).
inline int hf_t5_bucket_f32(std::int64_t r, bool bidirectional, int num_buckets,
                            std::int64_t max_distance) {
  std::int64_t base = 0, n = r;
  int nb = num_buckets;
  if (bidirectional) {
    nb /= 2;
    base = r > 0 ? nb : 0;
    n = r < 0 ? -r : r;
  } else {
    n = r < 0 ? -r : 0;
  }
  const int e = nb / 2;
  if (n < e) return static_cast<int>(base + n);
  const float lg = std::log(static_cast<float>(n) / static_cast<float>(e));
  const float denom = static_cast<float>(std::log(static_cast<double>(max_distance) / e));
  const float x = lg / denom * static_cast<float>(nb - e);
  const std::int64_t large = std::min<std::int64_t>(e + static_cast<std::int64_t>(x), nb - 1);
  return static_cast<int>(base + large);
}

// ---- scaled RoPE tables (reference/rope_scaling.hpp), templated over float / F32Interval ------

/// The base a host passes for a rule that changes it, computed as HF and a llama.cpp host do, in
/// Python / C double: NTK-aware base * s^(d/(d-2)); dynamic NTK base * (s l / L - (s - 1))^(d/(d-2))
/// with l = max(seq_len, L) (within L the bracket is s - (s - 1): base itself, up to the double
/// rounding of s L / L); every other rule: base. The engine then takes it as a float32 (ggml's
/// freq_base, HF's float32 tensor).
inline double host_rope_base(const reference::RopeParams& p, const reference::RopeScaling& s) {
  using reference::RopeScalingType;
  if (s.type != RopeScalingType::kNtk && s.type != RopeScalingType::kDynamic) return p.base;
  const int d = p.rotary_dim;
  double scale = s.factor;
  if (s.type == RopeScalingType::kDynamic) {
    const double l = static_cast<double>(std::max(s.seq_len, s.max_position));
    scale = s.factor * l / static_cast<double>(s.max_position) - (s.factor - 1.0);
  }
  return p.base * std::pow(scale, static_cast<double>(d) / (d - 2));
}

/// HF's float32 scaled inverse frequencies (modeling_rope_utils _compute_*_parameters), as
/// written there: the default frequencies 1 / powf(fl(base), fl(2i)/fl(d)), then the rule in
/// float32 with Python doubles (factor, low, high, 2 pi, wavelength edges) converted to float32
/// where they meet a tensor. The LongRoPE factor list is a float32 tensor.
template <class T>
std::vector<T> hf_scaled_inv_freq(const reference::RopeParams& p, const reference::RopeScaling& s) {
  using reference::RopeScalingType;
  using reference::YarnForm;
  const int d = p.rotary_dim, np = d / 2;
  auto exponent = [&](int i) { return T(f32_const<T>(2.0 * i)) / f32_const<T>(d); };
  auto plain = [&](double base) {
    std::vector<T> v;
    for (int i = 0; i < np; ++i) v.push_back(f32_const<T>(1.0) / powf_of(f32_const<T>(base), exponent(i)));
    return v;
  };
  switch (s.type) {
    case RopeScalingType::kNone:
      return plain(p.base);
    case RopeScalingType::kLinear: {
      std::vector<T> v = plain(p.base);
      for (auto& x : v) x = x / f32_const<T>(s.factor);
      return v;
    }
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamic:
      return plain(host_rope_base(p, s));  // Python double arithmetic
    case RopeScalingType::kYarn: {
      const double lc = s.yarn_form == YarnForm::kHfEarly ? static_cast<double>(s.max_position)
                                                          : static_cast<double>(s.original_max_position);
      auto corr = [&](double r) { return d * std::log(lc / (2 * M_PI * r)) / (2 * std::log(p.base)); };
      double low = corr(s.beta_fast), high = corr(s.beta_slow);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(d - 1));
      if (low == high) high += 0.001;
      std::vector<T> v;
      for (int i = 0; i < np; ++i) {
        const T pos_freq = powf_of(f32_const<T>(p.base), exponent(i));
        const T extrap = f32_const<T>(1.0) / pos_freq;
        const T interp = f32_const<T>(1.0) / (f32_const<T>(s.factor) * pos_freq);
        const T ramp = clamp_of((f32_const<T>(i) - f32_const<T>(low)) / f32_const<T>(high - low), 0.0, 1.0);
        const T mask = f32_const<T>(1.0) - ramp;  // inv_freq_extrapolation_factor
        v.push_back(interp * (f32_const<T>(1.0) - mask) + extrap * mask);
      }
      return v;
    }
    case RopeScalingType::kLlama3: {
      std::vector<T> v = plain(p.base);
      const double l0 = static_cast<double>(s.original_max_position);
      const double wl_lo = l0 / s.low_freq_factor, wl_hi = l0 / s.high_freq_factor;
      for (auto& inv : v) {
        const T wl = f32_const<T>(2 * M_PI) / inv;
        const T inv_l = choose(greater_than(wl, wl_lo), inv / f32_const<T>(s.factor), inv);
        const double span = s.high_freq_factor - s.low_freq_factor;
        const T smooth = span == 0.0 ? f32_const<T>(0.0)
                                     : (f32_const<T>(l0) / wl - f32_const<T>(s.low_freq_factor)) / f32_const<T>(span);
        const T smoothed = (f32_const<T>(1.0) - smooth) * inv_l / f32_const<T>(s.factor) + smooth * inv_l;
        const int medium = and3(not3(less_than(wl, wl_hi)), not3(greater_than(wl, wl_lo)));
        inv = choose(medium, smoothed, inv_l);
      }
      return v;
    }
    case RopeScalingType::kLongRope: {
      const auto& e = reference::longrope_uses_long(s) ? s.long_factor : s.short_factor;
      std::vector<T> v;
      for (int i = 0; i < np; ++i) {
        v.push_back(f32_const<T>(1.0) / (f32_const<T>(e[i]) * powf_of(f32_const<T>(p.base), exponent(i))));
      }
      return v;
    }
  }
  return {};
}

/// ggml's float32 angle of pair i at position p under a rule (ggml_rope_ext, rope_yarn): the
/// recurrence theta_base = fl(p) * ts^i with ts = powf(freq_base, -2.0f/n_dims); then the
/// rule: freq_scale = fl(1/s) (linear), a larger freq_base (ntk; dynamic NTK: the host's base'
/// for this call, host_rope_base, as llama.cpp passes freq_base per graph), the YaRN mix with
/// float32 correction dims and ramp (yarn), or a float32 frequency factor (llama3: the
/// converter's rope_freqs; longrope: the chosen list) that divides theta_base.
template <class T>
std::vector<T> ggml_scaled_thetas(const reference::RopeParams& p, const reference::RopeScaling& s,
                                  std::int64_t pos) {
  using reference::RopeScalingType;
  const int d = p.rotary_dim, np = d / 2;
  const double base = host_rope_base(p, s);
  const T ts = powf_of(f32_const<T>(base), f32_const<T>(-2.0) / f32_const<T>(d));
  std::vector<T> out;
  T theta = f32_const<T>(static_cast<double>(pos));
  // yarn: correction dims in float32 (ggml_rope_yarn_corr_dims)
  T low = f32_const<T>(0.0), high = f32_const<T>(0.0);
  if (s.type == RopeScalingType::kYarn) {
    auto corr = [&](double r) {
      const double lc = s.yarn_form == reference::YarnForm::kHfEarly ? static_cast<double>(s.max_position)
                                                                     : static_cast<double>(s.original_max_position);
      return f32_const<T>(d) * logf_of(f32_const<T>(lc) /
                                       (f32_const<T>(r) * f32_const<T>(2.0) * f32_const<T>(M_PI))) /
             (f32_const<T>(2.0) * logf_of(f32_const<T>(base)));
    };
    low = corr(s.beta_fast);
    high = corr(s.beta_slow);
    if (s.truncate) {  // ggml always truncates; a rule without it is modelled as written
      low = floorf_of(low);
      high = ceilf_of(high);
    }
    low = max_of(low, 0.0);
    high = min_of(high, d - 1);
  }
  const std::vector<double> llama3 = [&] {
    std::vector<double> ff;
    if (s.type != RopeScalingType::kLlama3) return ff;
    const double l0 = static_cast<double>(s.original_max_position);
    for (int i = 0; i < np; ++i) {  // the converter, in float64: 1, s, or the smoothed ratio
      const double inv = std::pow(p.base, -2.0 * i / d), wl = 2 * M_PI / inv;
      if (wl < l0 / s.high_freq_factor) {
        ff.push_back(1.0);
      } else if (wl > l0 / s.low_freq_factor) {
        ff.push_back(s.factor);
      } else {
        const double span = s.high_freq_factor - s.low_freq_factor;
        const double g = span == 0.0 ? 0.0 : (l0 / wl - s.low_freq_factor) / span;
        ff.push_back(1.0 / ((1 - g) / s.factor + g));
      }
    }
    return ff;
  }();
  for (int i = 0; i < np; ++i) {
    T th = theta;
    switch (s.type) {
      case RopeScalingType::kLinear:
        th = f32_const<T>(1.0 / s.factor) * th;
        break;
      case RopeScalingType::kYarn: {
        const T extrap = th;
        const T interp = f32_const<T>(1.0 / s.factor) * extrap;
        const T y = (f32_const<T>(i) - low) / max_of(high - low, 0.001);
        const T mix = f32_const<T>(1.0) - min_of(max_of(y, 0.0), 1.0);
        th = interp * (f32_const<T>(1.0) - mix) + extrap * mix;
        break;
      }
      case RopeScalingType::kLlama3:
        th = th / f32_const<T>(llama3[i]);
        break;
      case RopeScalingType::kLongRope:
        th = th / f32_const<T>((reference::longrope_uses_long(s) ? s.long_factor : s.short_factor)[i]);
        break;
      default:
        break;
    }
    out.push_back(th);
    theta = theta * ts;
  }
  return out;
}

/// ggml's float32 attention factor (the cos/sin magnitude) of a rule whose exact factor is a:
/// for YaRN, rope_yarn's mscale = attn_factor * (1 + 0.1 logf(1 / freq_scale)), freq_scale =
/// fl(1/s), with the converter's attn_factor = a / (1 + 0.1 ln s) (double, stored float32) so
/// that the product is a; every other rule: fl(a) (the converter's double, stored float32).
template <class T>
T ggml_attention_factor(const reference::RopeScaling& s, double a) {
  if (s.type != reference::RopeScalingType::kYarn) return f32_const<T>(a);
  const double m1 = s.factor > 1.0 ? 0.1 * std::log(s.factor) + 1.0 : 1.0;
  const T freq_scale = f32_const<T>(1.0 / s.factor);
  const T m = f32_const<T>(1.0) + f32_const<T>(0.1) * logf_of(f32_const<T>(1.0) / freq_scale);
  return f32_const<T>(a / m1) * m;
}

/// The softmax scale of DeepSeek MLA, q_head_dim^-1/2 times the YaRN multiplier m^2:
/// HF / vLLM compute it in Python double and the attention rounds it to float32 (T = fl of the
/// double `value`); llama.cpp computes mscale = 1 + fl(0.1 mscale_all_dim) logf(1/freq_scale),
/// kq_scale = mscale * mscale / sqrtf(q_head_dim) in float32.
template <class T>
T hf_softmax_scale(double value) {
  return f32_const<T>(value);
}
template <class T>
T ggml_softmax_scale(const reference::RopeScaling& s, int q_head_dim) {
  const T freq_scale = f32_const<T>(1.0 / s.factor);
  const double log_mul = s.yarn_form == reference::YarnForm::kDeepSeekOfficial
                             ? 0.1 * (s.mscale != 0 ? s.mscale : 1.0)
                             : 0.1 * s.mscale_all_dim;
  const T m = s.factor > 1.0 ? f32_const<T>(1.0) + f32_const<T>(log_mul) * logf_of(f32_const<T>(1.0) / freq_scale)
                             : f32_const<T>(1.0);
  return m * m / sqrtf_of(f32_const<T>(q_head_dim));
}

/// Why a pipeline cannot run a case whose activations are in dtype t ("" when it can).
inline std::string dtype_mismatch(const std::string& pipeline, DType t) {
  const DType c = compute_dtype(pipeline);
  if (c != DType::kF32 && c != t) {
    return "the " + pipeline + " pipeline computes in " + std::string(dtype_short(c)) +
           "; this case's target is " + std::string(dtype_short(t));
  }
  return "";
}

}  // namespace posenc::golden::pipelines
