// MLA decoupled RoPE float kernels (DeepSeek-V2/V3, Kimi K2). Formula: see reference/mla.hpp.
//
// Contract
//   what:         mla_rope_apply rotates, in place, the dr-channel tail of every query head
//                 and the one shared k_pe head per token, de-interleaving first for an
//                 interleaved checkpoint (the output is in HF's permuted order); the cache is
//                 an optimized::RopeCache of mla_rope_params(p) (rope_cache_init with the
//                 rule's inv_freq and attention factor). mla_assemble_keys broadcasts k_pe
//                 next to each head's k_nope, so any attention kernel (optimized/attention.hpp
//                 with AttentionScale::kGiven, scale = mla_softmax_scale) computes the scores
//   error metric: per rotated pair, the RoPE kernel's float bound (kRopeMaxError *
//                 eps_f32 * a * (|x_a| + |x_b|), optimized/rope.hpp: the same two products
//                 and one sum from the same float cos/sin); the nope channels, the permutation
//                 and the key assembly are exact copies
//   layout:       q [T, H, dn + dr] (nope first), k_pe [T, dr], k_nope [T, H, dn], keys out
//                 [T, H, dn + dr]; row t uses the cache's position t
//   threading:    OpenMP over tokens; every element by the same instruction sequence, so the
//                 bits do not depend on the thread count
#pragma once
#include <cstdint>

#include "optimized/rope.hpp"
#include "reference/common/span.hpp"
#include "reference/mla.hpp"

namespace posenc::optimized {

using reference::MlaParams;

/// Rotates the rope tails of q [T, H, dn + dr] and k_pe [T, dr] in place (T = cache positions).
void mla_rope_apply(const MlaParams& p, const RopeCache& cache, span<float> q, span<float> k_pe);

/// keys [T, H, dn + dr] = [k_nope[t, h], k_pe[t]] for every head h.
void mla_assemble_keys(const MlaParams& p, std::int64_t tokens, span<const float> k_nope,
                       span<const float> k_pe, span<float> keys);

}  // namespace posenc::optimized
