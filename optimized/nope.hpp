// NoPE float kernel. Formula: see reference/nope.hpp.
//
// Contract: that of optimized/attention.hpp (same bound, kAttentionMaxError), with the causal
// mask always on and no bias. The kernel skips key tiles after the query block, so it does
// about half the work of full attention.
#pragma once
#include <cstdint>

#include "optimized/attention.hpp"
#include "reference/nope.hpp"

namespace posenc::optimized {

/// out = causal attention(q, k, v) without any positional term.
void nope_forward(const AttentionParams& p, std::int64_t tq, std::int64_t tk, span<const float> q,
                  span<const float> k, span<const float> v, span<float> out);

}  // namespace posenc::optimized
