// ALiBi float kernels. Formula: see reference/alibi.hpp; contract: optimized/alibi.hpp.
#include "optimized/alibi.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include <omp.h>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {

std::vector<float> alibi_slopes(const AlibiParams& p) {
  reference::alibi_check(p, "alibi_slopes");
  std::vector<float> m(static_cast<std::size_t>(p.n_heads));
  for (int h = 0; h < p.n_heads; ++h) {
    int num = 0, den = 1;
    const int head = POSENC_MUTANT("opt_alibi_slopes_reversed") ? p.n_heads - 1 - h : h;
    reference::alibi_slope_exponent(p.n_heads, head, &num, &den);
    // 2^(-num/den): exact when den divides num, else exp2 in long double rounded once.
    m[h] = num % den == 0 ? std::ldexp(1.0f, -(num / den))
                          : static_cast<float>(std::exp2(-static_cast<long double>(num) / den));
  }
  return m;
}

AlibiBias::AlibiBias(const AlibiParams& a, const AttentionParams& p, std::int64_t tk)
    : form_(a.form), slopes_(alibi_slopes(a)), query_offset_(p.query_offset), tk_(tk) {
  if (a.n_heads != p.n_heads) {
    throw_invalid("AlibiBias", "alibi n_heads must equal attention n_heads " +
                                   std::to_string(p.n_heads), a.n_heads);
  }
  if (POSENC_MUTANT("opt_alibi_ignores_query_offset")) query_offset_ = 0;
}

void AlibiBias::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const {
  float m = slopes_[static_cast<std::size_t>(head)];
  if (POSENC_MUTANT("opt_alibi_thread_dependent") && omp_get_thread_num() != 0) m *= 1.0f + 0x1p-20f;
  for (int r = 0; r < nq; ++r) {
    const std::int64_t qpos = query_offset_ + q0 + r;
    float* row = tile + static_cast<std::ptrdiff_t>(r) * nk;
    switch (form_) {
      case AlibiForm::kPaper:
#pragma omp simd
        for (int c = 0; c < nk; ++c) row[c] = m * static_cast<float>(k0 + c - qpos);
        break;
      case AlibiForm::kBloom:
#pragma omp simd
        for (int c = 0; c < nk; ++c) row[c] = m * static_cast<float>(k0 + c);
        break;
      case AlibiForm::kMpt:
#pragma omp simd
        for (int c = 0; c < nk; ++c) row[c] = m * static_cast<float>(k0 + c - (tk_ - 1));
        break;
      case AlibiForm::kSymmetric:
        for (int c = 0; c < nk; ++c) row[c] = -m * static_cast<float>(std::llabs(qpos - (k0 + c)));
        break;
    }
  }
}

void alibi_attention_forward(const AlibiParams& a, const AttentionParams& p,
                             const AttentionMask& m, std::int64_t tq, std::int64_t tk,
                             span<const float> q, span<const float> k, span<const float> v,
                             span<float> out) {
  const AlibiBias bias(a, p, tk);
  attention_forward(p, m, tq, tk, q, k, v, out, &bias);
}

}  // namespace posenc::optimized
