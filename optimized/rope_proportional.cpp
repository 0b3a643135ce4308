// Proportional RoPE cache. Formula: see reference/rope_proportional.hpp; contract:
// optimized/rope_proportional.hpp.
#include "optimized/rope_proportional.hpp"

#include <cmath>
#include <string>

#include "reference/common/errors.hpp"

namespace posenc::optimized {

RopeCache rope_proportional_cache_init(const RopeParams& p, const RopeProportional& r,
                                       span<const std::int64_t> positions) {
  constexpr const char* fn = "rope_proportional_cache_init";
  reference::rope_proportional_check(p, r, fn);
  const int np = p.head_dim / 2;
  const int k = reference::rope_proportional_live_pairs(p, r);
  RopeCache cache;
  cache.n_pairs = np;
  cache.positions.assign(positions.begin(), positions.end());
  for (std::size_t t = 0; t < positions.size(); ++t) {
    if (positions[t] > kRopeMaxPosition || positions[t] < -kRopeMaxPosition) {
      throw_invalid(fn, "positions[" + std::to_string(t) + "] must satisfy |m| <= 2^28",
                    positions[t]);
    }
  }
  cache.inv_freq.assign(static_cast<std::size_t>(np), 0.0);
  const long double base = p.base;
  for (int i = 0; i < k; ++i) {  // as rope_cache_init: long double, one rounding to double
    cache.inv_freq[i] = static_cast<double>(
        std::pow(base, -static_cast<long double>(2 * i) / p.head_dim) / r.factor);
  }
  const double a = p.attention_factor;
  const std::size_t n = positions.size() * static_cast<std::size_t>(np);
  cache.cos_f32.resize(n);
  cache.sin_f32.resize(n);
  cache.cos_f64.resize(n);
  cache.sin_f64.resize(n);
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < n_tok; ++t) {
    for (int i = 0; i < np; ++i) {
      // A zero frequency gives phi = 0 exactly: cos = a, sin = 0 (the identity pair).
      const double phi = static_cast<double>(positions[t]) * cache.inv_freq[i];
      const double c = a * std::cos(phi), s = a * std::sin(phi);
      const std::size_t o = static_cast<std::size_t>(t) * np + i;
      cache.cos_f64[o] = c;
      cache.sin_f64[o] = s;
      cache.cos_f32[o] = static_cast<float>(c);
      cache.sin_f32[o] = static_cast<float>(s);
    }
  }
  return cache;
}

}  // namespace posenc::optimized
