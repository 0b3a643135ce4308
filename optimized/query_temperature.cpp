// Query temperature kernel. Formula: see reference/query_temperature.hpp; contract:
// optimized/query_temperature.hpp.
#include "optimized/query_temperature.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"

namespace posenc::optimized {

double query_temperature_f64(const QueryTemperature& t, std::int64_t m) {
  const std::int64_t n = reference::query_temperature_steps(t, m);  // checks t and m
  return n == 0 ? 1.0 : 1.0 + t.coefficient * std::log1p(static_cast<double>(n));
}

void query_temperature_apply(const QueryTemperature& t, span<const std::int64_t> positions,
                             span<float> q) {
  constexpr const char* fn = "query_temperature_apply";
  reference::query_temperature_check(t, fn);
  const std::size_t rows = positions.size();
  if (rows == 0) {
    if (!q.empty()) throw_invalid(fn, "q must be empty without positions", q.size());
    return;
  }
  if (q.size() % rows != 0) {
    throw_invalid(fn, "q must have a multiple of " + std::to_string(rows) + " entries", q.size());
  }
  std::vector<float> tau(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    if (positions[r] < 0) {
      throw_invalid(fn, "positions[" + std::to_string(r) + "] must be >= 0", positions[r]);
    }
    tau[r] = static_cast<float>(query_temperature_f64(t, positions[r]));
  }
  const std::size_t row = q.size() / rows;
  const std::int64_t n_rows = static_cast<std::int64_t>(rows);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n_rows; ++r) {
    float* x = q.data() + static_cast<std::size_t>(r) * row;
    const float f = tau[static_cast<std::size_t>(r)];
#pragma omp simd
    for (std::size_t c = 0; c < row; ++c) x[c] *= f;
  }
}

}  // namespace posenc::optimized
