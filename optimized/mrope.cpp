// M-RoPE float kernel. Formula: see reference/mrope.hpp; contract: optimized/mrope.hpp.
//
// Numerics: the RoPE kernel's (optimized/rope.cpp), per pair: theta_i in long double rounded
// once to double, p = p_hi + p_lo (p_hi a multiple of 16), sincos_f64 of p_hi theta_i and of
// p_lo theta_i, the angle-addition formulas in double (rope_angle_sum), times the factor, one
// rounding to float; then two products and a sum per element: the 2 eps_f32 bound.
#include "optimized/mrope.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "reference/common/mutant.hpp"
#include "optimized/fast_math.hpp"
#include "reference/common/errors.hpp"

namespace posenc::optimized {
namespace {

/// Shape, size and aliasing of one tensor and its output.
void check_tensor(const char* fn, const char* name, const RopeParams& p, std::int64_t n_tokens,
                  RopeShape s, span<const float> x, span<float> y) {
  if (s.n_tokens != n_tokens) {
    throw_invalid(
        fn, std::string(name) + ".n_tokens must equal q's " + std::to_string(n_tokens) + " tokens",
        s.n_tokens);
  }
  if (s.n_heads <= 0) throw_invalid(fn, std::string(name) + ".n_heads must be positive", s.n_heads);
  const std::size_t n = static_cast<std::size_t>(s.n_tokens) * s.n_heads * p.head_dim;
  if (x.size() != n) {
    throw_invalid(
        fn,
        std::string(name) + " must have tokens*heads*head_dim = " + std::to_string(n) + " elements",
        x.size());
  }
  if (y.size() != n) {
    throw_invalid(fn, std::string(name) + "_out must have " + std::to_string(n) + " elements",
                  y.size());
  }
  const float* xb = x.data();
  const float* yb = y.data();
  if (xb != yb && xb < yb + n && yb < xb + n) {
    throw_invalid(fn, std::string(name) + " and its output overlap without being identical",
                  "partial overlap");
  }
}

/// One head row; x may equal y (each iteration reads its pair before writing it).
void rotate_row(int head_dim, int d, bool interleaved, bool alias, const float* c, const float* s,
                const float* x, float* y) {
  const int half = d / 2;
  if (interleaved) {
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const float xa = x[2 * i];
      const float xb = x[2 * i + 1];
      y[2 * i] = xa * c[i] - xb * s[i];
      y[2 * i + 1] = xa * s[i] + xb * c[i];
    }
  } else {
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const float xa = x[i];
      const float xb = x[i + half];
      // The fused multiply-adds of the RoPE kernel's half-split loop (optimized/rope.cpp), written
      // out so that text tokens give its bits in every build, -O1 included.
      y[i] = std::fma(xa, c[i], -(xb * s[i]));
      y[i + half] = std::fma(alias ? x[i] : xa, s[i], xb * c[i]);  // mutant: re-reads an in-place x
    }
  }
  if (x != y && head_dim > d) {
    std::memcpy(y + d, x + d, sizeof(float) * static_cast<std::size_t>(head_dim - d));
  }
}

/// cos and sin (times factor, rounded to float) of tokens [t0, t0 + nt) into c, s as [nt, np];
/// pair i of token t reads positions[stream[i] * n_tok + t].
/// low_c, low_s: cos / sin of b theta_i for b in [0, kRopeLowSpan), [kRopeLowSpan, np]; m, lo:
/// np values of scratch each. The values are the RoPE kernel's (rope_angle_sum of the same
/// sincos_f64 results), so a text token gets rope_apply_qk_positions's bits.
void block_table(const std::int64_t* positions, std::int64_t n_tok, std::int64_t t0, int nt, int np,
                 const int* stream, const double* inv_freq, const double* low_c,
                 const double* low_s, double factor, double* m, int* lo, float* c, float* s) {
  const bool t_only = POSENC_MUTANT("opt_mrope_stream_t_only");
  for (int t = 0; t < nt; ++t) {
    for (int i = 0; i < np; ++i) {
      const std::int64_t pos = positions[(t_only ? 0 : stream[i]) * n_tok + t0 + t];
      const std::int64_t hi = pos >> 4;  // floor(pos / 16), also for pos < 0
      m[i] = static_cast<double>(hi * kRopeLowSpan);
      lo[i] = static_cast<int>(pos - hi * kRopeLowSpan);
    }
    float* ct = c + static_cast<std::size_t>(t) * np;
    float* st = s + static_cast<std::size_t>(t) * np;
#pragma omp simd
    for (int i = 0; i < np; ++i) {
      double sh, ch;
      sincos_f64(m[i] * inv_freq[i], &sh, &ch);
      const std::size_t at = static_cast<std::size_t>(lo[i]) * np + i;
      rope_angle_sum(ch, sh, low_c[at], low_s[at], factor, ct + i, st + i);
    }
  }
}

}  // namespace

void mrope_apply_qk_positions(const RopeParams& p, const MropeMap& map,
                              span<const std::int64_t> positions, double attention_factor,
                              RopeShape qs, span<const float> q, span<float> q_out, RopeShape ks,
                              span<const float> k, span<float> k_out) {
  constexpr const char* fn = "mrope_apply_qk_positions";
  reference::mrope_check(p, map, fn);
  const int np = p.rotary_dim / 2;
  const std::int64_t n_tok = qs.n_tokens;
  if (n_tok < 0) throw_invalid(fn, "q.n_tokens must be >= 0", n_tok);
  check_tensor(fn, "q", p, n_tok, qs, q, q_out);
  const bool has_k = ks.n_heads != 0 || !k.empty();
  if (has_k) check_tensor(fn, "k", p, n_tok, ks, k, k_out);
  const std::size_t n_pos =
      static_cast<std::size_t>(map.n_streams) * static_cast<std::size_t>(n_tok);
  if (positions.size() != n_pos) {
    throw_invalid(fn,
                  "positions must have n_streams * tokens = " + std::to_string(n_pos) +
                      " entries ([streams, tokens])",
                  positions.size());
  }
  for (std::size_t j = 0; j < positions.size(); ++j) {
    if ((positions[j] > kMropeMaxPosition || positions[j] < -kMropeMaxPosition) &&
        !POSENC_MUTANT("opt_mrope_position_unchecked")) {
      throw_invalid(fn,
                    "positions[stream " + std::to_string(j / std::max<std::int64_t>(n_tok, 1)) +
                        ", token " + std::to_string(j % std::max<std::int64_t>(n_tok, 1)) +
                        "] must satisfy |p| <= 2^28",
                    positions[j]);
    }
  }
  // theta_i in long double, one rounding to double (rope_cache_init's expression for k = i).
  std::vector<double> freq(static_cast<std::size_t>(np));
  std::vector<int> stream(static_cast<std::size_t>(np));
  const long double base = p.base;
  for (int i = 0; i < np; ++i) {
    const auto& pr = map.pairs[static_cast<std::size_t>(i)];
    freq[i] = static_cast<double>(
        std::pow(base, -static_cast<long double>(2 * pr.freq_index) / pr.freq_dim));
    if (POSENC_MUTANT("opt_mrope_theta_double_exponent")) {  // the exponent rounded to double
      freq[i] = std::pow(p.base, -static_cast<double>(2 * pr.freq_index) / pr.freq_dim);
    }
    if (!(freq[i] <= 2.0)) {
      throw_invalid(fn, "theta of pair " + std::to_string(i) + " must be <= 2 (base < 1?)",
                    freq[i]);
    }
    stream[i] = pr.stream;
  }
  if (attention_factor <= 0.0) attention_factor = p.attention_factor;
  if (!std::isfinite(attention_factor)) {
    throw_invalid(fn, "attention_factor must be finite", attention_factor);
  }
  const int block = kMropeTokenBlock;
  const std::int64_t n_blocks = (n_tok + block - 1) / block;
  const int h = p.head_dim;
  const int d = p.rotary_dim;
  const bool interleaved = p.layout == reference::RopeLayout::kInterleaved;
  const bool alias = POSENC_MUTANT("opt_mrope_inplace_alias");
  const bool thread_dependent = POSENC_MUTANT("opt_mrope_thread_dependent");
  // cos / sin of b theta_i, b < kRopeLowSpan (as rope_apply_qk_positions builds them).
  std::vector<double> low_c(static_cast<std::size_t>(kRopeLowSpan) * np), low_s(low_c.size());
  for (int b = 0; b < kRopeLowSpan; ++b) {
#pragma omp simd
    for (int i = 0; i < np; ++i) {
      sincos_f64(static_cast<double>(b) * freq[i], &low_s[static_cast<std::size_t>(b) * np + i],
                 &low_c[static_cast<std::size_t>(b) * np + i]);
    }
  }
#pragma omp parallel
  {
    std::vector<float> ct(static_cast<std::size_t>(block) * np);
    std::vector<float> st(ct.size());
    std::vector<double> mt(static_cast<std::size_t>(np));
    std::vector<int> lo(static_cast<std::size_t>(np));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      const std::int64_t t0 = b * block;
      const int nt = static_cast<int>(std::min<std::int64_t>(block, n_tok - t0));
      block_table(positions.data(), n_tok, t0, nt, np, stream.data(), freq.data(), low_c.data(),
                  low_s.data(), attention_factor, mt.data(), lo.data(), ct.data(), st.data());
      for (int which = 0; which < (has_k ? 2 : 1); ++which) {
        const RopeShape& s = which == 0 ? qs : ks;
        const float* x = which == 0 ? q.data() : k.data();
        float* y = which == 0 ? q_out.data() : k_out.data();
        const bool thd = s.layout == RopeTensorLayout::kTokensHeadsDim;
        for (int t = 0; t < nt; ++t) {
          for (int hh = 0; hh < s.n_heads; ++hh) {
            const std::int64_t row = thd ? (t0 + t) * s.n_heads + hh : hh * n_tok + t0 + t;
            rotate_row(h, d, interleaved, alias, ct.data() + static_cast<std::size_t>(t) * np,
                       st.data() + static_cast<std::size_t>(t) * np, x + row * h, y + row * h);
            if (thread_dependent) mutant_nudge(y + row * h, d, omp_get_thread_num());
          }
        }
      }
    }
  }
}

}  // namespace posenc::optimized
