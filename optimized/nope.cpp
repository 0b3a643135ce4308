// NoPE float kernel. Formula: see reference/nope.hpp; contract: optimized/nope.hpp.
#include "optimized/nope.hpp"

#include "reference/common/mutant.hpp"

namespace posenc::optimized {

void nope_forward(const AttentionParams& p, std::int64_t tq, std::int64_t tk, span<const float> q,
                  span<const float> k, span<const float> v, span<float> out) {
  AttentionParams pp = reference::nope_params(p);
  if (POSENC_MUTANT("opt_nope_mask_dropped")) pp.causal = false;
  attention_forward(pp, AttentionMask{}, tq, tk, q, k, v, out);
}

}  // namespace posenc::optimized
