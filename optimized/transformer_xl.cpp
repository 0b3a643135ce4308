// Transformer-XL kernel. Formula: see reference/transformer_xl.hpp; contract:
// optimized/transformer_xl.hpp.
//
// Numerics: the sinusoid is evaluated in double at exact integer positions (|error| < 2^-50
// for positions below 2^20), projected by r_net in double, and every table entry u . k and
// (q + v) . r is a double dot product rounded once to float, so the bias carries two float
// roundings and the float add in fill(). The BD table is indexed by position, not by (i, j):
// row i of it covers the P distinct positions, and fill() gathers pos = min(mlen + i - j,
// clamp_len), the rel-shift's result without its [qlen, klen + 1] buffer.
//
// Speed: the r table (R W_r^T, [P, d_model] x [d_model, H d]) and BD ((q + v) R_h^T per head,
// [qlen, d] x [d, P]) are double Eigen GEMMs over fixed blocks (kTxlPositionBlock positions;
// kTxlQueryBlock queries of one head), one block per OpenMP iteration with Eigen single-threaded
// inside, so each entry's summation order depends on the block, never on the thread count. A
// query block computes only the positions its rows can see (pos <= mlen + i, the causal
// triangle: about half of [qlen, P]); the entries it skips are never read by fill().
#define EIGEN_DONT_PARALLELIZE  // one OpenMP level: blocks, not GEMM threads
#include "optimized/transformer_xl.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"
#include "optimized/common/mutant.hpp"

namespace posenc::optimized {
namespace {

/// Below this many multiply-adds a table is built by one thread (a parallel region costs more
/// than it saves; the bits are the same either way).
constexpr std::int64_t kTxlThreadedWork = std::int64_t{1} << 16;

/// Fixed GEMM blocks of the tables (rows of one GEMM): positions of the r table, queries of BD.
constexpr std::int64_t kTxlPositionBlock = 64;
constexpr std::int64_t kTxlQueryBlock = 64;

using RowMatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapD = Eigen::Map<RowMatrixD>;
using ConstStridedD = Eigen::Map<const RowMatrixD, 0, Eigen::OuterStride<>>;

}  // namespace

std::int64_t txl_position_count(const TransformerXlParams& p, std::int64_t klen) {
  if (klen <= 0) return 0;
  if (p.clamp_len <= 0 || POSENC_MUTANT("opt_txl_clamp_ignored")) return klen;
  return std::min(klen - 1, p.clamp_len) + 1;
}

std::vector<double> txl_r_table(const TransformerXlParams& p, std::int64_t n_pos,
                                span<const float> w_r) {
  reference::txl_check(p, "txl_r_table");
  const int hd = p.n_heads * p.d_head, dm = p.d_model, half = dm / 2;
  if (w_r.size() != static_cast<std::size_t>(hd) * dm) {
    throw_invalid("txl_r_table", "r_net must have H * d_head * d_model elements", w_r.size());
  }
  std::vector<double> omega(static_cast<std::size_t>(half));
  for (int c = 0; c < half; ++c) omega[c] = std::pow(10000.0, -2.0 * c / dm);
  std::vector<double> table(static_cast<std::size_t>(n_pos) * hd);
  if (n_pos == 0) return table;
  // W_r in double once: [hd, dm].
  RowMatrixD w(hd, dm);
  for (int x = 0; x < hd; ++x) {
    for (int m = 0; m < dm; ++m) {
      w(x, m) = static_cast<double>(w_r[static_cast<std::size_t>(x) * dm + m]);
    }
  }
  const std::int64_t n_blocks = (n_pos + kTxlPositionBlock - 1) / kTxlPositionBlock;
  const bool threaded = n_pos * hd * dm >= kTxlThreadedWork;
#pragma omp parallel if (threaded)
  {
    RowMatrixD r(kTxlPositionBlock, dm);  // the sinusoid rows of one block
#pragma omp for schedule(static)
    for (std::int64_t blk = 0; blk < n_blocks; ++blk) {
      const std::int64_t p0 = blk * kTxlPositionBlock;
      const std::int64_t np = std::min(kTxlPositionBlock, n_pos - p0);
      for (std::int64_t y = 0; y < np; ++y) {
        for (int c = 0; c < half; ++c) {
          const double a = static_cast<double>(p0 + y) * omega[c];
          r(y, c) = std::sin(a);
          r(y, half + c) = std::cos(a);
        }
      }
      MapD out(table.data() + static_cast<std::size_t>(p0) * hd, np, hd);
      out.noalias() = r.topRows(np) * w.transpose();
    }
  }
  return table;
}

void txl_pos_emb(const TransformerXlParams& p, std::int64_t klen, span<float> out) {
  constexpr const char* fn = "txl_pos_emb";
  reference::txl_check(p, fn);
  if (klen < 0) throw_invalid(fn, "klen must be >= 0", klen);
  const int dm = p.d_model, half = dm / 2;
  if (out.size() != static_cast<std::size_t>(klen) * dm) {
    throw_invalid(fn, "out must have klen * d_model elements", out.size());
  }
  for (std::int64_t row = 0; row < klen; ++row) {
    std::int64_t pos = klen - 1 - row;
    if (p.clamp_len > 0 && !POSENC_MUTANT("opt_txl_clamp_ignored"))
      pos = std::min(pos, p.clamp_len);
    for (int c = 0; c < half; ++c) {
      const double a = static_cast<double>(pos) * std::pow(10000.0, -2.0 * c / dm);
      out[static_cast<std::size_t>(row) * dm + c] = static_cast<float>(std::sin(a));
      out[static_cast<std::size_t>(row) * dm + half + c] = static_cast<float>(std::cos(a));
    }
  }
}

TransformerXlBias::TransformerXlBias(const TransformerXlParams& p, std::int64_t qlen,
                                     std::int64_t klen, span<const float> q, span<const float> k,
                                     span<const float> r_w_bias, span<const float> r_r_bias,
                                     span<const float> r_net)
    : p_(p), qlen_(qlen), klen_(klen), mlen_(klen - qlen) {
  constexpr const char* fn = "TransformerXlBias";
  reference::txl_check(p, fn);
  reference::txl_check_lengths(qlen, klen, fn);
  const int H = p.n_heads, d = p.d_head, hd = H * d;
  auto need = [&](const char* name, std::size_t got, std::size_t want) {
    if (got != want) {
      throw_invalid(fn, std::string(name) + " must have " + std::to_string(want) + " elements",
                    got);
    }
  };
  need("q", q.size(), static_cast<std::size_t>(qlen) * hd);
  need("k", k.size(), static_cast<std::size_t>(klen) * hd);
  need("r_w_bias", r_w_bias.size(), static_cast<std::size_t>(hd));
  need("r_r_bias", r_r_bias.size(), static_cast<std::size_t>(hd));
  need("r_net", r_net.size(), static_cast<std::size_t>(hd) * p.d_model);
  n_pos_ = txl_position_count(p, klen);
  const std::vector<double> r = txl_r_table(p, n_pos_, r_net);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const bool no_u = POSENC_MUTANT("opt_txl_u_missing"), no_v = POSENC_MUTANT("opt_txl_v_missing");
  uk_.assign(static_cast<std::size_t>(H) * klen, 0.0f);
  bd_.assign(static_cast<std::size_t>(H) * qlen * n_pos_, 0.0f);
  const std::int64_t n_k = static_cast<std::int64_t>(H) * klen;
  const std::int64_t n_qblocks = (qlen + kTxlQueryBlock - 1) / kTxlQueryBlock;
  const std::int64_t n_tasks = static_cast<std::int64_t>(H) * n_qblocks;
  const bool threaded = static_cast<std::int64_t>(H) * qlen * n_pos_ * d >= kTxlThreadedWork;
#pragma omp parallel if (threaded)
  {
    RowMatrixD qv(kTxlQueryBlock, d);
    RowMatrixD bd(kTxlQueryBlock, std::max<std::int64_t>(n_pos_, 1));
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < n_k; ++t) {
      const int h = static_cast<int>(t / std::max<std::int64_t>(klen, 1));
      const std::int64_t j = t % std::max<std::int64_t>(klen, 1);
      double s = 0;
      for (int c = 0; c < d; ++c) {
        s += static_cast<double>(r_w_bias[h * d + c]) * k[(j * H + h) * d + c];
      }
      uk_[static_cast<std::size_t>(t)] = no_u ? 0.0f : static_cast<float>(scale * s);
    }
    // BD per (head, query block): (q + v) [nb, d] times R_h^T [d, np], np = the positions the
    // block's rows can see (pos <= mlen + i), in double, then scaled and rounded once.
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < n_tasks; ++t) {
      const int h = static_cast<int>(t / n_qblocks);
      const std::int64_t i0 = (t % n_qblocks) * kTxlQueryBlock;
      const std::int64_t nb = std::min(kTxlQueryBlock, qlen - i0);
      const std::int64_t np = std::min(n_pos_, mlen_ + i0 + nb);
      if (np <= 0) continue;
      for (std::int64_t y = 0; y < nb; ++y) {
        for (int c = 0; c < d; ++c) {
          qv(y, c) = static_cast<double>(q[((i0 + y) * H + h) * d + c]) +
                     (no_v ? 0.0 : r_r_bias[h * d + c]);
        }
      }
      const ConstStridedD rh(r.data() + static_cast<std::size_t>(h) * d, np, d,
                             Eigen::OuterStride<>(hd));
      auto b = bd.topLeftCorner(nb, np);
      b.noalias() = qv.topRows(nb) * rh.transpose();
      for (std::int64_t y = 0; y < nb; ++y) {
        float* row = bd_.data() + (static_cast<std::size_t>(h) * qlen + i0 + y) * n_pos_;
        for (std::int64_t pos = 0; pos < np; ++pos) {
          row[pos] = static_cast<float>(scale * b(y, pos));
        }
      }
    }
  }
}

std::int32_t TransformerXlBias::position(std::int64_t i, std::int64_t j) const {
  std::int64_t delta = mlen_ + i - j;
  if (POSENC_MUTANT("opt_txl_delta_off_by_one")) delta += 1;
  if (delta < 0) return -1;
  return static_cast<std::int32_t>(std::min(delta, n_pos_ - 1));
}

void TransformerXlBias::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                             float* tile) const {
  const float* uk = uk_.data() + static_cast<std::size_t>(head) * klen_;
  for (int r = 0; r < nq; ++r) {
    const std::int64_t i = q0 + r;
    const float* bd = bd_.data() + (static_cast<std::size_t>(head) * qlen_ + i) * n_pos_;
    float* out = tile + static_cast<std::size_t>(r) * nk;
    for (int c = 0; c < nk; ++c) {
      const std::int32_t pos = position(i, k0 + c);
      out[c] = pos < 0 ? 0.0f : uk[k0 + c] + bd[pos];  // a future key is masked: read nothing
    }
  }
  if (POSENC_MUTANT("opt_txl_thread_dependent")) mutant_nudge(tile, nq * nk, omp_get_thread_num());
}

void transformer_xl_forward(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                            span<const float> q, span<const float> k, span<const float> v,
                            span<const float> r_w_bias, span<const float> r_r_bias,
                            span<const float> r_net, span<float> out) {
  const AttentionParams ap =
      reference::txl_attention_params(p, qlen, klen, "transformer_xl_forward");
  const TransformerXlBias bias(p, qlen, klen, q, k, r_w_bias, r_r_bias, r_net);
  attention_forward(ap, AttentionMask{}, qlen, klen, q, k, v, out, &bias);
}

}  // namespace posenc::optimized
