// DeBERTa-v2/v3 disentangled attention fused into the tiled attention kernel. Formula: see
// reference/deberta.hpp.
//
// Contract
//   dtypes:       float rel_embeddings, projection weights, q, k, v and output; every product
//                 and sum in float
//   relative positions and indices: exact (bit-identical int32 to the reference's exact log
//                 buckets): evaluated once per distinct relative position of the block
//                 (Tq + Tk - 1 calls), never per (i, j)
//   projections:  Kr = P Wk^T + bk, Qr = P Wq^T + bq in float ([2k, H*d]; share_att_key picks
//                 key_proj / query_proj, else pos_key_proj / pos_query_proj)
//   relative term: per head, C2P = Q Kr^T / sqrt(d sf) [Tq, 2k] and P2C = K Qr^T / sqrt(d sf)
//                 [Tk, 2k] over the 2k bucket band (float Eigen GEMMs, then the float scale:
//                 float dot products whose order depends on the block only), plus an
//                 index-major copy of P2C's columns for the indices that cover runs of >= 16
//                 relative positions (beyond the buckets: the clamped ends); fill adds
//                 C2P[i, c_ij] + P2C[j, c_ij] per tile, such a run as one C2P value plus
//                 contiguous P2C values: no Tq x Tk x d (nor Tq x Tk) tensor
//   tables:       C2P per (head, 64-query block) in the attention kernel's per-thread scratch
//                 (begin_block: one GEMM [64, d] x [d, 2k]); P2C per (head, 256-key block),
//                 either all heads per call (the constructor) or, with per_thread_p2c, one head
//                 at a time in each thread's scratch, rebuilt when the thread's tasks move to
//                 another head (deberta_forward picks it when it has fewer threads than heads:
//                 [Tk, 2k] per thread instead of [H, Tk, 2k] per call); the same bits either way
//   score scale:  c2c through the attention kernel's given scale 1/sqrt(d sf) (as a float)
//   error metric: the attention output's (optimized/attention.hpp) with the score condition
//                   S_ij = (sum_x |q_ix k_jx| + sum_x |q_ix| |Kr|_cx + sum_x |k_jx| |Qr|_cx)
//                          / sqrt(d sf),   |Kr|_cx = sum_m |P_cm Wk_xm| + |bk_x| (|Qr| alike)
//                   |o - o*| <= kDebertaMaxError * eps_f32 * (A_ic + B_ic)
//                 empirical like the kernel's (measured in properties/deberta_test.cpp), not a
//                 worst-case proof
//   valid range:  any Tq, Tk, query_offset >= 0 (queries at query_offset + i: rows of the full
//                 forward); scores finite in float
//   layout:       rel_embeddings [2k, hidden]; weights [H*d, hidden], biases [H*d] (HF
//                 nn.Linear); q [Tq, H, d], k [Tk, H, d], v [Tk, H, dv], out [Tq, H, dv];
//                 relative / index matrices [Tq, Tk]
//   threading:    OpenMP over fixed blocks (64 rows of P for Kr / Qr; head x 256 keys for
//                 P2C; C2P per attention task), schedule static, one single-threaded Eigen GEMM
//                 per block; DebertaBias::fill is const and thread-safe; bits do not depend on
//                 the thread count
//   lifetime:     q, k and the layers are read again by begin_block(): they must outlive the
//                 bias
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "optimized/attention.hpp"
#include "reference/common/span.hpp"
#include "reference/deberta.hpp"  // DebertaParams: the reference defines the contract

namespace posenc::optimized {

using reference::DebertaParams;
using DebertaWeightsF32 = reference::DebertaWeights<float>;

/// Output bound of deberta_forward in eps_f32 * (A + B) units, B with the S_ij above. The
/// relative term adds at most three float roundings per score (the projection, the dot
/// product's own, the scale) measured against |Kr| / |Qr|, which S_ij already counts; the
/// kernel's empirical 16 covers them (MatchesOracleWithinBound measures the margin).
inline constexpr double kDebertaMaxError = kAttentionMaxError;

/// Kr and Qr ([2k, H*d] each, empty when unused) in float.
reference::DebertaPositionLayers<float> deberta_position_layers(const DebertaParams& p,
                                                                const DebertaWeightsF32& w);

/// The relative term as an AttentionBias: C2P[i, c_ij] + P2C[j, c_ij], pre-divided.
class DebertaBias final : public AttentionBias {
 public:
  DebertaBias(const DebertaParams& p, const reference::DebertaPositionLayers<float>& layers,
              span<const float> q, span<const float> k, std::int64_t tq, std::int64_t tk,
              std::int64_t query_offset, bool per_thread_p2c = false);
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override;
  std::size_t block_scratch() const override;
  void begin_block(int head, std::int64_t q0, int nq, float* scratch) const override;
  void fill_block(const float* scratch, int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                  float* tile) const override;
  /// Relative position (bucketed) and table rows of (query row i, key j).
  std::int32_t relative(std::int64_t i, std::int64_t j) const {
    return rel_[static_cast<std::size_t>(query_offset_ + i - j - d_min_)];
  }
  std::int32_t c2p_index(std::int64_t i, std::int64_t j) const {
    return c2p_idx_[static_cast<std::size_t>(query_offset_ + i - j - d_min_)];
  }
  std::int32_t p2c_index(std::int64_t i, std::int64_t j) const {
    return p2c_idx_[static_cast<std::size_t>(query_offset_ + i - j - d_min_)];
  }

 private:
  DebertaParams p_;
  std::int64_t tq_ = 0, tk_ = 0, query_offset_ = 0, d_min_ = 0, k2_ = 0;
  std::vector<std::int32_t> rel_, c2p_idx_, p2c_idx_;  // by delta - d_min
  // fill()'s segments by delta - d_min: the first x of its segment, and whether the segment is
  // one long run of an index pair (else a stretch of short runs)
  std::vector<std::int32_t> seg_lo_;
  std::vector<std::uint8_t> seg_long_;
  // C2P is built per query block (begin_block) from q and Kr, which must outlive the bias.
  float scale_ = 1.0f;
  span<const float> q_, kr_;
  // Tables (uninitialised on allocation; the GEMMs write every entry):
  std::unique_ptr<float[]> p2c_;  // [H, Tk, 2k], rows p2c_ld_ floats apart
  std::int64_t p2c_ld_ = 0;
  /// P2C of keys [j0, j0 + 256) of one head into its table p2c [Tk, p2c_ld_] and the long
  /// runs' copy p2c_long [n_long, Tk] (one GEMM; the same bits wherever it runs).
  void p2c_block(int head, std::int64_t j0, float* p2c, float* p2c_long) const;
  std::int64_t c2p_scratch(int nq) const;  // floats of nq C2P rows in the scratch
  std::int64_t p2c_scratch() const;        // floats of one head's P2C in the scratch (or 0)
  /// Scratch: [kScratchHeader] (float 0: the head whose P2C it holds, + 1), C2P [64, 2k],
  /// then with per_thread_p2c one head's P2C [Tk, p2c_ld_] and long runs [n_long, Tk].
  static constexpr std::int64_t kScratchHeader = 16;
  bool per_thread_p2c_ = false;
  span<const float> k_, qr_;
  std::vector<std::int32_t> long_index_;  // by slot: the p2c index of a long run
  std::vector<std::int32_t> long_slot_;   // by p2c index: its row in p2c_long_, or -1
  std::int64_t n_long_ = 0;               // p2c indices with a long run
  std::unique_ptr<float[]> p2c_long_;     // [H, n_long, Tk]: those indices' P2C, index-major
};

/// DeBERTa self-attention (no causal mask) with the relative term fused per tile; mask: key
/// padding / allowed as optimized/attention.hpp.
void deberta_forward(const DebertaParams& p, const AttentionParams& ap, const AttentionMask& mask,
                     std::int64_t tq, std::int64_t tk, const DebertaWeightsF32& w,
                     span<const float> q, span<const float> k, span<const float> v,
                     span<float> out);

/// Probabilities [H, Tq, Tk] of the same computation (for engines that expose them).
void deberta_probs(const DebertaParams& p, const AttentionParams& ap, const AttentionMask& mask,
                   std::int64_t tq, std::int64_t tk, const DebertaWeightsF32& w,
                   span<const float> q, span<const float> k, span<float> probs);

}  // namespace posenc::optimized
