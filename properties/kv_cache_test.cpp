// KV-cache properties: continuation, windows, padding, shifts and sinks in the reference session;
// the optimized ring-buffer cache against it; the golden traces. Model: reference/kv_cache.hpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include "golden/cases/catalog.hpp"
#include "golden/format/prng.hpp"
#include "optimized/alibi.hpp"
#include "optimized/kv_cache.hpp"
#include "optimized/rope.hpp"
#include "optimized/rope_scaling.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/dtype.hpp"
#include "reference/kv_cache.hpp"

namespace posenc::properties {
namespace {

using reference::AttentionParams;
using reference::AttentionScale;
using reference::KvBatch;
using reference::KvCacheParams;
using reference::KvEncodingKind;
using reference::KvSession;

// ---- random configurations -----------------------------------------------------------------

/// A random session shape and encoding (every scheme that decodes). Small: properties run many.
rc::Gen<KvCacheParams> gen_params(bool relative_only = false) {
  return rc::gen::exec([relative_only] {
    KvCacheParams p;
    const int hkv = *rc::gen::inRange(1, 3);
    const int group = *rc::gen::inRange(1, 3);
    const int d = 2 * *rc::gen::inRange(2, 9);
    p.attn.n_kv_heads = hkv;
    p.attn.n_heads = hkv * group;
    p.attn.head_dim = d;
    p.attn.value_dim = d;
    p.attn.causal = true;
    const int kinds = relative_only ? 4 : 6;
    const auto kind = static_cast<KvEncodingKind>(*rc::gen::inRange(0, kinds));
    p.enc.kind = kind;
    switch (kind) {
      case KvEncodingKind::kRope:
        p.enc.rope.head_dim = d;
        p.enc.rope.rotary_dim = 2 * *rc::gen::inRange(1, d / 2 + 1);
        p.enc.rope.base = *rc::gen::element(10000.0, 500000.0, 100.0);
        p.enc.rope.layout = *rc::gen::element(reference::RopeLayout::kHalfSplit, reference::RopeLayout::kInterleaved);
        break;
      case KvEncodingKind::kT5: {
        p.attn.scale_kind = AttentionScale::kNone;
        p.enc.t5.num_buckets = 16;
        p.enc.t5.max_distance = 32;
        p.enc.t5.bidirectional = false;
        p.enc.t5.n_heads = p.attn.n_heads;
        p.enc.t5_table = *gen_dyadic_vector(16 * p.attn.n_heads, 8);
        break;
      }
      case KvEncodingKind::kLearned:
      case KvEncodingKind::kSinusoidal:
        p.attn.n_heads = p.attn.n_kv_heads;
        if (kind == KvEncodingKind::kLearned) {
          p.enc.learned_rows = 96;
          p.enc.learned_offset = *rc::gen::inRange(0, 3);
          p.enc.learned_table = *gen_dyadic_vector(static_cast<int>(96 * p.attn.n_heads * d), 10);
        } else {
          p.enc.sinusoidal.d_model = p.attn.n_heads * d;
        }
        break;
      default: break;
    }
    return p;
  });
}

struct Tokens {
  std::vector<double> q, k, v;
};

Tokens gen_tokens(const KvCacheParams& p, std::int64_t n) {
  Tokens t;
  t.q = *gen_dyadic_vector(static_cast<int>(n * p.attn.n_heads * p.attn.head_dim), 12);
  t.k = *gen_dyadic_vector(static_cast<int>(n * p.attn.n_kv_heads * p.attn.head_dim), 12);
  t.v = *gen_dyadic_vector(static_cast<int>(n * p.attn.n_kv_heads * p.attn.value_dim), 12);
  return t;
}

/// Rows [a, b) of a [n, w] row-major vector.
std::vector<double> rows(const std::vector<double>& x, std::int64_t w, std::int64_t a, std::int64_t b) {
  return std::vector<double>(x.begin() + a * w, x.begin() + b * w);
}

/// Appends tokens [a, b) of `t` to the session.
reference::KvStepResult<double> append_range(KvSession<double>& s, const Tokens& t, std::int64_t a, std::int64_t b) {
  const auto& at = s.params().attn;
  return s.append(b - a, rows(t.q, at.n_heads * at.head_dim, a, b), rows(t.k, at.n_kv_heads * at.head_dim, a, b),
                  rows(t.v, at.n_kv_heads * at.value_dim, a, b));
}

void rc_assert_rows_close(const std::vector<double>& got, const std::vector<double>& want, std::size_t offset,
                          const std::string& what) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = want[offset + i];
    rc_assert_close<double>(got[i], w, 1e-12 * (1 + std::fabs(w)), what + " element " + std::to_string(i));
  }
}

// ---- reference properties ------------------------------------------------------------------

// prefill(N) equals prefill(k) followed by N - k single-token decodes, for every k.
RC_GTEST_PROP(KvCacheReference, PrefillEqualsPrefillThenDecodes, ()) {
  const KvCacheParams p = *gen_params();
  const std::int64_t N = *rc::gen::inRange<std::int64_t>(2, 20);
  const Tokens t = gen_tokens(p, N);
  const int w = p.attn.n_heads * p.attn.value_dim;
  KvSession<double> full(p);
  const auto all = append_range(full, t, 0, N);
  for (std::int64_t k = 1; k < N; ++k) {
    KvSession<double> s(p);
    const auto pre = append_range(s, t, 0, k);
    rc_assert_rows_close(pre.out, all.out, 0, "prefill(" + std::to_string(k) + ")");
    for (std::int64_t i = k; i < N; ++i) {
      const auto st = append_range(s, t, i, i + 1);
      RC_ASSERT(st.positions == std::vector<std::int64_t>{i});
      rc_assert_rows_close(st.out, all.out, static_cast<std::size_t>(i * w),
                           "decode of token " + std::to_string(i) + " after prefill(" + std::to_string(k) + ")");
    }
  }
}

// prefill(N) equals prefill(k) plus multi-token windows (speculative verify) of random sizes.
RC_GTEST_PROP(KvCacheReference, PrefillEqualsPrefillThenWindows, ()) {
  const KvCacheParams p = *gen_params();
  const std::int64_t N = *rc::gen::inRange<std::int64_t>(3, 24);
  const Tokens t = gen_tokens(p, N);
  const int w = p.attn.n_heads * p.attn.value_dim;
  KvSession<double> full(p), s(p);
  const auto all = append_range(full, t, 0, N);
  std::int64_t i = *rc::gen::inRange<std::int64_t>(1, N);
  append_range(s, t, 0, i);
  while (i < N) {
    const std::int64_t n = std::min(N - i, *rc::gen::inRange<std::int64_t>(1, 5));
    const auto st = append_range(s, t, i, i + n);
    RC_ASSERT(st.positions.front() == i);
    rc_assert_rows_close(st.out, all.out, static_cast<std::size_t>(i * w), "window at " + std::to_string(i));
    i += n;
  }
}

// A ring buffer of w slots equals full attention with the window mask, at lengths w - 1, w,
// w + 1 and 2w; after the wrap, slots are not positions and the next position is not the
// cache length.
RC_GTEST_PROP(KvCacheReference, RingBufferEqualsWindowMask, ()) {
  KvCacheParams p = *gen_params();
  const std::int64_t w = *rc::gen::inRange<std::int64_t>(1, 9);
  p.attn.window = w;
  KvCacheParams ring = p;
  ring.capacity = w;
  const std::int64_t N = 2 * w + 1;
  const Tokens t = gen_tokens(p, N);
  const int ow = p.attn.n_heads * p.attn.value_dim;
  for (std::int64_t len : {w - 1, w, w + 1, 2 * w}) {
    if (len < 1) continue;
    KvSession<double> full(p), rb(ring);
    const std::int64_t pre = *rc::gen::inRange<std::int64_t>(1, len + 1);
    const auto a = append_range(full, t, 0, len);
    const auto b0 = append_range(rb, t, 0, pre);
    rc_assert_rows_close(b0.out, a.out, 0, "ring prefill(" + std::to_string(pre) + ")");
    for (std::int64_t i = pre; i < len; ++i) {
      const auto st = append_range(rb, t, i, i + 1);
      RC_ASSERT(st.positions.front() == i);
      RC_ASSERT(st.slots.front() == i % w);  // the ring's slot: i mod w, not the position
      rc_assert_rows_close(st.out, a.out, static_cast<std::size_t>(i * ow), "ring decode " + std::to_string(i));
    }
    RC_ASSERT(rb.n_cached() == std::min(len, w));
    RC_ASSERT(rb.next_position() == len);
  }
}

// A left-padded batch equals each sequence run alone; padded rows are zero (never NaN) and no
// sequence's cache holds another's tokens.
RC_GTEST_PROP(KvCacheReference, LeftPaddedBatchEqualsEachAlone, ()) {
  const KvCacheParams p = *gen_params();
  const int B = 3;
  const std::int64_t T = *rc::gen::inRange<std::int64_t>(2, 8);
  std::vector<std::int64_t> len(B);
  for (auto& l : len) l = *rc::gen::inRange<std::int64_t>(1, T + 1);
  const bool left = *rc::gen::arbitrary<bool>();
  const int H = p.attn.n_heads, Hkv = p.attn.n_kv_heads, d = p.attn.head_dim, dv = p.attn.value_dim;
  const Tokens t = gen_tokens(p, B * T);
  std::vector<std::uint8_t> valid(static_cast<std::size_t>(B * T), 0);
  for (int b = 0; b < B; ++b) {
    for (std::int64_t c = 0; c < len[b]; ++c) valid[b * T + (left ? T - len[b] + c : c)] = 1;
  }
  KvBatch<double> batch(p, B);
  const auto r = batch.append(T, valid, t.q, t.k, t.v);
  const auto d1 = gen_tokens(p, B);  // one decode for everyone
  const auto r2 = batch.append(1, std::vector<std::uint8_t>(B, 1), d1.q, d1.k, d1.v);
  for (int b = 0; b < B; ++b) {
    KvSession<double> alone(p);
    std::vector<double> q, k, v;
    for (std::int64_t c = 0; c < T; ++c) {
      if (!valid[b * T + c]) continue;
      const std::size_t row = static_cast<std::size_t>(b * T + c);
      q.insert(q.end(), t.q.begin() + row * H * d, t.q.begin() + (row + 1) * H * d);
      k.insert(k.end(), t.k.begin() + row * Hkv * d, t.k.begin() + (row + 1) * Hkv * d);
      v.insert(v.end(), t.v.begin() + row * Hkv * dv, t.v.begin() + (row + 1) * Hkv * dv);
    }
    const auto a = alone.append(len[b], q, k, v);
    std::int64_t i = 0;
    for (std::int64_t c = 0; c < T; ++c) {
      const std::size_t row = static_cast<std::size_t>(b * T + c);
      std::vector<double> got(r.out.begin() + row * H * dv, r.out.begin() + (row + 1) * H * dv);
      if (!valid[row]) {
        RC_ASSERT(r.positions[row] == -1);
        for (double x : got) RC_ASSERT(x == 0.0);  // padded rows: zeros, never NaN
        continue;
      }
      RC_ASSERT(r.positions[row] == i);  // a column is not a position
      rc_assert_rows_close(got, a.out, static_cast<std::size_t>(i * H * dv), "sequence " + std::to_string(b));
      ++i;
    }
    const auto a2 = alone.append(1, rows(d1.q, H * d, b, b + 1), rows(d1.k, Hkv * d, b, b + 1), rows(d1.v, Hkv * dv, b, b + 1));
    RC_ASSERT(r2.positions[b] == len[b]);  // each continues from its own length
    rc_assert_rows_close(std::vector<double>(r2.out.begin() + b * H * dv, r2.out.begin() + (b + 1) * H * dv),
                         a2.out, 0, "decode of sequence " + std::to_string(b));
    RC_ASSERT(batch.sequence(b).n_cached() == len[b] + 1);
  }
}

// A context shift (re-rotating the kept keys by -n_discard) equals a session that recomputed
// those keys at their new positions: the same tokens, contiguous, without the discarded ones.
RC_GTEST_PROP(KvCacheReference, ShiftEqualsRecompute, ()) {
  const KvCacheParams p = *gen_params(true);
  const std::int64_t N = *rc::gen::inRange<std::int64_t>(4, 20);
  const std::int64_t n_keep = *rc::gen::inRange<std::int64_t>(0, N - 1);
  const std::int64_t n_discard = *rc::gen::inRange<std::int64_t>(1, N - n_keep);
  const Tokens t = gen_tokens(p, N + 2);
  const int H = p.attn.n_heads, Hkv = p.attn.n_kv_heads, d = p.attn.head_dim, dv = p.attn.value_dim;
  KvSession<double> s(p);
  append_range(s, t, 0, N);
  s.shift(n_keep, n_discard);
  RC_ASSERT(s.next_position() == N - n_discard);
  // The recomputed session: tokens [0, n_keep) and [n_keep + n_discard, N), then the decodes.
  KvSession<double> r(p);
  Tokens kept;
  for (std::int64_t i = 0; i < N; ++i) {
    if (i >= n_keep && i < n_keep + n_discard) continue;
    for (auto [src, dst, w] : {std::tuple{&t.q, &kept.q, H * d}, std::tuple{&t.k, &kept.k, Hkv * d}, std::tuple{&t.v, &kept.v, Hkv * dv}}) {
      dst->insert(dst->end(), src->begin() + i * w, src->begin() + (i + 1) * w);
    }
  }
  r.append(N - n_discard, kept.q, kept.k, kept.v);
  for (std::int64_t j = N; j < N + 2; ++j) {
    const auto x = append_range(s, t, j, j + 1);
    const auto y = append_range(r, t, j, j + 1);
    RC_ASSERT(x.positions == y.positions);
    rc_assert_rows_close(x.out, y.out, 0, "decode after the shift");
  }
}

// Llama 4's chunk mask and GPT-OSS's sink logits in a session: prefill(k) + decodes equals the
// attention core (reference/attention.hpp, the same chunk and sinks) over the whole sequence,
// for every split k; the first chunk's rows equal causal attention without the chunk mask.
RC_GTEST_PROP(KvCacheReference, ChunkAndSinkLogitsEqualTheAttentionCore, ()) {
  KvCacheParams p = *gen_params(true);
  p.enc.kind = KvEncodingKind::kNope;  // the masks and the sink do not read the encoding
  p.attn.scale_kind = AttentionScale::kInvSqrtHeadDim;
  p.attn.chunk = *rc::gen::inRange<std::int64_t>(1, 7);
  if (*rc::gen::inRange(0, 3) == 0) p.attn.window = *rc::gen::inRange<std::int64_t>(1, 6);
  for (int h = 0; h < p.attn.n_heads; ++h) {
    p.attn.sinks.push_back(*rc::gen::inRange(0, 5) == 0 ? -std::numeric_limits<double>::infinity()
                                                         : std::ldexp(*rc::gen::inRange(-64, 65), -5));
  }
  const int H = p.attn.n_heads, dv = p.attn.value_dim;
  const std::int64_t N = *rc::gen::inRange<std::int64_t>(2, 16);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(1, N + 1);
  const Tokens t = gen_tokens(p, N);
  const auto whole = reference::attention_forward<double>(p.attn, {}, N, N, t.q, t.k, t.v);
  KvSession<double> s(p);
  std::vector<double> got = append_range(s, t, 0, k).out;
  for (std::int64_t i = k; i < N; ++i) {
    const auto x = append_range(s, t, i, i + 1).out;
    got.insert(got.end(), x.begin(), x.end());
  }
  RC_ASSERT(got.size() == whole.size());
  for (std::size_t i = 0; i < got.size(); ++i) RC_ASSERT(std::fabs(got[i] - whole[i]) <= 1e-12);
  // Rows of the first chunk: the chunk mask changes nothing there.
  AttentionParams causal = p.attn;
  causal.chunk = 0;
  const auto plain = reference::attention_forward<double>(causal, {}, N, N, t.q, t.k, t.v);
  const std::int64_t first = std::min(N, p.attn.chunk);
  for (std::size_t i = 0; i < static_cast<std::size_t>(first * H * dv); ++i) RC_ASSERT(got[i] == plain[i] || std::fabs(got[i] - plain[i]) <= 1e-12);
}

// A decode past a chunk boundary forgets the previous chunk: the session equals a fresh one
// that starts at the chunk's first position (given positions: the cache holds fewer keys than
// positions), whatever the earlier chunk held.
RC_GTEST_PROP(KvCacheReference, ChunkBoundaryForgetsThePreviousChunk, ()) {
  KvCacheParams p = *gen_params(true);
  const std::int64_t C = *rc::gen::inRange<std::int64_t>(1, 6);
  p.attn.chunk = C;
  const std::int64_t N = C + *rc::gen::inRange<std::int64_t>(1, 8);  // crosses at least one boundary
  const Tokens t = gen_tokens(p, N);
  KvSession<double> s(p);
  const std::int64_t last_start = (N - 1) / C * C;
  append_range(s, t, 0, last_start);
  KvSession<double> r(p);
  std::vector<std::int64_t> pos;
  for (std::int64_t j = last_start; j < N; ++j) {
    const auto x = append_range(s, t, j, j + 1);
    const auto& at = p.attn;
    const auto y = r.append(1, rows(t.q, at.n_heads * at.head_dim, j, j + 1), rows(t.k, at.n_kv_heads * at.head_dim, j, j + 1),
                            rows(t.v, at.n_kv_heads * at.value_dim, j, j + 1), {j});
    RC_ASSERT(x.positions == y.positions);
    rc_assert_rows_close(x.out, y.out, 0, "decode at " + std::to_string(j));
  }
}

// Attention sinks (StreamingLLM): once full, every decode evicts the oldest window token and the
// rest move down one position; equals recomputing the cache's tokens at positions 0..C-1.
RC_GTEST_PROP(KvCacheReference, SinksEqualRecomputeInCachePositions, ()) {
  KvCacheParams p = *gen_params(true);
  const std::int64_t C = *rc::gen::inRange<std::int64_t>(3, 9);
  p.capacity = C;
  p.n_sink = *rc::gen::inRange<std::int64_t>(1, C - 1);
  const std::int64_t N = C + *rc::gen::inRange<std::int64_t>(1, 6);
  const Tokens t = gen_tokens(p, N);
  KvSession<double> s(p);
  append_range(s, t, 0, C - 1);
  for (std::int64_t i = C - 1; i < N; ++i) {
    const auto x = append_range(s, t, i, i + 1);
    RC_ASSERT(x.positions.front() == std::min(i, C - 1));  // the cache length
    // Recompute: sinks, then the latest C - 1 - n_sink tokens before i, then token i.
    KvCacheParams plain = p;
    plain.capacity = 0;
    plain.n_sink = 0;
    KvSession<double> r(plain);
    std::vector<std::int64_t> ids;
    for (std::int64_t j = 0; j < p.n_sink; ++j) ids.push_back(j);
    for (std::int64_t j = std::max(p.n_sink, i - (C - 1 - p.n_sink)); j < i; ++j) ids.push_back(j);
    for (std::int64_t j : ids) append_range(r, t, j, j + 1);
    const auto y = append_range(r, t, i, i + 1);
    rc_assert_rows_close(x.out, y.out, 0, "sink decode " + std::to_string(i));
  }
}

// Length-dependent RoPE rules crossing their boundary during decode: with the cache re-rotated
// (kRerotateCache) a decode equals the last row of a fresh prefill; keeping the cached rotation
// (HF) equals it before the boundary and differs after it.
TEST(KvCacheReference, LengthDependentRulesFollowTheirPolicy) {
  for (const std::string rule : {"dynamic", "longrope"}) {
    KvCacheParams p;
    p.attn.n_heads = 2;
    p.attn.n_kv_heads = 1;
    p.attn.head_dim = p.attn.value_dim = 8;
    p.attn.causal = true;
    p.enc.kind = KvEncodingKind::kRope;
    p.enc.rope.head_dim = p.enc.rope.rotary_dim = 8;
    p.enc.rope.base = 10000;
    auto& s = p.enc.scaling;
    if (rule == "dynamic") {
      s.type = reference::RopeScalingType::kDynamic;
      s.factor = 4;
      s.max_position = 6;
    } else {
      s.type = reference::RopeScalingType::kLongRope;
      s.original_max_position = 6;
      s.max_position = 24;
      s.factor = 4;
      s.short_factor = {1, 1.5, 2, 3};
      s.long_factor = {1, 2, 4, 8};
    }
    const std::int64_t N = 10;
    std::vector<double> q(N * 16), k(N * 8), v(N * 8);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::ldexp(static_cast<double>((i * 37) % 29) - 14, -4);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::ldexp(static_cast<double>((i * 53) % 31) - 15, -4);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(static_cast<double>((i * 17) % 23) - 11, -4);
    for (auto policy : {reference::KvTablePolicy::kKeepCachedRotation, reference::KvTablePolicy::kRerotateCache}) {
      p.enc.table_policy = policy;
      KvSession<double> sess(p);
      sess.append(4, rows(q, 16, 0, 4), rows(k, 8, 0, 4), rows(v, 8, 0, 4));
      for (std::int64_t i = 4; i < N; ++i) {
        const auto x = sess.append(1, rows(q, 16, i, i + 1), rows(k, 8, i, i + 1), rows(v, 8, i, i + 1));
        KvSession<double> fresh(p);
        const auto y = fresh.append(i + 1, rows(q, 16, 0, i + 1), rows(k, 8, 0, i + 1), rows(v, 8, 0, i + 1));
        double diff = 0;
        for (int c = 0; c < 16; ++c) diff = std::max(diff, std::fabs(x.out[c] - y.out[i * 16 + c]));
        const bool crossed = i + 1 > 6;  // seq_len above the boundary
        if (policy == reference::KvTablePolicy::kRerotateCache || !crossed) {
          EXPECT_LE(diff, 1e-12) << rule << " decode " << i;
        } else {
          EXPECT_GT(diff, 1e-6) << rule << " decode " << i << ": HF's cached keys keep the old rotation";
        }
      }
    }
  }
}

TEST(KvCacheReference, BadParametersNameFunctionAndValue) {
  KvCacheParams p;
  p.attn.n_heads = 2;
  p.attn.n_kv_heads = 1;
  p.attn.head_dim = p.attn.value_dim = 4;
  p.attn.window = 8;
  p.capacity = 4;
  try {
    KvSession<double> s(p);
    FAIL() << "capacity below the window accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KvSession"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("capacity"), std::string::npos) << e.what();
  }
  p.attn.window = 0;
  KvSession<double> s(p);
  const std::vector<double> q(8 * 5, 0.5), k(4 * 5, 0.25), v(4 * 5, 1.0);
  EXPECT_THROW(s.append(5, q, k, v), InvalidArgument);  // a fixed cache of 4: shift first
  s.append(2, rows(q, 8, 0, 2), rows(k, 4, 0, 2), rows(v, 4, 0, 2));
  EXPECT_THROW(s.shift(1, 2), InvalidArgument);  // beyond the next position
  p.enc.kind = KvEncodingKind::kSinusoidal;
  p.attn.n_kv_heads = 2;
  p.enc.sinusoidal.d_model = 8;
  KvSession<double> a(p);
  EXPECT_THROW(a.shift(0, 1), InvalidArgument);  // absolute encodings cannot renumber
  p.n_sink = 1;
  EXPECT_THROW(KvSession<double>{p}, InvalidArgument);
  // A chunk mask reads absolute positions; a StreamingLLM cache renumbers them: refused.
  p.n_sink = 1;
  p.attn.chunk = 4;
  p.enc.kind = KvEncodingKind::kNope;
  p.capacity = 4;
  try {
    KvSession<double> c(p);
    FAIL() << "a chunk mask with a sink cache accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("attn.chunk"), std::string::npos) << e.what();
  }
  p.n_sink = 0;
  p.attn.chunk = 0;
  p.attn.sinks.assign(static_cast<std::size_t>(p.attn.n_heads + 1), 0.5);  // one per query head
  EXPECT_THROW(KvSession<double>{p}, InvalidArgument);
}

// ---- optimized cache against the reference --------------------------------------------------

/// One step of a random trace.
struct OpStep {
  bool shift = false;
  std::int64_t n = 0, n_keep = 0, n_discard = 0;
};

/// Runs the same steps through the reference (double) and the optimized cache; returns the
/// largest |o - o*| / (eps_s (A + B)) over all outputs, with A, B from the reference step.
double optimized_vs_reference(const KvCacheParams& p, const std::vector<OpStep>& steps,
                              optimized::KvStorage storage, std::vector<float>* all_out = nullptr) {
  const int H = p.attn.n_heads, Hkv = p.attn.n_kv_heads, d = p.attn.head_dim, dv = p.attn.value_dim;
  optimized::KvCacheConfig c;
  c.attn = p.attn;
  std::int64_t total = 0;
  for (const auto& s : steps) total += s.n;
  c.capacity = p.capacity > 0 ? p.capacity : std::max<std::int64_t>(total, 1);
  c.n_sink = p.n_sink;
  c.storage = storage;
  if (p.enc.kind == KvEncodingKind::kRope) {
    c.rope = true;
    c.rope_params = p.enc.rope;
  }
  if (p.enc.kind == KvEncodingKind::kAlibi) {
    const auto m = optimized::alibi_slopes(reference::AlibiParams{H, p.enc.alibi_form});
    c.bias = [m](int h, std::int64_t qp, std::int64_t kp) { return -m[h] * static_cast<float>(qp - kp); };
  }
  optimized::KvCache cache(c);
  KvSession<double> ref(p);
  const double eps = storage == optimized::KvStorage::kF16 ? 0x1p-10 : 0x1p-23;
  const double scale = reference::attention_scale<double>(p.attn);
  double worst = 0;
  int rerotations = 0;  // shifts and sink evictions so far: rotations a cached key may carry
  std::uint64_t seed = 1;
  for (const auto& st : steps) {
    if (st.shift) {
      cache.shift(0, st.n_keep, st.n_discard);
      ref.shift(st.n_keep, st.n_discard);
      ++rerotations;
      continue;
    }
    if (p.n_sink > 0 && ref.n_cached() == p.capacity) ++rerotations;
    std::vector<double> q(st.n * H * d), k(st.n * Hkv * d), v(st.n * Hkv * dv);
    for (auto* x : {&q, &k, &v}) {
      for (double& e : *x) e = std::ldexp(static_cast<double>(static_cast<std::int64_t>(golden::prng_int(7, seed++, 0, 4095)) - 2048), -11);
    }
    const std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
    std::vector<float> out(st.n * H * dv);
    std::vector<std::int64_t> pos(st.n);
    cache.step(st.n, std::vector<std::uint8_t>(st.n, 1), qf, kf, vf, out, pos);
    const auto r = ref.append(st.n, q, k, v);
    EXPECT_EQ(pos, r.positions);
    if (all_out) all_out->insert(all_out->end(), out.begin(), out.end());
    const std::size_t nk = r.key_positions.size();
    // Each rotation (insertion, then every re-rotation) moves a score by up to
    // 2 kRopeMaxError eps S (q's and k's rotation): folded into S relative to the bound's K.
    const double rot = p.enc.kind == KvEncodingKind::kRope
                           ? 1 + 2.0 * (1 + rerotations) * optimized::kRopeMaxError / optimized::kKvCacheMaxError
                           : 1.0;
    for (std::int64_t i = 0; i < st.n; ++i) {
      for (int h = 0; h < H; ++h) {
        const int kh = h / (H / Hkv);
        for (int cc = 0; cc < dv; ++cc) {
          const double o = r.out[(i * H + h) * dv + cc];
          double A = 0, Bs = 0, psink = 1;
          for (std::size_t j = 0; j < nk; ++j) psink -= r.probs[(i * H + h) * nk + j];
          if (!p.attn.sinks.empty() && std::isfinite(p.attn.sinks[h])) {
            Bs += std::max(psink, 0.0) * std::fabs(o) * std::fabs(p.attn.sinks[h]);  // the sink: value 0
          }
          for (std::size_t j = 0; j < nk; ++j) {
            const double pj = r.probs[(i * H + h) * nk + j];
            if (pj == 0) continue;
            double s = 0;
            for (int x = 0; x < d; ++x) s += std::fabs(r.q[(i * H + h) * d + x]) * std::fabs(r.keys[(j * Hkv + kh) * d + x]);
            s = scale * s * rot + std::fabs(r.bias[(i * H + h) * nk + j]);
            A += pj * std::fabs(r.values[(j * Hkv + kh) * dv + cc]);
            Bs += pj * std::fabs(r.values[(j * Hkv + kh) * dv + cc] - o) * s;
          }
          const double err = std::fabs(out[(i * H + h) * dv + cc] - o);
          worst = std::max(worst, err / (optimized::kKvCacheMaxError * eps * (A + Bs) + 1e-300));
        }
      }
    }
  }
  return worst;
}

rc::Gen<std::vector<OpStep>> gen_steps(const KvCacheParams& p) {
  return rc::gen::exec([p] {
    std::vector<OpStep> v;
    std::int64_t next = 0, cached = 0;
    const int n_steps = *rc::gen::inRange(1, 8);
    for (int i = 0; i < n_steps; ++i) {
      const bool fixed = p.capacity > 0 && p.attn.window == 0 && p.n_sink == 0;
      const bool can_shift = p.n_sink == 0 && p.enc.kind != KvEncodingKind::kLearned &&
                             p.enc.kind != KvEncodingKind::kSinusoidal && next >= 2;
      if (can_shift && *rc::gen::inRange(0, 4) == 0) {
        OpStep s;
        s.shift = true;
        s.n_keep = *rc::gen::inRange<std::int64_t>(0, next - 1);
        s.n_discard = *rc::gen::inRange<std::int64_t>(1, next - s.n_keep + 1);
        next -= s.n_discard;
        cached = std::max<std::int64_t>(0, std::min(cached, next));
        v.push_back(s);
        continue;
      }
      std::int64_t n = *rc::gen::inRange<std::int64_t>(1, 6);
      if (p.n_sink > 0) n = p.capacity - cached > 0 ? std::min(n, p.capacity - cached) : 1;
      if (fixed) n = std::min(n, p.capacity - cached);
      if (n <= 0) break;
      OpStep s;
      s.n = n;
      next += n;
      cached = p.capacity > 0 ? std::min(p.capacity, cached + n) : cached + n;
      if (p.n_sink > 0) next = cached;
      v.push_back(s);
    }
    return v;
  });
}

/// A random cache mode on top of the params: unbounded, ring window, fixed (with shifts), sinks.
KvCacheParams with_mode(KvCacheParams p, int mode) {
  const bool relative = p.enc.kind != KvEncodingKind::kLearned && p.enc.kind != KvEncodingKind::kSinusoidal;
  if (mode == 1) {
    p.attn.window = *rc::gen::inRange<std::int64_t>(1, 6);
    p.capacity = p.attn.window + *rc::gen::inRange<std::int64_t>(0, 3);
  } else if (mode == 2) {
    p.capacity = *rc::gen::inRange<std::int64_t>(4, 24);
  } else if (mode == 3 && relative) {
    p.capacity = *rc::gen::inRange<std::int64_t>(3, 8);
    p.n_sink = *rc::gen::inRange<std::int64_t>(1, p.capacity - 1);
  }
  return p;
}

// The optimized cache (f32 and f16 storage) matches the reference within its contract's bound
// on random traces of every mode: prefill, decode, verify windows, ring wrap, shifts, sinks.
RC_GTEST_PROP(KvCacheOptimized, MatchesReference, ()) {
  KvCacheParams p = *gen_params();
  if (p.enc.kind == KvEncodingKind::kT5 || p.enc.kind == KvEncodingKind::kLearned ||
      p.enc.kind == KvEncodingKind::kSinusoidal) {
    p.enc.kind = KvEncodingKind::kNope;  // the cache's encodings: RoPE at insertion, or a bias hook
    p.attn.scale_kind = AttentionScale::kInvSqrtHeadDim;
  }
  p = with_mode(p, *rc::gen::inRange(0, 4));
  if (*rc::gen::inRange(0, 3) == 0 && p.n_sink == 0) p.attn.chunk = *rc::gen::inRange<std::int64_t>(1, 8);
  if (*rc::gen::inRange(0, 3) == 0) {  // GPT-OSS sink logits (-inf: none for that head)
    for (int h = 0; h < p.attn.n_heads; ++h) {
      p.attn.sinks.push_back(*rc::gen::inRange(0, 5) == 0 ? -std::numeric_limits<double>::infinity()
                                                           : std::ldexp(*rc::gen::inRange(-64, 65), -5));
    }
  }
  const auto steps = *gen_steps(p);
  for (auto storage : {optimized::KvStorage::kF32, optimized::KvStorage::kF16}) {
    const double w = optimized_vs_reference(p, steps, storage);
    RC_ASSERT(w <= 1.0);
  }
}

// The worst share of the bound over a fixed sweep, printed (docs/schemes/kv_cache.md).
TEST(KvCacheOptimized, ErrorBoundMeasured) {
  double worst32 = 0, worst16 = 0;
  for (int mode = 0; mode < 4; ++mode) {
    for (int kind : {0, 1, 2}) {  // nope, rope, alibi
      KvCacheParams p;
      p.attn.n_heads = 4;
      p.attn.n_kv_heads = 2;
      p.attn.head_dim = p.attn.value_dim = 32;
      p.attn.causal = true;
      p.enc.kind = static_cast<KvEncodingKind>(kind);
      p.enc.rope.head_dim = p.enc.rope.rotary_dim = 32;
      if (mode == 1) { p.attn.window = 8; p.capacity = 8; }
      if (mode == 2) p.capacity = 40;
      if (mode == 3) { p.capacity = 10; p.n_sink = 2; }
      std::vector<OpStep> steps = {{false, 12}, {false, 1}, {false, 3}, {false, 1}, {false, 1}};
      if (mode == 2) steps.insert(steps.end(), {{true, 0, 2, 6}, {false, 1}, {true, 0, 2, 3}, {false, 2}});
      if (mode == 3) steps = {{false, 8}, {false, 1}, {false, 1}, {false, 1}, {false, 1}, {false, 1}};
      worst32 = std::max(worst32, optimized_vs_reference(p, steps, optimized::KvStorage::kF32));
      worst16 = std::max(worst16, optimized_vs_reference(p, steps, optimized::KvStorage::kF16));
    }
  }
  std::printf("[ measured ] KvCache worst error: f32 storage %.3g, f16 storage %.3g of kKvCacheMaxError eps (A + B)\n",
              worst32, worst16);
  EXPECT_LE(worst32, 1.0);
  EXPECT_LE(worst16, 1.0);
  EXPECT_GT(worst32, 0.0);
}

// Outputs are bit-identical for any thread count.
TEST(KvCacheOptimized, BitIdenticalAcrossThreadCounts) {
  KvCacheParams p;
  p.attn.n_heads = 8;
  p.attn.n_kv_heads = 2;
  p.attn.head_dim = p.attn.value_dim = 32;
  p.attn.causal = true;
  p.attn.window = 16;
  p.capacity = 16;
  p.enc.kind = KvEncodingKind::kRope;
  p.enc.rope.head_dim = p.enc.rope.rotary_dim = 32;
  const std::vector<OpStep> steps = {{false, 20}, {false, 1}, {false, 5}, {false, 1}, {false, 1}};
  std::vector<std::vector<float>> outs;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 8}) {
    omp_set_num_threads(threads);
    std::vector<float> all;
    optimized_vs_reference(p, steps, optimized::KvStorage::kF16, &all);
    outs.push_back(all);
  }
  omp_set_num_threads(saved);
  for (std::size_t i = 1; i < outs.size(); ++i) {
    ASSERT_EQ(outs[i].size(), outs[0].size());
    EXPECT_TRUE(same_bits(outs[i], outs[0])) << "thread count run " << i;
  }
}

// Re-rotating cached keys n times (shifts by -1) against keys rotated once at the final
// position: the error grows at most linearly, by kRopeMaxError eps per rotation and pair L1
// norm (plus the storage rounding each time for f16). Reported per n.
TEST(KvCacheOptimized, RepeatedShiftErrorBoundedAndReported) {
  const int d = 64;
  reference::RopeParams rp;
  rp.head_dim = rp.rotary_dim = d;
  rp.base = 10000;
  for (auto storage : {optimized::KvStorage::kF32, optimized::KvStorage::kF16}) {
    const double eps = storage == optimized::KvStorage::kF16 ? 0x1p-10 : 0x1p-23;
    std::printf("[ measured ] %s cache, key error after n shifts (units of eps * pair L1 norm):",
                storage == optimized::KvStorage::kF16 ? "f16" : "f32");
    for (int n : {1, 4, 16, 64}) {
      optimized::KvCacheConfig c;
      c.attn.n_heads = c.attn.n_kv_heads = 1;
      c.attn.head_dim = c.attn.value_dim = d;
      c.attn.causal = true;
      c.capacity = n + 2;
      c.storage = storage;
      c.rope = true;
      c.rope_params = rp;
      optimized::KvCache cache(c);
      std::vector<float> k(d), q(d, 0.0f), v(d, 0.0f), out(d);
      for (int i = 0; i < d; ++i) k[i] = static_cast<float>(std::ldexp(static_cast<double>((i * 37) % 61) - 30, -5));
      std::vector<std::int64_t> pos(1);
      // token 0 (dropped by the shifts), then the key under test at position n + 1
      for (int t = 0; t <= n + 1; ++t) cache.step(1, std::vector<std::uint8_t>{1}, q, t == n + 1 ? k : q, v, out, pos);
      for (int s = 0; s < n; ++s) cache.shift(0, 0, 1);  // drop position 0, move the rest down
      // now the key sits at position 1; exact: R(1) k
      const auto y = reference::rope_apply<double>(rp, 1, std::vector<double>(k.begin(), k.end()));
      std::vector<float> key(d), val(d);
      std::int64_t slot = -1;
      for (std::int64_t sl = 0; sl < c.capacity; ++sl) {
        if (cache.slot_position(0, sl) == 1) slot = sl;
      }
      ASSERT_GE(slot, 0);
      cache.read_slot(0, slot, key, val);
      double worst = 0;
      for (int i = 0; i < d / 2; ++i) {
        const double cn = std::fabs(k[i]) + std::fabs(k[i + d / 2]);
        for (int ch : {i, i + d / 2}) worst = std::max(worst, std::fabs(key[ch] - y[ch]) / (eps * cn));
      }
      std::printf(" n=%d %.3g", n, worst);
      // one insertion and n re-rotations, each within kRopeMaxError (sqrt 2 for the norm growth)
      EXPECT_LE(worst, optimized::kRopeMaxError * (1 + std::sqrt(2.0) * n) + (storage == optimized::KvStorage::kF16 ? n + 1 : 0))
          << "n = " << n;
    }
    std::printf("\n");
  }
}

TEST(KvCacheOptimized, BadInputNamesTheParameter) {
  optimized::KvCacheConfig c;
  c.attn.n_heads = c.attn.n_kv_heads = 1;
  c.attn.head_dim = c.attn.value_dim = 4;
  c.capacity = 0;
  EXPECT_THROW(optimized::KvCache{c}, InvalidArgument);
  c.capacity = 2;
  c.attn.chunk = 2;
  c.n_sink = 1;
  try {  // a chunk mask reads absolute positions; a sink cache renumbers them
    optimized::KvCache bad{c};
    ADD_FAILURE() << "a chunk mask with a sink cache accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("attn.chunk"), std::string::npos) << e.what();
  }
  c.attn.chunk = 0;
  c.n_sink = 0;
  c.attn.sinks = {0.0, 0.0};
  EXPECT_THROW(optimized::KvCache{c}, InvalidArgument);  // sink logits: one per query head
  c.attn.sinks.clear();
  optimized::KvCache cache(c);
  std::vector<float> x(12, 0.5f), out(12);
  std::vector<std::int64_t> pos(3);
  try {
    cache.step(3, std::vector<std::uint8_t>(3, 1), x, x, x, out, pos);
    FAIL() << "3 tokens into 2 slots accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KvCache::step"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.next_position(0), 0);  // nothing changed
  EXPECT_THROW(cache.shift(0, 0, 1), InvalidArgument);
}

// ---- golden traces -----------------------------------------------------------------------------

TEST(KvCacheGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("kv_cache", 13); }

TEST(KvCacheGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("kv_cache"); }

TEST(KvCacheGolden, PipelinesPassTheirProfiles) {
  // Per stage. Attention outputs are loose by design (as in attention): the bound admits any
  // summation order; the cached keys carry the rotation budgets and must be tight.
  expect_pipelines_pass_their_profiles("kv_cache", 0.25, {"output"}, true);
}

// The RoPE traces' cached keys alone (the learned trace's keys, at 0.5, would hide a loose
// rotation budget in the per-stage figure above): each float pipeline's worst key reaches a
// quarter of its budget.
TEST(KvCacheGolden, RopeKeyBudgetsAreTight) {
  for (const std::string pipeline : {"exact", "fp32", "fp32-recurrence"}) {
    double worst = 0;
    for_each_golden_case("kv_cache", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
      if (lc.spec.result != "valid" || lc.spec.manifest.at("encoding").at("kind") != "rope") return;
      if (!profile_applies(lc.spec, golden::pipelines::profile_of(pipeline))) return;  // LongRoPE: strict only
      golden::EngineOptions eo;
      eo.pipeline = pipeline;
      const auto r = golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, eo),
                                         {golden::pipelines::profile_of(pipeline), {}, true});
      EXPECT_EQ(r.status, golden::Verdict::kPass) << lc.spec.id << " " << pipeline;
      for (const auto& t : r.tensors) {
        if (t.stage == "cache" && t.kind == golden::CheckKind::kConditioned) worst = std::max(worst, t.max_ratio);
      }
    });
    std::printf("[ tight    ] kv_cache RoPE keys, pipeline %-16s worst at %.3f of the budget\n", pipeline.c_str(), worst);
    EXPECT_GE(worst, 0.25) << pipeline;
    EXPECT_LE(worst, 1.0) << pipeline;
  }
}

TEST(KvCacheGolden, FloatPipelinesFailStrictAfterShifts) {
  expect_float_pipelines_fail_strict("kv_cache", [](const std::string& id, const std::string&) {
    // and the model-plan traces, whose positions (126-133, 8186-8195) are far enough from 0
    return id == "kv_cache_rope_context_shift_f32" || id == "kv_cache_rope_llama4_chunk8192_boundary_f32" ||
           id == "kv_cache_rope_gpt_oss_window128_sink_logits_f32";
  });
}

/// Which engine mistake a valid trace can see (the others must pass it: no false FAIL).
bool visible(const std::string& id, const std::string& mistake) {
  const std::string chunk = "kv_cache_rope_llama4_chunk8192_boundary_f32";
  const std::string sink_logits = "kv_cache_rope_gpt_oss_window128_sink_logits_f32";
  const std::string hf_switch = "kv_cache_rope_phi3_5_mini_longrope_hf_switch_f32";
  const std::string max_model_len = "kv_cache_rope_phi3_5_mini_longrope_max_model_len_f32";
  if (mistake == "restart-at-0") return true;
  if (mistake == "factors-flip-without-rerotation") return id == hf_switch;
  if (mistake == "chunk-mask-ignored-in-decode") return id == chunk;
  if (mistake == "sink-logits-dropped-in-decode") return id == sink_logits;
  if (mistake == "cache-length-position") {  // the chunk trace's cache starts at 8186
    return id == "kv_cache_rope_window8_ring_wrap_f32" || id == chunk || id == sink_logits || id == hf_switch ||
           id == max_model_len;
  }
  if (mistake == "padding-position") return id == "kv_cache_rope_left_padded_batch3_f32";
  if (mistake == "shift-not-rerotated") {
    return id == "kv_cache_rope_context_shift_f32" || id == "kv_cache_rope_sinks2_cache8_f32" ||
           id == "kv_cache_rope_repeated_shift24_f32";
  }
  if (mistake == "window-off-by-one") return id == "kv_cache_rope_window8_ring_wrap_f32" || id == sink_logits;
  if (mistake == "shift-n-past-kept" || mistake == "shift-restart-at-0") {
    return id == "kv_cache_rope_context_shift_f32" || id == "kv_cache_rope_repeated_shift24_f32";
  }
  if (mistake == "verify-window-start") {
    return id == "kv_cache_rope_llama3_1_8b_prefill_decode_f32" || id == "kv_cache_rope_window8_ring_wrap_f32" ||
           id == "kv_cache_alibi_decode_h4_f32" || id == chunk || id == sink_logits || id == hf_switch ||
           id == max_model_len;
  }
  return true;
}

// Each mistake fails every valid trace that can see it, naming a step, and passes the others;
// a negative control is reproduced by its own mistake alone.
TEST(KvCacheGolden, EngineMistakesAreCaughtAtTheirStep) {
  for_each_golden_case("kv_cache", [](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    const std::string own = lc.spec.manifest.contains("negative_control")
                                ? lc.spec.manifest.at("negative_control").at("mistake").get<std::string>()
                                : "";
    for (const auto& mistake : s.mistakes()) {
      const auto out = s.run_engine(lc.spec, lc.golden, {mistake});
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, false});
      if (lc.spec.result == "invalid") {
        EXPECT_EQ(r.status, mistake == own ? golden::Verdict::kFail : golden::Verdict::kPass) << lc.spec.id << " with " << mistake;
        continue;
      }
      EXPECT_EQ(r.status, visible(lc.spec.id, mistake) ? golden::Verdict::kFail : golden::Verdict::kPass)
          << lc.spec.id << " with " << mistake << "\n" << golden::format_case_text(r, false);
      ASSERT_TRUE(r.trace.has_value());
      if (r.status == golden::Verdict::kFail) {
        EXPECT_GE(r.trace->index, 0) << lc.spec.id << " " << mistake;
      }
    }
  });
}

// Each negative control, given to verify as an engine's output for its valid twin, fails with a
// step-level report naming the step where the mistake first shows and its position.
TEST(KvCacheGolden, NegativeControlsFailTheirTwinAtTheFirstWrongStep) {
  const auto dir = golden::default_data_dir() / "kv_cache";
  const std::vector<std::tuple<std::string, std::string, std::string, std::int64_t>> pairs = {
      {"kv_cache_rope_llama3_1_8b_restart_invalid_f32", "kv_cache_rope_llama3_1_8b_prefill_decode_f32", "s01", 12},
      {"kv_cache_rope_window8_cache_length_invalid_f32", "kv_cache_rope_window8_ring_wrap_f32", "s04", 9},
      {"kv_cache_rope_left_padded_batch3_padding_position_invalid_f32", "kv_cache_rope_left_padded_batch3_f32", "s00", 0},
      {"kv_cache_rope_context_shift_not_rerotated_invalid_f32", "kv_cache_rope_context_shift_f32", "s05", -1},
      {"kv_cache_rope_llama4_chunk_ignored_invalid_f32", "kv_cache_rope_llama4_chunk8192_boundary_f32", "s03", 8194},
      {"kv_cache_rope_gpt_oss_sink_logits_dropped_invalid_f32", "kv_cache_rope_gpt_oss_window128_sink_logits_f32", "s01", 126},
      {"kv_cache_rope_phi3_5_mini_longrope_flip_not_rerotated_invalid_f32", "kv_cache_rope_phi3_5_mini_longrope_hf_switch_f32",
       "s03", -1}};
  for (const auto& [bad, good, step, position] : pairs) {
    // Under a generator mutant, the cases as generated now (as every golden test reads them).
    const auto& scheme = golden::scheme_by_slug("kv_cache");
    const auto nb = generator_mutant_active() ? fresh_case(scheme, bad) : golden::load_case(dir / (bad + ".json"));
    const auto ng = generator_mutant_active() ? fresh_case(scheme, good) : golden::load_case(dir / (good + ".json"));
    golden::TensorMap actual;
    for (const auto& e : nb.spec.expected) actual.emplace(e.name, nb.golden.at(e.name));
    const auto r = golden::verify_case(ng.spec, ng.golden, actual, {"strict", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kFail) << bad;
    ASSERT_TRUE(r.trace.has_value());
    EXPECT_EQ(r.trace->name, step) << golden::trace_text(*r.trace, false);
    if (position >= 0) {
      ASSERT_TRUE(r.trace->position.has_value()) << golden::trace_text(*r.trace, false);
      EXPECT_EQ(*r.trace->position, position) << golden::trace_text(*r.trace, false);
    }
    std::printf("[ trace    ] %s as output for %s: %s\n", bad.c_str(), good.c_str(),
                golden::trace_text(*r.trace, false).c_str());
  }
}

}  // namespace
}  // namespace posenc::properties
