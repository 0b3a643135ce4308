// Shaw relative attention kernel. Formula: see reference/shaw.hpp; contract: optimized/shaw.hpp.
//
// Numerics: the index is an exact integer (the reference's clip, cached per distance). The score
// term rounds twice per (query, table row): the float dot product q_i . aK_r over d, then the
// product with the float scale; the attention kernel adds it to its own rounded scale * q.k,
// so the score's error stays a few eps_f32 * S_ij. The value term sums float weights per row
// (the same weights that multiply v, rescaled alike), normalises them with the same 1/l and
// adds 2K + 1 float products per output element: its error is a few eps_f32 * A_ic.
//
// Speed: QA is one float Eigen GEMM per (head, block of 64 query rows): [64, d] x [d, 2K + 1],
// Eigen single-threaded inside, so each entry's order depends on the block, not the threads.
#define EIGEN_DONT_PARALLELIZE  // one OpenMP level: blocks, not GEMM threads
#include "optimized/shaw.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {

ShawIndexTable shaw_index_table(const ShawParams& p, std::int64_t tq, std::int64_t tk,
                                std::int64_t query_offset) {
  constexpr const char* fn = "shaw_index_table";
  reference::shaw_check(p, fn);
  if (tq < 0) throw_invalid(fn, "query length must be >= 0", tq);
  if (tk < 0) throw_invalid(fn, "key length must be >= 0", tk);
  if (query_offset < 0) throw_invalid(fn, "query_offset must be >= 0", query_offset);
  ShawIndexTable t;
  t.r_min = -(query_offset + tq - 1);
  if (tq == 0 || tk == 0) return t;
  const std::int64_t r_max = tk - 1 - query_offset;
  const bool flip = POSENC_MUTANT("opt_shaw_sign_flipped");
  const std::int64_t kk = p.max_relative_position - (POSENC_MUTANT("opt_shaw_clip_off_by_one") ? 1 : 0);
  t.index.resize(static_cast<std::size_t>(r_max - t.r_min + 1));
  for (std::int64_t r = t.r_min; r <= r_max; ++r) {
    // row = clip(r, -K, K) + K, the reference's shaw_index(p, 0, r)
    const std::int64_t x = std::clamp<std::int64_t>(flip ? -r : r, -kk, kk);
    t.index[static_cast<std::size_t>(r - t.r_min)] =
        static_cast<std::int32_t>(x + p.max_relative_position);
  }
  return t;
}

void shaw_index_matrix(const ShawParams& p, std::int64_t tq, std::int64_t tk,
                       std::int64_t query_offset, span<std::int32_t> index) {
  constexpr const char* fn = "shaw_index_matrix";
  const ShawIndexTable t = shaw_index_table(p, tq, tk, query_offset);
  if (index.size() != static_cast<std::size_t>(tq * tk)) {
    throw_invalid(fn, "index must have Tq * Tk = " + std::to_string(tq * tk) + " entries",
                  index.size());
  }
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) index[i * tk + j] = t.at(j - (query_offset + i));
  }
}

ShawRelative::ShawRelative(const ShawParams& p, const AttentionParams& ap, std::int64_t tq,
                           std::int64_t tk, span<const float> q, span<const float> rel_k,
                           span<const float> rel_v, ShawIndexTable index)
    : rows_(reference::shaw_table_rows(p)),
      dv_(ap.value_dim),
      tq_(tq),
      query_offset_(ap.query_offset),
      index_(std::move(index)) {
  constexpr const char* fn = "ShawRelative";
  reference::shaw_check_shapes(p, ap, tq, tk, q.size(), rel_k.size(), rel_v.size(), fn);
  const std::size_t want = tq > 0 && tk > 0 ? static_cast<std::size_t>(tq + tk - 1) : 0;
  if (index_.index.size() != want || (want && index_.r_min != -(ap.query_offset + tq - 1))) {
    throw_invalid(fn, "index must cover the distances of this block (Tq + Tk - 1 entries)",
                  index_.index.size());
  }
  for (std::int32_t x : index_.index) {
    if (x < 0 || x >= rows_) throw_invalid(fn, "index rows must lie in [0, 2K]", x);
  }
  rel_v_.assign(rel_v.begin(), rel_v.end());
  const int H = ap.n_heads, d = ap.head_dim, W = rows_;
  float scale = static_cast<float>(reference::attention_scale<double>(ap));
  if (POSENC_MUTANT("opt_shaw_bias_unscaled")) scale = 1.0f;
  qa_.resize(static_cast<std::size_t>(H) * tq * W);
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
  constexpr std::int64_t kBlock = 64;  // query rows per GEMM (fixed: bits independent of threads)
  const std::int64_t n_blocks = (tq + kBlock - 1) / kBlock;
  const Eigen::Map<const RowMatrix> ak(rel_k.data(), W, d);
#pragma omp parallel for schedule(static)
  for (std::int64_t hb = 0; hb < H * n_blocks; ++hb) {
    const int h = static_cast<int>(hb / n_blocks);
    const std::int64_t i0 = (hb % n_blocks) * kBlock, nb = std::min(kBlock, tq - i0);
    const Strided qm(q.data() + (i0 * H + h) * d, nb, d, Eigen::OuterStride<>(H * d));
    Eigen::Map<RowMatrix> out(qa_.data() + (static_cast<std::size_t>(h) * tq + i0) * W, nb, W);
    out.noalias() = qm * ak.transpose();
    out *= scale;
  }
}

void ShawRelative::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                        float* tile) const {
  for (int r = 0; r < nq; ++r) {
    const float* qa = qa_.data() + (static_cast<std::size_t>(head) * tq_ + q0 + r) * rows_;
    const std::int64_t base = k0 - (query_offset_ + q0 + r);
    float* row = tile + static_cast<std::size_t>(r) * nk;
    for (int c = 0; c < nk; ++c) row[c] = qa[index_.at(base + c)];
  }
  if (POSENC_MUTANT("opt_shaw_thread_dependent")) mutant_nudge(tile, nq * nk, omp_get_thread_num());
}

void ShawRelative::slot_tile(int, std::int64_t q0, int nq, std::int64_t k0, int nk,
                             std::int32_t* tile) const {
  for (int r = 0; r < nq; ++r) {
    const std::int64_t start = k0 - (query_offset_ + q0 + r) - index_.r_min;
    std::memcpy(tile + static_cast<std::size_t>(r) * nk, index_.index.data() + start,
                static_cast<std::size_t>(nk) * sizeof(std::int32_t));
  }
}

void ShawRelative::add(int, std::int64_t, const float* w, float* out) const {
  if (POSENC_MUTANT("opt_shaw_values_dropped")) return;
  for (int s = 0; s < rows_; ++s) {
    if (w[s] == 0.0f) continue;
    const float* a = rel_v_.data() + static_cast<std::size_t>(s) * dv_;
    for (int c = 0; c < dv_; ++c) out[c] += w[s] * a[c];
  }
}

void shaw_forward(const ShawParams& p, const AttentionParams& ap, const AttentionMask& m,
                  std::int64_t tq, std::int64_t tk, span<const float> rel_k,
                  span<const float> rel_v, span<const float> q, span<const float> k,
                  span<const float> v, span<float> out) {
  const ShawRelative rel(p, ap, tq, tk, q, rel_k, rel_v,
                         shaw_index_table(p, tq, tk, ap.query_offset));
  attention_forward(ap, m, tq, tk, q, k, v, out, &rel, &rel);
}

void shaw_probs(const ShawParams& p, const AttentionParams& ap, const AttentionMask& m,
                std::int64_t tq, std::int64_t tk, span<const float> rel_k, span<const float> q,
                span<const float> k, span<float> probs) {
  // The value table does not enter the probabilities: a zero table of the right size.
  const std::vector<float> no_values(
      static_cast<std::size_t>(reference::shaw_table_rows(p)) * std::max(ap.value_dim, 0), 0.0f);
  const ShawRelative rel(p, ap, tq, tk, q, rel_k, no_values,
                         shaw_index_table(p, tq, tk, ap.query_offset));
  attention_probs(ap, m, tq, tk, q, k, probs, &rel);
}

}  // namespace posenc::optimized
