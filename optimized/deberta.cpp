// DeBERTa disentangled attention kernel. Formula: see reference/deberta.hpp; contract:
// optimized/deberta.hpp.
//
// Numerics: relative positions and indices are integers from the reference's exact bucket
// function, one call per relative position that occurs. The float work is the projection of
// the relative table (one dot product of `hidden` terms per element), one dot product of d
// terms per C2P / P2C element, its multiplication by the float scale 1/sqrt(d sf), and in
// fill() one addition C2P + P2C; the attention kernel adds scale * (q . k).
//
// Speed: the projection (P W^T, [2k, hidden] x [hidden, H d]), C2P (per head [Tq, d] x [d, 2k])
// and P2C (per head [Tk, d] x [d, 2k]) are float Eigen GEMMs over fixed blocks (kDebertaRowBlock
// rows of P; 64 queries of one head for C2P, built by begin_block() in the attention task that
// reads it; kDebertaTableBlock keys of one head for P2C), Eigen single-threaded inside: each
// element's summation order depends on the block, never on the thread count. With fewer threads
// than heads each thread holds one head's P2C at a time (4.3 MiB at T = 2048, 2k = 512: it stays
// in the last-level cache and its pages are faulted in once per call, not 35 MiB of [H, Tk, 2k]).
// fill_block() walks a tile row by runs of keys whose relative positions share one (c2p, p2c)
// index pair: outside the bucket's linear band (|delta| > buckets / 2) a run spans many keys,
// and the row is one broadcast C2P value plus a contiguous P2C stretch (the old per-element
// gather, P2C row-major [Tk, 2k], read a different row for every key).
#define EIGEN_DONT_PARALLELIZE  // one OpenMP level: blocks, not GEMM threads
#include "optimized/deberta.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

/// Rows of one table GEMM (a fixed block: bits do not depend on the thread count).
constexpr std::int64_t kDebertaRowBlock = 64;
/// Queries (C2P) or keys (P2C) of one head per table GEMM (fixed, as kDebertaRowBlock): larger
/// than the projection's blocks so that each GEMM packs its [2k, d] operand for more rows.
constexpr std::int64_t kDebertaTableBlock = 256;
/// Index runs of at least this many keys are added as one broadcast plus a contiguous stretch;
/// stretches of shorter runs (the bucket's linear band and the log buckets near it) element by
/// element, without a run's setup per key.
constexpr std::int64_t kDebertaLongRun = 16;

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMatrix>;
using ConstMap = Eigen::Map<const RowMatrix>;
using ConstStrided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using StridedOut = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

/// y = P W^T + b in float, [2k, out]: one GEMM per block of kDebertaRowBlock rows of P.
std::vector<float> project(std::int64_t k2, std::int64_t hidden, std::int64_t out,
                           const std::vector<float>& table, const std::vector<float>& w,
                           const std::vector<float>& b) {
  std::vector<float> y(static_cast<std::size_t>(k2 * out));
  const ConstMap wm(w.data(), out, hidden);
  const std::int64_t n_blocks = (k2 + kDebertaRowBlock - 1) / kDebertaRowBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < n_blocks; ++blk) {
    const std::int64_t r0 = blk * kDebertaRowBlock, nr = std::min(kDebertaRowBlock, k2 - r0);
    const ConstMap pm(table.data() + r0 * hidden, nr, hidden);
    Map ym(y.data() + r0 * out, nr, out);
    ym.noalias() = pm * wm.transpose();
    for (std::int64_t r = 0; r < nr; ++r) {
      for (std::int64_t o = 0; o < out; ++o) ym(r, o) += b[static_cast<std::size_t>(o)];
    }
  }
  return y;
}

/// The scale 1/sqrt(d sf) as the kernel uses it.
double deberta_scale_value(const DebertaParams& p) {
  const int sf =
      POSENC_MUTANT("opt_deberta_scale_factor_dropped") ? 1 : reference::deberta_scale_factor(p);
  return 1.0 / std::sqrt(static_cast<double>(p.head_dim) * sf);
}

AttentionParams kernel_params(const DebertaParams& p, const AttentionParams& ap, const char* fn) {
  AttentionParams pp = reference::deberta_attention_params(ap, p, fn);
  pp.scale = deberta_scale_value(p);
  return pp;
}

}  // namespace

reference::DebertaPositionLayers<float> deberta_position_layers(const DebertaParams& p,
                                                                const DebertaWeightsF32& w) {
  reference::deberta_check_weights(p, w, "deberta_position_layers");
  const std::int64_t k2 = 2 * reference::deberta_att_span(p);
  const std::int64_t out = std::int64_t{p.n_heads} * p.head_dim;
  const bool ignore_share = POSENC_MUTANT("opt_deberta_share_att_key_ignored");
  reference::DebertaPositionLayers<float> l;
  if (p.c2p) {
    const bool content = p.share_att_key || ignore_share;
    l.kr = project(k2, w.hidden, out, w.rel_embeddings, content ? w.key_w : w.pos_key_w,
                   content ? w.key_b : w.pos_key_b);
  }
  if (p.p2c) {
    const bool content = p.share_att_key || ignore_share;
    l.qr = project(k2, w.hidden, out, w.rel_embeddings, content ? w.query_w : w.pos_query_w,
                   content ? w.query_b : w.pos_query_b);
  }
  return l;
}

DebertaBias::DebertaBias(const DebertaParams& p,
                         const reference::DebertaPositionLayers<float>& layers, span<const float> q,
                         span<const float> k, std::int64_t tq, std::int64_t tk,
                         std::int64_t query_offset, bool per_thread_p2c)
    : p_(p), tq_(tq), tk_(tk), query_offset_(query_offset), per_thread_p2c_(per_thread_p2c) {
  constexpr const char* fn = "DebertaBias";
  reference::deberta_check(p, fn);
  if (tq < 0) throw_invalid(fn, "query length must be >= 0", tq);
  if (tk < 0) throw_invalid(fn, "key length must be >= 0", tk);
  if (query_offset < 0) throw_invalid(fn, "query_offset must be >= 0", query_offset);
  const int H = p.n_heads, d = p.head_dim;
  const std::int64_t span_k = reference::deberta_att_span(p);
  k2_ = 2 * span_k;
  if (q.size() != static_cast<std::size_t>(tq * H * d)) {
    throw_invalid(fn, "q must have Tq*H*d elements", q.size());
  }
  if (k.size() != static_cast<std::size_t>(tk * H * d)) {
    throw_invalid(fn, "k must have Tk*H*d elements", k.size());
  }
  const std::size_t table = static_cast<std::size_t>(k2_ * H * d);
  if ((p.c2p && layers.kr.size() != table) || (p.p2c && layers.qr.size() != table)) {
    throw_invalid(fn, "Kr / Qr must have 2k*H*d elements", table);
  }
  // Relative positions delta = query - key that occur: [o - (Tk - 1), o + Tq - 1].
  d_min_ = query_offset - (tk - 1);
  const std::int64_t n = tq > 0 && tk > 0 ? tq + tk - 1 : 0;
  rel_.resize(static_cast<std::size_t>(n));
  c2p_idx_.resize(rel_.size());
  p2c_idx_.resize(rel_.size());
  const bool flip = POSENC_MUTANT("opt_deberta_sign_flipped");
  const bool literal = POSENC_MUTANT("opt_deberta_p2c_literal_index");
  for (std::int64_t x = 0; x < n; ++x) {
    const std::int64_t delta = d_min_ + x;
    const std::int64_t r = reference::deberta_relative_position(p, flip ? -delta : delta, 0);
    rel_[static_cast<std::size_t>(x)] = static_cast<std::int32_t>(r);
    c2p_idx_[static_cast<std::size_t>(x)] =
        static_cast<std::int32_t>(reference::deberta_index_of(p, r));
    p2c_idx_[static_cast<std::size_t>(x)] =
        static_cast<std::int32_t>(reference::deberta_index_of(p, literal ? -r : r));
  }
  // Segments of x (delta - d_min) for fill(): a run of at least kDebertaLongRun equal (c2p,
  // p2c) index pairs, or a maximal stretch of shorter runs. seg_lo_[x]: the segment's first x;
  // seg_long_[x]: whether it is one long run.
  seg_lo_.resize(rel_.size());
  seg_long_.resize(rel_.size());
  for (std::size_t x0 = 0; x0 < rel_.size();) {
    std::size_t x1 = x0 + 1;  // [x0, x1): one run of equal index pairs
    while (x1 < rel_.size() && c2p_idx_[x1] == c2p_idx_[x0] && p2c_idx_[x1] == p2c_idx_[x0]) ++x1;
    const bool is_long = static_cast<std::int64_t>(x1 - x0) >= kDebertaLongRun;
    const bool joins = !is_long && x0 > 0 && !seg_long_[x0 - 1];  // extends a short stretch
    const std::int32_t lo = joins ? seg_lo_[x0 - 1] : static_cast<std::int32_t>(x0);
    for (std::size_t x = x0; x < x1; ++x) {
      seg_lo_[x] = lo;
      seg_long_[x] = is_long;
    }
    x0 = x1;
  }
  const float scale = static_cast<float>(deberta_scale_value(p));
  scale_ = scale;
  // C2P is built per (head, query block) by begin_block(), from q_ and kr_.
  if (p.c2p) {
    q_ = q;
    kr_ = span<const float>(layers.kr.data(), layers.kr.size());
  }
  // P2C: dst[h, j, c] = scale * (k_h[j] . Qr_h[c]), per (head, block of kDebertaTableBlock
  // keys) one GEMM [nr, d] x [d, 2k], then the float scale; then the block's columns of the
  // indices of long runs copied index-major (p2c_long_[h, slot, j]): fill() reads a stretch of
  // short runs from the row-major table (one row per key, nearby indices) and a long run as
  // contiguous keys of one index.
  if (p.p2c) {
    long_slot_.assign(static_cast<std::size_t>(k2_), -1);
    std::vector<std::int32_t> long_index;
    for (std::size_t x = 0; x < rel_.size(); ++x) {
      const std::int32_t m = p2c_idx_[x];
      if (seg_long_[x] && long_slot_[m] < 0) {
        long_slot_[m] = static_cast<std::int32_t>(long_index.size());
        long_index.push_back(m);
      }
    }
    n_long_ = static_cast<std::int64_t>(long_index.size());
    long_index_ = std::move(long_index);
    k_ = k;
    qr_ = span<const float>(layers.qr.data(), layers.qr.size());
    // Rows padded by 16 floats: at a power-of-two stride the keys of a short stretch (one
    // element per row) would share a few L1 sets.
    p2c_ld_ = k2_ + 16;
    if (!per_thread_p2c_) {
      p2c_ = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(H * tk * p2c_ld_));
      p2c_long_ =
          std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(H * n_long_ * tk));
      const std::int64_t n_blocks = (tk + kDebertaTableBlock - 1) / kDebertaTableBlock;
#pragma omp parallel for schedule(static)
      for (std::int64_t hb = 0; hb < H * n_blocks; ++hb) {
        const std::int64_t h = hb / n_blocks, j0 = (hb % n_blocks) * kDebertaTableBlock;
        p2c_block(static_cast<int>(h), j0, p2c_.get() + h * tk * p2c_ld_,
                  p2c_long_.get() + h * n_long_ * tk);
      }
    }
  }
}

void DebertaBias::p2c_block(int head, std::int64_t j0, float* p2c, float* p2c_long) const {
  const std::int64_t H = p_.n_heads, d = p_.head_dim;
  const std::int64_t nr = std::min(kDebertaTableBlock, tk_ - j0);
  const ConstStrided km(k_.data() + (j0 * H + head) * d, nr, d, Eigen::OuterStride<>(H * d));
  const ConstStrided tm(qr_.data() + head * d, k2_, d, Eigen::OuterStride<>(H * d));
  StridedOut out(p2c + j0 * p2c_ld_, nr, k2_, Eigen::OuterStride<>(p2c_ld_));
  out.noalias() = km * tm.transpose();
  out *= scale_;
  for (std::int64_t slot = 0; slot < n_long_; ++slot) {
    float* dst = p2c_long + slot * tk_ + j0;
    const std::int32_t m = long_index_[static_cast<std::size_t>(slot)];
    for (std::int64_t y = 0; y < nr; ++y) dst[y] = out(y, m);
  }
}

std::size_t DebertaBias::block_scratch() const {
  return static_cast<std::size_t>(kScratchHeader + c2p_scratch(kAttentionQueryTile) +
                                  p2c_scratch());
}

std::int64_t DebertaBias::c2p_scratch(int nq) const { return p_.c2p ? std::int64_t{nq} * k2_ : 0; }

std::int64_t DebertaBias::p2c_scratch() const {
  return p_.p2c && per_thread_p2c_ ? tk_ * p2c_ld_ + n_long_ * tk_ : 0;
}

void DebertaBias::begin_block(int head, std::int64_t q0, int nq, float* scratch) const {
  // Per thread, the P2C of one head (per_thread_p2c): rebuilt when the block's head differs
  // from the one scratch holds (its tag: head + 1; 0 in fresh, zeroed scratch).
  if (p_.p2c && per_thread_p2c_ && scratch[0] != static_cast<float>(head + 1)) {
    float* p2c = scratch + kScratchHeader + c2p_scratch(kAttentionQueryTile);
    for (std::int64_t j0 = 0; j0 < tk_; j0 += kDebertaTableBlock) {
      p2c_block(head, j0, p2c, p2c + tk_ * p2c_ld_);
    }
    scratch[0] = static_cast<float>(head + 1);
  }
  // C2P rows of queries [q0, q0 + nq): scratch[r, c] = scale * (q_h[q0 + r] . Kr_h[c]), one
  // GEMM [nq, d] x [d, 2k], then the float scale.
  if (!p_.c2p || nq <= 0) return;
  const std::int64_t H = p_.n_heads, d = p_.head_dim;
  const ConstStrided xm(q_.data() + (q0 * H + head) * d, nq, d, Eigen::OuterStride<>(H * d));
  const ConstStrided tm(kr_.data() + head * d, k2_, d, Eigen::OuterStride<>(H * d));
  Map out(scratch + kScratchHeader, nq, k2_);
  out.noalias() = xm * tm.transpose();
  out *= scale_;
}

void DebertaBias::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                       float* tile) const {
  // A standalone tile: the tables of each 64-row block in a buffer of its own (per_thread_p2c:
  // with the head's whole P2C, so a caller that fills row by row should construct without it).
  std::vector<float> scratch(block_scratch());
  for (int r0 = 0; r0 < nq; r0 += kAttentionQueryTile) {
    const int n = std::min(kAttentionQueryTile, nq - r0);
    begin_block(head, q0 + r0, n, scratch.data());
    fill_block(scratch.data(), head, q0 + r0, n, k0, nk, tile + static_cast<std::size_t>(r0) * nk);
  }
}

void DebertaBias::fill_block(const float* scratch, int head, std::int64_t q0, int nq,
                             std::int64_t k0, int nk, float* tile) const {
  const float* c2p = p_.c2p ? scratch + kScratchHeader : nullptr;  // the block's C2P rows
  // The head's P2C [Tk, ld] and long runs [n_long, Tk]: the thread's own or the call's.
  const float* own = scratch + kScratchHeader + c2p_scratch(kAttentionQueryTile);
  const float* p2c_head = !p_.p2c           ? nullptr
                          : per_thread_p2c_ ? own
                                            : p2c_.get() + head * tk_ * p2c_ld_;
  const float* long_head = !p_.p2c           ? nullptr
                           : per_thread_p2c_ ? own + tk_ * p2c_ld_
                                             : p2c_long_.get() + head * n_long_ * tk_;
  const float* p2c = p2c_head ? p2c_head + k0 * p2c_ld_ : nullptr;  // key k0's row
  const float* p2c_long = long_head ? long_head + k0 : nullptr;
  const std::int32_t* cidx = c2p_idx_.data();
  const std::int32_t* pidx = p2c_idx_.data();
  if (!c2p && !p2c) std::fill(tile, tile + static_cast<std::size_t>(nq) * nk, 0.0f);
  for (int r = 0; r < nq && (c2p || p2c); ++r) {
    const std::int64_t i = q0 + r;
    const float* crow = c2p ? c2p + static_cast<std::int64_t>(r) * k2_ : nullptr;
    float* out = tile + static_cast<std::size_t>(r) * nk;
    // Column c reads x = x0 - c. A long run of one index pair adds one C2P value to a
    // contiguous stretch of keys of one P2C index; a stretch of short runs is gathered element
    // by element (C2P from row i, P2C from each key's row, at nearby indices).
    const std::int64_t x0 = query_offset_ + i - k0 - d_min_;
    for (int c = 0; c < nk;) {
      const std::int64_t x = x0 - c;
      const int len = static_cast<int>(std::min<std::int64_t>(x - seg_lo_[x] + 1, nk - c));
      if (seg_long_[x]) {
        if (!p2c) {
          std::fill(out + c, out + c + len, crow[cidx[x]]);
        } else {
          const float cv = crow ? crow[cidx[x]] : 0.0f;
          const float* prow = p2c_long + static_cast<std::int64_t>(long_slot_[pidx[x]]) * tk_ + c;
#pragma omp simd
          for (int l = 0; l < len; ++l) out[c + l] = cv + prow[l];
        }
      } else if (!p2c) {
        for (int l = c; l < c + len; ++l) out[l] = crow[cidx[x0 - l]];
      } else if (!crow) {
        for (int l = c; l < c + len; ++l) out[l] = 0.0f + p2c[l * p2c_ld_ + pidx[x0 - l]];
      } else {
        for (int l = c; l < c + len; ++l) {
          out[l] = crow[cidx[x0 - l]] + p2c[l * p2c_ld_ + pidx[x0 - l]];
        }
      }
      c += len;
    }
  }
  if (POSENC_MUTANT("opt_deberta_thread_dependent")) mutant_nudge(tile, nq * nk, omp_get_thread_num());
}

void deberta_forward(const DebertaParams& p, const AttentionParams& ap, const AttentionMask& mask,
                     std::int64_t tq, std::int64_t tk, const DebertaWeightsF32& w,
                     span<const float> q, span<const float> k, span<const float> v,
                     span<float> out) {
  const AttentionParams pp = kernel_params(p, ap, "deberta_forward");
  reference::attention_check(pp, tq, tk, "deberta_forward");
  const auto layers = deberta_position_layers(p, w);
  // Fewer threads than heads: each thread builds one head's P2C at a time in its own scratch
  // (reused from head to head, in cache) instead of all heads' up front; the same values.
  const bool per_thread = omp_get_max_threads() < p.n_heads;
  const DebertaBias bias(p, layers, q, k, tq, tk, pp.query_offset, per_thread);
  attention_forward(pp, mask, tq, tk, q, k, v, out, &bias);
}

void deberta_probs(const DebertaParams& p, const AttentionParams& ap, const AttentionMask& mask,
                   std::int64_t tq, std::int64_t tk, const DebertaWeightsF32& w,
                   span<const float> q, span<const float> k, span<float> probs) {
  const AttentionParams pp = kernel_params(p, ap, "deberta_probs");
  reference::attention_check(pp, tq, tk, "deberta_probs");
  const auto layers = deberta_position_layers(p, w);
  const DebertaBias bias(p, layers, q, k, tq, tk, pp.query_offset);
  attention_probs(pp, mask, tq, tk, q, k, probs, &bias);
}

}  // namespace posenc::optimized
