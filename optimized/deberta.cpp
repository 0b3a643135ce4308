// DeBERTa disentangled attention kernel. Formula: see reference/deberta.hpp; contract:
// optimized/deberta.hpp.
//
// Numerics: relative positions and indices are integers from the reference's exact bucket
// function, one call per relative position that occurs. The float work is the projection of
// the relative table (one dot product of `hidden` terms per element), one dot product of d
// terms per C2P / P2C element, its multiplication by the float scale 1/sqrt(d sf), and in
// fill() one addition C2P + P2C; the attention kernel adds scale * (q . k).
//
// Speed: the projection (P W^T, [2k, hidden] x [hidden, H d]) and C2P / P2C (per head
// [T, d] x [d, 2k]) are float Eigen GEMMs over fixed blocks (kDebertaRowBlock rows of P; of one
// head's queries / keys), one block per OpenMP iteration with Eigen single-threaded inside:
// each element's summation order depends on the block, never on the thread count.
#define EIGEN_DONT_PARALLELIZE  // one OpenMP level: blocks, not GEMM threads
#include "optimized/deberta.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"
#include "optimized/common/mutant.hpp"

namespace posenc::optimized {
namespace {

/// Rows of one table GEMM (a fixed block: bits do not depend on the thread count).
constexpr std::int64_t kDebertaRowBlock = 64;

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMatrix>;
using ConstMap = Eigen::Map<const RowMatrix>;
using ConstStrided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

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
                         std::int64_t query_offset)
    : p_(p), tq_(tq), tk_(tk), query_offset_(query_offset) {
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
  const float scale = static_cast<float>(deberta_scale_value(p));
  // dst[h, r, c] = scale * (x_h[r] . t_h[c]): per (head, block of kDebertaRowBlock rows) one
  // GEMM [nr, d] x [d, 2k], then the float scale.
  const auto products = [&](span<const float> x, std::int64_t rows, const std::vector<float>& t,
                            std::vector<float>& dst) {
    dst.assign(static_cast<std::size_t>(H * rows * k2_), 0.0f);
    const std::int64_t n_blocks = (rows + kDebertaRowBlock - 1) / kDebertaRowBlock;
#pragma omp parallel for schedule(static)
    for (std::int64_t hb = 0; hb < H * n_blocks; ++hb) {
      const std::int64_t h = hb / n_blocks, r0 = (hb % n_blocks) * kDebertaRowBlock;
      const std::int64_t nr = std::min(kDebertaRowBlock, rows - r0);
      const ConstStrided xm(x.data() + (r0 * H + h) * d, nr, d, Eigen::OuterStride<>(H * d));
      const ConstStrided tm(t.data() + h * d, k2_, d, Eigen::OuterStride<>(H * d));
      Map out(dst.data() + (h * rows + r0) * k2_, nr, k2_);
      out.noalias() = xm * tm.transpose();
      out *= scale;
    }
  };
  if (p.c2p) products(q, tq, layers.kr, c2p_);
  if (p.p2c) products(k, tk, layers.qr, p2c_);
}

void DebertaBias::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                       float* tile) const {
  const float* c2p = p_.c2p ? c2p_.data() + head * tq_ * k2_ : nullptr;
  const float* p2c = p_.p2c ? p2c_.data() + head * tk_ * k2_ : nullptr;
  for (int r = 0; r < nq; ++r) {
    const std::int64_t i = q0 + r;
    const float* crow = c2p ? c2p + i * k2_ : nullptr;
    for (int c = 0; c < nk; ++c) {
      const std::int64_t j = k0 + c;
      const std::size_t x = static_cast<std::size_t>(query_offset_ + i - j - d_min_);
      float b = 0.0f;
      if (crow) b = crow[c2p_idx_[x]];
      if (p2c) b += p2c[j * k2_ + p2c_idx_[x]];
      tile[static_cast<std::size_t>(r) * nk + c] = b;
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
  const DebertaBias bias(p, layers, q, k, tq, tk, pp.query_offset);
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
