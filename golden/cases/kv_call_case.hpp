// The in-memory golden case of one KV-cache call sequence (a prefill, then decode steps) of one
// float32 sequence: the kv_cache generator's trace (golden/schemes/kv_cache/kv_cache_golden.cpp) with the mp50
// oracle, the mp100 cross-check and every profile's budgets, built for a drawn configuration.
// For check/kv_cache.hpp (posenc's KV-cache properties on a user's cache), not for files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "reference/kv_cache.hpp"

namespace posenc::golden {

struct KvCallDef {
  reference::KvCacheParams params;  // batch 1, float32 inputs drawn from `seed`
  std::vector<std::int64_t> steps;  // tokens appended by each step (the first is the prefill)
  std::uint64_t seed = 0;
  /// "" = the correct numbering; else a kv_cache mistake (restart-at-0, cache-length-position):
  /// the expected values an engine with that mistake produces (for the diagnosis).
  std::string mistake;
};

/// Tensors sNN.q [1, T, H, d], sNN.k and sNN.v [1, T, Hkv, d] (inputs), sNN.out [1, T, H, d]
/// (expected, conditioned). InvalidArgument for an unusable configuration.
LoadedCase kv_call_case(const KvCallDef& def);

}  // namespace posenc::golden
