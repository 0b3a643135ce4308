// KV cache float kernels: a ring-buffer cache per sequence with RoPE applied at insertion, and a
// batched step with per-sequence positions. Model: see reference/kv_cache.hpp (the same slots,
// positions, eviction and renumbering rules; this cache stores keys already rotated).
//
// Contract
//   dtypes:       float in / float out; the cache stores keys and values as float32 or float16
//                 (KvStorage), rounded to nearest even once when written (and when re-rotated)
//   error metric: per output element o_tc (t query, c channel), exact probabilities p:
//                   A = sum_j p_j |v_jc|,  B = sum_j p_j |v_jc - o_tc| S_j,
//                   S_j = scale sum_i (|q_a| + |q_b|)(|k_a| + |k_b|) over the pairs i of the raw
//                         q and k (tail channels: |q_c k_c|) + |bias_j|
//                   |o - o*| <= kKvCacheMaxError * eps_s * (A + B)
//                 eps_s = eps_f32 (f32 storage) or eps_f16 (f16 storage: the stored key and value
//                 roundings dominate); a key re-rotated n times by a shift adds n rotations'
//                 error (kRopeMaxError each) to its part of B. Empirical, measured by the
//                 properties (docs/schemes/kv_cache.md), not a worst-case proof.
//   valid range:  positions and shifts within optimized/rope.hpp's kRopeMaxPosition
//   layout:       q [B, T, H, d], k [B, T, Hkv, d], v [B, T, Hkv, dv], out [B, T, H, dv],
//                 valid [B, T] (0 = padding column), positions [B, T] (-1 for padding)
//   masks:        causal by position, window (attn.window), chunk (attn.chunk, Llama 4: key and
//                 query in the same chunk of absolute positions; earlier chunks' keys stay in
//                 their slots until evicted, unseen); sink logits (attn.sinks, GPT-OSS) add
//                 exp(s_h - max) to the softmax's sum (the max includes s_h) in every step, and
//                 count in B as p_sink |o| |s_h| (a score with value 0)
//   rules:        a token takes the lowest empty slot, else replaces the oldest evictable one;
//                 sinks (n_sink > 0): the oldest window token is evicted when full and later ones
//                 move down one position, their keys re-rotated by R(-1); shift() drops positions
//                 [n_keep, n_keep + n_discard) and re-rotates later keys by R(-n_discard)
//   threading:    OpenMP over (sequence, head) pairs, schedule static; each output row is computed
//                 by one thread in a fixed key order, so bits do not depend on the thread count
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "reference/common/span.hpp"
#include "reference/kv_cache.hpp"  // the model this cache implements (slots, positions, rules)

namespace posenc::optimized {

using reference::AttentionParams;
using reference::RopeParams;

/// Empirical bound of KvCache::step, in eps_s * (A + B) units (contract above).
inline constexpr double kKvCacheMaxError = 16.0;

enum class KvStorage { kF32, kF16 };

/// An additive score bias by head and logical positions (ALiBi, T5); empty = none.
using KvPositionBias = std::function<float(int head, std::int64_t query_pos, std::int64_t key_pos)>;

/// A rotation hook: rotates `heads` head vectors x [heads, d] by R(m), times `factor`. Empty =
/// posenc's RoPE kernel (optimized/rope.hpp: angles in double). Engine pipelines that compute
/// their angles in float32 (golden/cases/pipelines.hpp) plug in here.
using KvRotate = std::function<void(float* x, int heads, std::int64_t m, double factor)>;

struct KvCacheConfig {
  AttentionParams attn;        // heads, dims, scale, window (causal is implied)
  std::int64_t capacity = 0;   // slots per sequence, > 0
  std::int64_t n_sink = 0;     // StreamingLLM sinks (window must be 0)
  int batch = 1;
  KvStorage storage = KvStorage::kF32;
  bool rope = false;           // rotate q and k at insertion
  RopeParams rope_params;      // head_dim = attn.head_dim
  std::vector<double> inv_freq;  // empty = base^(-2i/d); else rotary_dim/2 values (scaled rules)
  double attention_factor = 1.0;
  KvRotate rotate;             // empty = the RoPE kernel with rope_params and inv_freq
  KvPositionBias bias;
  /// Re-rotate keys whose positions a shift or a sink eviction moves. false only models the
  /// engine mistake of renumbering the position records alone (golden negative controls).
  bool rerotate = true;
  /// The slot a written token takes. kFreeOrOldest is the rule above; the others only model
  /// engine mistakes (the golden engine's `slot-reused`, `slot-restart-at-0`): kReuseNewest, a
  /// step's first token overwrites the newest cached token (a write index one slot early);
  /// kFromSlot0, a step's tokens are written from slot 0 on, over the oldest cached ones.
  enum class SlotRule { kFreeOrOldest, kReuseNewest, kFromSlot0 };
  SlotRule slot_rule = SlotRule::kFreeOrOldest;
  /// true only models the engine mistake `window-off-by-one`: a window of w sees
  /// p - w <= k <= p (one key more than p - w < k <= p).
  bool window_inclusive = false;
  /// true only model engine mistakes (the golden engine's `chunk-mask-ignored-in-decode`,
  /// `sink-logits-dropped-in-decode`): single-token steps leave out attn.chunk, attn.sinks.
  bool decode_ignores_chunk = false;
  bool decode_drops_sink_logits = false;
};

class KvCache {
 public:
  /// InvalidArgument naming the parameter for an unusable configuration.
  explicit KvCache(KvCacheConfig c);

  const KvCacheConfig& config() const { return c_; }
  std::int64_t next_position(int b) const;

  /// One batched step: appends the valid columns of each sequence (T columns per sequence) and
  /// writes their attention outputs and positions. Positions are each sequence's own (next,
  /// next + 1, ...) unless `given` [B, T] holds the scheduler's numbering (read at valid
  /// columns). `slots` [B, T] (optional) receives the slot each token was written to (-1 for
  /// padding). A sequence without valid columns is left alone. InvalidArgument (nothing
  /// changed) when a sequence's tokens do not fit.
  void step(std::int64_t T, span<const std::uint8_t> valid, span<const float> q,
            span<const float> k, span<const float> v, span<float> out,
            span<std::int64_t> positions, span<const std::int64_t> given = {},
            span<std::int64_t> slots = {});

  /// llama.cpp's context shift of sequence b (see the contract).
  void shift(int b, std::int64_t n_keep, std::int64_t n_discard);

  /// New RoPE tables (rotary_dim/2 frequencies, attention factor) for the tokens written from now
  /// on: a length-dependent rule's next call (LongRoPE). Cached keys keep the rotation that
  /// wrote them (HF's kept cache); an engine that re-rotates the cache re-prefills it.
  void set_rope_tables(std::vector<double> inv_freq, double attention_factor);

  /// Slot contents of sequence b: position (-1 = empty), key [Hkv, d], value [Hkv, dv] as floats.
  std::int64_t slot_position(int b, std::int64_t slot) const;
  void read_slot(int b, std::int64_t slot, span<float> key, span<float> value) const;

 private:
  struct Seq {
    std::vector<std::int64_t> pos, age;  // per slot
    std::vector<float> k32, v32;         // f32 storage
    std::vector<std::uint16_t> k16, v16; // f16 storage
    std::int64_t next = 0, age_counter = 0;
  };
  void store(Seq& s, std::int64_t slot, const float* key, const float* value);
  void load_key(const Seq& s, std::int64_t slot, float* key) const;
  void load_value(const Seq& s, std::int64_t slot, float* value) const;
  void rerotate(Seq& s, const std::vector<std::int64_t>& slots, std::int64_t delta);
  void rotate(float* x, int heads, std::int64_t m, double factor) const;
  std::int64_t free_slot(const Seq& s) const;
  std::int64_t write_slot(const Seq& s, std::int64_t i) const;  // config().slot_rule's choice
  // step's four stages (kv_cache.cpp): plan and check, prepare each sequence, attend, commit.
  struct SeqWork;
  std::vector<SeqWork> step_plan(std::int64_t T, span<const std::uint8_t> valid) const;
  void evict_for_sink(Seq& s);
  void step_prepare(int b, std::int64_t T, span<const float> q, span<const float> k,
                    span<const float> v, span<const std::int64_t> given, SeqWork& w);
  void step_attend(std::vector<SeqWork>& work) const;
  void step_commit(std::int64_t T, std::vector<SeqWork>& work, span<float> out,
                   span<std::int64_t> positions, span<std::int64_t> slots);

  KvCacheConfig c_;
  std::vector<Seq> seqs_;
};

}  // namespace posenc::optimized
