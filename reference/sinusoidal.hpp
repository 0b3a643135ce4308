// -----------------------------------------------------------------------------
// Sinusoidal: the fixed absolute positional encoding of the Transformer (reference, closed form)
// -----------------------------------------------------------------------------
// Formula (code indices are 0-based; d = d_model >= 1, odd allowed; m = position, any int64):
//
//   SinusoidalVariant::kPaper (interleaved; the paper):
//     n = ceil(d/2) frequencies        omega_i = base^(-2i / d)               i = 0 .. n - 1
//     PE(m, 2i)     = sin(m * omega_i)
//     PE(m, 2i + 1) = cos(m * omega_i)                 (only while 2i + 1 < d)
//     Odd d: the last channel d - 1 is sin(m * omega_{n-1}) and has no cos partner; the
//     exponent's denominator stays d (HF DistilBERT).
//
//   SinusoidalVariant::kConcat (tensor2tensor / fairseq; concatenated [sin | cos]):
//     n = floor(d/2) frequencies       omega_i = base^(-i / max(n - 1, 1))    i = 0 .. n - 1
//                                      (t2t writes exp(-i * ln(base) / max(n - 1, 1)))
//     PE(m, i)     = sin(m * omega_i)
//     PE(m, n + i) = cos(m * omega_i)
//     Odd d: one zero column is appended, PE(m, d - 1) = 0.
//
//   h = e + PE(m)        e: one token's embedding row (already scaled, see Not modelled)
//
//   Relations (each is a property in properties/sinusoidal_test.cpp):
//     |PE(m, c)| <= 1, and sin^2 + cos^2 = 1 for every frequency that has both channels;
//     PE(m + delta) = M(delta) PE(m), M block-diagonal, one rotation per frequency:
//        (sin, cos)(m + delta) = [ cos(delta w)  sin(delta w) ] (sin, cos)(m),   w = omega_i
//                                [-sin(delta w)  cos(delta w) ]
//       (the lone sin channel of an odd kPaper d has no partner and is not linear in PE(m));
//     omega_0 = 1 and omega is geometric with ratio base^(-2/d) (kPaper) or base^(-1/(n-1))
//       (kConcat): kConcat's last frequency is exactly 1/base, kPaper's is base^(-2(n-1)/d);
//     for one d, 2 (n_concat - 1) ln omega^concat_i = d ln omega^paper_i (i < n_concat).
//
//   Symbols: d = SinusoidalParams::d_model, base = SinusoidalParams::base,
//   omega_i = sinusoidal_inv_freq(p)[i], m = positions[r], e = row r of sinusoidal_add's e.
//
// Source: A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez, L. Kaiser,
//   I. Polosukhin, "Attention Is All You Need", arXiv:1706.03762v7, Sec. 3.5 "Positional
//   Encoding" (the two unnumbered displays PE(pos, 2i), PE(pos, 2i+1); the "linear function of
//   PE_pos" remark) and Sec. 3.4 (embeddings multiplied by sqrt(d_model) before the sum).
// Index note: the paper's pos (= m) and i are 0-based as here; it writes the angle as
//   pos / 10000^(2i/d_model) and only uses even d_model (512). Odd d and kConcat follow
//   the released code named below (docs/schemes/sinusoidal.md).
// Names elsewhere: tensor2tensor common_attention get_timing_signal_1d / add_timing_signal_1d
//   (min_timescale 1, max_timescale = base; = kConcat); fairseq SinusoidalPositionalEmbedding
//   get_embedding (log(10000) / (half_dim - 1); = kConcat); HF DistilBERT
//   create_sinusoidal_embeddings (= kPaper, angles in float64, stored float32); HF
//   Transformer-XL PositionalEmbedding uses the paper's frequencies in the [sin | cos] layout
//   (a third convention, not a variant here).
// Not modelled: float32 angle pipelines (t2t and fairseq compute in float32; the fp32-angles
//   verify profile budgets for them); t2t min_timescale != 1; fairseq's zeroed padding_idx row
//   and its position origin padding_idx + 1 (pass the shifted positions instead); the
//   sqrt(d_model) embedding scale (e is taken as already scaled); dropout after the sum.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"

namespace posenc::reference {

enum class SinusoidalVariant { kPaper, kConcat };

constexpr const char* sinusoidal_variant_name(SinusoidalVariant v) {
  return v == SinusoidalVariant::kPaper ? "paper" : "concat";
}

/// Configuration shared by reference, optimized, properties and golden code.
struct SinusoidalParams {
  int d_model = 0;  // d: channels of one row; >= 1, odd allowed
  SinusoidalVariant variant = SinusoidalVariant::kPaper;
  double base = 10000.0;  // t2t max_timescale / min_timescale; exact in double
};

/// Throws InvalidArgument naming `function` unless p satisfies the formula's preconditions.
inline void sinusoidal_check(const SinusoidalParams& p, const char* function = "sinusoidal_check") {
  if (p.d_model <= 0) throw_invalid(function, "d_model must be positive", p.d_model);
  if (!(p.base > 0.0) || !std::isfinite(p.base)) {
    throw_invalid(function, "base must be finite and > 0", p.base);
  }
}

/// n: ceil(d/2) frequencies for kPaper, floor(d/2) for kConcat.
inline int sinusoidal_n_freq(const SinusoidalParams& p) {
  return p.variant == SinusoidalVariant::kPaper ? (p.d_model + 1) / 2 : p.d_model / 2;
}

/// Channel of sin(m * omega_i).
inline int sinusoidal_sin_channel(const SinusoidalParams& p, int i) {
  if (p.variant == SinusoidalVariant::kPaper) return 2 * i;
  return i;
}

/// Channel of cos(m * omega_i), or -1 for the lone last frequency of an odd kPaper d.
inline int sinusoidal_cos_channel(const SinusoidalParams& p, int i) {
  if (p.variant == SinusoidalVariant::kPaper) return 2 * i + 1 < p.d_model ? 2 * i + 1 : -1;
  return sinusoidal_n_freq(p) + i;
}

/// Frequency index of channel c, or -1 for the zero column of an odd kConcat d.
inline int sinusoidal_freq_of_channel(const SinusoidalParams& p, int c) {
  if (p.variant == SinusoidalVariant::kPaper) return c / 2;
  const int n = sinusoidal_n_freq(p);
  return c < 2 * n ? c % n : -1;
}

/// omega_i in closed form, i in [0, n): base^(-2i/d) (kPaper) or base^(-i/max(n-1, 1)).
template <class Real>
std::vector<Real> sinusoidal_inv_freq(const SinusoidalParams& p) {
  using std::pow;
  sinusoidal_check(p, "sinusoidal_inv_freq");
  const int d = p.d_model;
  const int n = sinusoidal_n_freq(p);
  const Real base = Real(p.base);
  std::vector<Real> omega(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (p.variant == SinusoidalVariant::kPaper) {
      // Odd d keeps d as the denominator.
      omega[i] = pow(base, -Real(2 * i) / Real(d));
    } else {
      // t2t / fairseq: ln(base) / (n - 1).
      const int denom = n - 1 > 1 ? n - 1 : 1;
      omega[i] = pow(base, -Real(i) / Real(denom));
    }
  }
  return omega;
}

/// m * omega_i, a single rounding in Real.
template <class Real>
Real sinusoidal_angle(const std::vector<Real>& omega, std::int64_t m, int i) {
  return Real(m) * omega[i];
}

/// One row PE(m), size d_model, with precomputed frequencies (sinusoidal_inv_freq(p)).
template <class Real>
std::vector<Real> sinusoidal_row(const SinusoidalParams& p, const std::vector<Real>& omega,
                                 std::int64_t m) {
  using std::cos;
  using std::sin;
  sinusoidal_check(p, "sinusoidal_row");
  const int d = p.d_model;
  const int n = sinusoidal_n_freq(p);
  if (omega.size() != static_cast<std::size_t>(n)) {
    throw_invalid("sinusoidal_row", "omega must have " + std::to_string(n) + " entries",
                  omega.size());
  }
  std::vector<Real> pe(static_cast<std::size_t>(d), Real(0));  // the odd kConcat zero column
  for (int i = 0; i < n; ++i) {
    const Real phi = sinusoidal_angle(omega, m, i);
    const int cs = sinusoidal_sin_channel(p, i);
    const int cc = sinusoidal_cos_channel(p, i);
    pe[cs] = sin(phi);
    if (cc >= 0) pe[cc] = cos(phi);
  }
  return pe;
}

/// One row PE(m), size d_model.
template <class Real>
std::vector<Real> sinusoidal_row(const SinusoidalParams& p, std::int64_t m) {
  return sinusoidal_row(p, sinusoidal_inv_freq<Real>(p), m);
}

/// Row-major [positions.size(), d_model]; row r is PE(positions[r]).
template <class Real>
std::vector<Real> sinusoidal_rows(const SinusoidalParams& p, span<const std::int64_t> positions) {
  sinusoidal_check(p, "sinusoidal_rows");
  const std::vector<Real> omega = sinusoidal_inv_freq<Real>(p);
  std::vector<Real> out;
  out.reserve(positions.size() * static_cast<std::size_t>(p.d_model));
  for (const std::int64_t m : positions) {
    for (const Real& v : sinusoidal_row(p, omega, m)) out.push_back(v);
  }
  return out;
}

/// h = e + PE(positions[r]) row by row; e and h are [positions.size(), d_model], may alias.
template <class Real>
void sinusoidal_add(const SinusoidalParams& p, span<const std::int64_t> positions,
                    span<const Real> e, span<Real> h) {
  sinusoidal_check(p, "sinusoidal_add");
  const std::size_t d = static_cast<std::size_t>(p.d_model);
  const std::size_t size = positions.size() * d;
  if (e.size() != size) {
    throw_invalid("sinusoidal_add",
                  "e must have rows * d_model = " + std::to_string(size) + " entries", e.size());
  }
  if (h.size() != size) {
    throw_invalid("sinusoidal_add",
                  "h must have rows * d_model = " + std::to_string(size) + " entries", h.size());
  }
  const std::vector<Real> omega = sinusoidal_inv_freq<Real>(p);
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const std::vector<Real> pe = sinusoidal_row(p, omega, positions[r]);
    for (std::size_t c = 0; c < d; ++c) h[r * d + c] = e[r * d + c] + pe[c];
  }
}

}  // namespace posenc::reference
