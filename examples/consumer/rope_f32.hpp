// The engine under test of both consumer tests: a float32 RoPE kernel written the way a PyTorch
// user writes it,
//   inv_freq = 1 / base ** (arange(0, rotary_dim, 2).float() / rotary_dim)
//   freqs    = positions.float()[:, None] * inv_freq[None, :]
//   y        = x * cos + rotate_half(x) * sin
// with a switch to pair the channels the wrong way (interleaved instead of half-split).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace consumer {

enum class Pairing { kHalfSplit, kInterleaved };

// x: [tokens, heads, head_dim]; rotates the first rotary_dim channels, copies the rest.
inline std::vector<float> rope_f32(const std::vector<float>& x,
                                   const std::vector<std::int64_t>& positions, std::int64_t heads,
                                   std::int64_t head_dim, std::int64_t rotary_dim, float base,
                                   Pairing pairing) {
  const std::int64_t half = rotary_dim / 2;
  std::vector<float> inv_freq(half);
  for (std::int64_t i = 0; i < half; ++i) {
    inv_freq[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  }
  std::vector<float> y = x;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t row = (static_cast<std::int64_t>(t) * heads + h) * head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        const float c = std::cos(angle), s = std::sin(angle);
        const std::int64_t a = pairing == Pairing::kHalfSplit ? i : 2 * i;
        const std::int64_t b = pairing == Pairing::kHalfSplit ? i + half : 2 * i + 1;
        const float xa = x[row + a], xb = x[row + b];
        y[row + a] = xa * c - xb * s;
        y[row + b] = xb * c + xa * s;
      }
    }
  }
  return y;
}

}  // namespace consumer
