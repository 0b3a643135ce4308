// Counter-based PRNG for golden inputs: integer arithmetic only, no std distributions, so a
// case's inputs are the same bits on every machine and compiler.
//
// value(seed, stream, counter) = mix64(seed ^ mix64(stream * G + counter)), with mix64 the
// SplitMix64 finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014) and G the 64-bit golden-ratio constant. No state: element i of tensor s is
// value(seed, s, i), so shards and threads can draw any element independently.
#pragma once
#include <cstdint>

namespace posenc::golden {

constexpr std::uint64_t prng_mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t prng_value(std::uint64_t seed, std::uint64_t stream,
                                   std::uint64_t counter) {
  return prng_mix64(seed ^ prng_mix64(stream * 0x9e3779b97f4a7c15ULL + counter));
}

/// Uniform integer in [-bound, bound] (bound < 2^62), by rejection-free multiply-shift.
constexpr std::int64_t prng_int(std::uint64_t seed, std::uint64_t stream, std::uint64_t counter,
                                std::int64_t bound) {
  const unsigned __int128 span = static_cast<unsigned __int128>(2 * bound + 1);
  const std::uint64_t r = prng_value(seed, stream, counter);
  return static_cast<std::int64_t>((span * r) >> 64) - bound;
}

}  // namespace posenc::golden
