// -----------------------------------------------------------------------------
// Proportional RoPE (p-RoPE; Gemma 4's global layers): reference, closed form
// -----------------------------------------------------------------------------
// Formula (code indices 0-based; h = head_dim, even; rotary_dim = h: the whole head is laid
// out as h/2 pairs; p = proportion in (0, 1]; s = factor > 0; m = position):
//
//   k       = floor(p h / 2)                          live pairs (HF: int(p * h // 2))
//   theta_i = base^(-2i / h) / s                       i < k   (the exponent runs over h, not 2k)
//   theta_i = 0                                        k <= i < h/2
//   then the RoPE rotation of reference/rope.hpp over the whole head with these frequencies:
//   pairs (i, i + h/2) in the half-split layout (HF rotate_half), (2i, 2i + 1) interleaved.
//   A zero frequency is the identity rotation (cos 0 = 1, sin 0 = 0): those channels pass
//   through, but they stay where they are (channel i and i + h/2), unlike partial rotary,
//   which rotates the first 2k channels with theta_i = base^(-2i / 2k) and copies the tail.
//   p = 1 (and s = 1) is plain RoPE over the head; the live pairs' channels equal plain
//   full-head RoPE's; <R(m) q, R(n) k> depends on m - n only.
//
// Source: F. Barbero, A. Vitvitskyi, C. Perivolaropoulos, R. Pascanu, P. Velickovic, "Round and
//   Round We Go! What makes Rotary Positional Encodings useful?", arXiv:2410.06205 (p-RoPE:
//   keep the highest-frequency fraction p of the frequencies, zero the rest); HF transformers
//   modeling_rope_utils `_compute_proportional_rope_parameters` (rope_type "proportional",
//   `partial_rotary_factor` = p, `factor` = s), used by Gemma 4's full_attention layers (p = 0.25,
//   base 1e6, head_dim = global_head_dim).
// Index note: the paper counts frequencies from 1; same set.
// Names elsewhere: HF rope_parameters {rope_type: "proportional", partial_rotary_factor};
//   Gemma's JAX code `rope_proportion` (timescale padded with +inf: the same zero frequencies).
// Not modelled: float32 tables (the rotation's own bound covers the live pairs; zero pairs are
//   exact in any precision); an attention factor other than RopeParams::attention_factor.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/rope.hpp"

namespace posenc::reference {

/// p and s of a proportional rule; p = 1, s = 1 is plain RoPE.
struct RopeProportional {
  double proportion = 1.0;  // p = partial_rotary_factor, in (0, 1]
  double factor = 1.0;      // s: every live frequency is divided by it
};

/// InvalidArgument naming `function` unless (params, rule) describe a proportional rotation.
inline void rope_proportional_check(const RopeParams& p, const RopeProportional& r,
                                    const char* function = "rope_proportional_check") {
  rope_check(p, function);
  if (p.rotary_dim != p.head_dim) {
    throw_invalid(function,
                  "rotary_dim must equal head_dim " + std::to_string(p.head_dim) +
                      " (proportional RoPE lays its pairs over the whole head)",
                  p.rotary_dim);
  }
  if (!(r.proportion > 0.0 && r.proportion <= 1.0)) {
    throw_invalid(function, "proportion (partial_rotary_factor) must be in (0, 1]", r.proportion);
  }
  if (!(r.factor > 0.0) || !std::isfinite(r.factor)) {
    throw_invalid(function, "factor must be finite and > 0", r.factor);
  }
}

/// k = floor(p h / 2): the number of pairs with a non-zero frequency (HF: int(p * h // 2), the
/// product p * h in binary64 as Python computes it).
inline int rope_proportional_live_pairs(const RopeParams& p, const RopeProportional& r) {
  rope_proportional_check(p, r, "rope_proportional_live_pairs");
  return static_cast<int>(std::floor(r.proportion * static_cast<double>(p.head_dim) / 2.0));
}

/// The tables: theta_i = base^(-2i/h) / s for i < k, else 0; a = p.attention_factor.
template <class Real>
RopeTables<Real> rope_proportional_tables(const RopeParams& p, const RopeProportional& r) {
  using std::pow;
  rope_proportional_check(p, r, "rope_proportional_tables");
  const int h = p.head_dim, k = rope_proportional_live_pairs(p, r);
  const Real base = Real(p.base), s = Real(r.factor);
  RopeTables<Real> t;
  t.inv_freq.assign(static_cast<std::size_t>(h / 2), Real(0));
  for (int i = 0; i < k; ++i) t.inv_freq[i] = pow(base, -Real(2 * i) / Real(h)) / s;
  t.attention_factor = Real(p.attention_factor);
  return t;
}

/// Rotates one head vector (size head_dim) to position m.
template <class Real>
std::vector<Real> rope_proportional_apply(const RopeParams& p, const RopeProportional& r,
                                          std::int64_t m, const std::vector<Real>& x) {
  rope_proportional_check(p, r, "rope_proportional_apply");
  return rope_apply(p, rope_proportional_tables<Real>(p, r), m, x);
}

}  // namespace posenc::reference
