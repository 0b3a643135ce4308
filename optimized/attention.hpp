// Attention float kernel: tiled, online softmax. Formula: see reference/attention.hpp.
//
// Contract
//   dtypes:       float in, float out; scores, softmax statistics and accumulators in float
//   error metric: per output element o_ic, with p the exact probabilities,
//                   A_ic = sum_j p_ij |v_jc|                                 (value scale)
//                   B_ic = sum_j p_ij |v_jc - o_ic| (scale |q_i|.|k_j| + |bias_ij|)  (score scale)
//                   |o - o*| <= kAttentionMaxError * eps_f32 * (A_ic + B_ic)
//                 the bound is empirical (measured with margin over random shapes up to
//                 Tq, Tk <= 300, d <= 128; docs/schemes/attention.md), not a worst-case
//                 proof: a float dot
//                 product of d terms can in the worst case err by d/2 eps. The weights come
//                 from exp_f32 (relative error <= kExpF32MaxError = 2 eps_f32 per weight,
//                 optimized/fast_math.hpp): weights off by relative delta move o_ic by at
//                 most delta * sum_j p_ij |v_jc - o_ic| <= 2 delta A_ic = 4 eps * A_ic over a
//                 correctly rounded exp, inside the 16 (the properties pass with it)
//   valid range:  any Tq, Tk >= 0; scores must stay finite in float
//   layout:       q [Tq, H, d], k [Tk, Hkv, d], v [Tk, Hkv, dv], out [Tq, H, dv], row-major;
//                 out must not alias the inputs
//   masks:        causal, sliding window, chunks (Llama 4), key padding and an arbitrary
//                 [Tq, Tk] boolean mask, with query i at absolute position query_offset + i; a
//                 fully masked row gives the zero vector (as the reference); causal, window and
//                 chunk masks trim the key range a task visits, so chunked attention costs about
//                 Tq * C key visits, not Tq * Tk
//   sinks:        optional per-head sink logits (GPT-OSS) fold into the running maximum and sum
//                 after the last key chunk (std::exp, a rescale as for a key chunk); the bound
//                 keeps its form, with p the exact probabilities (which sum to < 1)
//   bias:         an AttentionBias fills one [64-query tile, <= 256-key chunk] block at a time
//                 (chunks on a fixed 256-key grid, trimmed to the keys the masks leave visible),
//                 after building its per-block tables (begin_block) once per (head, query tile)
//   value hook:   optional (Shaw's relative values): an AttentionValueHook names a slot per
//                 (query, key) a chunk at a time; the kernel sums the unnormalised weights per
//                 slot next to the accumulator (rescaled with it), normalises them with the
//                 same 1/l and lets the hook add sum_s w_s row_s to the output row
//   memory:       per thread S and bias [64, 256] floats (64 KiB each), acc [64, dv], the
//                 bias's block_scratch(), plus Eigen's GEMM packing; no Tq x Tk matrix is ever
//                 materialised
//   threading:    OpenMP over (head, 64-query block) tasks, schedule static; each output row is
//                 computed by one task with a fixed chunk order; Eigen GEMMs run 1-threaded
#pragma once
#include <cstddef>
#include <cstdint>

#include "reference/attention.hpp"
#include "reference/common/span.hpp"

namespace posenc::optimized {

using reference::AttentionMask;
using reference::AttentionParams;
using reference::AttentionScale;

/// Empirical bound of attention_forward in eps_f32 * (A + B) units (contract above).
inline constexpr double kAttentionMaxError = 16.0;

/// Query and key tile sizes.
inline constexpr int kAttentionQueryTile = 64;
inline constexpr int kAttentionKeyTile = 256;

/// An additive score bias computed per tile (ALiBi, T5, ...).
///
/// Per-block tables (optional): a bias whose terms depend on the query (Transformer-XL's
/// (q + v) . r, DeBERTa's C2P) can build them per (head, query block) instead of per call, in
/// scratch the kernel keeps per thread. attention_forward then calls, on the thread that runs a
/// (head, query block) task, begin_block() once with that thread's block_scratch() floats and
/// then fill_block() with the same scratch for each key chunk of the block. Callers that do not
/// (attention_probs, tests) call fill(), which a bias with per-block tables implements as
/// begin_block() into its own buffer and fill_block(). Whatever begin_block() writes must depend
/// on (head, q0, nq) only, never on the thread: bits do not depend on the thread count.
class AttentionBias {
 public:
  virtual ~AttentionBias() = default;
  /// tile[r * nk + c] = bias(head, query q0 + r, key k0 + c), for r < nq, c < nk.
  virtual void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                    float* tile) const = 0;
  /// Floats of per-thread scratch that begin_block() writes (0: no per-block tables).
  virtual std::size_t block_scratch() const { return 0; }
  /// Builds the tables of queries [q0, q0 + nq) (nq <= kAttentionQueryTile) of one head into
  /// scratch (block_scratch() floats).
  virtual void begin_block(int /*head*/, std::int64_t /*q0*/, int /*nq*/,
                           float* /*scratch*/) const {}
  /// fill() for a tile of the block that begin_block(head, q0, nq, scratch) prepared.
  virtual void fill_block(const float* /*scratch*/, int head, std::int64_t q0, int nq,
                          std::int64_t k0, int nk, float* tile) const {
    fill(head, q0, nq, k0, nk, tile);
  }
};

/// An additive value term through per-(query, key) slots (Shaw's aV): the output row i gets
/// sum_j p_ij row(slot(i, j)) on top of sum_j p_ij v_j.
class AttentionValueHook {
 public:
  virtual ~AttentionValueHook() = default;
  /// Number of slots W (Shaw: 2K + 1).
  virtual int slots() const = 0;
  /// tile[r * nk + c] = slot of (query q0 + r, key k0 + c), in [0, slots()).
  virtual void slot_tile(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                         std::int32_t* tile) const = 0;
  /// out[0 .. dv) += sum_s w[s] * row(head, s); w holds the normalised weights of row i.
  virtual void add(int head, std::int64_t i, const float* w, float* out) const = 0;
};

/// out = attention(q, k, v) for all heads; bias and value_hook may be null.
void attention_forward(const AttentionParams& p, const AttentionMask& m, std::int64_t tq,
                       std::int64_t tk, span<const float> q, span<const float> k,
                       span<const float> v, span<float> out, const AttentionBias* bias = nullptr,
                       const AttentionValueHook* value_hook = nullptr);

/// Probabilities [H, Tq, Tk] with the same scale, bias and masks (two-pass softmax in float,
/// one row per OpenMP iteration). For engines that expose probabilities and for checking bias
/// schemes stage by stage; attention_forward never builds this matrix.
void attention_probs(const AttentionParams& p, const AttentionMask& m, std::int64_t tq,
                     std::int64_t tk, span<const float> q, span<const float> k, span<float> probs,
                     const AttentionBias* bias = nullptr);

}  // namespace posenc::optimized
