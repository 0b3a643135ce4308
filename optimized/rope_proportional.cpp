// Proportional RoPE cache. Formula: see reference/rope_proportional.hpp; contract:
// optimized/rope_proportional.hpp.
#include "optimized/rope_proportional.hpp"

#include <cmath>

#include "optimized/rope_table.hpp"

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
  rope_check_positions(fn, positions);
  cache.inv_freq.assign(static_cast<std::size_t>(np), 0.0);
  const long double base = p.base;
  for (int i = 0; i < k; ++i) {  // as rope_cache_init: long double, one rounding to double
    cache.inv_freq[i] = static_cast<double>(
        std::pow(base, -static_cast<long double>(2 * i) / p.head_dim) / r.factor);
  }
  // A zero frequency gives phi = 0 exactly: cos = a, sin = 0 (the identity pair).
  rope_fill_cache_tables(cache, p.attention_factor);
  return cache;
}

}  // namespace posenc::optimized
