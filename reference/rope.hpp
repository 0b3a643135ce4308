// -----------------------------------------------------------------------------
// RoPE: rotary position embedding (reference, closed form)
// -----------------------------------------------------------------------------
// Formula (code indices are 0-based; d = rotary_dim, even; m = position, any int64):
//
//   theta_i = base^(-2i / d)                           i = 0 .. d/2 - 1   (inv_freq)
//   phi_i   = m * theta_i                              (the angle; no recurrence, no cache)
//   y_a = a * (x_a * cos(phi_i) - x_b * sin(phi_i))
//   y_b = a * (x_a * sin(phi_i) + x_b * cos(phi_i))
//   a   = attention factor (1 for plain RoPE; YaRN / LongRoPE scale cos and sin by it)
//
//   pair (a, b) of pair index i:
//     RopeLayout::kInterleaved : (2i, 2i + 1)         the paper; GPT-J; Meta's complex view
//     RopeLayout::kHalfSplit   : (i,  i + d/2)        GPT-NeoX; HF "rotate_half"
//   Components at index >= rotary_dim (the tail, partial rotary) are copied unchanged.
//   Invariants: each pair keeps its Euclidean norm times a; <R(m)q, R(n)k> depends on m - n
//   only; R(a) R(b) = R(a + b).
//
//   Symbols: d = RopeParams::rotary_dim, h = head_dim, base = RopeParams::base,
//   a = RopeTables::attention_factor, theta_i = RopeTables::inv_freq[i].
//
// Source: J. Su, Y. Lu, S. Pan, A. Murtadha, B. Wen, Y. Liu, "RoFormer: Enhanced Transformer
//   with Rotary Position Embedding", arXiv:2104.09864v5, Sec. 3.2.2 (the block-diagonal
//   R^d_{Theta,m} and Theta = {theta_i}) and Sec. 3.4.2 (the element-wise form).
// Index note: the paper counts i from 1, theta_i = 10000^(-2(i-1)/d); same values.
// Names elsewhere: ONNX RotaryEmbedding (`interleaved`, `rotary_embedding_dim`);
//   ggml GGML_ROPE_TYPE_NORMAL (= kInterleaved), GGML_ROPE_TYPE_NEOX (= kHalfSplit);
//   vLLM/SGLang is_neox_style; HF rotate_half / rotate_every_two, partial_rotary_factor.
// Not modelled: float32 rounding of theta_i, of m, or of m * theta_i done by engines (the
//   fp32-angles verify profile budgets for it); ggml's repeated theta *= theta_scale; the
//   scaling rules themselves (they only supply inv_freq and a through RopeTables).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"

namespace posenc::reference {

enum class RopeLayout { kInterleaved, kHalfSplit };

/// Configuration shared by reference, optimized, properties and golden code.
struct RopeParams {
  int head_dim = 0;        // h: length of one head vector
  int rotary_dim = 0;      // d: rotated leading channels; even, 0 < d <= h
  double base = 10000.0;   // exact in double for all published bases
  RopeLayout layout = RopeLayout::kHalfSplit;
  double attention_factor = 1.0;  // a, used by rope_tables(p); scaling schemes pass their own
};

constexpr const char* rope_layout_name(RopeLayout l) {
  return l == RopeLayout::kInterleaved ? "interleaved" : "half_split";
}

/// Throws InvalidArgument naming `function` unless p satisfies the formula's preconditions.
inline void rope_check(const RopeParams& p, const char* function = "rope_check") {
  if (p.head_dim <= 0) throw_invalid(function, "head_dim must be positive", p.head_dim);
  if (p.rotary_dim <= 0) throw_invalid(function, "rotary_dim must be positive", p.rotary_dim);
  if (p.rotary_dim % 2 != 0) throw_invalid(function, "rotary_dim must be even", p.rotary_dim);
  if (p.rotary_dim > p.head_dim) {
    throw_invalid(function, "rotary_dim must be <= head_dim " + std::to_string(p.head_dim),
                  p.rotary_dim);
  }
  if (!(p.base > 0.0) || !std::isfinite(p.base)) {
    throw_invalid(function, "base must be finite and > 0", p.base);
  }
  if (!(p.attention_factor > 0.0) || !std::isfinite(p.attention_factor)) {
    throw_invalid(function, "attention_factor must be finite and > 0", p.attention_factor);
  }
}

/// Channel index of the first (a) and second (b) component of pair i.
inline int rope_pair_a(const RopeParams& p, int i) {
  return p.layout == RopeLayout::kInterleaved ? 2 * i : i;
}
inline int rope_pair_b(const RopeParams& p, int i) {
  return p.layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + p.rotary_dim / 2;
}

/// Pair index of channel c, or -1 for a tail channel (c >= rotary_dim).
inline int rope_pair_of_channel(const RopeParams& p, int c) {
  if (c >= p.rotary_dim) return -1;
  if (p.layout == RopeLayout::kInterleaved) return c / 2;
  return c % (p.rotary_dim / 2);
}

/// The two tables a rotation needs; scaling schemes (PI, NTK, YaRN, ...) build their own.
template <class Real>
struct RopeTables {
  std::vector<Real> inv_freq;  // theta_i, size d/2
  Real attention_factor = Real(1);
};

/// theta_i = base^(-2i/d), i in [0, d/2), in closed form.
template <class Real>
std::vector<Real> rope_inv_freq(const RopeParams& p) {
  using std::pow;
  rope_check(p, "rope_inv_freq");
  const int d = p.rotary_dim;
  const Real base = Real(p.base);
  std::vector<Real> theta(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) theta[i] = pow(base, -Real(2 * i) / Real(d));
  return theta;
}

/// Default tables: the plain inv_freq and p.attention_factor.
template <class Real>
RopeTables<Real> rope_tables(const RopeParams& p) {
  return RopeTables<Real>{rope_inv_freq<Real>(p), Real(p.attention_factor)};
}

/// Validated override hook for scaling schemes: d/2 finite positive frequencies, a > 0.
template <class Real>
RopeTables<Real> rope_tables(const RopeParams& p, std::vector<Real> inv_freq,
                             const Real& attention_factor) {
  using std::isfinite;
  rope_check(p, "rope_tables");
  if (inv_freq.size() != static_cast<std::size_t>(p.rotary_dim / 2)) {
    throw_invalid("rope_tables", "inv_freq must have rotary_dim/2 = " +
                                     std::to_string(p.rotary_dim / 2) + " entries",
                  inv_freq.size());
  }
  for (const Real& t : inv_freq) {
    if (!(t > Real(0)) || !isfinite(t)) throw_invalid("rope_tables", "inv_freq must be > 0", t);
  }
  if (!(attention_factor > Real(0)) || !isfinite(attention_factor)) {
    throw_invalid("rope_tables", "attention_factor must be > 0", attention_factor);
  }
  return RopeTables<Real>{std::move(inv_freq), attention_factor};
}

/// phi_i = m * theta_i, a single rounding in Real.
template <class Real>
Real rope_angle(const RopeTables<Real>& t, std::int64_t m, int i) {
  return Real(m) * t.inv_freq[i];
}

namespace detail {
template <class Real>
void rope_rotate(const RopeParams& p, const RopeTables<Real>& t, std::int64_t m,
                 const Real& factor, span<const Real> x, span<Real> y) {
  using std::cos;
  using std::sin;
  const int d = p.rotary_dim;
  for (int c = d; c < p.head_dim; ++c) y[c] = x[c];
  for (int i = 0; i < d / 2; ++i) {
    const Real phi = rope_angle(t, m, i);
    const Real ca = factor * cos(phi);
    const Real sa = factor * sin(phi);
    const int a = rope_pair_a(p, i);
    const int b = rope_pair_b(p, i);
    const Real xa = x[a];
    const Real xb = x[b];
    y[a] = xa * ca - xb * sa;
    y[b] = xa * sa + xb * ca;
  }
}
}  // namespace detail

/// Rotates one head vector (size head_dim) to position m with the given tables.
template <class Real>
std::vector<Real> rope_apply(const RopeParams& p, const RopeTables<Real>& t, std::int64_t m,
                             const std::vector<Real>& x) {
  rope_check(p, "rope_apply");
  if (x.size() != static_cast<std::size_t>(p.head_dim)) {
    throw_invalid("rope_apply", "x must have head_dim = " + std::to_string(p.head_dim) +
                                    " entries", x.size());
  }
  std::vector<Real> y(x.size());
  detail::rope_rotate<Real>(p, t, m, t.attention_factor, x, y);
  return y;
}

/// Rotates one head vector to position m with the default tables of p.
template <class Real>
std::vector<Real> rope_apply(const RopeParams& p, std::int64_t m, const std::vector<Real>& x) {
  return rope_apply(p, rope_tables<Real>(p), m, x);
}

/// Inverse of rope_apply: rotation to -m with factor 1/a.
template <class Real>
std::vector<Real> rope_apply_inverse(const RopeParams& p, const RopeTables<Real>& t,
                                     std::int64_t m, const std::vector<Real>& x) {
  rope_check(p, "rope_apply_inverse");
  if (x.size() != static_cast<std::size_t>(p.head_dim)) {
    throw_invalid("rope_apply_inverse", "x must have head_dim entries", x.size());
  }
  std::vector<Real> y(x.size());
  detail::rope_rotate<Real>(p, t, -m, Real(1) / t.attention_factor, x, y);
  return y;
}

/// Row-major [positions.size(), head_dim] in and out; row r is rotated to positions[r].
template <class Real>
void rope_apply_rows(const RopeParams& p, const RopeTables<Real>& t,
                     span<const std::int64_t> positions, span<const Real> x, span<Real> y) {
  rope_check(p, "rope_apply_rows");
  const std::size_t n = positions.size() * static_cast<std::size_t>(p.head_dim);
  if (x.size() != n) throw_invalid("rope_apply_rows", "x must have rows * head_dim entries", x.size());
  if (y.size() != n) throw_invalid("rope_apply_rows", "y must have rows * head_dim entries", y.size());
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const std::size_t o = r * static_cast<std::size_t>(p.head_dim);
    detail::rope_rotate<Real>(p, t, positions[r], t.attention_factor, x.subspan(o, p.head_dim),
                              y.subspan(o, p.head_dim));
  }
}

}  // namespace posenc::reference
