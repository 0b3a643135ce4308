// The compiled part of check/kv_cache.hpp (posenc's KV-cache properties on a user's cache): the
// calling convention, and one property at one drawn configuration, judged with the budgets of the
// in-memory golden trace of that configuration (golden/cases/kv_call_case.hpp: the kv_cache
// generator's mp50 oracle and per-profile budgets). check/kv_cache.hpp adds the RapidCheck and
// GoogleTest glue.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "golden/cases/check_rope.hpp"  // PropertyResult
#include "reference/common/span.hpp"
#include "reference/rope.hpp"

namespace posenc::check {

/// A cache configuration: one sequence, causal attention with scale 1/sqrt(head_dim), values of
/// head_dim channels, query head h reads kv head h / (n_heads / n_kv_heads). RoPE with `base`
/// and `layout` over all head_dim channels is applied to q and k at their positions (keys are
/// cached rotated, or raw and rotated when read: the cache's choice). `capacity` slots; window
/// 0: every token stays (the properties never append more than capacity); window w > 0: a
/// sliding window (a query at position p sees keys at positions p - w < k <= p) in a ring buffer
/// of capacity >= w slots that evicts the oldest token when full.
struct KvCacheCheckConfig {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  double base = 10000.0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  std::int64_t capacity = 0, window = 0;
};

/// One step of a session: n_tokens new tokens, q [n, n_heads, head_dim], k and v
/// [n, n_kv_heads, head_dim] (raw, before RoPE), their positions [n] (the sequence's own
/// numbering: 0, 1, 2, ... across steps). The step appends them to the cache and writes their
/// attention outputs out [n, n_heads, head_dim] (each token sees the cached keys and the step's
/// tokens up to itself).
struct KvStepCall {
  std::int64_t n_tokens = 0;
  span<const std::int64_t> positions;
  span<const float> q, k, v;
  span<float> out;
};
using KvStepFunction = std::function<void(const KvStepCall&)>;
/// Makes a fresh session (an empty cache) for a configuration; its step function keeps the cache.
using KvSessionFactory = std::function<KvStepFunction(const KvCacheCheckConfig&)>;

struct KvCacheCheckOptions {
  std::string profile = "fp32";  // strict, fp32, fp32-recurrence
  std::vector<int> head_dims = {8, 16};
  std::vector<double> bases = {10000.0, 500000.0};
  std::vector<RopeLayout> layouts = {RopeLayout::kHalfSplit, RopeLayout::kInterleaved};
  int max_prefill = 8;  // tokens of the first step
  int max_decode = 6;   // one-token steps after it
  bool sliding_window = true;  // false: plain caches only (window 0, capacity = every token)
  int max_success = 10;  // per property; RC_PARAMS max_success lowers it
};

enum class KvCacheProperty { kOracle, kPrefillDecode };

inline const char* kv_cache_property_name(KvCacheProperty p) {
  return p == KvCacheProperty::kOracle ? "Oracle" : "PrefillDecode";
}

namespace detail {

struct KvDraw {
  KvCacheCheckConfig config;
  std::int64_t prefill = 1, decode = 1;
  std::uint64_t seed = 0;
};

std::string describe(const KvDraw& d);

/// InvalidArgument naming `function` unless profile is strict, fp32 or fp32-recurrence (the
/// traces are float32; bf16 and f16 judge 16-bit pipelines).
void kv_check_profile(const std::string& profile, const char* function);

/// "" when the property holds at d; else what failed, with the diagnosis when it is a known
/// numbering mistake.
std::string kv_property_at(KvCacheProperty which, const KvSessionFactory& factory,
                           const KvDraw& d, const std::string& profile);

}  // namespace detail
}  // namespace posenc::check
