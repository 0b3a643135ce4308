// Attention float kernel. Formula: see reference/attention.hpp; contract: optimized/attention.hpp.
//
// Numerics: the online softmax keeps a running row maximum m and sum l; when a key chunk raises
// the maximum, the accumulated output and l are rescaled by exp(m_old - m_new) <= 1, so nothing
// overflows and the result equals the two-pass softmax up to rounding (rows whose maximum does
// not move skip the rescale: alpha = 1 exactly). Key chunks lie on a fixed grid of
// kAttentionKeyTile keys; a task's first and last chunk are trimmed to the keys the causal /
// window masks leave visible to some row of its query block, and chunks outside are skipped,
// which makes causal attention about half the work of full attention. Per chunk: one GEMM
// S = Q K^T [64, <= 256], one pass per row that scales, adds the bias and takes the maximum of
// the visible columns, one `omp simd` pass of exp_f32 (optimized/fast_math.hpp: relative error
// <= 2 eps_f32, measured 0.65) with the row sum as a simd reduction (its order depends on the
// vector width, not on the thread count), one GEMM acc += P V. Larger chunks than the old
// 32 x 64 tiles mean fewer, larger GEMMs and fewer passes (measured in docs/performance.md).
#define EIGEN_DONT_PARALLELIZE  // one OpenMP level: tasks, not GEMM threads
#include "optimized/attention.hpp"

#include "optimized/fast_math.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "reference/common/eigen.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstStrided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

float scale_of(const AttentionParams& p) {
  switch (p.scale_kind) {
    case AttentionScale::kInvSqrtHeadDim:
      return static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
    case AttentionScale::kNone: return 1.0f;
    case AttentionScale::kGiven: return static_cast<float>(p.scale);
  }
  return 1.0f;
}

/// Folds a sink logit into the running softmax of nq rows (after the last key chunk): the sink
/// is one more score with a zero value, so it raises the maximum (rescaling acc, l and the slot
/// weights by exp(m_old - m_new)) and adds exp(sink - m_new) to l only. A row that saw no key
/// (m = -inf, l = 0) ends with l = 1 and acc = 0: all its mass on the sink, output 0.
void add_sink(float sink, int nq, float* row_max, float* row_sum, RowMatrix& acc,
              std::vector<float>& wacc, int n_slots) {
  if (sink == -std::numeric_limits<float>::infinity()) return;
  for (int r = 0; r < nq; ++r) {
    const float new_max = std::max(row_max[r], sink);
    const float alpha = row_sum[r] > 0.0f ? std::exp(row_max[r] - new_max) : 0.0f;
    row_sum[r] = row_sum[r] * alpha + std::exp(sink - new_max);
    if (alpha != 1.0f) {
      acc.row(r) *= alpha;
      float* w = wacc.empty() ? nullptr : wacc.data() + static_cast<std::size_t>(r) * n_slots;
      for (int x = 0; w && x < n_slots; ++x) w[x] *= alpha;
    }
    row_max[r] = new_max;
  }
}

/// attention_forward's argument checks: InvalidArgument naming the parameter.
void check_forward_inputs(const AttentionParams& p, const AttentionMask& m, std::int64_t tq,
                          std::int64_t tk, span<const float> q, span<const float> k,
                          span<const float> v, span<float> out) {
  constexpr const char* fn = "attention_forward";
  reference::attention_check(p, tq, tk, fn);
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  auto need = [&](const char* name, std::size_t got, std::size_t want) {
    if (got != want) {
      throw_invalid(fn, std::string(name) + " must have " + std::to_string(want) + " elements",
                    got);
    }
  };
  need("q", q.size(), static_cast<std::size_t>(tq * H * d));
  need("k", k.size(), static_cast<std::size_t>(tk * Hkv * d));
  need("v", v.size(), static_cast<std::size_t>(tk * Hkv * dv));
  need("out", out.size(), static_cast<std::size_t>(tq * H * dv));
  if (!m.key_padding.empty()) need("key_padding", m.key_padding.size(), static_cast<std::size_t>(tk));
  if (!m.allowed.empty()) need("allowed", m.allowed.size(), static_cast<std::size_t>(tq * tk));
  const float* ob = out.data();
  for (const float* in : {q.data(), k.data(), v.data()}) {
    const std::size_t n = in == q.data() ? q.size() : in == k.data() ? k.size() : v.size();
    if (n && out.size() && in < ob + out.size() && ob < in + n) {
      throw_invalid(fn, "out must not overlap q, k or v", "overlap");
    }
  }
}

/// The columns [lo, hi) of the key chunk [j0, j0 + nk) that the causal, window and chunk masks
/// leave visible to the query at qpos (one range: each mask hides a prefix or a suffix).
inline void visible_columns(const AttentionParams& p, std::int64_t qpos, std::int64_t j0, int nk,
                            bool mut_causal, int& lo, int& hi) {
  std::int64_t c_lo = 0, c_hi = nk;
  if (p.causal) c_hi = std::min<std::int64_t>(c_hi, qpos + (mut_causal ? 1 : 0) - j0 + 1);
  if (p.window > 0) c_lo = std::max<std::int64_t>(c_lo, qpos - p.window + 1 - j0);
  if (p.chunk > 0) {  // the chunk of qpos: [start, start + C)
    const std::int64_t cs = reference::attention_chunk_start(p.chunk, qpos);
    c_lo = std::max<std::int64_t>(c_lo, cs - j0);
    c_hi = std::min<std::int64_t>(c_hi, cs + p.chunk - j0);
  }
  c_lo = std::min<std::int64_t>(c_lo, nk);
  c_hi = std::max(c_hi, c_lo);
  lo = static_cast<int>(c_lo);
  hi = static_cast<int>(c_hi);
}

/// One pass over the visible columns [lo, hi) of a score row (query row i, keys from j0): scale,
/// the bias row b (nullptr: none) and the running maximum; then the padding and allowed masks
/// (-inf). Returns the row's maximum (-inf: nothing visible).
inline float scale_and_mask_row(float* srow, int lo, int hi, float scale, const float* b,
                                bool mut_scale, const AttentionMask& m, std::int64_t i,
                                std::int64_t j0, std::int64_t tk) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float tile_max = -kInf;
  if (b) {
    if (mut_scale) {
#pragma omp simd reduction(max : tile_max)
      for (int c = lo; c < hi; ++c) {
        srow[c] = (srow[c] + b[c]) * scale;
        tile_max = std::max(tile_max, srow[c]);
      }
    } else {
#pragma omp simd reduction(max : tile_max)
      for (int c = lo; c < hi; ++c) {
        srow[c] = srow[c] * scale + b[c];
        tile_max = std::max(tile_max, srow[c]);
      }
    }
  } else {
#pragma omp simd reduction(max : tile_max)
    for (int c = lo; c < hi; ++c) {
      srow[c] = srow[c] * scale;
      tile_max = std::max(tile_max, srow[c]);
    }
  }
  if (!m.key_padding.empty() || !m.allowed.empty()) {
    tile_max = -kInf;
    for (int c = lo; c < hi; ++c) {
      const std::int64_t j = j0 + c;
      if ((!m.key_padding.empty() && m.key_padding[static_cast<std::size_t>(j)]) ||
          (!m.allowed.empty() && !m.allowed[static_cast<std::size_t>(i * tk + j)])) {
        srow[c] = -kInf;
      }
      tile_max = std::max(tile_max, srow[c]);
    }
  }
  return tile_max;
}

/// Adds the weights srow[lo, hi) to their slots w[sl[c]]. Runs of equal slots (Shaw: every key
/// beyond the clip distance lands in one of the two end slots) are summed in registers, then
/// added once.
inline void add_slot_weights(const std::int32_t* sl, const float* srow, int lo, int hi,
                             float* w) {
  for (int c = lo; c < hi;) {
    const std::int32_t slot = sl[c];
    int e = c + 1;
    while (e < hi && sl[e] == slot) ++e;
    float run = 0.0f;
#pragma omp simd reduction(+ : run)
    for (int x = c; x < e; ++x) run += srow[x];
    w[slot] += run;
    c = e;
  }
}

}  // namespace

void attention_forward(const AttentionParams& p, const AttentionMask& m, std::int64_t tq,
                       std::int64_t tk, span<const float> q, span<const float> k,
                       span<const float> v, span<float> out, const AttentionBias* bias,
                       const AttentionValueHook* value_hook) {
  check_forward_inputs(p, m, tq, tk, q, k, v, out);
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const float scale = scale_of(p);
  const int group = H / Hkv;
  const bool has_sink = !p.sinks.empty();
  const auto sink_of = [&p](int h) {
    return static_cast<float>(p.sinks[static_cast<std::size_t>(h)]);
  };
  const std::int64_t n_qblocks = (tq + kAttentionQueryTile - 1) / kAttentionQueryTile;
  const std::int64_t n_tasks = static_cast<std::int64_t>(H) * n_qblocks;
  const bool mut_causal = POSENC_MUTANT("opt_causal_includes_next");
  const bool mut_no_rescale = POSENC_MUTANT("opt_online_softmax_no_rescale");
  const bool mut_thread = POSENC_MUTANT("opt_thread_dependent");
  const bool mut_scale = POSENC_MUTANT("opt_scale_after_bias");
  constexpr float kInf = std::numeric_limits<float>::infinity();

#pragma omp parallel
  {
    RowMatrix s(kAttentionQueryTile, kAttentionKeyTile), acc(kAttentionQueryTile, dv);
    std::vector<float> bias_tile(static_cast<std::size_t>(kAttentionQueryTile) * kAttentionKeyTile);
    // The bias's per-block tables (begin_block), this thread's own.
    std::vector<float> bias_scratch(bias ? bias->block_scratch() : 0);
    std::vector<float> row_max(kAttentionQueryTile), row_sum(kAttentionQueryTile);
    // Value hook state: unnormalised weights per slot [query tile, W] and the slot tile.
    const int n_slots = value_hook ? value_hook->slots() : 0;
    std::vector<float> wacc, wrow(static_cast<std::size_t>(n_slots));
    std::vector<std::int32_t> slot_tile;
    if (value_hook) {
      wacc.resize(static_cast<std::size_t>(kAttentionQueryTile) * n_slots);
      slot_tile.resize(static_cast<std::size_t>(kAttentionQueryTile) * kAttentionKeyTile);
    }
#pragma omp for schedule(static)
    for (std::int64_t task = 0; task < n_tasks; ++task) {
      const int h = static_cast<int>(task / n_qblocks);
      const std::int64_t i0 = (task % n_qblocks) * kAttentionQueryTile;
      const int nq = static_cast<int>(std::min<std::int64_t>(kAttentionQueryTile, tq - i0));
      const int hk = h / group;
      const ConstStrided qb(q.data() + (i0 * H + h) * d, nq, d, Eigen::OuterStride<>(H * d));
      acc.topRows(nq).setZero();
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<float>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      if (value_hook) std::fill(wacc.begin(), wacc.end(), 0.0f);
      bool block_ready = false;  // begin_block() ran for this task (at its first key chunk)
      const std::int64_t qpos_first = p.query_offset + i0;
      const std::int64_t qpos_last = qpos_first + nq - 1;
      // Keys any row of the block can see: [j_first, j_end) (causal, window and chunk masks).
      std::int64_t j_end =
          p.causal ? std::min<std::int64_t>(tk, qpos_last + (mut_causal ? 1 : 0) + 1) : tk;
      std::int64_t j_first =
          p.window > 0 ? std::max<std::int64_t>(0, qpos_first - p.window + 1) : 0;
      if (p.chunk > 0) {
        j_first = std::max(j_first, reference::attention_chunk_start(p.chunk, qpos_first));
        j_end = std::min(j_end, reference::attention_chunk_start(p.chunk, qpos_last) + p.chunk);
      }
      // Key chunks start at multiples of the chunk length (a fixed grid: the same chunks for
      // any thread count); the first and last are trimmed to [j_first, j_end).
      for (std::int64_t g0 = j_first / kAttentionKeyTile * kAttentionKeyTile; g0 < j_end;
           g0 += kAttentionKeyTile) {
        const std::int64_t j0 = std::max(g0, j_first);
        const int nk = static_cast<int>(std::min<std::int64_t>(g0 + kAttentionKeyTile, j_end) - j0);
        if (nk <= 0) continue;
        const ConstStrided kb(k.data() + (j0 * Hkv + hk) * d, nk, d, Eigen::OuterStride<>(Hkv * d));
        const ConstStrided vb(v.data() + (j0 * Hkv + hk) * dv, nk, dv, Eigen::OuterStride<>(Hkv * dv));
        auto st = s.topLeftCorner(nq, nk);
        st.noalias() = qb * kb.transpose();
        if (bias && !block_ready) {
          bias->begin_block(h, i0, nq, bias_scratch.data());
          block_ready = true;
        }
        if (bias) bias->fill_block(bias_scratch.data(), h, i0, nq, j0, nk, bias_tile.data());
        if (value_hook) value_hook->slot_tile(h, i0, nq, j0, nk, slot_tile.data());
        for (int r = 0; r < nq; ++r) {
          const std::int64_t i = i0 + r, qpos = p.query_offset + i;
          float* srow = &st(r, 0);
          int lo = 0, hi = 0;
          visible_columns(p, qpos, j0, nk, mut_causal, lo, hi);
          const float* b = bias ? bias_tile.data() + static_cast<std::size_t>(r) * nk : nullptr;
          const float tile_max = scale_and_mask_row(srow, lo, hi, scale, b, mut_scale, m, i, j0, tk);
          for (int c = 0; c < lo; ++c) srow[c] = 0.0f;
          for (int c = hi; c < nk; ++c) srow[c] = 0.0f;
          if (tile_max == -kInf) {
            std::fill(srow + lo, srow + hi, 0.0f);  // nothing visible: contributes nothing
            continue;
          }
          const float new_max = std::max(row_max[r], tile_max);
          const float alpha = mut_no_rescale ? 1.0f : std::exp(row_max[r] - new_max);
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int c = lo; c < hi; ++c) {
            const float e = exp_f32(srow[c] - new_max);  // exp(-inf) = 0 for masked keys
            srow[c] = e;
            sum += e;
          }
          row_sum[r] = row_sum[r] * alpha + sum;
          if (alpha != 1.0f) acc.row(r) *= alpha;
          row_max[r] = new_max;
          if (value_hook) {  // the same weights, summed per slot
            float* w = wacc.data() + static_cast<std::size_t>(r) * n_slots;
            if (alpha != 1.0f) {
              for (int x = 0; x < n_slots; ++x) w[x] *= alpha;
            }
            add_slot_weights(slot_tile.data() + static_cast<std::size_t>(r) * nk, srow, lo, hi, w);
          }
        }
        acc.topRows(nq).noalias() += st * vb;
      }
      if (has_sink) add_sink(sink_of(h), nq, row_max.data(), row_sum.data(), acc, wacc, n_slots);
      for (int r = 0; r < nq; ++r) {
        float* o = out.data() + ((i0 + r) * H + h) * dv;
        const float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
        for (int c = 0; c < dv; ++c) o[c] = acc(r, c) * inv;
        if (value_hook) {
          const float* w = wacc.data() + static_cast<std::size_t>(r) * n_slots;
          for (int x = 0; x < n_slots; ++x) wrow[x] = w[x] * inv;
          value_hook->add(h, i0 + r, wrow.data(), o);
        }
        if (mut_thread && omp_get_thread_num() != 0) {
          for (int c = 0; c < dv; ++c) o[c] += o[c] * std::numeric_limits<float>::epsilon();
        }
      }
    }
  }
}

void attention_probs(const AttentionParams& p, const AttentionMask& m, std::int64_t tq,
                     std::int64_t tk, span<const float> q, span<const float> k, span<float> probs,
                     const AttentionBias* bias) {
  constexpr const char* fn = "attention_probs";
  reference::attention_check(p, tq, tk, fn);
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim;
  if (q.size() != static_cast<std::size_t>(tq * H * d)) throw_invalid(fn, "q must have Tq*H*d elements", q.size());
  if (k.size() != static_cast<std::size_t>(tk * Hkv * d)) throw_invalid(fn, "k must have Tk*Hkv*d elements", k.size());
  if (probs.size() != static_cast<std::size_t>(H * tq * tk)) {
    throw_invalid(fn, "probs must have H*Tq*Tk elements", probs.size());
  }
  const float scale = scale_of(p);
  const int group = H / Hkv;
  const bool mut_causal = POSENC_MUTANT("opt_causal_includes_next");
  const std::int64_t rows = static_cast<std::int64_t>(H) * tq;
#pragma omp parallel
  {
    std::vector<float> brow(static_cast<std::size_t>(tk));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const int h = static_cast<int>(r / tq);
      const std::int64_t i = r % tq, qpos = p.query_offset + i;
      const float* qi = q.data() + (i * H + h) * d;
      float* pr = probs.data() + r * tk;
      if (bias && tk > 0) bias->fill(h, i, 1, 0, static_cast<int>(tk), brow.data());
      float mx = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < tk; ++j) {
        const float* kj = k.data() + (j * Hkv + h / group) * d;
        float dot = 0.0f;
        for (int c = 0; c < d; ++c) dot += qi[c] * kj[c];
        float sc = dot * scale + (bias ? brow[static_cast<std::size_t>(j)] : 0.0f);
        const bool vis = (!p.causal || j <= qpos + (mut_causal ? 1 : 0)) && (p.window == 0 || qpos - p.window < j) &&
                         (p.chunk == 0 || reference::attention_chunk_start(p.chunk, j) ==
                                              reference::attention_chunk_start(p.chunk, qpos)) &&
                         (m.key_padding.empty() || !m.key_padding[static_cast<std::size_t>(j)]) &&
                         (m.allowed.empty() || m.allowed[static_cast<std::size_t>(i * tk + j)]);
        if (!vis) sc = -std::numeric_limits<float>::infinity();
        pr[j] = sc;
        mx = std::max(mx, sc);
      }
      const float sink = p.sinks.empty() ? -std::numeric_limits<float>::infinity()
                                         : static_cast<float>(p.sinks[static_cast<std::size_t>(h)]);
      mx = std::max(mx, sink);  // a sink takes part in the maximum and the sum, not in the row
      if (mx == -std::numeric_limits<float>::infinity()) {
        std::fill(pr, pr + tk, 0.0f);
        continue;
      }
      float sum = std::exp(sink - mx);
      for (std::int64_t j = 0; j < tk; ++j) sum += (pr[j] = std::exp(pr[j] - mx));
      for (std::int64_t j = 0; j < tk; ++j) pr[j] /= sum;
    }
  }
}

}  // namespace posenc::optimized
