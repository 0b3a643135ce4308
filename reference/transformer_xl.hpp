// -----------------------------------------------------------------------------
// Transformer-XL: relative positional attention with segment memory (reference)
// -----------------------------------------------------------------------------
// Formula, head h (code indices 0-based; qlen queries of the current segment, mlen memory
// tokens, klen = mlen + qlen keys; query i sits at absolute position mlen + i, key j at j):
//
//   omega_k  = 10000^(-2k / d_model),  k = 0 .. d_model/2 - 1
//   R(pos)   = [sin(pos omega_0) .. sin(pos omega_{D/2-1}) | cos(pos omega_0) .. ]  (halves
//              concatenated, not interleaved), D = d_model
//   table    rows row = 0 .. klen-1 hold positions pos(row) = klen - 1 - row (DESCENDING);
//              clamp_len > 0: pos <- min(pos, clamp_len)
//   r_h(pos) = W_r[h] R(pos)       W_r = r_net.weight [H * d_head, d_model] (no bias), rows
//                                    h * d_head .. of head h
//   delta_ij = (mlen + i) - j       query absolute position MINUS key absolute position
//   score_ij = [ (q_i + u_h) . k_j  +  (q_i + v_h) . r_h(min(delta_ij, clamp_len)) ] / sqrt(d_head)
//              u = r_w_bias [H, d_head] ("AC" term), v = r_r_bias [H, d_head] ("BD" term)
//   visible  j <= mlen + i (causal: triu(ones(qlen, klen), 1 + mlen) masked); same_length
//              additionally masks keys with delta_ij >= mem_len (the code's
//              tril(ones, -mask_shift_len), mask_shift_len = qlen - (klen - mem_len) when
//              klen > mem_len else qlen; txl_visible_literal spells it out and a property shows
//              it equals a sliding window of mem_len)
//   p, out   softmax and p . v as reference/attention.hpp (masked entries excluded)
//
//   The rel-shift: engines compute BD_raw[i, row] = (q_i + v) . r(pos(row)) for every table row
//   and then shift: pad a zero column in front ([qlen, klen + 1]), reinterpret the buffer as
//   [klen + 1, qlen], drop the first row, reinterpret as [qlen, klen]. Entry (i, j) then reads
//   row j + qlen - 1 - i, whose position is exactly delta_ij, for every causally visible key;
//   the entries j > mlen + i hold wrapped values of other rows and must be masked.
//   txl_rel_shift below is that literal buffer manipulation (the second form); txl_bd is the
//   direct indexing by distance; a property shows they agree on every visible key.
//
//   Segment memory: after a segment, new mems = cat(old mems, hidden)[beg:end] with
//   end = mlen + max(0, qlen - ext_len), beg = max(0, end - mem_len) (txl_mems_range).
//
// Source: Z. Dai, Z. Yang, Y. Yang, J. Carbonell, Q. V. Le, R. Salakhutdinov, "Transformer-XL:
//   Attentive Language Models Beyond a Fixed-Length Context", arXiv:1901.02860v3, Sec. 3.3
//   (eq. with terms (a)-(d), u and v) and Appendix B (the efficient shift); the positions,
//   clamp_len, same_length and mems slicing are those of kimiyoung/transformer-xl
//   pytorch/mem_transformer.py (docs/schemes/transformer_xl.md).
// Index note: the paper writes R_{i-j}; the code builds the table in descending order
//   klen-1 .. 0 and relies on the shift, which gives the same i - j with i the absolute query
//   position (mlen + i here).
// Names elsewhere: mem_transformer.py RelPartialLearnableMultiHeadAttn (r_w_bias, r_r_bias,
//   r_net, _rel_shift), PositionalEmbedding (inv_freq, pos_seq), MemTransformerLM
//   (clamp_len, same_length, mem_len, ext_len, _update_mems); HF TransfoXLModel (deprecated).
// Not modelled: untie_r (per-layer u, v: pass each layer's), the adaptive embedding and its
//   sqrt(d_proj) scale, dropout, layer norm and the post-attention projection (o_net), the
//   TF rel_shift's -1e30 masking (posenc masks with -inf), attn_type != 0, and the `zero_triu`
//   option. The engines' float32 sinusoid is a pipeline (golden/schemes/transformer_xl/transformer_xl_golden.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reference/attention.hpp"
#include "reference/common/errors.hpp"

namespace posenc::reference {

/// Configuration shared by reference, optimized, properties and golden code.
struct TransformerXlParams {
  int n_heads = 1;             // H (n_head)
  int d_head = 0;              // d_head
  int d_model = 0;             // width of the sinusoid and of r_net's input (even)
  std::int64_t clamp_len = 0;  // > 0: positions saturate at clamp_len; <= 0: no clamp
  std::int64_t mem_len = 0;    // memory length (used by same_length and the mems slicing)
  bool same_length = false;    // mask keys more than mem_len behind
};

/// Throws InvalidArgument naming `function` unless p is usable.
inline void txl_check(const TransformerXlParams& p, const char* function = "txl_check") {
  if (p.n_heads <= 0) throw_invalid(function, "n_heads must be positive", p.n_heads);
  if (p.d_head <= 0) throw_invalid(function, "d_head must be positive", p.d_head);
  if (p.d_model <= 0 || p.d_model % 2 != 0) {
    throw_invalid(function, "d_model must be positive and even", p.d_model);
  }
  if (p.mem_len < 0) throw_invalid(function, "mem_len must be >= 0", p.mem_len);
  if (p.same_length && p.mem_len == 0) {
    throw_invalid(function, "same_length needs mem_len > 0 (it masks keys mem_len behind)",
                  p.mem_len);
  }
}

/// Throws InvalidArgument unless 0 <= qlen <= klen (mlen = klen - qlen memory tokens).
inline void txl_check_lengths(std::int64_t qlen, std::int64_t klen, const char* function) {
  if (qlen < 0) throw_invalid(function, "qlen must be >= 0", qlen);
  if (klen < qlen) throw_invalid(function, "klen must be >= qlen (klen = mlen + qlen)", klen);
}

/// The position the sinusoid is evaluated at for a distance: min(pos, clamp_len) when
/// clamp_len > 0.
inline std::int64_t txl_clamp(const TransformerXlParams& p, std::int64_t pos) {
  if (p.clamp_len <= 0) return pos;
  return std::min(pos, p.clamp_len);
}

/// Position of row `row` of the table for klen keys: klen - 1 - row, clamped (descending).
inline std::int64_t txl_table_position(const TransformerXlParams& p, std::int64_t klen,
                                       std::int64_t row) {
  return txl_clamp(p, klen - 1 - row);
}

/// delta_ij = (mlen + i) - j: query absolute position minus key absolute position.
inline std::int64_t txl_distance(std::int64_t mlen, std::int64_t i, std::int64_t j) {
  return mlen + i - j;
}

/// Visibility as the code writes it: triu(ones(qlen, klen), 1 + mlen), and with same_length
/// also tril(ones, -mask_shift_len).
inline bool txl_visible_literal(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                                std::int64_t i, std::int64_t j) {
  const std::int64_t mlen = klen - qlen;
  if (j - i >= 1 + mlen) return false;
  if (p.same_length) {
    const std::int64_t mask_len = klen - p.mem_len;
    const std::int64_t shift = mask_len > 0 ? qlen - mask_len : qlen;
    if (j - i <= -shift) return false;
  }
  return true;
}

/// The frequencies omega_k = 10000^(-2k / d_model), k = 0 .. d_model/2 - 1.
template <class Real>
std::vector<Real> txl_frequencies(const TransformerXlParams& p) {
  using std::pow;
  std::vector<Real> w(static_cast<std::size_t>(p.d_model / 2));
  for (int k = 0; k < p.d_model / 2; ++k) {
    w[static_cast<std::size_t>(k)] = pow(Real(10000), Real(-2 * k) / Real(p.d_model));
  }
  return w;
}

/// The sinusoid R(pos) [d_model] from the frequencies: [sin(pos omega_k) | cos(pos omega_k)].
template <class Real>
std::vector<Real> txl_sinusoid(const std::vector<Real>& omega, std::int64_t pos) {
  using std::cos;
  using std::sin;
  const std::size_t half = omega.size();
  std::vector<Real> r(2 * half);
  for (std::size_t k = 0; k < half; ++k) {
    const Real a = Real(static_cast<double>(pos)) * omega[k];
    r[k] = sin(a);
    r[half + k] = cos(a);
  }
  return r;
}

/// The sinusoid R(pos) [d_model]: [sin(pos omega_k) | cos(pos omega_k)], omega_k =
/// 10000^(-2k/d_model).
template <class Real>
std::vector<Real> txl_sinusoid(const TransformerXlParams& p, std::int64_t pos) {
  return txl_sinusoid(txl_frequencies<Real>(p), pos);
}

/// Projection of a sinusoid row r [d_model] by head h's rows of W_r: [d_head].
/// w_r [H * d_head, d_model] row-major (nn.Linear weight).
template <class Real>
std::vector<Real> txl_project(const TransformerXlParams& p, const std::vector<Real>& w_r, int head,
                              const std::vector<Real>& r) {
  std::vector<Real> out(static_cast<std::size_t>(p.d_head), Real(0));
  for (int x = 0; x < p.d_head; ++x) {
    const std::size_t row = static_cast<std::size_t>(head * p.d_head + x) * p.d_model;
    Real s(0);
    for (int m = 0; m < p.d_model; ++m) s += w_r[row + m] * r[static_cast<std::size_t>(m)];
    out[static_cast<std::size_t>(x)] = s;
  }
  return out;
}

/// Projected relative embedding of one head: r_h(pos) = W_r[h rows] R(pos), [d_head].
template <class Real>
std::vector<Real> txl_r_head(const TransformerXlParams& p, const std::vector<Real>& w_r, int head,
                             std::int64_t pos) {
  return txl_project(p, w_r, head, txl_sinusoid<Real>(p, pos));
}

/// Inputs of one Transformer-XL attention call (float, double or mp), row-major:
/// q [qlen, H, d_head], k and v [klen, H, d_head], u and v_bias [H, d_head],
/// w_r [H * d_head, d_model].
template <class Real>
struct TxlInputs {
  std::vector<Real> q, k, v, u, v_bias, w_r;
};

/// Throws InvalidArgument unless every tensor of x has the shape p, qlen, klen imply.
template <class Real>
void txl_check_inputs(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                      const TxlInputs<Real>& x, const char* function) {
  txl_check(p, function);
  txl_check_lengths(qlen, klen, function);
  const std::size_t hd = static_cast<std::size_t>(p.n_heads) * p.d_head;
  auto need = [&](const char* name, std::size_t got, std::size_t want) {
    if (got != want) {
      throw_invalid(function,
                    std::string(name) + " must have " + std::to_string(want) + " elements", got);
    }
  };
  need("q", x.q.size(), static_cast<std::size_t>(qlen) * hd);
  need("k", x.k.size(), static_cast<std::size_t>(klen) * hd);
  need("v", x.v.size(), static_cast<std::size_t>(klen) * hd);
  need("r_w_bias", x.u.size(), hd);
  need("r_r_bias", x.v_bias.size(), hd);
  need("r_net", x.w_r.size(), hd * p.d_model);
}

/// u_h . k_j, the part of the AC term that does not depend on the query.
template <class Real>
Real txl_uk(const TransformerXlParams& p, const TxlInputs<Real>& x, int h, std::int64_t j) {
  const std::size_t H = p.n_heads, d = p.d_head;
  Real s(0);
  for (std::size_t c = 0; c < d; ++c) s += x.u[h * d + c] * x.k[(j * H + h) * d + c];
  return s;
}

/// AC term of (h, i, j): (q_i + u_h) . k_j = q_i . k_j + u_h . k_j (unscaled).
template <class Real>
Real txl_ac(const TransformerXlParams& p, const TxlInputs<Real>& x, int h, std::int64_t i,
            std::int64_t j) {
  const std::size_t H = p.n_heads, d = p.d_head;
  Real s(0);
  for (std::size_t c = 0; c < d; ++c) s += x.q[(i * H + h) * d + c] * x.k[(j * H + h) * d + c];
  return s + txl_uk(p, x, h, j);
}

/// BD term of query i against an embedding row r [d_head]: (q_i + v_h) . r (unscaled).
template <class Real>
Real txl_bd_row(const TransformerXlParams& p, const TxlInputs<Real>& x, int h, std::int64_t i,
                const std::vector<Real>& r) {
  const std::size_t H = p.n_heads, d = p.d_head;
  Real s(0);
  for (std::size_t c = 0; c < d; ++c) {
    const Real qi = x.q[(i * H + h) * d + c] + x.v_bias[h * d + c];
    s += qi * r[c];
  }
  return s;
}

/// BD by direct indexing: (q_i + v_h) . r_h(clamp(delta_ij)), mlen = klen - qlen.
template <class Real>
Real txl_bd(const TransformerXlParams& p, const TxlInputs<Real>& x, std::int64_t qlen,
            std::int64_t klen, int h, std::int64_t i, std::int64_t j) {
  const std::int64_t pos = txl_clamp(p, txl_distance(klen - qlen, i, j));
  return txl_bd_row(p, x, h, i, txl_r_head<Real>(p, x.w_r, h, pos));
}

/// The literal rel-shift of a [rows, cols] row-major matrix: pad a zero column in front,
/// view the buffer as [cols + 1, rows], drop the first row, view as [rows, cols].
template <class Real>
std::vector<Real> txl_rel_shift(const std::vector<Real>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<Real> padded;
  padded.reserve(static_cast<std::size_t>(rows * (cols + 1)));
  for (std::int64_t r = 0; r < rows; ++r) {
    padded.push_back(Real(0));
    for (std::int64_t c = 0; c < cols; ++c)
      padded.push_back(x[static_cast<std::size_t>(r * cols + c)]);
  }
  // Dropping the first row of the [cols + 1, rows] view skips `rows` elements.
  return std::vector<Real>(padded.begin() + rows, padded.begin() + rows + rows * cols);
}

/// BD of one head through the engines' route: BD_raw[i, row] = (q_i + v) . r(pos(row)) for
/// the descending table, then txl_rel_shift. [qlen, klen]; entries j > mlen + i are garbage.
template <class Real>
std::vector<Real> txl_bd_shifted(const TransformerXlParams& p, const TxlInputs<Real>& x,
                                 std::int64_t qlen, std::int64_t klen, int h) {
  std::vector<std::vector<Real>> table;
  table.reserve(static_cast<std::size_t>(klen));
  for (std::int64_t row = 0; row < klen; ++row) {
    table.push_back(txl_r_head<Real>(p, x.w_r, h, txl_table_position(p, klen, row)));
  }
  std::vector<Real> raw(static_cast<std::size_t>(qlen * klen));
  for (std::int64_t i = 0; i < qlen; ++i) {
    for (std::int64_t row = 0; row < klen; ++row) {
      raw[static_cast<std::size_t>(i * klen + row)] = txl_bd_row(p, x, h, i, table[row]);
    }
  }
  return txl_rel_shift(raw, qlen, klen);
}

/// Attention params of the call: 1/sqrt(d_head), causal with query_offset = mlen, and the
/// same_length mask as a window of mem_len keys.
inline AttentionParams txl_attention_params(const TransformerXlParams& p, std::int64_t qlen,
                                            std::int64_t klen,
                                            const char* function = "txl_attention_params") {
  txl_check(p, function);
  txl_check_lengths(qlen, klen, function);
  AttentionParams ap;
  ap.n_heads = ap.n_kv_heads = p.n_heads;
  ap.head_dim = ap.value_dim = p.d_head;
  ap.scale_kind = AttentionScale::kInvSqrtHeadDim;
  ap.causal = true;
  ap.query_offset = klen - qlen;
  ap.window = p.same_length ? p.mem_len : 0;
  return ap;
}

/// The bias hook for reference/attention.hpp: attention_head adds scale * q_i . k_j; the hook
/// adds the rest, scale * (u_h . k_j + BD_ij). BD rows are cached per (head, position).
template <class Real>
AttentionHooks<Real> txl_hooks(const TransformerXlParams& p, const TxlInputs<Real>& x,
                               std::int64_t qlen, std::int64_t klen) {
  txl_check_inputs(p, qlen, klen, x, "txl_hooks");
  using std::sqrt;
  const Real scale = Real(1) / sqrt(Real(p.d_head));
  struct Cache {
    std::vector<Real> omega;                                // frequencies
    std::vector<std::vector<Real>> sinusoid;                // by position
    std::vector<std::vector<std::vector<Real>>> projected;  // by head, then position
  };
  auto cache = std::make_shared<Cache>();
  cache->projected.resize(static_cast<std::size_t>(p.n_heads));
  cache->omega = txl_frequencies<Real>(p);
  AttentionHooks<Real> hooks;
  hooks.bias = [p, x, qlen, klen, scale, cache](int h, std::int64_t i, std::int64_t j) {
    const std::int64_t delta = txl_distance(klen - qlen, i, j);
    if (delta < 0) return Real(0);  // a future key: masked, its score is never used
    const std::size_t pos = static_cast<std::size_t>(txl_clamp(p, delta));
    auto& rows = cache->projected[static_cast<std::size_t>(h)];
    if (rows.size() <= pos) rows.resize(pos + 1);
    if (cache->sinusoid.size() <= pos) cache->sinusoid.resize(pos + 1);
    if (cache->sinusoid[pos].empty()) {
      cache->sinusoid[pos] = txl_sinusoid(cache->omega, static_cast<std::int64_t>(pos));
    }
    auto& r = rows[pos];
    if (r.empty()) r = txl_project(p, x.w_r, h, cache->sinusoid[pos]);
    return scale * (txl_uk(p, x, h, j) + txl_bd_row(p, x, h, i, r));
  };
  return hooks;
}

/// Full scores [H, qlen, klen] = ((q + u) . k + BD) / sqrt(d_head), BD by direct indexing when
/// `shifted` is false, by the rel-shift route when true; masked entries hold 0.
template <class Real>
std::vector<Real> txl_scores(const TransformerXlParams& p, const TxlInputs<Real>& x,
                             std::int64_t qlen, std::int64_t klen, bool shifted) {
  txl_check_inputs(p, qlen, klen, x, "txl_scores");
  using std::sqrt;
  const Real scale = Real(1) / sqrt(Real(p.d_head));
  const AttentionParams ap = txl_attention_params(p, qlen, klen);
  std::vector<Real> s(static_cast<std::size_t>(p.n_heads * qlen * klen), Real(0));
  for (int h = 0; h < p.n_heads; ++h) {
    const std::vector<Real> bd =
        shifted ? txl_bd_shifted(p, x, qlen, klen, h) : std::vector<Real>{};
    for (std::int64_t i = 0; i < qlen; ++i) {
      for (std::int64_t j = 0; j < klen; ++j) {
        if (!attention_visible(ap, AttentionMask{}, klen, i, j)) continue;
        const Real b = shifted ? bd[static_cast<std::size_t>(i * klen + j)]
                               : txl_bd(p, x, qlen, klen, h, i, j);
        s[static_cast<std::size_t>((h * qlen + i) * klen + j)] =
            scale * (txl_ac(p, x, h, i, j) + b);
      }
    }
  }
  return s;
}

/// The position each (i, j) reads from the sinusoid, [qlen, klen]: clamp(delta_ij) where the
/// key is visible, -1 where masked.
inline std::vector<std::int32_t> txl_position_matrix(const TransformerXlParams& p,
                                                     std::int64_t qlen, std::int64_t klen) {
  const AttentionParams ap = txl_attention_params(p, qlen, klen, "txl_position_matrix");
  std::vector<std::int32_t> m(static_cast<std::size_t>(qlen * klen), -1);
  for (std::int64_t i = 0; i < qlen; ++i) {
    for (std::int64_t j = 0; j < klen; ++j) {
      if (!attention_visible(ap, AttentionMask{}, klen, i, j)) continue;
      m[static_cast<std::size_t>(i * klen + j)] =
          static_cast<std::int32_t>(txl_clamp(p, txl_distance(klen - qlen, i, j)));
    }
  }
  return m;
}

/// Transformer-XL attention: out [qlen, H, d_head].
template <class Real>
std::vector<Real> txl_forward(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                              const TxlInputs<Real>& x) {
  txl_check_inputs(p, qlen, klen, x, "txl_forward");
  const AttentionParams ap = txl_attention_params(p, qlen, klen, "txl_forward");
  return attention_forward<Real>(ap, AttentionMask{}, qlen, klen, x.q, x.k, x.v,
                                 txl_hooks(p, x, qlen, klen));
}

/// [beg, end) of cat(old mems, hidden) kept as the next memory (mem_transformer.py
/// _update_mems): end = mlen + max(0, qlen - ext_len), beg = max(0, end - mem_len).
inline std::pair<std::int64_t, std::int64_t> txl_mems_range(std::int64_t mem_len,
                                                            std::int64_t ext_len, std::int64_t mlen,
                                                            std::int64_t qlen) {
  constexpr const char* fn = "txl_mems_range";
  if (mem_len < 0) throw_invalid(fn, "mem_len must be >= 0", mem_len);
  if (ext_len < 0) throw_invalid(fn, "ext_len must be >= 0", ext_len);
  if (mlen < 0) throw_invalid(fn, "mlen must be >= 0", mlen);
  if (qlen < 0) throw_invalid(fn, "qlen must be >= 0", qlen);
  const std::int64_t end = mlen + std::max<std::int64_t>(0, qlen - ext_len);
  const std::int64_t beg = std::max<std::int64_t>(0, end - mem_len);
  return {beg, end};
}

}  // namespace posenc::reference
