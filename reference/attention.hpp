// -----------------------------------------------------------------------------
// Attention: scaled dot-product attention with masks and bias hooks (reference)
// -----------------------------------------------------------------------------
// Formula, for one head (code indices 0-based; Tq queries, Tk keys):
//
//   s_ij = scale * (q_i . k_j) + bias(i, j)               scale = 1/sqrt(d), 1 (T5) or given
//   s_ij = -inf  where key j is not visible to query i     (masks below)
//   p_ij = exp(s_ij - max_j s_ij) / sum_j exp(s_ij - max_j s_ij)     (stable softmax)
//   o_i  = sum_j p_ij v_j  (+ value_hook(i, p_i.) : Shaw's relative values add here)
//
//   Positions: query i sits at absolute position query_offset + i, key j at position j (the
//   KV-cache convention: a decode step has query_offset = number of cached tokens).
//   Visibility of key j to query i (all that apply must hold):
//     causal          j <= query_offset + i
//     window w > 0    query_offset + i - w < j          (the last w keys, spec class M)
//     key_padding     key_padding[j] == 0
//     allowed         allowed[i * Tk + j] != 0          (arbitrary boolean mask)
//     chunk C > 0     floor(j / C) == floor((query_offset + i) / C)   (Llama 4's chunked
//                     attention: a query sees only the keys of its own chunk of C positions;
//                     with causal, the keys of its chunk up to itself)
//   A fully masked row has no defined softmax: here its probabilities are all 0 and its
//   output is the zero vector, on purpose (never NaN by accident).
//   Learned sinks (GPT-OSS): head h has a sink logit s_h, a score with no key, no value and no
//   position, that joins the softmax denominator only:
//     M_i = max(max_j s_ij, s_h),  Z_i = sum_j exp(s_ij - M_i) + exp(s_h - M_i)
//     p_ij = exp(s_ij - M_i) / Z_i                       (sum_j p_ij = 1 - exp(s_h - M_i) / Z_i)
//   The sink is compared with the scaled scores (it is not multiplied by the scale); s_h = -inf
//   is plain softmax; a fully masked row puts all its mass on the sink (output 0, as above).
//   Multi-head tensors are [tokens, heads, dim]; grouped-query: kv head = h / (H / Hkv).
//
// Source: A. Vaswani et al., "Attention Is All You Need", arXiv:1706.03762v7, Sec. 3.2.1
//   (scaled dot-product attention, eq. 1) and Sec. 3.2.3 (masking future positions). Chunks:
//   Meta Llama 4 (HF Llama4TextConfig attention_chunk_size, the chunked causal mask). Sinks:
//   G. Xiao et al., "Efficient Streaming Language Models with Attention Sinks",
//   arXiv:2309.17453v4, Sec. 3.3 (a learnable sink token) and OpenAI gpt-oss (HF GptOss
//   attention `sinks`: one logit per head concatenated to the scores, dropped after softmax).
// Index note: the paper has no positions; the causal mask is stated over 0-based indices.
// Names elsewhere: torch scaled_dot_product_attention (is_causal, attn_mask, scale); ONNX
//   Attention (opset 23); ggml_soft_max_ext (mask, scale, max_bias for ALiBi); HF
//   eager_attention_forward.
// Not modelled: dropout; logit soft-capping; the engine's float accumulation order.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"

namespace posenc::reference {

template <class Real>
using AttentionMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

enum class AttentionScale { kInvSqrtHeadDim, kNone, kGiven };

/// Shapes, score scale and masks; shared by reference, optimized, properties and golden code.
struct AttentionParams {
  int n_heads = 1;      // H, query heads
  int n_kv_heads = 1;   // Hkv, divides H
  int head_dim = 0;     // d of q and k
  int value_dim = 0;    // dv of v and of the output
  AttentionScale scale_kind = AttentionScale::kInvSqrtHeadDim;
  double scale = 1.0;   // used when scale_kind == kGiven
  bool causal = false;
  std::int64_t window = 0;        // 0 = no sliding window
  std::int64_t query_offset = 0;  // absolute position of query 0
  std::int64_t chunk = 0;         // 0 = no chunks; C > 0: Llama 4's attention_chunk_size
  std::vector<double> sinks;      // empty = none; else [H] sink logits, finite or -inf
};

/// Per-token and per-pair masks (optional; empty = everything visible).
struct AttentionMask {
  std::vector<std::uint8_t> key_padding;  // [Tk], 1 = padding (masked)
  std::vector<std::uint8_t> allowed;      // [Tq * Tk], 0 = masked
};

/// Additive bias and value hooks (Real-valued, per head). Empty functions = none.
template <class Real>
struct AttentionHooks {
  std::function<Real(int head, std::int64_t i, std::int64_t j)> bias;
  /// Adds to out_i (size dv) given the probability row p_i (size Tk); Shaw's relative values.
  std::function<void(int head, std::int64_t i, const std::vector<Real>& p, std::vector<Real>& out)>
      value_hook;
  /// > 0: the score scale in Real, replacing attention_scale(p) where the params' double is
  /// only a rounding of it (DeBERTa's kGiven 1/sqrt(d sf)); 0 = the params' scale.
  Real scale = Real(0);
};

inline void attention_check(const AttentionParams& p, std::int64_t tq, std::int64_t tk,
                            const char* function = "attention_check") {
  if (p.n_heads <= 0) throw_invalid(function, "n_heads must be positive", p.n_heads);
  if (p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0) {
    throw_invalid(function, "n_kv_heads must divide n_heads " + std::to_string(p.n_heads),
                  p.n_kv_heads);
  }
  if (p.head_dim <= 0) throw_invalid(function, "head_dim must be positive", p.head_dim);
  if (p.value_dim <= 0) throw_invalid(function, "value_dim must be positive", p.value_dim);
  if (p.scale_kind == AttentionScale::kGiven && !(std::isfinite(p.scale) && p.scale > 0)) {
    throw_invalid(function, "scale must be finite and > 0", p.scale);
  }
  if (p.window < 0) throw_invalid(function, "window must be >= 0", p.window);
  if (p.query_offset < 0) throw_invalid(function, "query_offset must be >= 0", p.query_offset);
  if (tq < 0) throw_invalid(function, "query length must be >= 0", tq);
  if (tk < 0) throw_invalid(function, "key length must be >= 0", tk);
  if (p.chunk < 0) throw_invalid(function, "chunk must be >= 0", p.chunk);
  if (!p.sinks.empty() && p.sinks.size() != static_cast<std::size_t>(p.n_heads)) {
    throw_invalid(function, "sinks must have n_heads = " + std::to_string(p.n_heads) + " entries",
                  p.sinks.size());
  }
  for (double s : p.sinks) {
    if (std::isnan(s) || s == std::numeric_limits<double>::infinity()) {
      throw_invalid(function, "sinks must be finite or -inf", s);
    }
  }
}

/// First position of the chunk holding position `pos` (pos >= 0, chunk > 0).
inline std::int64_t attention_chunk_start(std::int64_t chunk, std::int64_t pos) {
  return pos / chunk * chunk;
}

/// The score scale as a Real: 1/sqrt(d), 1, or the given value.
template <class Real>
Real attention_scale(const AttentionParams& p) {
  using std::sqrt;
  switch (p.scale_kind) {
    case AttentionScale::kInvSqrtHeadDim: return Real(1) / sqrt(Real(p.head_dim));
    case AttentionScale::kNone: return Real(1);
    case AttentionScale::kGiven: return Real(p.scale);
  }
  return Real(1);
}

/// True when key j is visible to query i (see the visibility rules above).
inline bool attention_visible(const AttentionParams& p, const AttentionMask& m, std::int64_t tk,
                              std::int64_t i, std::int64_t j) {
  const std::int64_t qpos = p.query_offset + i;
  if (p.causal && j > qpos) return false;
  if (p.window > 0 && !(qpos - p.window < j)) return false;
  if (!m.key_padding.empty() && m.key_padding[static_cast<std::size_t>(j)]) return false;
  if (!m.allowed.empty() && !m.allowed[static_cast<std::size_t>(i * tk + j)]) return false;
  if (p.chunk > 0 && attention_chunk_start(p.chunk, j) != attention_chunk_start(p.chunk, qpos)) {
    return false;
  }
  return true;
}

/// Softmax of one score row with -inf for masked entries; all-masked rows give all zeros.
template <class Real>
std::vector<Real> attention_softmax(const std::vector<Real>& s, const std::vector<bool>& visible) {
  using std::exp;
  std::vector<Real> p(s.size(), Real(0));
  bool any = false;
  Real mx = Real(0);
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (!visible[j]) continue;
    if (!any || s[j] > mx) mx = s[j];
    any = true;
  }
  if (!any) return p;
  Real sum = Real(0);
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (!visible[j]) continue;
    p[j] = exp(s[j] - mx);
    sum += p[j];
  }
  for (Real& x : p) x /= sum;
  return p;
}

/// Softmax of one score row with a sink logit in the denominator (GPT-OSS): the sink is one
/// more score with no key; its own probability is dropped. sink = -inf gives attention_softmax.
template <class Real>
std::vector<Real> attention_softmax_sink(const std::vector<Real>& s,
                                         const std::vector<bool>& visible, const Real& sink) {
  using std::exp;
  using std::isinf;
  if (isinf(sink)) return attention_softmax(s, visible);  // -inf: checked, never +inf
  std::vector<Real> p(s.size(), Real(0));
  Real mx = sink;
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (visible[j] && s[j] > mx) mx = s[j];
  }
  Real sum = exp(sink - mx);
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (!visible[j]) continue;
    p[j] = exp(s[j] - mx);
    sum += p[j];
  }
  for (Real& x : p) x /= sum;
  return p;
}

/// The sink's share of row i: 1 - sum_j p_ij = exp(s_h - M_i) / Z_i (0 without a sink).
template <class Real>
Real attention_sink_mass(const std::vector<Real>& s, const std::vector<bool>& visible,
                         const Real& sink) {
  using std::exp;
  using std::isinf;
  if (isinf(sink)) return Real(0);
  Real mx = sink;
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (visible[j] && s[j] > mx) mx = s[j];
  }
  Real sum = exp(sink - mx);
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (visible[j]) sum += exp(s[j] - mx);
  }
  return exp(sink - mx) / sum;
}

/// Everything one head produces: scores (masked entries hold 0), probabilities, output.
template <class Real>
struct AttentionHeadResult {
  AttentionMatrix<Real> scores, probs, out;
  std::vector<std::uint8_t> visible;  // [Tq * Tk]
};

/// One head: q [Tq, d], k [Tk, d], v [Tk, dv] as matrices.
template <class Real>
AttentionHeadResult<Real> attention_head(const AttentionParams& p, const AttentionMask& m, int head,
                                         const AttentionMatrix<Real>& q,
                                         const AttentionMatrix<Real>& k,
                                         const AttentionMatrix<Real>& v,
                                         const AttentionHooks<Real>& hooks = {}) {
  const std::int64_t tq = q.rows(), tk = k.rows();
  attention_check(p, tq, tk, "attention_head");
  const Real scale = hooks.scale > Real(0) ? hooks.scale : attention_scale<Real>(p);
  AttentionHeadResult<Real> r;
  r.scores = (q * k.transpose()) * scale;  // s_ij = scale * q_i . k_j
  r.probs = AttentionMatrix<Real>::Zero(tq, tk);
  r.out = AttentionMatrix<Real>::Zero(tq, p.value_dim);
  r.visible.assign(static_cast<std::size_t>(tq * tk), 0);
  for (std::int64_t i = 0; i < tq; ++i) {
    std::vector<Real> s(static_cast<std::size_t>(tk));
    std::vector<bool> vis(static_cast<std::size_t>(tk));
    for (std::int64_t j = 0; j < tk; ++j) {
      if (hooks.bias) r.scores(i, j) += hooks.bias(head, i, j);
      vis[j] = attention_visible(p, m, tk, i, j);
      r.visible[i * tk + j] = vis[j];
      if (!vis[j]) r.scores(i, j) = Real(0);
      s[j] = r.scores(i, j);
    }
    const std::vector<Real> prow =
        p.sinks.empty()
            ? attention_softmax(s, vis)
            : attention_softmax_sink(s, vis, Real(p.sinks[static_cast<std::size_t>(head)]));
    std::vector<Real> o(static_cast<std::size_t>(p.value_dim), Real(0));
    for (std::int64_t j = 0; j < tk; ++j) {
      r.probs(i, j) = prow[j];
      for (int c = 0; c < p.value_dim; ++c) o[c] += prow[j] * v(j, c);
    }
    if (hooks.value_hook) hooks.value_hook(head, i, prow, o);
    for (int c = 0; c < p.value_dim; ++c) r.out(i, c) = o[c];
  }
  return r;
}

/// Slices head h of a row-major [tokens, heads, dim] tensor into a [tokens, dim] matrix.
template <class Real>
AttentionMatrix<Real> attention_slice(const std::vector<Real>& x, std::int64_t tokens, int heads,
                                      int dim, int h) {
  AttentionMatrix<Real> m(tokens, dim);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int c = 0; c < dim; ++c) m(t, c) = x[static_cast<std::size_t>((t * heads + h) * dim + c)];
  }
  return m;
}

/// All heads: q [Tq, H, d], k [Tk, Hkv, d], v [Tk, Hkv, dv] -> out [Tq, H, dv].
template <class Real>
std::vector<Real> attention_forward(const AttentionParams& p, const AttentionMask& m,
                                    std::int64_t tq, std::int64_t tk, const std::vector<Real>& q,
                                    const std::vector<Real>& k, const std::vector<Real>& v,
                                    const AttentionHooks<Real>& hooks = {}) {
  attention_check(p, tq, tk, "attention_forward");
  const auto n = [](std::int64_t a, int b, int c) { return static_cast<std::size_t>(a * b * c); };
  if (q.size() != n(tq, p.n_heads, p.head_dim)) {
    throw_invalid("attention_forward", "q must have Tq*H*d elements", q.size());
  }
  if (k.size() != n(tk, p.n_kv_heads, p.head_dim)) {
    throw_invalid("attention_forward", "k must have Tk*Hkv*d elements", k.size());
  }
  if (v.size() != n(tk, p.n_kv_heads, p.value_dim)) {
    throw_invalid("attention_forward", "v must have Tk*Hkv*dv elements", v.size());
  }
  if (!m.key_padding.empty() && m.key_padding.size() != static_cast<std::size_t>(tk)) {
    throw_invalid("attention_forward", "key_padding must have Tk entries", m.key_padding.size());
  }
  if (!m.allowed.empty() && m.allowed.size() != static_cast<std::size_t>(tq * tk)) {
    throw_invalid("attention_forward", "allowed must have Tq*Tk entries", m.allowed.size());
  }
  std::vector<Real> out(n(tq, p.n_heads, p.value_dim));
  const int group = p.n_heads / p.n_kv_heads;
  for (int h = 0; h < p.n_heads; ++h) {
    const auto r = attention_head<Real>(
        p, m, h, attention_slice(q, tq, p.n_heads, p.head_dim, h),
        attention_slice(k, tk, p.n_kv_heads, p.head_dim, h / group),
        attention_slice(v, tk, p.n_kv_heads, p.value_dim, h / group), hooks);
    for (std::int64_t i = 0; i < tq; ++i) {
      for (int c = 0; c < p.value_dim; ++c) {
        out[static_cast<std::size_t>((i * p.n_heads + h) * p.value_dim + c)] = r.out(i, c);
      }
    }
  }
  return out;
}

}  // namespace posenc::reference
