// RoPE float kernels. Formula: see reference/rope.hpp; contract: optimized/rope.hpp.
//
// Numerics: theta_i = pow(base, -2i/d) in long double rounded once to double, phi = m * theta_i
// in double (relative error <= 2^-52, so |phi| * 2^-52 absolute), cos/sin from glibc (< 1 ulp of double), then one rounding
// to the kernel type. For float output the table error is therefore about half an ulp of float,
// and the rotation adds two products and a sum: the 2 eps_f32 bound of the contract.
#include "optimized/rope.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>
#include <cstring>
#include <string>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "optimized/fast_math.hpp"
#include "optimized/rope_table.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

struct Mutants {  // resolved once per call; all false outside the mutant test build
  bool pairing_swapped = POSENC_MUTANT("opt_pairing_swapped");
  bool tail_rotated = POSENC_MUTANT("opt_tail_rotated");
  bool inplace_alias = POSENC_MUTANT("opt_inplace_alias");
};

template <class T>
void check_shape(const char* fn, const char* name, const RopeParams& p, const char* owner,
                 std::size_t n_positions, RopeShape s, span<const T> x, span<T> y);

template <class T>
void check_tensor(const char* fn, const char* name, const RopeParams& p, const RopeCache& cache,
                  RopeShape s, span<const T> x, span<T> y) {
  if (cache.n_pairs != p.rotary_dim / 2) {
    throw_invalid(fn, "cache built for rotary_dim/2 = " + std::to_string(p.rotary_dim / 2) +
                          " pairs has n_pairs", cache.n_pairs);
  }
  check_shape<T>(fn, name, p, "the cache's", cache.positions.size(), s, x, y);
}

/// Shape, size and aliasing of one tensor and its output; `owner` names whose positions.
template <class T>
void check_shape(const char* fn, const char* name, const RopeParams& p, const char* owner,
                 std::size_t n_positions, RopeShape s, span<const T> x, span<T> y) {
  if (s.n_tokens != static_cast<std::int64_t>(n_positions)) {
    throw_invalid(fn, std::string(name) + ".n_tokens must equal " + owner + " " +
                          std::to_string(n_positions) + " positions", s.n_tokens);
  }
  if (s.n_heads <= 0) throw_invalid(fn, std::string(name) + ".n_heads must be positive", s.n_heads);
  const std::size_t n = static_cast<std::size_t>(s.n_tokens) * s.n_heads * p.head_dim;
  if (x.size() != n) {
    throw_invalid(fn, std::string(name) + " must have tokens*heads*head_dim = " +
                          std::to_string(n) + " elements", x.size());
  }
  if (y.size() != n) {
    throw_invalid(fn, std::string(name) + "_out must have " + std::to_string(n) + " elements",
                  y.size());
  }
  const T* xb = x.data();
  const T* yb = y.data();
  if (xb != yb && xb < yb + n && yb < xb + n && !POSENC_MUTANT("opt_overlap_unchecked")) {
    throw_invalid(fn, std::string(name) + " and its output overlap without being identical",
                  "partial overlap");
  }
}

template <class T>
const T* cos_table(const RopeCache& c);
template <>
const float* cos_table<float>(const RopeCache& c) { return c.cos_f32.data(); }
template <>
const double* cos_table<double>(const RopeCache& c) { return c.cos_f64.data(); }
template <class T>
const T* sin_table(const RopeCache& c);
template <>
const float* sin_table<float>(const RopeCache& c) { return c.sin_f32.data(); }
template <>
const double* sin_table<double>(const RopeCache& c) { return c.sin_f64.data(); }

/// One head row. x may equal y: each iteration reads its own pair before writing it.
template <class T>
inline void rotate_row(int head_dim, int d, bool interleaved, const Mutants& mut,
                       const T* c, const T* s, const T* x, T* y) {
  const int half = d / 2;
  if (interleaved != mut.pairing_swapped) {
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const T xa = x[2 * i];
      const T xb = x[2 * i + 1];
      y[2 * i] = xa * c[i] - xb * s[i];
      y[2 * i + 1] = xa * s[i] + xb * c[i];
    }
  } else if (!mut.inplace_alias) {
    // Written as the fused multiply-adds they compile to at -O2 and above (one product rounded,
    // one fma), so the bits do not depend on the compiler's contraction: the streaming path
    // (rotate_row_stream) and the -O1 mutant build give the same ones.
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const T xa = x[i];
      const T xb = x[i + half];
      y[i] = std::fma(xa, c[i], -(xb * s[i]));
      y[i + half] = std::fma(xa, s[i], xb * c[i]);
    }
  } else {
    for (int i = 0; i < half; ++i) {  // mutant: second component reads the overwritten first
      const T xb = x[i + half];
      y[i] = x[i] * c[i] - xb * s[i];
      y[i + half] = y[i] * s[i] + xb * c[i];
    }
  }
  if (mut.tail_rotated) {
    for (int k = d; k + 1 < head_dim; k += 2) {
      const T xa = x[k];
      const T xb = x[k + 1];
      y[k] = xa * c[0] - xb * s[0];
      y[k + 1] = xa * s[0] + xb * c[0];
    }
  } else if (x != y && head_dim > d) {
    std::memcpy(y + d, x + d, sizeof(T) * static_cast<std::size_t>(head_dim - d));
  }
}

/// Rows read ahead: a software prefetch of the input row (and, with a prebuilt table, of its
/// cos/sin rows) this many rows before it is rotated, 8 KiB ahead for 128-float rows. Without
/// it the rotation waited on its loads (1 thread: 0.61-0.75 of copy with a prebuilt table;
/// 8 rows ahead 0.72-0.90, 16 rows 0.78-0.91, 32 and 64 rows less again; measured with
/// `posenc bench --kernel rope --threads 1`). A prefetch is a hint: no value changes.
constexpr std::int64_t kPrefetchRows = 16;

/// Prefetches the n values at x (one hint per 64-byte line, low temporal locality).
template <class T>
inline void prefetch_row(const T* x, int n) {
  for (int i = 0; i < n; i += 64 / static_cast<int>(sizeof(T))) __builtin_prefetch(x + i, 0, 0);
}

/// Prefetches the n values at y for writing (out of place: the lines' write-allocate reads).
template <class T>
inline void prefetch_out(T* y, int n) {
  for (int i = 0; i < n; i += 64 / static_cast<int>(sizeof(T))) __builtin_prefetch(y + i, 1, 0);
}

/// Whether rope_apply_qk_positions streams its stores (kRopeStreamMinBytes, optimized/rope.hpp):
/// an AVX-512 build, half-split pairs over whole 64-byte aligned rows (head_dim a multiple of
/// 32), every tensor out of place, a large output, no mutant of rotate_row.
bool stream_stores(const RopeParams& p, const Mutants& mut, std::int64_t rows, const float* x,
                   const float* y) {
#if defined(__AVX512F__)
  return p.layout == RopeLayout::kHalfSplit && p.rotary_dim == p.head_dim && p.head_dim % 32 == 0 &&
         x != y && reinterpret_cast<std::uintptr_t>(y) % 64 == 0 &&
         static_cast<std::size_t>(rows) * static_cast<std::size_t>(p.head_dim) * sizeof(float) >=
             kRopeStreamMinBytes &&
         !mut.pairing_swapped && !mut.inplace_alias && !mut.tail_rotated;
#else
  (void)p, (void)mut, (void)rows, (void)x, (void)y;
  return false;
#endif
}

#if defined(__AVX512F__)
/// rotate_row's half-split loop for float with streaming stores (y 64-byte aligned, half a
/// multiple of 16, x != y): y_a = x_a c - (x_b s) and y_b = x_a s + (x_b c), each one product
/// rounded and one fused multiply-add, as GCC contracts rotate_row's loop (the bits are the
/// same: checked by RopeOptimizedPositions.StreamingStoresGiveTheSameBits).
inline void rotate_row_stream(int half, const float* c, const float* s, const float* x, float* y) {
  for (int i = 0; i < half; i += 16) {
    const __m512 xa = _mm512_loadu_ps(x + i);
    const __m512 xb = _mm512_loadu_ps(x + half + i);
    const __m512 cv = _mm512_loadu_ps(c + i);
    const __m512 sv = _mm512_loadu_ps(s + i);
    _mm512_stream_ps(y + i, _mm512_fmsub_ps(xa, cv, _mm512_mul_ps(xb, sv)));
    _mm512_stream_ps(y + half + i, _mm512_fmadd_ps(xa, sv, _mm512_mul_ps(xb, cv)));
  }
}
#endif

/// Rows [0, rows_q) belong to q, [rows_q, rows_q + rows_k) to k; one parallel loop over both.
template <class T>
void apply_impl(const char* fn, const RopeParams& p, const RopeCache& cache, RopeShape qs,
                span<const T> q, span<T> q_out, RopeShape ks, span<const T> k, span<T> k_out) {
  reference::rope_check(p, fn);
  check_tensor<T>(fn, "q", p, cache, qs, q, q_out);
  const bool has_k = ks.n_heads != 0 || !k.empty();
  if (has_k) check_tensor<T>(fn, "k", p, cache, ks, k, k_out);
  const std::int64_t rows_q = qs.n_tokens * qs.n_heads;
  const std::int64_t rows_k = has_k ? ks.n_tokens * ks.n_heads : 0;
  const int h = p.head_dim;
  const int d = p.rotary_dim;
  const int np = cache.n_pairs;
  const bool interleaved = p.layout == RopeLayout::kInterleaved;
  const Mutants mut;
  const T* ct = cos_table<T>(cache);
  const T* st = sin_table<T>(cache);
  const bool thread_dependent = POSENC_MUTANT("opt_thread_dependent");
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows_q + rows_k; ++r) {
    const bool is_q = r < rows_q;
    const RopeShape& s = is_q ? qs : ks;
    const std::int64_t rr = is_q ? r : r - rows_q;
    const std::int64_t token =
        s.layout == RopeTensorLayout::kTokensHeadsDim ? rr / s.n_heads : rr % s.n_tokens;
    const T* x = (is_q ? q.data() : k.data()) + rr * h;
    T* y = (is_q ? q_out.data() : k_out.data()) + rr * h;
    if (r + kPrefetchRows < rows_q + rows_k) {
      const std::int64_t pr = r + kPrefetchRows;
      const bool pq = pr < rows_q;
      const RopeShape& ps = pq ? qs : ks;
      const std::int64_t prr = pq ? pr : pr - rows_q;
      const std::int64_t ptok =
          ps.layout == RopeTensorLayout::kTokensHeadsDim ? prr / ps.n_heads : prr % ps.n_tokens;
      prefetch_row((pq ? q.data() : k.data()) + prr * h, h);
      if (pq ? q.data() != q_out.data() : k.data() != k_out.data()) {
        prefetch_out((pq ? q_out.data() : k_out.data()) + prr * h, h);
      }
      prefetch_row(ct + ptok * np, np);
      prefetch_row(st + ptok * np, np);
    }
    rotate_row<T>(h, d, interleaved, mut, ct + token * np, st + token * np, x, y);
    if (thread_dependent && omp_get_thread_num() != 0) {  // mutant: rows of other threads differ
      for (int c = 0; c < d; ++c) y[c] = static_cast<T>(y[c] + y[c] * std::numeric_limits<T>::epsilon());
    }
  }
}

/// theta_i = base^(-2i/d) in long double, rounded once to double (see rope_cache_init).
void default_inv_freq(const RopeParams& p, double* out) {
  const long double base = p.base;
  for (int i = 0; i < p.rotary_dim / 2; ++i) {
    out[i] = static_cast<double>(std::pow(base, -static_cast<long double>(2 * i) / p.rotary_dim));
  }
}

/// Positions split as m = kRopeLowSpan * a + b with 0 <= b < kRopeLowSpan (a = floor(m / 16)):
/// cos(m theta) and sin(m theta) come from the angle-addition formulas over phi_hi = (16 a) theta
/// and phi_lo = b theta, each by sincos_f64. A block of consecutive positions shares one or two
/// values of a, so the table costs about one sincos_f64 row per 16 tokens plus four products
/// per pair and token, where a sincos_f64 per pair and token made the kernel compute-bound.
constexpr int kRopeLowBits = 4;
static_assert(kRopeLowSpan == 1 << kRopeLowBits);

/// sincos(b theta_i) for b in [0, kRopeLowSpan): [kRopeLowSpan, np] each, in double.
struct LowAngles {
  std::vector<double> cos, sin;
  LowAngles(int np, const double* inv_freq)
      : cos(static_cast<std::size_t>(kRopeLowSpan) * np), sin(cos.size()) {
    for (int b = 0; b < kRopeLowSpan; ++b) {
      double* cb = cos.data() + static_cast<std::size_t>(b) * np;
      double* sb = sin.data() + static_cast<std::size_t>(b) * np;
#pragma omp simd
      for (int i = 0; i < np; ++i) sincos_f64(static_cast<double>(b) * inv_freq[i], sb + i, cb + i);
    }
  }
};

/// cos and sin (times `factor`, rounded to float) of positions[t0 .. t0 + nt) for all pairs,
/// into c and s as [nt, np]; hi_c, hi_s: np doubles of scratch. Each value depends on its
/// position alone (a, b and the same instructions), not on the block or the thread.
void block_table(const std::int64_t* positions, int nt, int np, const double* inv_freq,
                 const LowAngles& low, double factor, float* c, float* s, double* hi_c,
                 double* hi_s) {
  bool have_hi = false;
  std::int64_t a_hi = 0;
  for (int t = 0; t < nt; ++t) {
    const std::int64_t m = positions[t];
    const std::int64_t a = m >> kRopeLowBits;  // floor (arithmetic shift), also for m < 0
    const std::int64_t b = m - (a << kRopeLowBits);
    if (!have_hi || a != a_hi) {
      const double m_hi = static_cast<double>(a << kRopeLowBits);  // exact: |m| <= 2^28
#pragma omp simd
      for (int i = 0; i < np; ++i) sincos_f64(m_hi * inv_freq[i], hi_s + i, hi_c + i);
      have_hi = true;
      a_hi = a;
    }
    const double* lc = low.cos.data() + static_cast<std::size_t>(b) * np;
    const double* ls = low.sin.data() + static_cast<std::size_t>(b) * np;
    float* ct = c + static_cast<std::size_t>(t) * np;
    float* st = s + static_cast<std::size_t>(t) * np;
#pragma omp simd
    for (int i = 0; i < np; ++i) {
      rope_angle_sum(hi_c[i], hi_s[i], lc[i], ls[i], factor, ct + i, st + i);
    }
  }
}

}  // namespace

void rope_apply_qk_positions(const RopeParams& p, span<const std::int64_t> positions,
                             span<const double> inv_freq, double attention_factor,
                             RopeShape qs, span<const float> q, span<float> q_out,
                             RopeShape ks, span<const float> k, span<float> k_out) {
  constexpr const char* fn = "rope_apply_qk_positions";
  reference::rope_check(p, fn);
  const int np = p.rotary_dim / 2;
  check_shape<float>(fn, "q", p, "the", positions.size(), qs, q, q_out);
  const bool has_k = ks.n_heads != 0 || !k.empty();
  if (has_k) check_shape<float>(fn, "k", p, "the", positions.size(), ks, k, k_out);
  rope_check_positions(fn, positions);
  std::vector<double> freq(static_cast<std::size_t>(np));
  if (inv_freq.empty()) {
    default_inv_freq(p, freq.data());
  } else {
    if (inv_freq.size() != freq.size()) {
      throw_invalid(fn, "inv_freq must have rotary_dim/2 = " + std::to_string(np) + " entries",
                    inv_freq.size());
    }
    for (std::size_t i = 0; i < freq.size(); ++i) {
      // <= 2 keeps |phi| <= 2^29 < kSinCosMaxAngle, where sincos_f64 keeps its bound.
      if (!(inv_freq[i] > 0.0 && inv_freq[i] <= 2.0)) {
        throw_invalid(fn, "inv_freq[" + std::to_string(i) + "] must be in (0, 2]", inv_freq[i]);
      }
      freq[i] = inv_freq[i];
    }
  }
  if (attention_factor <= 0.0) attention_factor = p.attention_factor;
  if (!std::isfinite(attention_factor)) {
    throw_invalid(fn, "attention_factor must be finite", attention_factor);
  }
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
  const bool heads_major = qs.layout == RopeTensorLayout::kHeadsTokensDim ||
                           (has_k && ks.layout == RopeTensorLayout::kHeadsTokensDim);
  const int block = heads_major ? kRopeTokenBlockHeadsMajor : kRopeTokenBlock;
  const std::int64_t n_blocks = (n_tok + block - 1) / block;
  const int h = p.head_dim;
  const int d = p.rotary_dim;
  const bool interleaved = p.layout == RopeLayout::kInterleaved;
  const Mutants mut;
  const LowAngles low(np, freq.data());
  // The row `it` iterations after the start of tensor `which` in the block at token t0, in
  // the order the loop below visits rows (q's rows of the block, then k's, then the next
  // block's), as q's row or rows_q + k's row; -1 past the end. For the prefetch only.
  const std::int64_t rows_q = n_tok * qs.n_heads;
  const auto row_ahead = [&](int which, std::int64_t it, std::int64_t t0) -> std::int64_t {
    for (;;) {
      const int nt = static_cast<int>(std::min<std::int64_t>(block, n_tok - t0));
      if (nt <= 0) return -1;
      const RopeShape& s = which == 0 ? qs : ks;
      const std::int64_t n_rows = static_cast<std::int64_t>(nt) * s.n_heads;
      if (it < n_rows) {
        const bool thd = s.layout == RopeTensorLayout::kTokensHeadsDim;
        const std::int64_t n_inner = thd ? s.n_heads : nt;
        const std::int64_t outer = it / n_inner, inner = it % n_inner;
        const std::int64_t row =
            thd ? (t0 + outer) * s.n_heads + inner : outer * n_tok + t0 + inner;
        return which == 0 ? row : rows_q + row;
      }
      it -= n_rows;
      if (which == 0 && has_k) {
        which = 1;
      } else {
        which = 0;
        t0 += block;
      }
    }
  };
  // Streaming stores for the whole call or none (both tensors out of place, their rows aligned).
  const std::int64_t rows_k = has_k ? n_tok * ks.n_heads : 0;
  const bool stream = stream_stores(p, mut, rows_q + rows_k, q.data(), q_out.data()) &&
                      (!has_k || stream_stores(p, mut, rows_q + rows_k, k.data(), k_out.data()));
#pragma omp parallel
  {
    std::vector<float> ct(static_cast<std::size_t>(block) * np);
    std::vector<float> st(ct.size());
    std::vector<double> hi_c(static_cast<std::size_t>(np)), hi_s(hi_c.size());
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      const std::int64_t t0 = b * block;
      const int nt = static_cast<int>(std::min<std::int64_t>(block, n_tok - t0));
      block_table(positions.data() + t0, nt, np, freq.data(), low, attention_factor, ct.data(),
                  st.data(), hi_c.data(), hi_s.data());
      for (int which = 0; which < (has_k ? 2 : 1); ++which) {
        const RopeShape& s = which == 0 ? qs : ks;
        const float* x = which == 0 ? q.data() : k.data();
        float* y = which == 0 ? q_out.data() : k_out.data();
        // Rows in memory order: token-major rows of a block are contiguous; head-major rows
        // are a contiguous run of nt rows per head.
        const bool thd = s.layout == RopeTensorLayout::kTokensHeadsDim;
        const int n_inner = thd ? s.n_heads : nt;
        for (int outer = 0; outer < (thd ? nt : s.n_heads); ++outer) {
          for (int inner = 0; inner < n_inner; ++inner) {
            const int t = thd ? outer : inner;
            const int hh = thd ? inner : outer;
            const std::int64_t row = thd ? (t0 + t) * s.n_heads + hh : hh * n_tok + t0 + t;
            const std::int64_t ahead = row_ahead(which, outer * n_inner + inner + kPrefetchRows, t0);
            if (ahead >= 0) {
              prefetch_row(ahead < rows_q ? q.data() + ahead * h : k.data() + (ahead - rows_q) * h, h);
              if (!stream) {  // a streamed line is not read
                prefetch_out(
                    ahead < rows_q ? q_out.data() + ahead * h : k_out.data() + (ahead - rows_q) * h,
                    h);
              }
            }
            const float* c_row = ct.data() + static_cast<std::size_t>(t) * np;
            const float* s_row = st.data() + static_cast<std::size_t>(t) * np;
#if defined(__AVX512F__)
            if (stream) {
              rotate_row_stream(d / 2, c_row, s_row, x + row * h, y + row * h);
              continue;
            }
#endif
            rotate_row<float>(h, d, interleaved, mut, c_row, s_row, x + row * h, y + row * h);
          }
        }
      }
    }
#if defined(__AVX512F__)
    if (stream) _mm_sfence();  // this thread's streamed lines are visible before the join
#endif
  }
}

RopeCache rope_cache_init(const RopeParams& p, span<const std::int64_t> positions,
                          span<const double> inv_freq, double attention_factor) {
  constexpr const char* fn = "rope_cache_init";
  reference::rope_check(p, fn);
  const int np = p.rotary_dim / 2;
  RopeCache cache;
  cache.n_pairs = np;
  cache.positions.assign(positions.begin(), positions.end());
  rope_check_positions(fn, positions);
  if (!inv_freq.empty()) {
    if (inv_freq.size() != static_cast<std::size_t>(np)) {
      throw_invalid(fn, "inv_freq must have rotary_dim/2 = " + std::to_string(np) + " entries",
                    inv_freq.size());
    }
    for (double v : inv_freq) {
      if (!(v > 0.0) || !std::isfinite(v)) throw_invalid(fn, "inv_freq must be finite and > 0", v);
    }
    cache.inv_freq.assign(inv_freq.begin(), inv_freq.end());
  } else {
    // theta_i in long double, then one rounding to double: with a double exponent 2i/d the
    // exponent's own rounding would be amplified by ln(base) (up to 16 ulp for base 1e7).
    const long double base = POSENC_MUTANT("opt_wrong_base") ? p.base + 1.0 : p.base;
    cache.inv_freq.resize(static_cast<std::size_t>(np));
    for (int i = 0; i < np; ++i) {
      cache.inv_freq[i] = static_cast<double>(
          std::pow(base, -static_cast<long double>(2 * i) / p.rotary_dim));
    }
  }
  if (attention_factor <= 0.0) attention_factor = p.attention_factor;
  if (!std::isfinite(attention_factor)) {
    throw_invalid(fn, "attention_factor must be finite", attention_factor);
  }
  RopeTableMutants mut;
  mut.off_by_one = POSENC_MUTANT("opt_position_off_by_one");
  mut.angle_f32 = POSENC_MUTANT("opt_angle_float32");
  mut.sin_flip = POSENC_MUTANT("opt_sin_sign_flipped");
  mut.cos_only = POSENC_MUTANT("opt_factor_cos_only");
  rope_fill_cache_tables(cache, attention_factor, mut);
  return cache;
}

void rope_check_positions(const char* fn, span<const std::int64_t> positions) {
  for (std::size_t t = 0; t < positions.size(); ++t) {
    if (positions[t] > kRopeMaxPosition || positions[t] < -kRopeMaxPosition) {
      throw_invalid(fn, "positions[" + std::to_string(t) + "] must satisfy |m| <= 2^28",
                    positions[t]);
    }
  }
}

void rope_fill_cache_tables(RopeCache& cache, double factor, const RopeTableMutants& mut) {
  const int np = cache.n_pairs;
  const std::size_t n = cache.positions.size() * static_cast<std::size_t>(np);
  cache.cos_f32.resize(n);
  cache.sin_f32.resize(n);
  cache.cos_f64.resize(n);
  cache.sin_f64.resize(n);
  const std::int64_t n_tok = static_cast<std::int64_t>(cache.positions.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < n_tok; ++t) {
    const std::int64_t m = cache.positions[t] + (mut.off_by_one ? 1 : 0);
    for (int i = 0; i < np; ++i) {
      const double phi =
          mut.angle_f32
              ? static_cast<double>(static_cast<float>(m) * static_cast<float>(cache.inv_freq[i]))
              : static_cast<double>(m) * cache.inv_freq[i];
      const double c = factor * std::cos(phi);
      double s = (mut.cos_only ? 1.0 : factor) * std::sin(phi);
      if (mut.sin_flip) s = -s;
      const std::size_t o = static_cast<std::size_t>(t) * np + i;
      cache.cos_f64[o] = c;
      cache.sin_f64[o] = s;
      cache.cos_f32[o] = static_cast<float>(c);
      cache.sin_f32[o] = static_cast<float>(s);
    }
  }
}

void rope_apply(const RopeParams& p, const RopeCache& cache, RopeShape s, span<const float> x,
                span<float> y) {
  apply_impl<float>("rope_apply", p, cache, s, x, y, RopeShape{}, {}, {});
}
void rope_apply(const RopeParams& p, const RopeCache& cache, RopeShape s, span<const double> x,
                span<double> y) {
  apply_impl<double>("rope_apply", p, cache, s, x, y, RopeShape{}, {}, {});
}
void rope_apply_qk(const RopeParams& p, const RopeCache& cache, RopeShape q_shape,
                   span<const float> q, span<float> q_out, RopeShape k_shape,
                   span<const float> k, span<float> k_out) {
  apply_impl<float>("rope_apply_qk", p, cache, q_shape, q, q_out, k_shape, k, k_out);
}
void rope_apply_qk(const RopeParams& p, const RopeCache& cache, RopeShape q_shape,
                   span<const double> q, span<double> q_out, RopeShape k_shape,
                   span<const double> k, span<double> k_out) {
  apply_impl<double>("rope_apply_qk", p, cache, q_shape, q, q_out, k_shape, k, k_out);
}

}  // namespace posenc::optimized
