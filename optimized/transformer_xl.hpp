// Transformer-XL relative attention fused into the tiled attention kernel. Formula: see
// reference/transformer_xl.hpp.
//
// Contract
//   dtypes:       float q, k, v, r_w_bias, r_r_bias, r_net and output; u . k in double rounded
//                 once to float; the sinusoid R(pos) in double rounded once to float, the r table
//                 r_h(pos) = W_r R(pos) a float GEMM (d_model terms), BD = fl(scale (q + v)) .
//                 r_h(pos) a float GEMM (d_head terms); attention itself is optimized/attention's
//   positions:    exact integers: pos = min(mlen + i - j, clamp_len) for every visible key
//   error metric: the attention output's (optimized/attention.hpp), with bias_ij = scale *
//                 (u . k_j + (q_i + v) . r_h(pos)) and the score scale
//                   S_ij = scale * (sum_c |q_ic k_jc| + |u . k_j| + sum_c |q_ic + v_c| |r|_c(pos)),
//                   |r|_c(pos) = sum_m |W_r[c, m] R_m(pos)|:
//                   |o - o*| <= kTransformerXlMaxError * eps_f32 * (A_ic + B_ic)
//                 BD is a float dot product of d_head terms like q . k (whose scale is sum_c
//                 |q_ic k_jc|), of float r entries whose own rounding (d_model terms, and R's)
//                 scales with |r|_c; empirical like the kernel's (MatchesOracleWithinBound
//                 measures the margin), not a worst-case proof
//   valid range:  0 <= qlen <= klen; klen - qlen = mlen memory tokens; distances below 2^31
//   layout:       q [qlen, H, d_head]; k, v [klen, H, d_head]; r_w_bias, r_r_bias [H, d_head];
//                 r_net [H * d_head, d_model] (nn.Linear weight); out [qlen, H, d_head]
//   memory:       TransformerXlBias holds u . k [H, klen] and the r table [H, P, d_head] over
//                 the P = min(klen - 1, clamp_len) + 1 distinct positions; BD is built per
//                 (head, 64-query block) in the attention kernel's per-thread scratch ([64, P],
//                 begin_block) and gathered by fill_block (a direct gather instead of the
//                 rel-shift); no T x T x d intermediate, no [T, T] nor [H, T, P] table; future
//                 keys (masked) read nothing
//   tables:       the r table is float Eigen GEMMs over fixed blocks of 64 positions; a query
//                 block's BD is one GEMM [nb, d] x [d, np] over the positions its rows can see
//                 (pos < np = min(P, mlen + i0 + nb + 1)), the causal triangle; fill_block reads
//                 only entries its block wrote
//   threading:    the r table and u . k are built with OpenMP over fixed blocks, schedule
//                 static, Eigen single-threaded inside; a block's BD depends on (head, block)
//                 only, never on the thread that builds it; fill is const and thread-safe; bits
//                 do not depend on the thread count
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "optimized/attention.hpp"
#include "reference/common/span.hpp"
#include "reference/transformer_xl.hpp"  // TransformerXlParams: the reference defines the contract

namespace posenc::optimized {

using reference::TransformerXlParams;

/// Output bound of transformer_xl_forward in eps_f32 * (A + B) units (contract above): that of
/// attention_forward, with the bias's float tables inside the score scale S.
inline constexpr double kTransformerXlMaxError = kAttentionMaxError;

/// Number of distinct sinusoid positions of a call with klen keys: min(klen - 1, clamp_len) + 1
/// (klen when clamp_len <= 0); 0 when klen == 0.
std::int64_t txl_position_count(const TransformerXlParams& p, std::int64_t klen);

/// r_h(pos) for pos = 0 .. n_pos - 1, [n_pos, H * d_head] in double (W_r R(pos)).
std::vector<double> txl_r_table(const TransformerXlParams& p, std::int64_t n_pos,
                                span<const float> w_r);

/// r_h(pos) in float, head-major with rows in descending position order: [H, n_pos, d_head],
/// row y of head h = W_r[h] R(n_pos - 1 - y) (R from sincos in double rounded once to float, a
/// float GEMM of d_model terms per entry).
std::vector<float> txl_r_table_f32(const TransformerXlParams& p, std::int64_t n_pos,
                                   span<const float> w_r);

/// The engines' positional table pos_emb [klen, d_model]: row r = R(min(klen - 1 - r,
/// clamp_len)) (descending), evaluated in double and rounded once to float.
void txl_pos_emb(const TransformerXlParams& p, std::int64_t klen, span<float> out);

/// The Transformer-XL score terms as an AttentionBias (the kernel adds scale * q . k itself).
class TransformerXlBias final : public AttentionBias {
 public:
  /// q and r_r_bias are read again by begin_block() / fill(): they must outlive the bias.
  TransformerXlBias(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                    span<const float> q, span<const float> k, span<const float> r_w_bias,
                    span<const float> r_r_bias, span<const float> r_net);
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override;
  std::size_t block_scratch() const override;
  void begin_block(int head, std::int64_t q0, int nq, float* scratch) const override;
  void fill_block(const float* scratch, int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                  float* tile) const override;
  /// The sinusoid position query i reads for key j: clamp(mlen + i - j), or -1 for a future key.
  std::int32_t position(std::int64_t i, std::int64_t j) const;
  std::int64_t n_positions() const { return n_pos_; }

 private:
  /// Positions 0 .. np - 1 whose BD a block of nq queries from q0 computes.
  std::int64_t block_positions(std::int64_t q0, int nq) const;
  TransformerXlParams p_;
  std::int64_t qlen_ = 0, klen_ = 0, mlen_ = 0, n_pos_ = 0;
  double scale_ = 1.0;
  span<const float> q_, v_;
  std::vector<float> uk_;     // [H, klen]: scale * u_h . k_j
  std::vector<float> r_rev_;  // [H, n_pos, d_head]: row y of head h = r_h(n_pos - 1 - y), float
};
/// Transformer-XL attention (causal with mlen = klen - qlen memory keys, same_length as a
/// window of mem_len keys), the relative terms fused per tile. out [qlen, H, d_head].
void transformer_xl_forward(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                            span<const float> q, span<const float> k, span<const float> v,
                            span<const float> r_w_bias, span<const float> r_r_bias,
                            span<const float> r_net, span<float> out);

}  // namespace posenc::optimized
