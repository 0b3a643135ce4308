// Shaw relative keys and values fused into the tiled attention kernel. Formula: see
// reference/shaw.hpp.
//
// Contract
//   dtypes:       float tables, q, k, v and output (optimized/attention.hpp computes in float)
//   indices:      exact (bit-identical int32 to reference::shaw_index): one int32 per relative
//                 distance that occurs, r in [-(query_offset + Tq - 1), Tk - 1 - query_offset]
//                 (Tq + Tk - 1 entries, not Tq * Tk)
//   score term:   QA = Q aK^T once per call ([H, Tq, 2K + 1] floats, float dot products over d,
//                 times the float scale), gathered per tile: bias_ij = scale * (q_i . aK[idx_ij])
//   value term:   the kernel sums each row's softmax weights per table row (w_ir, 2K + 1 floats
//                 per query row, rescaled with the online softmax), and adds w_i aV once per row
//                 (optimized/attention.hpp AttentionValueHook); no [Tq, Tk, d] tensor is built
//   error metric: per output element, with p the exact probabilities, r = idx_ij,
//                   A_ic = sum_j p_ij (|v_jc| + |aV_rc|)
//                   S_ij = scale (sum_x |q_ix k_jx| + sum_x |q_ix aK_rx|)
//                   B_ic = sum_j p_ij |v_jc + aV_rc - o_ic| S_ij
//                   |o - o*| <= kShawMaxError * eps_f32 * (A_ic + B_ic)
//                 empirical, as optimized/attention.hpp's bound (a test measures it)
//   valid range:  any Tq, Tk >= 0, query_offset >= 0, K >= 1; scores finite in float
//   layout:       rel_k [2K + 1, d], rel_v [2K + 1, dv] row-major, shared by all heads;
//                 q [Tq, H, d], k [Tk, Hkv, d], v [Tk, Hkv, dv], out [Tq, H, dv];
//                 probs [H, Tq, Tk]; index [Tq, Tk]
//   threading:    QA is built by an OpenMP loop over (head, 64-query block) Eigen GEMMs,
//                 one block per thread; ShawRelative's hooks are const and thread-safe; bits
//                 do not depend on the thread count
#pragma once
#include <cstdint>
#include <vector>

#include "optimized/attention.hpp"
#include "reference/common/span.hpp"
#include "reference/shaw.hpp"  // ShawParams: the reference defines the contract

namespace posenc::optimized {

using reference::ShawParams;

/// Output bound of shaw_forward in eps_f32 * (A + B) units (contract above).
inline constexpr double kShawMaxError = kAttentionMaxError;

/// Table rows of the contiguous range of distances [r_min, r_min + index.size()).
struct ShawIndexTable {
  std::int64_t r_min = 0;
  std::vector<std::int32_t> index;
  /// Row of distance r = key - query (r_min <= r < r_min + size).
  std::int32_t at(std::int64_t r) const { return index[static_cast<std::size_t>(r - r_min)]; }
};

/// Rows of every distance r = j - (query_offset + i) of a [Tq, Tk] block.
ShawIndexTable shaw_index_table(const ShawParams& p, std::int64_t tq, std::int64_t tk,
                                std::int64_t query_offset);

/// The index matrix [Tq, Tk] (for engines that expose it).
void shaw_index_matrix(const ShawParams& p, std::int64_t tq, std::int64_t tk,
                       std::int64_t query_offset, span<std::int32_t> index);

/// Both relative terms for one call: the score bias (AttentionBias) and the relative values
/// (AttentionValueHook) for optimized::attention_forward / attention_probs. `index` maps the
/// distance r = j - (query_offset + i) to a table row (shaw_index_table's; an engine emulation
/// may pass another to model a mistake).
class ShawRelative final : public AttentionBias, public AttentionValueHook {
 public:
  ShawRelative(const ShawParams& p, const AttentionParams& ap, std::int64_t tq, std::int64_t tk,
               span<const float> q, span<const float> rel_k, span<const float> rel_v,
               ShawIndexTable index);
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override;
  int slots() const override { return rows_; }
  void slot_tile(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                 std::int32_t* tile) const override;
  void add(int head, std::int64_t i, const float* w, float* out) const override;
  const ShawIndexTable& index() const { return index_; }

 private:
  int rows_ = 0, dv_ = 0;
  std::int64_t tq_ = 0, query_offset_ = 0;
  ShawIndexTable index_;
  std::vector<float> qa_;     // [H, Tq, rows_]: scale * (q_i . aK_r)
  std::vector<float> rel_v_;  // [rows_, dv]
};

/// Shaw self-attention: out [Tq, H, dv]; masks, scale and query_offset from `ap`.
void shaw_forward(const ShawParams& p, const AttentionParams& ap, const AttentionMask& m,
                  std::int64_t tq, std::int64_t tk, span<const float> rel_k,
                  span<const float> rel_v, span<const float> q, span<const float> k,
                  span<const float> v, span<float> out);

/// Probabilities [H, Tq, Tk] of the same scores (two-pass softmax, optimized::attention_probs).
void shaw_probs(const ShawParams& p, const AttentionParams& ap, const AttentionMask& m,
                std::int64_t tq, std::int64_t tk, span<const float> rel_k, span<const float> q,
                span<const float> k, span<float> probs);

}  // namespace posenc::optimized
