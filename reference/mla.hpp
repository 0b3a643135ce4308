// -----------------------------------------------------------------------------
// MLA decoupled RoPE (DeepSeek-V2/V3, Kimi K2): reference, closed form
// -----------------------------------------------------------------------------
// Multi-head latent attention splits each query head into a position-free part and a rotated
// part, and shares one rotated key part across all heads (code indices 0-based):
//
//   q_i,h = [qn_i,h (dn channels), qr_i,h (dr channels)]       per head h
//   k_j,h = [kn_j,h (dn channels), kr_j   (dr channels)]       kr_j: ONE head, shared by all h
//   score_h(i, j) = sigma * (qn_i,h . kn_j,h + R(m_i) qr_i,h . R(n_j) kr_j)
//   sigma = mult / sqrt(dn + dr)       mult = mscale(s, mscale_all_dim)^2 under YaRN (HF; the
//                                      official code uses mscale(s, mscale)^2), 1 otherwise:
//                                      RopeScaledTables::softmax_scale_multiplier
//   R is the RoPE rotation of reference/rope.hpp on the dr channels only (DeepSeek: dr = 64,
//   dn = 128), with the tables of the model's rule (YaRN for V3: rope_scaling_tables).
//
//   Interleaved checkpoints: DeepSeek's weights produce qr and kr with pairs (2i, 2i + 1)
//   (the complex view of its own code). HF de-interleaves them before rotate_half:
//     P x = [x_0, x_2, ..., x_{dr-2}, x_1, x_3, ..., x_{dr-1}]      (mla_deinterleave)
//   and rotates P x half-split; the result stays in the permuted order. Since
//   halfsplit(P x) = P interleaved(x) channel for channel and P is orthogonal, the scores are
//   those of the interleaved rotation on the unpermuted vectors. P^-1 = mla_interleave.
//   (HF v5 configs: rope_interleave = true; vLLM's DeepseekScalingRotaryEmbedding is_neox_style
//   = false rotates the interleaved pairs in place.)
//
// Source: DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
//   Language Model", arXiv:2405.04434v5, Sec. 2.1.3 (decoupled rotary position embedding:
//   q^R per head, one shared k^R) and App. B (YaRN for MLA, the softmax factor);
//   deepseek-ai/DeepSeek-V3 inference/model.py (MLA, apply_rotary_emb); HF transformers
//   DeepseekV3Attention (apply_rotary_pos_emb_interleave, softmax_scale * mscale^2).
// Index note: the paper's d_h^R = dr, d_h = dn; its heads count from 1.
// Names elsewhere: qk_nope_head_dim (dn), qk_rope_head_dim (dr), v_head_dim, rope_interleave.
// Not modelled: the low-rank projections (q_lora, kv_lora) and the absorbed-weight decode form;
//   both change how q and k are computed, not the scores of given q and k.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/rope.hpp"

namespace posenc::reference {

/// Shapes and conventions of one MLA layer.
struct MlaParams {
  int n_heads = 1;
  int nope_dim = 128;  // dn = qk_nope_head_dim (0 allowed: rope-only scores)
  int rope_dim = 64;   // dr = qk_rope_head_dim, even
  double base = 10000.0;
  bool interleaved_checkpoint = true;  // rope_interleave: de-interleave, then rotate half-split
};

inline void mla_check(const MlaParams& p, const char* function = "mla_check") {
  if (p.n_heads <= 0) throw_invalid(function, "n_heads must be positive", p.n_heads);
  if (p.nope_dim < 0) throw_invalid(function, "qk_nope_head_dim must be >= 0", p.nope_dim);
  if (p.rope_dim <= 0 || p.rope_dim % 2 != 0) {
    throw_invalid(function, "qk_rope_head_dim must be positive and even", p.rope_dim);
  }
  if (!(p.base > 0.0) || !std::isfinite(p.base))
    throw_invalid(function, "base must be finite and > 0", p.base);
}

/// The RoPE parameters of the rotated part: dr channels, all rotated, half-split (HF's form
/// after de-interleaving).
inline RopeParams mla_rope_params(const MlaParams& p) {
  mla_check(p, "mla_rope_params");
  return RopeParams{p.rope_dim, p.rope_dim, p.base, RopeLayout::kHalfSplit, 1.0};
}

/// P x: the even channels, then the odd ones (x.size() even).
template <class T>
std::vector<T> mla_deinterleave(const std::vector<T>& x) {
  if (x.size() % 2 != 0) throw_invalid("mla_deinterleave", "x must have an even size", x.size());
  const std::size_t h = x.size() / 2;
  std::vector<T> y(x.size());
  for (std::size_t i = 0; i < h; ++i) {
    y[i] = x[2 * i];
    y[h + i] = x[2 * i + 1];
  }
  return y;
}

/// P^-1 y: the inverse of mla_deinterleave.
template <class T>
std::vector<T> mla_interleave(const std::vector<T>& y) {
  if (y.size() % 2 != 0) throw_invalid("mla_interleave", "y must have an even size", y.size());
  const std::size_t h = y.size() / 2;
  std::vector<T> x(y.size());
  for (std::size_t i = 0; i < h; ++i) {
    x[2 * i] = y[i];
    x[2 * i + 1] = y[h + i];
  }
  return x;
}

/// The rotated part of one q head or of the shared k head at position m, as the engine stores
/// it: de-interleaved first for an interleaved checkpoint, then rotated half-split.
template <class Real>
std::vector<Real> mla_rope_apply(const MlaParams& p, const RopeTables<Real>& t, std::int64_t m,
                                 const std::vector<Real>& x_pe) {
  mla_check(p, "mla_rope_apply");
  if (x_pe.size() != static_cast<std::size_t>(p.rope_dim)) {
    throw_invalid("mla_rope_apply",
                  "x_pe must have qk_rope_head_dim = " + std::to_string(p.rope_dim) + " entries",
                  x_pe.size());
  }
  if (t.inv_freq.size() != static_cast<std::size_t>(p.rope_dim / 2)) {
    throw_invalid("mla_rope_apply", "tables must have qk_rope_head_dim/2 frequencies",
                  t.inv_freq.size());
  }
  const RopeParams rp = mla_rope_params(p);
  return rope_apply(rp, t, m, p.interleaved_checkpoint ? mla_deinterleave(x_pe) : x_pe);
}

/// sigma = mult / sqrt(dn + dr).
template <class Real>
Real mla_softmax_scale(const MlaParams& p, const Real& multiplier) {
  using std::sqrt;
  mla_check(p, "mla_softmax_scale");
  if (!(multiplier > Real(0)))
    throw_invalid("mla_softmax_scale", "multiplier must be > 0", multiplier);
  return multiplier / sqrt(Real(p.nope_dim + p.rope_dim));
}

/// Scores [H, Tq, Tk] of one layer. q [Tq, H, dn + dr] (nope part first, as the projection
/// writes it), k_nope [Tk, H, dn], k_pe [Tk, dr] (one shared head), unrotated; query i sits at
/// q_pos[i], key j at k_pos[j]. No mask: the attention core applies those.
template <class Real>
std::vector<Real> mla_scores(const MlaParams& p, const RopeTables<Real>& t, const Real& multiplier,
                             const std::vector<std::int64_t>& q_pos,
                             const std::vector<std::int64_t>& k_pos, const std::vector<Real>& q,
                             const std::vector<Real>& k_nope, const std::vector<Real>& k_pe) {
  mla_check(p, "mla_scores");
  const std::size_t tq = q_pos.size(), tk = k_pos.size();
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim, dq = dn + dr;
  if (q.size() != tq * H * dq)
    throw_invalid("mla_scores", "q must have Tq*H*(dn+dr) entries", q.size());
  if (k_nope.size() != tk * H * dn)
    throw_invalid("mla_scores", "k_nope must have Tk*H*dn entries", k_nope.size());
  if (k_pe.size() != tk * dr)
    throw_invalid("mla_scores", "k_pe must have Tk*dr entries", k_pe.size());
  const Real sigma = mla_softmax_scale(p, multiplier);
  std::vector<std::vector<Real>> kr(tk);
  for (std::size_t j = 0; j < tk; ++j) {
    kr[j] = mla_rope_apply(p, t, k_pos[j],
                           std::vector<Real>(k_pe.begin() + j * dr, k_pe.begin() + (j + 1) * dr));
  }
  std::vector<Real> out(static_cast<std::size_t>(H) * tq * tk);
  for (int h = 0; h < H; ++h) {
    for (std::size_t i = 0; i < tq; ++i) {
      const auto qi = q.begin() + (i * H + h) * dq;
      const std::vector<Real> qr =
          mla_rope_apply(p, t, q_pos[i], std::vector<Real>(qi + dn, qi + dq));
      for (std::size_t j = 0; j < tk; ++j) {
        Real s = Real(0);
        for (int c = 0; c < dn; ++c) s += qi[c] * k_nope[(j * H + h) * dn + c];
        for (int c = 0; c < dr; ++c) s += qr[c] * kr[j][c];
        out[(h * tq + i) * tk + j] = sigma * s;
      }
    }
  }
  return out;
}

}  // namespace posenc::reference
