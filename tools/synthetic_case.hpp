// A synthetic golden case for throughput measurements of `posenc verify` (tools/bench.cpp): a
// RoPE-shaped case (inputs positions [T] and q [T, H, D]; expected q_rot [T, H, D] with its
// exact f64 and cond f32 companions) in the catalog's format, written tensor by tensor without
// holding any tensor in memory, and an engine output that reproduces it.
//
// Contract: the exact values come from a double-precision evaluation of the rotation (cos and
// sin of p * 10000^(-2i/D) in double), NOT from the mp oracle: the case measures throughput
// and is no reference. q_rot is the exact value rounded to float32, the output equals q_rot,
// so the case passes under strict, fp32 and fp32-recurrence.
#pragma once
#include <cstdint>
#include <filesystem>

namespace posenc::tools {

struct SyntheticCase {
  std::filesystem::path manifest;  // <dir>/<id>.json (its tensors file beside it)
  std::filesystem::path actual;    // <dir>/actual/<id>.safetensors (q_rot)
  std::uint64_t golden_bytes = 0, actual_bytes = 0;  // file sizes
};

/// Writes the case under dir (created if missing); InvalidArgument on a non-positive size or
/// an odd head_dim, GoldenFileError when a file cannot be written.
SyntheticCase write_synthetic_rope_case(const std::filesystem::path& dir, std::int64_t tokens,
                                        std::int64_t heads, std::int64_t head_dim);

}  // namespace posenc::tools
