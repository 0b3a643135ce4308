// Sinusoidal float kernels. Formula: see reference/sinusoidal.hpp; contract:
// optimized/sinusoidal.hpp.
//
// Numerics (u53 = 2^-53, eps = eps_f32 = 2^-23):
//   omega_i = powl(base, -k) in long double, k = 2i/d or i/max(n-1, 1): the exponent's rounding
//     (2^-64 relative, |k| <= 2) is amplified by ln(base) to below 2^-58 for base <= 1e7, then
//     one rounding to double: |d omega| <= omega (u53 + 2^-58).
//   phi = m * omega_i in double (m exact): |d phi| <= |phi| (2 u53 + 2^-58) ~ 1.03 |phi| 2^-52.
//   sin, cos from glibc in double (< 1 ulp of double), then one rounding to float: at most half
//     an ulp of float, <= eps / 4 for values in [-1, 1].
//   Table error <= 1.03 |phi| 2^-52 + eps / 4 + 2^-53: 0.77 eps at |phi| = |m| = 2^28
//     (kSinusoidalMaxPosition; omega <= 1 as base >= 1), 0.32 eps at the golden cases' 2^24 + 1.
//   h = fl(e + PE): table error plus half an ulp of h (<= eps (1 + |e|) / 2), so
//     |h - h*| <= 1.27 eps (1 + |e|) < kSinusoidalAddMaxError.
// Doing the angle in float instead (t2t, fairseq) gives |d phi| of a few |phi| 2^-24: 0.06 rad
// at m = 2^20, far outside these bounds; that pipeline is the fp32-angles verify profile's.
#include "optimized/sinusoidal.hpp"

#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

struct Mutants {  // resolved once per call; all false outside the mutant test build
  bool sin_cos_swapped = POSENC_MUTANT("opt_sin_cos_swapped");
  bool position_off_by_one = POSENC_MUTANT("opt_position_off_by_one");
  bool angle_float32 = POSENC_MUTANT("opt_angle_float32");
  bool odd_extra_frequency = POSENC_MUTANT("opt_odd_extra_frequency");
  bool thread_dependent = POSENC_MUTANT("opt_thread_dependent");
  bool inplace_alias = POSENC_MUTANT("opt_inplace_alias");
  bool add_first_position = POSENC_MUTANT("opt_add_first_position");
};

void check_params(const char* fn, const SinusoidalParams& p) {
  reference::sinusoidal_check(p, fn);
  if (!(p.base >= 1.0)) throw_invalid(fn, "base must be >= 1", p.base);
}

void check_positions(const char* fn, span<const std::int64_t> positions) {
  if (POSENC_MUTANT("opt_position_check_dropped")) return;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    if (positions[t] > kSinusoidalMaxPosition || positions[t] < -kSinusoidalMaxPosition) {
      throw_invalid(fn, "positions[" + std::to_string(t) + "] must satisfy |m| <= 2^28",
                    positions[t]);
    }
  }
}

std::vector<double> inv_freq_impl(const SinusoidalParams& p) {
  const int d = p.d_model;
  const int n = reference::sinusoidal_n_freq(p);
  const long double base = p.base;
  std::vector<double> omega(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    long double k;
    if (p.variant == SinusoidalVariant::kPaper) {
      k = static_cast<long double>(2 * i) / d;
    } else {
      const int denom = POSENC_MUTANT("opt_wrong_denominator") ? n : (n > 2 ? n - 1 : 1);
      k = static_cast<long double>(i) / denom;
    }
    omega[i] = static_cast<double>(std::pow(base, -k));
  }
  return omega;
}

/// One table row (d floats) at position m. phi: scratch of n doubles owned by the thread.
void build_row(const SinusoidalParams& p, const double* omega, int n, std::int64_t m,
               const Mutants& mut, double* phi, float* row) {
  const int d = p.d_model;
  if (mut.position_off_by_one) m += 1;
  const double md = static_cast<double>(m);
#pragma omp simd
  for (int i = 0; i < n; ++i) phi[i] = md * omega[i];
  if (mut.angle_float32) {
    for (int i = 0; i < n; ++i) {
      phi[i] = static_cast<double>(static_cast<float>(m) * static_cast<float>(omega[i]));
    }
  }
  const bool paper = p.variant == SinusoidalVariant::kPaper;
  const int full = paper ? d / 2 : n;  // frequencies that have both a sin and a cos channel
  for (int i = 0; i < full; ++i) {
    float s = static_cast<float>(std::sin(phi[i]));
    float c = static_cast<float>(std::cos(phi[i]));
    if (mut.sin_cos_swapped) std::swap(s, c);
    row[paper ? 2 * i : i] = s;
    row[paper ? 2 * i + 1 : n + i] = c;
  }
  if (d % 2 == 1) {
    if (paper) {
      row[d - 1] = static_cast<float>(std::sin(phi[n - 1]));  // the lone sin channel
    } else if (mut.odd_extra_frequency) {
      const double w = std::pow(p.base, -static_cast<double>(n) / (n > 2 ? n - 1 : 1));
      row[d - 1] = static_cast<float>(std::sin(md * w));
    } else {
      row[d - 1] = 0.0f;  // the appended zero column
    }
  }
}

void perturb_if_other_thread(const Mutants& mut, int d, float* row) {
  if (mut.thread_dependent && omp_get_thread_num() != 0) {  // mutant: other threads' rows differ
    for (int c = 0; c < d; ++c) row[c] = std::nextafter(row[c], 2.0f);
  }
}

}  // namespace

std::vector<double> sinusoidal_inv_freq(const SinusoidalParams& p) {
  check_params("sinusoidal_inv_freq", p);
  return inv_freq_impl(p);
}

void sinusoidal_rows(const SinusoidalParams& p, span<const std::int64_t> positions,
                     span<float> pe) {
  constexpr const char* fn = "sinusoidal_rows";
  check_params(fn, p);
  check_positions(fn, positions);
  const int d = p.d_model;
  const std::size_t size = positions.size() * static_cast<std::size_t>(d);
  if (pe.size() != size) {
    throw_invalid(fn, "pe must have rows * d_model = " + std::to_string(size) + " entries",
                  pe.size());
  }
  const std::vector<double> omega = inv_freq_impl(p);
  const int n = static_cast<int>(omega.size());
  const Mutants mut;
  const std::int64_t rows = static_cast<std::int64_t>(positions.size());
#pragma omp parallel if (rows * d >= kSinusoidalParallelMinElements)
  {
    std::vector<double> phi(static_cast<std::size_t>(n) + 1);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = pe.data() + r * d;
      build_row(p, omega.data(), n, positions[r], mut, phi.data(), row);
      perturb_if_other_thread(mut, d, row);
    }
  }
}

std::vector<float> sinusoidal_rows(const SinusoidalParams& p, span<const std::int64_t> positions) {
  check_params("sinusoidal_rows", p);
  std::vector<float> pe(positions.size() * static_cast<std::size_t>(p.d_model));
  sinusoidal_rows(p, positions, pe);
  return pe;
}

void sinusoidal_add(const SinusoidalParams& p, span<const std::int64_t> positions,
                    span<const float> e, span<float> h) {
  constexpr const char* fn = "sinusoidal_add";
  check_params(fn, p);
  check_positions(fn, positions);
  const int d = p.d_model;
  const std::size_t size = positions.size() * static_cast<std::size_t>(d);
  if (e.size() != size) {
    throw_invalid(fn, "e must have rows * d_model = " + std::to_string(size) + " entries",
                  e.size());
  }
  if (h.size() != size) {
    throw_invalid(fn, "h must have rows * d_model = " + std::to_string(size) + " entries",
                  h.size());
  }
  const float* eb = e.data();
  const float* hb = h.data();
  if (eb != hb && size > 0 && eb < hb + size && hb < eb + size) {
    throw_invalid(fn, "e and h overlap without being identical", "partial overlap");
  }
  const std::vector<double> omega = inv_freq_impl(p);
  const int n = static_cast<int>(omega.size());
  const Mutants mut;
  const std::int64_t rows = static_cast<std::int64_t>(positions.size());
#pragma omp parallel if (rows * d >= kSinusoidalParallelMinElements)
  {
    std::vector<double> phi(static_cast<std::size_t>(n) + 1);
    std::vector<float> row(static_cast<std::size_t>(d));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t m = mut.add_first_position ? positions[0] : positions[r];
      build_row(p, omega.data(), n, m, mut, phi.data(), row.data());
      perturb_if_other_thread(mut, d, row.data());
      const float* er = eb + r * d;
      float* hr = h.data() + r * d;
      const float* pr = row.data();
      if (mut.inplace_alias) {  // mutant: PE written first, e read after (wrong in place)
        for (int c = 0; c < d; ++c) hr[c] = pr[c];
        for (int c = 0; c < d; ++c) hr[c] = er[c] + hr[c];
        continue;
      }
#pragma omp simd
      for (int c = 0; c < d; ++c) hr[c] = er[c] + pr[c];
    }
  }
}

}  // namespace posenc::optimized
