// -----------------------------------------------------------------------------
// ALiBi: attention with linear biases (reference)
// -----------------------------------------------------------------------------
// Formula (code indices 0-based; n = n_heads; head h has slope m_h):
//
//   slopes, n a power of two:  m_h = 2^(-8 (h + 1) / n)                 h = 0 .. n-1
//   otherwise, c = 2^floor(log2 n):
//     m_h = 2^(-8 (h + 1) / c)                 h = 0 .. c-1     (the c-head set)
//     m_h = 2^(-4 (2 (h - c) + 1) / c)         h = c .. n-1     (every other slope of the
//                                                                2c-head set: its entries 0, 2, 4..)
//   bias added to the score s_ij = scale * q_i . k_j (query at position P = query_offset + i,
//   key at position j, Tk keys):
//     AlibiForm::kPaper      -m_h (P - j)          the paper; causal attention
//     AlibiForm::kBloom      +m_h j                BLOOM, the paper's fairseq code (row-invariant)
//     AlibiForm::kMpt        +m_h (j - (Tk - 1))   MPT (row-invariant, 0 at the last key)
//     AlibiForm::kSymmetric  -m_h |P - j|          bidirectional use
//   The three causal forms differ by a per-row constant (m_h P, m_h (P - Tk + 1)), so they give
//   the same probabilities under a causal mask; the symmetric form is not a row shift of them.
//   The bias is not multiplied by the score scale (BLOOM's baddbmm beta = 1, MPT adds it after
//   softmax_scale).
//
// Source: O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear
//   Biases Enables Input Length Extrapolation", arXiv:2108.12409v2, Sec. 3 (bias -m (i - j),
//   slopes 2^(-8/n) geometric) and the released code's get_slopes (non-power-of-2 rule).
// Index note: the paper numbers heads from 1 (m_k = 2^(-8k/n)); here h = k - 1.
// Names elsewhere: HF build_alibi_tensor (BLOOM), build_mpt_alibi_tensor (MPT, alibi_bias_max
//   = 8 gives the same slopes and order); ggml_soft_max_ext max_bias = 8 (ggml_alibi).
// Not modelled: float32 slope arithmetic of engines (last-bit differences only); BLOOM's cast
//   of the bias to bf16; MPT's alibi_bias_max other than 8.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "reference/common/errors.hpp"

namespace posenc::reference {

enum class AlibiForm { kPaper, kBloom, kMpt, kSymmetric };

constexpr const char* alibi_form_name(AlibiForm f) {
  switch (f) {
    case AlibiForm::kPaper: return "paper";
    case AlibiForm::kBloom: return "bloom";
    case AlibiForm::kMpt: return "mpt";
    case AlibiForm::kSymmetric: return "symmetric";
  }
  return "?";
}

struct AlibiParams {
  int n_heads = 0;
  AlibiForm form = AlibiForm::kPaper;
};

inline void alibi_check(const AlibiParams& p, const char* function = "alibi_check") {
  if (p.n_heads <= 0) throw_invalid(function, "n_heads must be positive", p.n_heads);
}

/// c = the largest power of two <= n.
inline int alibi_power_of_two_floor(int n) {
  int c = 1;
  while (c * 2 <= n) c *= 2;
  return c;
}

/// Exponent x of slope m_h = 2^(-x), as the exact rational num / den.
inline void alibi_slope_exponent(int n, int h, int* num, int* den) {
  const int c = alibi_power_of_two_floor(n);
  if (h < c) {
    *num = 8 * (h + 1);
    *den = c;
  } else {
    *num = 4 * (2 * (h - c) + 1);
    *den = c;
  }
}

/// The n slopes, in head order, in closed form: 2^(-num/den) evaluated in Real.
template <class Real>
std::vector<Real> alibi_slopes(const AlibiParams& p) {
  using std::pow;
  alibi_check(p, "alibi_slopes");
  std::vector<Real> m(static_cast<std::size_t>(std::max(p.n_heads, 0)));
  for (int h = 0; h < p.n_heads; ++h) {
    int num = 0, den = 1;
    alibi_slope_exponent(p.n_heads, h, &num, &den);
    m[h] = pow(Real(2), -Real(num) / Real(den));
  }
  return m;
}

/// Bias of head slope m for query i (absolute position P = query_offset + i) and key j of tk.
template <class Real>
Real alibi_bias(AlibiForm form, const Real& m, std::int64_t query_offset, std::int64_t i,
                std::int64_t j, std::int64_t tk) {
  const std::int64_t qpos = query_offset + i;
  switch (form) {
    case AlibiForm::kPaper:
      return -m * Real(qpos - j);
    case AlibiForm::kBloom: return m * Real(j);
    case AlibiForm::kMpt: return m * Real(j - (tk - 1));
    case AlibiForm::kSymmetric:
      return -m * Real(std::llabs(qpos - j));
  }
  return Real(0);
}

}  // namespace posenc::reference
