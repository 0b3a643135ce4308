// Learned absolute position embedding kernels. Formula: see reference/learned.hpp; contract:
// optimized/learned.hpp.
//
// Numerics: the only arithmetic is e + P in the kernel type, one IEEE rounding. The row indices
// are validated and stored once at entry, so the parallel loop is a plain gather + add with no
// branch per element and nothing that can throw.
#include "optimized/learned.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

struct Mutants {  // resolved once per call; all false outside the mutant test build
  bool offset_ignored = POSENC_MUTANT("opt_offset_ignored");
  bool row_off_by_one = POSENC_MUTANT("opt_row_off_by_one");
  bool bounds_clamped = POSENC_MUTANT("opt_bounds_clamped");
  bool gather_then_add = POSENC_MUTANT("opt_gather_then_add");
  bool thread_dependent = POSENC_MUTANT("opt_rows_thread_dependent");
  bool add_truncated = POSENC_MUTANT("opt_add_truncated");
};

template <class T>
bool overlaps(const T* a, std::size_t na, const T* b, std::size_t nb) {
  return na > 0 && nb > 0 && a < b + nb && b < a + na;
}

/// Validates everything once and returns the table row of every token.
template <class T>
std::vector<std::int64_t> checked_rows(const char* fn, const LearnedParams& p, span<const T> table,
                                       span<const std::int64_t> positions, const T* e,
                                       std::size_t e_size, span<T> out, const char* out_name,
                                       const Mutants& mut) {
  reference::learned_check(p, fn);
  const std::size_t d = static_cast<std::size_t>(p.d_model > 0 ? p.d_model : 0);
  const std::size_t n = positions.size() * d;
  if (table.size() != static_cast<std::size_t>(p.max_positions) * d) {
    throw_invalid(fn,
                  "table must have max_positions * d_model = " +
                      std::to_string(static_cast<std::size_t>(p.max_positions) * d) + " entries",
                  table.size());
  }
  if (e != nullptr && e_size != n) {
    throw_invalid(fn, "e must have tokens * d_model = " + std::to_string(n) + " entries", e_size);
  }
  if (out.size() != n) {
    throw_invalid(
        fn,
        std::string(out_name) + " must have tokens * d_model = " + std::to_string(n) + " entries",
        out.size());
  }
  if (!POSENC_MUTANT("opt_overlap_ignored")) {
    if (overlaps<T>(out.data(), n, table.data(), table.size())) {
      throw_invalid(fn, std::string(out_name) + " overlaps the table", "overlap");
    }
    if (e != nullptr && e != out.data() && overlaps<T>(out.data(), n, e, e_size)) {
      throw_invalid(fn, std::string(out_name) + " and e overlap without being identical",
                    "partial overlap");
    }
  }
  std::vector<std::int64_t> rows(positions.size());
  const std::int64_t last = p.max_positions - 1;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(p.position_offset, positions[t], &r)) {
      throw_invalid(fn,
                    "position_offset " + std::to_string(p.position_offset) + " + positions[" +
                        std::to_string(t) + "] overflows int64",
                    positions[t]);
    }
    if (r < 0 || r > last) {
      if (!mut.bounds_clamped) {
        throw_invalid(fn,
                      "row position_offset + positions[" + std::to_string(t) +
                          "] must lie in [0, max_positions = " + std::to_string(p.max_positions) +
                          ")",
                      r);
      }
      r = r < 0 ? 0 : last;  // mutant: a silent clamp instead of the error
    }
    // Mutants that read a wrong (but in-table) row.
    if (mut.offset_ignored) r = std::min(std::max<std::int64_t>(positions[t], 0), last);
    if (mut.row_off_by_one) r = std::min(r + 1, last);
    rows[t] = r;
  }
  return rows;
}

/// Round-toward-zero sum (mutant only): the double sum of two floats is exact here, then the
/// float rounding is pulled back toward zero when it went away from it.
inline float add_truncated(float a, float b) {
  const double s = static_cast<double>(a) + static_cast<double>(b);
  float f = static_cast<float>(s);
  if (std::fabs(static_cast<double>(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
  return f;
}
inline double add_truncated(double a, double b) { return a + b; }

template <class T>
void apply_impl(const LearnedParams& p, span<const T> table, span<const std::int64_t> positions,
                span<const T> e, span<T> h) {
  constexpr const char* fn = "learned_apply";
  const Mutants mut;
  const std::vector<std::int64_t> rows =
      checked_rows<T>(fn, p, table, positions, e.data(), e.size(), h, "h", mut);
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
  const std::size_t d = static_cast<std::size_t>(p.d_model);
  const T* tab = table.data();
  const T* ep = e.data();
  T* hp = h.data();
  const bool parallel = n_tok * static_cast<std::int64_t>(d) >= kLearnedParallelMinElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t t = 0; t < n_tok; ++t) {
    const T* src = tab + static_cast<std::size_t>(rows[t]) * d;
    const T* et = ep + static_cast<std::size_t>(t) * d;
    T* ht = hp + static_cast<std::size_t>(t) * d;
    if (mut.gather_then_add) {  // mutant: gather into h first, then add e (wrong in place)
      std::memcpy(ht, src, sizeof(T) * d);
      for (std::size_t c = 0; c < d; ++c) ht[c] = et[c] + ht[c];
    } else if (mut.add_truncated) {
      for (std::size_t c = 0; c < d; ++c) ht[c] = add_truncated(et[c], src[c]);
    } else {
      // In place is safe: element c reads e[c] before writing h[c] and nothing else.
#pragma omp simd
      for (std::size_t c = 0; c < d; ++c) ht[c] = et[c] + src[c];
    }
    if (mut.thread_dependent && omp_get_thread_num() != 0) {  // mutant: other threads differ
      for (std::size_t c = 0; c < d; ++c) {
        ht[c] = static_cast<T>(ht[c] + ht[c] * std::numeric_limits<T>::epsilon());
      }
    }
  }
}

template <class T>
void lookup_impl(const LearnedParams& p, span<const T> table, span<const std::int64_t> positions,
                 span<T> out) {
  constexpr const char* fn = "learned_lookup";
  const Mutants mut;
  const std::vector<std::int64_t> rows =
      checked_rows<T>(fn, p, table, positions, nullptr, 0, out, "rows", mut);
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
  const std::size_t d = static_cast<std::size_t>(p.d_model);
  const bool parallel = n_tok * static_cast<std::int64_t>(d) >= kLearnedParallelMinElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t t = 0; t < n_tok; ++t) {
    std::memcpy(out.data() + static_cast<std::size_t>(t) * d,
                table.data() + static_cast<std::size_t>(rows[t]) * d, sizeof(T) * d);
  }
}

}  // namespace

void learned_apply(const LearnedParams& p, span<const float> table,
                   span<const std::int64_t> positions, span<const float> e, span<float> h) {
  apply_impl<float>(p, table, positions, e, h);
}
void learned_apply(const LearnedParams& p, span<const double> table,
                   span<const std::int64_t> positions, span<const double> e, span<double> h) {
  apply_impl<double>(p, table, positions, e, h);
}
void learned_lookup(const LearnedParams& p, span<const float> table,
                    span<const std::int64_t> positions, span<float> rows) {
  lookup_impl<float>(p, table, positions, rows);
}
void learned_lookup(const LearnedParams& p, span<const double> table,
                    span<const std::int64_t> positions, span<double> rows) {
  lookup_impl<double>(p, table, positions, rows);
}

}  // namespace posenc::optimized
