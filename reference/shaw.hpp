// -----------------------------------------------------------------------------
// Shaw: relative position representations for keys and values, clipped (reference)
// -----------------------------------------------------------------------------
// Formula (code indices 0-based; query i at absolute position P_i = query_offset + i, key j at
// position j; K = max_relative_position; one head, depth d of q and k, dv of v):
//
//   r_ij   = j - P_i                                   relative distance: KEY minus QUERY
//   idx_ij = clip(r_ij, -K, K) + K                     row of the tables, in [0, 2K]
//   e_ij   = (q_i / sqrt(d)) . (k_j + aK[idx_ij])      q pre-scaled: the 1/sqrt(d) applies to
//          = scale * (q_i . k_j) + scale * (q_i . aK[idx_ij])   BOTH terms
//   alpha_ij = softmax_j(e_ij) over the visible keys   (masks: reference/attention.hpp)
//   z_i    = sum_j alpha_ij (v_j + aV[idx_ij])
//          = sum_j alpha_ij v_j + sum_r w_ir aV[r],   w_ir = sum over j with idx_ij = r of alpha_ij
//
//   Tables aK [2K + 1, d] and aV [2K + 1, dv], row-major, SHARED across heads (one pair per
//   layer). The first line of each form is what shaw_forward_naive computes (the T x T x d
//   "relations" tensors of tensor2tensor); shaw_forward computes the second through the
//   attention hooks (a score bias and a value hook). In exact arithmetic they are equal.
//   Decode: tensor2tensor puts fewer queries than keys at the LAST key positions (its cache
//   mode uses the distance row (-Tk + 1, ..., 0)); here that is query_offset = Tk - Tq.
//   Invariants: everything depends on (i, j) only through clip(j - P_i), so shifting every
//   position changes nothing, and moving a key further than K away changes nothing.
//
//   Symbols: K = ShawParams::max_relative_position.
//
// Source: P. Shaw, J. Uszkoreit, A. Vaswani, "Self-Attention with Relative Position
//   Representations", arXiv:1803.02155v2, Sec. 3.1 (eq. 3 values, eq. 4 keys), Sec. 3.2
//   (clipping: a^K_ij = w^K_clip(j - i, k)), Sec. 3.3 (efficient implementation: split each
//   term into two, the relative one by a [n, n, d] x [n, d] product). Signs and scaling from
//   the released code, tensorflow/tensor2tensor common_attention.py
//   (_generate_relative_positions_matrix: range_k[None, :] - range_q[:, None];
//   dot_product_attention_relative; multihead_attention scales q by depth^-0.5), see
//   docs/schemes/shaw.md.
// Index note: the paper is 0/1-agnostic; only differences j - i occur, so none.
// Names elsewhere: tensor2tensor max_relative_position (hparams transformer_relative: K = 20),
//   relations_keys / relations_values (the gathered T x T x d tables), embeddings named
//   relative_positions_keys / _values; fairseq and HF ports call K max_relative_positions.
// Not modelled: dropout; per-head tables (tensor2tensor shares them; an engine that keeps
//   one per head is a different model); the paper's unscaled variant without 1/sqrt(d);
//   tensor2tensor's heads_share_relative_embedding / unmasked "local" variants.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/common/errors.hpp"

namespace posenc::reference {

/// Configuration shared by reference, optimized, properties and golden code.
struct ShawParams {
  int max_relative_position = 20;  // K (tensor2tensor transformer_relative: 20)
};

/// Throws InvalidArgument naming `function` unless K > 0 (tensor2tensor: ValueError).
inline void shaw_check(const ShawParams& p, const char* function = "shaw_check") {
  if (p.max_relative_position <= 0) {
    throw_invalid(function, "max_relative_position must be > 0", p.max_relative_position);
  }
}

/// Rows of each relative table: 2K + 1.
inline int shaw_table_rows(const ShawParams& p) { return 2 * p.max_relative_position + 1; }

/// Table row of a key at key_pos seen from a query at query_pos: clip(key - query, -K, K) + K.
inline int shaw_index(const ShawParams& p, std::int64_t query_pos, std::int64_t key_pos) {
  shaw_check(p, "shaw_index");
  const std::int64_t r = key_pos - query_pos;
  const std::int64_t k = p.max_relative_position;
  return static_cast<int>(std::clamp<std::int64_t>(r, -k, k) + k);
}

/// Indices [Tq, Tk] of queries at query_offset + i against keys 0 .. Tk - 1.
inline std::vector<std::int32_t> shaw_index_matrix(const ShawParams& p, std::int64_t tq,
                                                   std::int64_t tk, std::int64_t query_offset) {
  shaw_check(p, "shaw_index_matrix");
  std::vector<std::int32_t> m(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      m[static_cast<std::size_t>(i * tk + j)] = shaw_index(p, query_offset + i, j);
    }
  }
  return m;
}

/// Throws InvalidArgument unless the attention shapes and the tables fit together.
inline void shaw_check_shapes(const ShawParams& p, const AttentionParams& ap, std::int64_t tq,
                              std::int64_t tk, std::size_t q_size, std::size_t rel_k_size,
                              std::size_t rel_v_size, const char* function) {
  shaw_check(p, function);
  attention_check(ap, tq, tk, function);
  const std::size_t rows = static_cast<std::size_t>(shaw_table_rows(p));
  if (rel_k_size != rows * ap.head_dim) {
    throw_invalid(function,
                  "rel_k must have (2K + 1) * head_dim = " + std::to_string(rows * ap.head_dim) +
                      " entries",
                  rel_k_size);
  }
  if (rel_v_size != rows * ap.value_dim) {
    throw_invalid(function,
                  "rel_v must have (2K + 1) * value_dim = " + std::to_string(rows * ap.value_dim) +
                      " entries",
                  rel_v_size);
  }
  if (q_size != static_cast<std::size_t>(tq * ap.n_heads * ap.head_dim)) {
    throw_invalid(function, "q must have Tq*H*d elements", q_size);
  }
}

/// The hooks for reference/attention.hpp: bias(h, i, j) = scale * (q_i . aK[idx_ij]) (head h's
/// query row of q [Tq, H, d]) and value_hook adding sum_j p_ij aV[idx_ij] to the output row.
template <class Real>
AttentionHooks<Real> shaw_hooks(const ShawParams& p, const AttentionParams& ap, std::int64_t tq,
                                std::int64_t tk, const std::vector<Real>& q,
                                const std::vector<Real>& rel_k, const std::vector<Real>& rel_v) {
  shaw_check_shapes(p, ap, tq, tk, q.size(), rel_k.size(), rel_v.size(), "shaw_hooks");
  const Real scale = attention_scale<Real>(ap);
  const int H = ap.n_heads, d = ap.head_dim, dv = ap.value_dim;
  const std::int64_t o = ap.query_offset;
  AttentionHooks<Real> hooks;
  hooks.bias = [p, q, rel_k, scale, H, d, o](int h, std::int64_t i, std::int64_t j) {
    const std::size_t row = static_cast<std::size_t>(shaw_index(p, o + i, j)) * d;
    const std::size_t qi = static_cast<std::size_t>((i * H + h) * d);
    Real dot = Real(0);
    for (int c = 0; c < d; ++c) dot += q[qi + c] * rel_k[row + c];
    return scale * dot;
  };
  hooks.value_hook = [p, rel_v, dv, o](int, std::int64_t i, const std::vector<Real>& prow,
                                       std::vector<Real>& out) {
    for (std::size_t j = 0; j < prow.size(); ++j) {
      const std::size_t row =
          static_cast<std::size_t>(shaw_index(p, o + i, static_cast<std::int64_t>(j))) * dv;
      for (int c = 0; c < dv; ++c) out[c] += prow[j] * rel_v[row + c];
    }
  };
  return hooks;
}

/// Shaw self-attention, efficient form: q [Tq, H, d], k [Tk, Hkv, d], v [Tk, Hkv, dv],
/// rel_k [2K + 1, d], rel_v [2K + 1, dv] -> [Tq, H, dv]. Masks and scale as `ap` says
/// (tensor2tensor: scale 1/sqrt(d), causal in the decoder).
template <class Real>
std::vector<Real> shaw_forward(const ShawParams& p, const AttentionParams& ap,
                               const AttentionMask& m, std::int64_t tq, std::int64_t tk,
                               const std::vector<Real>& rel_k, const std::vector<Real>& rel_v,
                               const std::vector<Real>& q, const std::vector<Real>& k,
                               const std::vector<Real>& v) {
  return attention_forward<Real>(ap, m, tq, tk, q, k, v,
                                 shaw_hooks<Real>(p, ap, tq, tk, q, rel_k, rel_v));
}

/// The naive form, as tensor2tensor writes it: gathers the [Tq, Tk, d] relations tensors and
/// computes e_ij = (scale q_i) . (k_j + aK_ij), z_i = sum_j alpha_ij (v_j + aV_ij) directly.
/// For checking the efficient form; O(Tq Tk d) memory on purpose.
template <class Real>
std::vector<Real> shaw_forward_naive(const ShawParams& p, const AttentionParams& ap,
                                     const AttentionMask& m, std::int64_t tq, std::int64_t tk,
                                     const std::vector<Real>& rel_k, const std::vector<Real>& rel_v,
                                     const std::vector<Real>& q, const std::vector<Real>& k,
                                     const std::vector<Real>& v) {
  shaw_check_shapes(p, ap, tq, tk, q.size(), rel_k.size(), rel_v.size(), "shaw_forward_naive");
  const int H = ap.n_heads, Hkv = ap.n_kv_heads, d = ap.head_dim, dv = ap.value_dim;
  const Real scale = attention_scale<Real>(ap);
  const std::vector<std::int32_t> idx = shaw_index_matrix(p, tq, tk, ap.query_offset);
  std::vector<Real> rk(static_cast<std::size_t>(tq * tk * d));
  std::vector<Real> rv(static_cast<std::size_t>(tq * tk * dv));
  for (std::size_t x = 0; x < idx.size(); ++x) {
    for (int c = 0; c < d; ++c) rk[x * d + c] = rel_k[static_cast<std::size_t>(idx[x]) * d + c];
    for (int c = 0; c < dv; ++c) rv[x * dv + c] = rel_v[static_cast<std::size_t>(idx[x]) * dv + c];
  }
  std::vector<Real> out(static_cast<std::size_t>(tq * H * dv), Real(0));
  const int group = H / Hkv;
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<Real> s(static_cast<std::size_t>(tk), Real(0));
      std::vector<bool> vis(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        vis[j] = attention_visible(ap, m, tk, i, j);
        if (!vis[j]) continue;
        Real e = Real(0);
        for (int c = 0; c < d; ++c) {
          e += (q[(i * H + h) * d + c] * scale) *
               (k[(j * Hkv + g) * d + c] + rk[(i * tk + j) * d + c]);
        }
        s[j] = e;
      }
      const std::vector<Real> a = attention_softmax(s, vis);
      for (std::int64_t j = 0; j < tk; ++j) {
        for (int c = 0; c < dv; ++c) {
          out[(i * H + h) * dv + c] +=
              a[j] * (v[(j * Hkv + g) * dv + c] + rv[(i * tk + j) * dv + c]);
        }
      }
    }
  }
  return out;
}

}  // namespace posenc::reference
