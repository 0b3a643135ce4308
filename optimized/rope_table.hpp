// The cos/sin table of a RopeCache, shared by rope_cache_init (optimized/rope.cpp) and
// rope_proportional_cache_init (optimized/rope_proportional.cpp). Internal to the optimized
// kernels: the public contract is optimized/rope.hpp's.
#pragma once
#include <cstdint>

#include "optimized/rope.hpp"
#include "reference/common/span.hpp"

namespace posenc::optimized {

/// InvalidArgument from `fn` naming the first position with |m| > kRopeMaxPosition.
void rope_check_positions(const char* fn, span<const std::int64_t> positions);

/// Deliberate table bugs of the mutant test build (rope_cache_init only); all false otherwise.
struct RopeTableMutants {
  bool off_by_one = false, angle_f32 = false, sin_flip = false, cos_only = false;
};

/// Fills cache's four [positions, n_pairs] tables from cache.positions and cache.inv_freq
/// (n_pairs entries, set by the caller): factor cos(m theta_i) and factor sin(m theta_i) with
/// phi = m theta_i in double and glibc's cos / sin, kept in double and rounded once to float.
/// OpenMP over positions (static schedule); each value depends on its position and pair only,
/// so the bits do not depend on the thread count.
void rope_fill_cache_tables(RopeCache& cache, double factor, const RopeTableMutants& mut = {});

}  // namespace posenc::optimized
