// posenc's RoPE properties (check/rope.hpp: oracle, relative position, pair norm, composition) on
// the consumer's float32 kernel (rope_f32.hpp), at random calls under fp32. The properties build
// their golden cases in memory with posenc's oracle: this test links posenc::golden (and so MPFR),
// unlike rope_consumer_test, which only verifies against committed cases (posenc::verify).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "check/rope.hpp"
#include "rope_f32.hpp"

namespace {

using consumer::Pairing;

// The kernel behind posenc::check's calling convention.
void rope_kernel(const posenc::check::RopeCall& c) {
  const Pairing pairing = c.layout == posenc::check::RopeLayout::kInterleaved
                              ? Pairing::kInterleaved
                              : Pairing::kHalfSplit;
  const std::vector<std::int64_t> positions(c.positions.begin(), c.positions.end());
  auto rotate = [&](posenc::span<const float> x, posenc::span<float> out, int heads) {
    const auto y = consumer::rope_f32(std::vector<float>(x.begin(), x.end()), positions, heads,
                                      c.head_dim, c.rotary_dim, static_cast<float>(c.base),
                                      pairing);
    std::copy(y.begin(), y.end(), out.begin());
  };
  rotate(c.q, c.q_out, c.n_heads);
  rotate(c.k, c.k_out, c.n_kv_heads);
}

posenc::check::RopeCheckOptions fp32_options() {
  posenc::check::RopeCheckOptions o;
  o.profile = "fp32";
  o.max_success = 10;  // per property; the default is 25
  return o;
}
POSENC_ROPE_PROPERTIES(RopeConsumerProperties, rope_kernel, fp32_options());

}  // namespace
