// RoPE scaling tables. Formula: see reference/rope_scaling.hpp; contract:
// optimized/rope_scaling.hpp.
//
// Written independently of the reference template: every table in long double from the
// closed forms, with the frequencies in log space (theta_i = exp(-(2i/d) ln b)).
#include "optimized/rope_scaling.hpp"

#include <algorithm>
#include <cmath>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

using reference::LongRopePolicy;
using reference::YarnForm;

constexpr long double kPi = 3.141592653589793238462643383279502884L;

long double mscale(long double s, long double m) {
  return s <= 1.0L ? 1.0L : 0.1L * m * std::log(s) + 1.0L;
}

}  // namespace

RopeScaledTablesF64 rope_scaling_tables(const RopeParams& p, const RopeScaling& s) {
  reference::rope_scaling_check(p, s, "rope_scaling_tables");
  const int d = p.rotary_dim, np = d / 2;
  long double ln_base = std::log(static_cast<long double>(p.base));
  const long double factor = POSENC_MUTANT("opt_scaling_factor_inverted") ? 1.0L / s.factor : s.factor;
  std::vector<long double> theta(static_cast<std::size_t>(np));
  auto plain = [&] {
    for (int i = 0; i < np; ++i) theta[i] = std::exp(-static_cast<long double>(2 * i) / d * ln_base);
  };
  long double a = p.attention_factor, softmax = 1.0L;
  switch (s.type) {
    case RopeScalingType::kNone:
      plain();
      break;
    case RopeScalingType::kLinear:
      plain();
      for (auto& t : theta) t /= factor;
      break;
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamic: {
      long double scale = factor;
      if (s.type == RopeScalingType::kDynamic) {
        const long double l = static_cast<long double>(std::max(s.seq_len, s.max_position));
        scale = factor * l / static_cast<long double>(s.max_position) - (factor - 1.0L);
      }
      ln_base += static_cast<long double>(d) / (d - 2) * std::log(scale);
      plain();
      break;
    }
    case RopeScalingType::kYarn: {
      plain();
      const long double lc = s.yarn_form == YarnForm::kHfEarly ? s.max_position : s.original_max_position;
      auto corr = [&](long double r) { return d * std::log(lc / (2 * kPi * r)) / (2 * ln_base); };
      long double low = corr(s.beta_fast), high = corr(s.beta_slow);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0L);
      high = std::min(high, static_cast<long double>(d - 1));
      if (low == high) high += 0.001L;
      for (int i = 0; i < np; ++i) {
        long double rho = std::clamp((i - low) / (high - low), 0.0L, 1.0L);
        if (POSENC_MUTANT("opt_yarn_ramp_reversed")) rho = 1.0L - rho;
        theta[i] *= rho / factor + (1.0L - rho);
      }
      switch (s.yarn_form) {
        case YarnForm::kPaper: a = mscale(factor, 1.0L); break;
        case YarnForm::kHfEarly:
          a = s.attention_factor > 0 ? s.attention_factor : 0.1L * std::log(factor) + 1.0L;
          break;
        case YarnForm::kHfCurrent:
          if (s.attention_factor > 0) {
            a = s.attention_factor;
          } else if (s.mscale != 0 && s.mscale_all_dim != 0) {
            a = mscale(factor, s.mscale) / mscale(factor, s.mscale_all_dim);
          } else {
            a = mscale(factor, 1.0L);
          }
          if (s.mla && s.mscale_all_dim != 0) softmax = mscale(factor, s.mscale_all_dim) * mscale(factor, s.mscale_all_dim);
          break;
        case YarnForm::kDeepSeekOfficial: {
          a = 1.0L;
          const long double m = mscale(factor, s.mscale != 0 ? s.mscale : 1.0);
          softmax = m * m;
          break;
        }
      }
      break;
    }
    case RopeScalingType::kLlama3: {
      plain();
      const long double l0 = s.original_max_position;
      const long double wl_hi = l0 / s.high_freq_factor, wl_lo = l0 / s.low_freq_factor;
      for (int i = 0; i < np; ++i) {
        const long double wl = 2 * kPi / theta[i];
        if (wl < wl_hi) continue;
        if (wl > wl_lo || POSENC_MUTANT("opt_llama3_no_smoothing")) {
          theta[i] /= factor;
          continue;
        }
        const long double g = s.high_freq_factor == s.low_freq_factor
                                  ? 0.0L
                                  : (l0 / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        theta[i] = theta[i] * ((1.0L - g) / factor + g);
      }
      break;
    }
    case RopeScalingType::kLongRope: {
      plain();
      bool use_long = reference::longrope_uses_long(s);
      if (POSENC_MUTANT("opt_longrope_lists_swapped")) use_long = !use_long;
      const auto& e = use_long ? s.long_factor : s.short_factor;
      for (int i = 0; i < np; ++i) theta[i] /= e[i];
      a = s.attention_factor > 0 ? static_cast<long double>(s.attention_factor)
          : factor > 1.0L        ? std::sqrt(1.0L + std::log(factor) / std::log(static_cast<long double>(s.original_max_position)))
                                 : 1.0L;
      break;
    }
  }
  RopeScaledTablesF64 out;
  out.inv_freq.assign(theta.begin(), theta.end());
  out.attention_factor = static_cast<double>(a);
  out.softmax_scale_multiplier = static_cast<double>(softmax);
  return out;
}

RopeCache rope_scaling_cache_init(const RopeParams& p, const RopeScaling& s,
                                  span<const std::int64_t> positions) {
  const RopeScaledTablesF64 t = rope_scaling_tables(p, s);
  return rope_cache_init(p, positions, t.inv_freq, t.attention_factor);
}

}  // namespace posenc::optimized
