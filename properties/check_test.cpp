// The public property API (check/rope.hpp, alibi.hpp, t5_bias.hpp, kv_cache.hpp) on posenc's own
// (dogfooding) and on deliberately broken kernels, each of which must be caught.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "check/alibi.hpp"
#include "check/kv_cache.hpp"
#include "check/rope.hpp"
#include "check/t5_bias.hpp"
#include "golden/cases/pipelines.hpp"
#include "optimized/alibi.hpp"
#include "optimized/kv_cache.hpp"
#include "optimized/rope.hpp"
#include "reference/common/mutant.hpp"

namespace {

namespace pc = posenc::check;
using posenc::reference::RopeLayout;

/// posenc's optimized float kernel (cos/sin from double angles, correctly rounded): strict.
void optimized_rope(const pc::RopeCall& c) {
  posenc::reference::RopeParams p;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim;
  p.base = c.base;
  p.layout = c.layout;
  const auto cache = posenc::optimized::rope_cache_init(p, c.positions);
  const std::int64_t tn = static_cast<std::int64_t>(c.positions.size());
  posenc::optimized::rope_apply_qk(p, cache, {tn, c.n_heads}, c.q, c.q_out, {tn, c.n_kv_heads},
                                   c.k, c.k_out);
}

/// What a broken float32 kernel gets wrong.
enum class Bug { kNone, kPairing, kOffByOne, kFloat16Angles, kSinSign };

/// HF's float32 RoPE (1/powf(base, 2i/d), float32 angle, cosf/sinf), with an optional bug.
template <Bug kBug>
void hf_rope(const pc::RopeCall& c) {
  const int d = c.rotary_dim, np = d / 2, h = c.head_dim;
  bool interleaved = c.layout == RopeLayout::kInterleaved;
  if (kBug == Bug::kPairing) interleaved = !interleaved;
  auto rotate = [&](posenc::span<const float> x, posenc::span<float> y, int heads) {
    for (std::size_t t = 0; t < c.positions.size(); ++t) {
      const std::int64_t m = c.positions[t] + (kBug == Bug::kOffByOne ? 1 : 0);
      for (int hh = 0; hh < heads; ++hh) {
        const std::size_t o = (t * heads + hh) * h;
        for (int ch = d; ch < h; ++ch) y[o + ch] = x[o + ch];
        for (int i = 0; i < np; ++i) {
          const float inv = 1.0f / std::pow(static_cast<float>(c.base),
                                            static_cast<float>(2 * i) / static_cast<float>(d));
          float angle = static_cast<float>(m) * inv;
          if (kBug == Bug::kFloat16Angles) angle = static_cast<float>(static_cast<_Float16>(angle));
          const float cs = std::cos(angle);
          const float sn = kBug == Bug::kSinSign ? -std::sin(angle) : std::sin(angle);
          const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + np;
          const float xa = x[o + a], xb = x[o + b];
          y[o + a] = xa * cs - xb * sn;
          y[o + b] = xa * sn + xb * cs;
        }
      }
    }
  };
  rotate(c.q, c.q_out, c.n_heads);
  rotate(c.k, c.k_out, c.n_kv_heads);
}

// Dogfooding: posenc's kernel under strict, HF's float32 pipeline under fp32, through the same
// macro a user calls.
// (10 draws per property instead of the default 25, head_dim up to 64: the test binary stays
// under 15 s.)
pc::RopeCheckOptions dogfood(const std::string& profile) {
  pc::RopeCheckOptions o;
  o.profile = profile;
  o.max_success = 10;
  o.head_dims = {8, 64};
  return o;
}
POSENC_ROPE_PROPERTIES(CheckOptimizedRope, optimized_rope, dogfood("strict"));
POSENC_ROPE_PROPERTIES(CheckHfFloat32Rope, hf_rope<Bug::kNone>, dogfood("fp32"));

/// Small draws: a broken kernel is found at the first draws; shrinking does the rest.
pc::RopeCheckOptions small(const std::string& profile) {
  pc::RopeCheckOptions o;
  o.profile = profile;
  o.head_dims = {8, 16};
  o.max_success = 15;
  return o;
}

TEST(CheckRope, HfFloat32FailsStrictAndTheDiagnosisSaysClaimFp32) {
  const auto r = pc::check_rope_property(pc::RopeProperty::kOracle, hf_rope<Bug::kNone>,
                                         small("strict"));
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("Oracle fails at"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("claim --profile fp32"), std::string::npos) << r.message;
}

TEST(CheckRope, OtherPairingIsCaughtAndDiagnosed) {
  for (auto p : {pc::RopeProperty::kOracle, pc::RopeProperty::kPairNorm}) {
    const auto r = pc::check_rope_property(p, hf_rope<Bug::kPairing>, small("fp32"));
    ASSERT_FALSE(r.passed) << pc::rope_property_name(p);
    EXPECT_NE(r.message.find("`pairing`"), std::string::npos) << r.message;
  }
}

TEST(CheckRope, PositionOffByOneIsCaughtAndDiagnosed) {
  for (auto p : {pc::RopeProperty::kOracle, pc::RopeProperty::kComposition}) {
    const auto r = pc::check_rope_property(p, hf_rope<Bug::kOffByOne>, small("fp32"));
    ASSERT_FALSE(r.passed) << pc::rope_property_name(p);
    EXPECT_NE(r.message.find("`offset`"), std::string::npos) << r.message;
  }
  // A constant offset keeps relative positions: the dot products agree, and only the oracle
  // check every property makes at its inputs sees it.
  const auto r = pc::check_rope_property(pc::RopeProperty::kRelative, hf_rope<Bug::kOffByOne>,
                                         small("fp32"));
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.message.find("q.k at positions"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("outputs vs the mp50 oracle"), std::string::npos) << r.message;
  std::cout << r.message << "\n";
}

TEST(CheckRope, Float16AnglesAreCaught) {
  for (auto p : {pc::RopeProperty::kOracle, pc::RopeProperty::kRelative}) {
    const auto r = pc::check_rope_property(p, hf_rope<Bug::kFloat16Angles>, small("fp32"));
    ASSERT_FALSE(r.passed) << pc::rope_property_name(p);
    EXPECT_NE(r.message.find("budget"), std::string::npos) << r.message;
  }
}

TEST(CheckRope, SinSignIsCaughtAndDiagnosed) {
  const auto r = pc::check_rope_property(pc::RopeProperty::kOracle, hf_rope<Bug::kSinSign>,
                                         small("fp32"));
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("`sin-sign`"), std::string::npos) << r.message;
}

TEST(CheckRope, RejectsA16BitProfile) {
  EXPECT_THROW(pc::check_rope_property(pc::RopeProperty::kOracle, optimized_rope, small("bf16")),
               posenc::InvalidArgument);
}

// ---- ALiBi ----------------------------------------------------------------------------------

enum class AlibiBug { kNone, kNaiveSlopes, kReversed, kSignFlipped };

/// Slopes from `slopes_of`, causal bias -m (i - j) as one float32 product, with an optional bug.
template <AlibiBug kBug>
void alibi_kernel(const pc::AlibiCall& c, std::vector<float> (*slopes_of)(int)) {
  std::vector<float> m = slopes_of(c.n_heads);
  if (kBug == AlibiBug::kNaiveSlopes) {
    for (int h = 0; h < c.n_heads; ++h) m[h] = std::exp2(-8.0f * (h + 1) / c.n_heads);
  }
  if (kBug == AlibiBug::kReversed) std::reverse(m.begin(), m.end());
  std::copy(m.begin(), m.end(), c.slopes.begin());
  const std::size_t tq = c.q_positions.size(), tk = c.k_positions.size();
  for (int h = 0; h < c.n_heads; ++h) {
    for (std::size_t i = 0; i < tq; ++i) {
      for (std::size_t j = 0; j < tk; ++j) {
        const float d = static_cast<float>(c.q_positions[i] - c.k_positions[j]);
        c.bias[(h * tq + i) * tk + j] = (kBug == AlibiBug::kSignFlipped ? 1.0f : -1.0f) * m[h] * d;
      }
    }
  }
}
std::vector<float> exact_slopes(int n) {
  return posenc::optimized::alibi_slopes(posenc::reference::AlibiParams{n});
}
void optimized_alibi(const pc::AlibiCall& c) { alibi_kernel<AlibiBug::kNone>(c, exact_slopes); }
void bloom_alibi(const pc::AlibiCall& c) {
  alibi_kernel<AlibiBug::kNone>(c, [](int n) { return posenc::golden::pipelines::bloom_slopes(n); });
}

pc::AlibiCheckOptions alibi_options(const std::string& profile) {
  pc::AlibiCheckOptions o;
  o.profile = profile;
  o.max_success = 15;
  return o;
}
POSENC_ALIBI_PROPERTIES(CheckOptimizedAlibi, optimized_alibi, alibi_options("strict"));
POSENC_ALIBI_PROPERTIES(CheckBloomFloat32Alibi, bloom_alibi, alibi_options("fp32"));

TEST(CheckAlibi, NaiveSlopesAreCaughtAndDiagnosed) {
  const auto r = pc::check_alibi_property(
      pc::AlibiProperty::kSlopes,
      [](const pc::AlibiCall& c) { alibi_kernel<AlibiBug::kNaiveSlopes>(c, exact_slopes); },
      alibi_options("fp32"));
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("diagnosis: naive slopes"), std::string::npos) << r.message;
}

TEST(CheckAlibi, ReversedSlopesAreCaughtAndDiagnosed) {
  const auto r = pc::check_alibi_property(
      pc::AlibiProperty::kSlopes,
      [](const pc::AlibiCall& c) { alibi_kernel<AlibiBug::kReversed>(c, exact_slopes); },
      alibi_options("fp32"));
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("reversed head order"), std::string::npos) << r.message;
}

TEST(CheckAlibi, FlippedBiasSignIsCaughtByTheRatios) {
  auto flipped = [](const pc::AlibiCall& c) {
    alibi_kernel<AlibiBug::kSignFlipped>(c, exact_slopes);
  };
  EXPECT_TRUE(pc::check_alibi_property(pc::AlibiProperty::kSlopes, flipped,
                                       alibi_options("fp32")).passed);  // slopes are right
  const auto r = pc::check_alibi_property(pc::AlibiProperty::kRatios, flipped,
                                          alibi_options("fp32"));
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("diagnosis: the bias sign is flipped"), std::string::npos) << r.message;
}

TEST(CheckAlibi, Float32SlopesFailStrict) {
  EXPECT_FALSE(pc::check_alibi_property(pc::AlibiProperty::kSlopes, bloom_alibi,
                                        alibi_options("strict")).passed);
}

// ---- T5 buckets -----------------------------------------------------------------------------

enum class T5Bug { kNone, kDirectionFlipped, kAlwaysBidirectional };

template <T5Bug kBug>
void t5_buckets(const pc::T5BucketCall& c) {
  posenc::reference::T5BiasParams p;
  p.num_buckets = c.num_buckets;
  p.max_distance = c.max_distance;
  p.bidirectional = kBug == T5Bug::kAlwaysBidirectional ? true : c.bidirectional;
  for (std::size_t i = 0; i < c.relative_positions.size(); ++i) {
    const std::int64_t r = c.relative_positions[i];
    c.buckets[i] = posenc::reference::t5_bias_bucket(p, kBug == T5Bug::kDirectionFlipped ? -r : r);
  }
}
POSENC_T5_BIAS_PROPERTIES(CheckReferenceT5Buckets, t5_buckets<T5Bug::kNone>);

TEST(CheckT5Bias, FlippedDirectionIsCaughtAndDiagnosed) {
  const auto r = pc::check_t5_bucket_property(pc::T5BucketProperty::kBuckets,
                                              t5_buckets<T5Bug::kDirectionFlipped>, {});
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("diagnosis: the direction is flipped"), std::string::npos) << r.message;
}

TEST(CheckT5Bias, CausalCallWithBidirectionalBucketsIsCaught) {
  const auto r = pc::check_t5_bucket_property(pc::T5BucketProperty::kMonotonic,
                                              t5_buckets<T5Bug::kAlwaysBidirectional>, {});
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("bidirectional buckets for a causal call"), std::string::npos)
      << r.message;
}

// ---- KV cache ---------------------------------------------------------------------------------

/// posenc's optimized::KvCache as a user's session; the bugs number the step's tokens as an
/// engine with that mistake does (the cache is told those positions).
enum class KvBug { kNone, kRestartAtZero, kCacheLengthPosition };

template <KvBug bug>
pc::KvStepFunction optimized_kv_session(const pc::KvCacheCheckConfig& c) {
  posenc::optimized::KvCacheConfig k;
  k.attn.n_heads = c.n_heads;
  k.attn.n_kv_heads = c.n_kv_heads;
  k.attn.head_dim = c.head_dim;
  k.attn.value_dim = c.head_dim;
  k.attn.scale_kind = posenc::reference::AttentionScale::kInvSqrtHeadDim;
  k.attn.causal = true;
  k.attn.window = c.window;
  k.capacity = c.capacity;
  k.rope = true;
  k.rope_params.head_dim = c.head_dim;
  k.rope_params.rotary_dim = c.head_dim;
  k.rope_params.base = c.base;
  k.rope_params.layout = c.layout;
  auto cache = std::make_shared<posenc::optimized::KvCache>(k);
  auto cached = std::make_shared<std::int64_t>(0);  // tokens in the cache
  const std::int64_t capacity = c.capacity;
  return [cache, cached, capacity](const pc::KvStepCall& s) {
    const std::int64_t n = s.n_tokens;
    std::vector<std::int64_t> given(s.positions.begin(), s.positions.end()), pos(n);
    for (std::int64_t t = 0; t < n; ++t) {
      if (bug == KvBug::kRestartAtZero) given[t] = t;
      if (bug == KvBug::kCacheLengthPosition) given[t] = *cached + t;
    }
    const std::vector<std::uint8_t> valid(static_cast<std::size_t>(n), 1);
    cache->step(n, valid, s.q, s.k, s.v, s.out, pos, given);
    *cached = std::min(*cached + n, capacity);
  };
}
POSENC_KV_CACHE_PROPERTIES(CheckOptimizedKvCache, optimized_kv_session<KvBug::kNone>, "strict");

pc::KvCacheCheckOptions kv_small() {
  pc::KvCacheCheckOptions o;
  o.profile = "strict";
  o.max_success = 25;  // half the draws are a ring that fills (where cache length != position)
  return o;
}

TEST(CheckKvCache, PositionsRestartingAtZeroAreCaughtAndDiagnosed) {
  for (auto p : {pc::KvCacheProperty::kOracle, pc::KvCacheProperty::kPrefillDecode}) {
    const auto r = pc::check_kv_cache_property(
        p, optimized_kv_session<KvBug::kRestartAtZero>, kv_small());
    ASSERT_FALSE(r.passed) << pc::kv_cache_property_name(p);
    EXPECT_NE(r.message.find("diagnosis: positions restart at 0 after the prefill"),
              std::string::npos)
        << r.message;
    EXPECT_NE(r.message.find("`restart-at-0`"), std::string::npos) << r.message;
    if (p == pc::KvCacheProperty::kPrefillDecode) std::cout << r.message << "\n";
  }
}

TEST(CheckKvCache, CacheLengthAsPositionIsCaughtAndDiagnosed) {
  for (auto p : {pc::KvCacheProperty::kOracle, pc::KvCacheProperty::kPrefillDecode}) {
    const auto r = pc::check_kv_cache_property(
        p, optimized_kv_session<KvBug::kCacheLengthPosition>, kv_small());
    ASSERT_FALSE(r.passed) << pc::kv_cache_property_name(p);
    EXPECT_NE(r.message.find("diagnosis: the cache length is taken as the position"),
              std::string::npos)
        << r.message;
    EXPECT_NE(r.message.find("`cache-length-position`"), std::string::npos) << r.message;
    if (p == pc::KvCacheProperty::kOracle) std::cout << r.message << "\n";
  }
}

TEST(CheckKvCache, PlainCachesOnlyCannotSeeTheCacheLengthMistake) {
  // Without a ring that fills, the cache length is the next position: the mistake is invisible
  // (the option is for caches without a sliding window), while restarting at 0 is still caught.
  pc::KvCacheCheckOptions o = kv_small();
  o.sliding_window = false;
  o.max_success = 10;
  EXPECT_TRUE(pc::check_kv_cache_property(pc::KvCacheProperty::kOracle,
                                          optimized_kv_session<KvBug::kCacheLengthPosition>, o)
                  .passed);
  EXPECT_FALSE(pc::check_kv_cache_property(pc::KvCacheProperty::kOracle,
                                           optimized_kv_session<KvBug::kRestartAtZero>, o)
                   .passed);
}

TEST(CheckKvCache, RejectsA16BitProfile) {
  pc::KvCacheCheckOptions o;
  o.profile = "bf16";
  EXPECT_THROW(pc::check_kv_cache_property(pc::KvCacheProperty::kOracle,
                                           optimized_kv_session<KvBug::kNone>, o),
               posenc::InvalidArgument);
}

}  // namespace
