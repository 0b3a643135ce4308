// Transformer-XL kernel. Formula: see reference/transformer_xl.hpp; contract:
// optimized/transformer_xl.hpp.
//
// Numerics: the sinusoid is evaluated in double at exact integer positions (sincos_f64,
// optimized/fast_math.hpp: |error| <= 2^-50 up to its kSinCosMaxAngle, glibc beyond) and
// rounded once to float; r_h = W_r R is a float GEMM; u . k is a double dot product rounded
// once to float; BD = fl(scale (q + v)) . r_h is a float dot product, so the bias carries float
// dot-product roundings measured against sum_c |q_ic + v_c| |r|_c (contract) and the float add
// in fill_block(). BD is indexed by position, not by (i, j): row i of a block covers the
// positions its query can see, and fill_block() gathers pos = min(mlen + i - j, clamp_len), the
// rel-shift's result without its [qlen, klen + 1] buffer.
//
// Speed: the r table (R W_r^T, [P, d_model] x [d_model, H d], rows in descending position
// order) is float Eigen GEMMs over fixed blocks of kTxlPositionBlock positions, one block per
// OpenMP iteration with Eigen single-threaded inside. BD is built per (head, 64-query block)
// by begin_block() inside the attention task that reads it, into the thread's scratch (one
// GEMM [nb, d] x [d, np] over the positions the block can see, about half of [qlen, P]): no
// [H, qlen, P] table is written, faulted in and read back (it was 64 MiB at T = 2048, H = 8,
// and built in double it was 60 % of a call). The descending r rows make each BD row reversed,
// so that fill_block() reads the descending positions of a tile row as one forward run (one
// vector loop with u . k).
#define EIGEN_DONT_PARALLELIZE  // one OpenMP level: blocks, not GEMM threads
#include "optimized/transformer_xl.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/common/mutant.hpp"
#include "optimized/fast_math.hpp"
#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"

namespace posenc::optimized {
namespace {

/// Below this many multiply-adds a table is built by one thread (a parallel region costs more
/// than it saves; the bits are the same either way).
constexpr std::int64_t kTxlThreadedWork = std::int64_t{1} << 16;

/// Fixed GEMM blocks of the r tables (rows of one GEMM: positions).
constexpr std::int64_t kTxlPositionBlock = 64;

using RowMatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapD = Eigen::Map<RowMatrixD>;

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
  // omega <= 1: every angle is below n_pos, inside sincos_f64's range when n_pos is.
  const bool fast_sincos = static_cast<double>(n_pos) <= kSinCosMaxAngle;
#pragma omp parallel if (threaded)
  {
    RowMatrixD r(kTxlPositionBlock, dm);  // the sinusoid rows of one block
#pragma omp for schedule(static)
    for (std::int64_t blk = 0; blk < n_blocks; ++blk) {
      const std::int64_t p0 = blk * kTxlPositionBlock;
      const std::int64_t np = std::min(kTxlPositionBlock, n_pos - p0);
      for (std::int64_t y = 0; y < np; ++y) {
        double* row = &r(y, 0);
        const double pos = static_cast<double>(p0 + y);
        if (fast_sincos) {
#pragma omp simd
          for (int c = 0; c < half; ++c) sincos_f64(pos * omega[c], row + c, row + half + c);
        } else {
          for (int c = 0; c < half; ++c) {
            row[c] = std::sin(pos * omega[c]);
            row[half + c] = std::cos(pos * omega[c]);
          }
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

std::vector<float> txl_r_table_f32(const TransformerXlParams& p, std::int64_t n_pos,
                                   span<const float> w_r) {
  reference::txl_check(p, "txl_r_table_f32");
  const int hd = p.n_heads * p.d_head, dm = p.d_model, half = dm / 2;
  if (w_r.size() != static_cast<std::size_t>(hd) * dm) {
    throw_invalid("txl_r_table_f32", "r_net must have H * d_head * d_model elements", w_r.size());
  }
  std::vector<double> omega(static_cast<std::size_t>(half));
  for (int c = 0; c < half; ++c) omega[c] = std::pow(10000.0, -2.0 * c / dm);
  std::vector<float> table(static_cast<std::size_t>(n_pos) * hd);
  if (n_pos == 0) return table;
  using RowMatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMatrixF> w(w_r.data(), hd, dm);
  const std::int64_t n_blocks = (n_pos + kTxlPositionBlock - 1) / kTxlPositionBlock;
  const bool threaded = n_pos * hd * dm >= kTxlThreadedWork;
  const bool fast_sincos = static_cast<double>(n_pos) <= kSinCosMaxAngle;
#pragma omp parallel if (threaded)
  {
    RowMatrixF r(kTxlPositionBlock, dm);   // the sinusoid rows of one block, reversed
    RowMatrixF rh(kTxlPositionBlock, hd);  // their r rows, all heads
#pragma omp for schedule(static)
    for (std::int64_t blk = 0; blk < n_blocks; ++blk) {
      const std::int64_t y0 = blk * kTxlPositionBlock;
      const std::int64_t ny = std::min(kTxlPositionBlock, n_pos - y0);
      for (std::int64_t y = 0; y < ny; ++y) {
        float* row = &r(y, 0);
        const double pos = static_cast<double>(n_pos - 1 - (y0 + y));
        if (fast_sincos) {
#pragma omp simd
          for (int c = 0; c < half; ++c) {
            double sn, cs;
            sincos_f64(pos * omega[c], &sn, &cs);
            row[c] = static_cast<float>(sn);
            row[half + c] = static_cast<float>(cs);
          }
        } else {
          for (int c = 0; c < half; ++c) {
            row[c] = static_cast<float>(std::sin(pos * omega[c]));
            row[half + c] = static_cast<float>(std::cos(pos * omega[c]));
          }
        }
      }
      // One GEMM for all heads, then each head's rows to its own [n_pos, d] slab.
      auto out = rh.topRows(ny);
      out.noalias() = r.topRows(ny) * w.transpose();
      for (int h = 0; h < p.n_heads; ++h) {
        float* dst = table.data() + (static_cast<std::size_t>(h) * n_pos + y0) * p.d_head;
        for (std::int64_t y = 0; y < ny; ++y) {
          std::copy_n(&out(y, h * p.d_head), p.d_head, dst + y * p.d_head);
        }
      }
    }
  }
  return table;
}

TransformerXlBias::TransformerXlBias(const TransformerXlParams& p, std::int64_t qlen,
                                     std::int64_t klen, span<const float> q, span<const float> k,
                                     span<const float> r_w_bias, span<const float> r_r_bias,
                                     span<const float> r_net)
    : p_(p), qlen_(qlen), klen_(klen), mlen_(klen - qlen), q_(q), v_(r_r_bias) {
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
  scale_ = 1.0 / std::sqrt(static_cast<double>(d));
  r_rev_ = txl_r_table_f32(p, n_pos_, r_net);
  const bool no_u = POSENC_MUTANT("opt_txl_u_missing");
  uk_.assign(static_cast<std::size_t>(H) * klen, 0.0f);
  const std::int64_t n_k = static_cast<std::int64_t>(H) * klen;
#pragma omp parallel for schedule(static) if (n_k * d >= kTxlThreadedWork)
  for (std::int64_t t = 0; t < n_k; ++t) {
    const int h = static_cast<int>(t / klen);
    const std::int64_t j = t % klen;
    double s = 0;
    for (int c = 0; c < d; ++c) {
      s += static_cast<double>(r_w_bias[h * d + c]) * k[(j * H + h) * d + c];
    }
    uk_[static_cast<std::size_t>(t)] = no_u ? 0.0f : static_cast<float>(scale_ * s);
  }
}

std::int64_t TransformerXlBias::block_positions(std::int64_t q0, int nq) const {
  // Each row's visible positions (pos <= mlen + i) and one more (a shifted mutant reads it).
  return std::max<std::int64_t>(0, std::min(n_pos_, mlen_ + q0 + nq + 1));
}

std::size_t TransformerXlBias::block_scratch() const {
  return static_cast<std::size_t>(kAttentionQueryTile) * (n_pos_ + p_.d_head);
}

void TransformerXlBias::begin_block(int head, std::int64_t q0, int nq, float* scratch) const {
  const int H = p_.n_heads, d = p_.d_head;
  const std::int64_t np = block_positions(q0, nq);
  if (np == 0 || nq <= 0) return;
  using RowMatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  // fl(scale (q_i + v)) [nq, d] after the BD rows; BD = that times the reversed r rows of
  // positions np - 1 .. 0 ([d, np]): row r's entry x is position np - 1 - x.
  float* qv = scratch + static_cast<std::size_t>(nq) * n_pos_;
  const bool no_v = POSENC_MUTANT("opt_txl_v_missing");
  for (int y = 0; y < nq; ++y) {
    const float* qi = q_.data() + ((q0 + y) * H + head) * d;
    for (int c = 0; c < d; ++c) {
      const double vc =
          no_v ? 0.0 : static_cast<double>(v_[static_cast<std::size_t>(head) * d + c]);
      qv[y * d + c] = static_cast<float>(scale_ * (static_cast<double>(qi[c]) + vc));
    }
  }
  const Eigen::Map<const RowMatrixF> qm(qv, nq, d);
  const Eigen::Map<const RowMatrixF> rm(
      r_rev_.data() + (static_cast<std::size_t>(head) * n_pos_ + (n_pos_ - np)) * d, np, d);
  Eigen::Map<RowMatrixF, 0, Eigen::OuterStride<>> bd(scratch, nq, np, Eigen::OuterStride<>(n_pos_));
  bd.noalias() = qm * rm.transpose();
}

std::int32_t TransformerXlBias::position(std::int64_t i, std::int64_t j) const {
  std::int64_t delta = mlen_ + i - j;
  if (POSENC_MUTANT("opt_txl_delta_off_by_one")) delta += 1;
  if (delta < 0) return -1;
  return static_cast<std::int32_t>(std::min(delta, n_pos_ - 1));
}

void TransformerXlBias::fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
                             float* tile) const {
  // A standalone tile: each 64-row block's BD in a buffer of its own.
  std::vector<float> scratch(block_scratch());
  for (int r0 = 0; r0 < nq; r0 += kAttentionQueryTile) {
    const int n = std::min(kAttentionQueryTile, nq - r0);
    begin_block(head, q0 + r0, n, scratch.data());
    fill_block(scratch.data(), head, q0 + r0, n, k0, nk, tile + static_cast<std::size_t>(r0) * nk);
  }
}

void TransformerXlBias::fill_block(const float* scratch, int head, std::int64_t q0, int nq,
                                   std::int64_t k0, int nk, float* tile) const {
  const float* uk = uk_.data() + static_cast<std::size_t>(head) * klen_ + k0;
  const bool shifted = POSENC_MUTANT("opt_txl_delta_off_by_one");
  const std::int64_t np = block_positions(q0, nq);
  for (int r = 0; r < nq; ++r) {
    const std::int64_t i = q0 + r;
    // Row r of the block's BD holds positions np - 1, np - 2, ..., 0 (rev[np - 1 - pos]), so
    // the positions of columns c = 0, 1, ... (pos = delta0 - c, descending) are read forwards.
    const float* rev = scratch + static_cast<std::size_t>(r) * n_pos_;
    float* out = tile + static_cast<std::size_t>(r) * nk;
    const std::int64_t delta0 = mlen_ + i - k0 + (shifted ? 1 : 0);
    // Columns [0, c_clamp): pos clamped to n_pos - 1 (then np == n_pos); [c_clamp, c_future):
    // pos = delta0 - c <= np - 1; [c_future, nk): future keys (masked), which read nothing.
    const int c_future = static_cast<int>(std::clamp<std::int64_t>(delta0 + 1, 0, nk));
    const int c_clamp =
        static_cast<int>(std::clamp<std::int64_t>(delta0 - (n_pos_ - 1), 0, c_future));
    if (c_clamp > 0) {
      const float last = rev[np - n_pos_];
#pragma omp simd
      for (int c = 0; c < c_clamp; ++c) out[c] = uk[c] + last;
    }
    const int n_run = c_future - c_clamp;
    if (n_run > 0) {
      const float* run = rev + (np - 1 - delta0 + c_clamp);  // pos of column c_clamp
#pragma omp simd
      for (int c = 0; c < n_run; ++c) out[c_clamp + c] = uk[c_clamp + c] + run[c];
    }
    std::fill(out + c_future, out + nk, 0.0f);
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
