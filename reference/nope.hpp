// -----------------------------------------------------------------------------
// NoPE: no positional encoding (reference)
// -----------------------------------------------------------------------------
// Formula: o = attention(q, k, v) with the causal mask and no positional term at all
// (reference/attention.hpp): s_ij = q_i . k_j / sqrt(d), key j visible iff j <= i.
// Order enters only through the causal mask, so:
//   - without a mask, attention is permutation-equivariant (permuting tokens permutes outputs);
//   - with the causal mask, output 0 equals v_0, and reordering tokens changes outputs.
//
// Source: A. Kazemnejad, I. Padhi, K. Natesan Ramamurthy, P. Das, S. Reddy, "The Impact of
//   Positional Encoding on Length Generalization in Transformers", arXiv:2305.19466v2, Sec. 2
//   (NoPE: decoder-only, causal mask, no positional term).
// Index note: none (no positions).
// Names elsewhere: HF SmolLM3 `no_rope_layers` (a layer schedule: 1 = RoPE, 0 = NoPE), Llama 4
//   `no_rope_layers`; in ggml a layer that skips ggml_rope.
// Not modelled: per-layer schedules (which layers skip RoPE is a config question, bug class S of
//   docs/bug-classes.md); this file is the NoPE layer itself.
#pragma once
#include <cstdint>
#include <vector>

#include "reference/attention.hpp"

namespace posenc::reference {

/// A NoPE layer's attention params: the given shapes with the causal mask switched on.
inline AttentionParams nope_params(AttentionParams p) {
  p.causal = true;
  return p;
}

/// NoPE attention, no positional term; tensors as attention_forward. causal_mask = false is
/// the bidirectional (encoder) form, which is permutation-equivariant.
template <class Real>
std::vector<Real> nope_forward(const AttentionParams& p, std::int64_t tq, std::int64_t tk,
                               const std::vector<Real>& q, const std::vector<Real>& k,
                               const std::vector<Real>& v, bool causal_mask = true) {
  AttentionParams pp = p;
  pp.causal = causal_mask;
  return attention_forward<Real>(pp, AttentionMask{}, tq, tk, q, k, v);
}

}  // namespace posenc::reference
