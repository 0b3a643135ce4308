// MLA decoupled RoPE kernels. Formula: see reference/mla.hpp; contract: optimized/mla.hpp.
#include "optimized/mla.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"

namespace posenc::optimized {
namespace {

/// Rotates one dr-channel vector x in place at token t of the cache (half-split pairs),
/// de-interleaving it first when asked.
void rotate_tail(const RopeCache& cache, std::int64_t t, int dr, bool deinterleave, float* x,
                 float* tmp) {
  const int np = dr / 2;
  if (deinterleave) {
    for (int i = 0; i < np; ++i) {
      tmp[i] = x[2 * i];
      tmp[np + i] = x[2 * i + 1];
    }
  } else {
    std::copy(x, x + dr, tmp);
  }
  const float* c = cache.cos_f32.data() + static_cast<std::size_t>(t) * np;
  const float* s = cache.sin_f32.data() + static_cast<std::size_t>(t) * np;
  for (int i = 0; i < np; ++i) {
    const float a = tmp[i], b = tmp[np + i];
    x[i] = a * c[i] - b * s[i];
    x[np + i] = a * s[i] + b * c[i];
  }
}

}  // namespace

void mla_rope_apply(const MlaParams& p, const RopeCache& cache, span<float> q, span<float> k_pe) {
  constexpr const char* fn = "mla_rope_apply";
  reference::mla_check(p, fn);
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim, dq = dn + dr;
  if (cache.n_pairs != dr / 2) {
    throw_invalid(fn, "cache must have qk_rope_head_dim/2 = " + std::to_string(dr / 2) + " pairs",
                  cache.n_pairs);
  }
  const std::int64_t T = static_cast<std::int64_t>(cache.positions.size());
  if (q.size() != static_cast<std::size_t>(T * H * dq)) {
    throw_invalid(fn, "q must have T*H*(dn+dr) = " + std::to_string(T * H * dq) + " elements",
                  q.size());
  }
  if (k_pe.size() != static_cast<std::size_t>(T * dr)) {
    throw_invalid(fn, "k_pe must have T*dr = " + std::to_string(T * dr) + " elements", k_pe.size());
  }
#pragma omp parallel
  {
    std::vector<float> tmp(static_cast<std::size_t>(dr));
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        rotate_tail(cache, t, dr, p.interleaved_checkpoint, q.data() + (t * H + h) * dq + dn,
                    tmp.data());
      }
      rotate_tail(cache, t, dr, p.interleaved_checkpoint, k_pe.data() + t * dr, tmp.data());
    }
  }
}

void mla_assemble_keys(const MlaParams& p, std::int64_t tokens, span<const float> k_nope,
                       span<const float> k_pe, span<float> keys) {
  constexpr const char* fn = "mla_assemble_keys";
  reference::mla_check(p, fn);
  if (tokens < 0) throw_invalid(fn, "tokens must be >= 0", tokens);
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim, dq = dn + dr;
  if (k_nope.size() != static_cast<std::size_t>(tokens * H * dn)) {
    throw_invalid(fn, "k_nope must have T*H*dn elements", k_nope.size());
  }
  if (k_pe.size() != static_cast<std::size_t>(tokens * dr)) {
    throw_invalid(fn, "k_pe must have T*dr elements", k_pe.size());
  }
  if (keys.size() != static_cast<std::size_t>(tokens * H * dq)) {
    throw_invalid(fn, "keys must have T*H*(dn+dr) elements", keys.size());
  }
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < H; ++h) {
      float* o = keys.data() + (t * H + h) * dq;
      std::copy_n(k_nope.data() + (t * H + h) * dn, dn, o);
      std::copy_n(k_pe.data() + t * dr, dr, o + dn);
    }
  }
}

}  // namespace posenc::optimized
