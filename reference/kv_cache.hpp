// -----------------------------------------------------------------------------
// KV cache: positions across incremental decoding (reference)
// -----------------------------------------------------------------------------
// A decoding session holds, per sequence, a cache of keys and values in slots. Every slot keeps
// an explicit logical position; the slot index is storage only and never a position:
//
//   slot s:  position P_s (-1 = empty), the key (RoPE: the raw key and the position R_s it is
//            rotated to; other schemes: the encoded key), the value, its insertion age
//
// A step appends n tokens (n = 1: decode; prefill and speculative verify are multi-token
// steps). Token t of the step gets position N + t, N = the sequence's next position (the
// number of tokens it has seen, less any discarded by a shift). Then, for query t at position
// q = N + t and every key at position k (cached slots and the step's own tokens):
//
//   visible  k <= q, and q - w < k when the attention window w > 0, and floor(k / C) =
//            floor(q / C) when the chunk C > 0 (Llama 4: after position 8191 a chunked layer
//            sees nothing before 8192; the keys of earlier chunks may stay cached, unseen)
//   s_tk     scale * enc_q(q, q_t) . enc_k(k_j) + bias_h(q, k)
//   out_t    softmax over the visible keys, times their values (reference/attention.hpp);
//            with sink logits s_h (GPT-OSS, attn.sinks) the softmax's denominator also holds
//            exp(s_h): a score with no key, no value and no slot, in every step (prefill and
//            decode alike), never evicted or moved. Not StreamingLLM's sinks (n_sink below),
//            which are kept tokens.
//
//   RoPE      enc(x, p) = R(p) x with the call's tables; the key of slot s is R(R_s) k_raw
//   ALiBi     bias_h = -m_h (q - k)           T5      bias_h = table[bucket(k - q), h]
//   learned   enc(x, p) = x + P[o + p] on q, k and v (the hidden state x + P feeds all three
//   sinusoid  enc(x, p) = x + PE(p)         projections, here the identity)
//   NoPE      nothing
//
// and only then are the step's keys written: a token takes the lowest empty slot; when none is
// empty it replaces the oldest evictable token (sliding window: a ring buffer, slot != position).
// Pitfalls this model makes explicit (bug classes H-N of docs/bug-classes.md):
//   continuation  after a prefill of 100 tokens the next token is position 100, even alone
//   moving        a ring buffer keeps positions 80-99 in slots 0-19; the next token is 100, not 20
//   renumbering   a context shift (llama.cpp: discard positions [n_keep, n_keep + n_discard),
//                 later ones move down by n_discard) must re-rotate the moved keys:
//                 R(p - n) k_raw = R(-n) R(p) k_raw, since R(a) R(b) = R(a + b); changing the
//                 position record alone is wrong
//   sinks         StreamingLLM keeps the first n_sink tokens and a window; positions are indexes
//                 in the cache: evicting the oldest window token moves the rest down by one (and
//                 re-rotates them), the new token takes position = cache length
//   padding       in a batch, each sequence numbers its own tokens: [PAD, PAD, A, B] gives A, B
//                 positions 0, 1 and the next token 2; padded columns produce no token
// Length-dependent RoPE rules (dynamic NTK, LongRoPE) build a call's tables from its seq_len =
// largest position + 1 (dynamic NTK: through DynamicPolicy). KvTablePolicy says what happens to
// keys already cached when the tables change: HF keeps them as rotated by the call that wrote
// them (kKeepCachedRotation); kRerotateCache rotates every key with the current call's tables.
//
// Source: StreamingLLM: G. Xiao, Y. Tian, B. Chen, S. Han, M. Lewis, "Efficient Streaming
//   Language Models with Attention Sinks", arXiv:2309.17453v4, Sec. 3.2 ("positions within the
//   cache": cache [0,1,2,3,6,7,8] decoding token 9 uses positions 0..7). Sliding window:
//   A. Q. Jiang et al., "Mistral 7B", arXiv:2310.06825v1, Sec. 2 (rolling buffer cache, slot
//   i mod W). RoPE's R(a) R(b) = R(a + b): J. Su et al., arXiv:2104.09864v5, Sec. 3.4.2.
// Index note: positions and slots are 0-based; the papers' examples are too.
// Names elsewhere: llama.cpp llama_kv_cache seq_add / seq_rm (context shift, K-shift by
//   ggml_rope_ext on the cache); HF DynamicCache / SlidingWindowCache / SinkCache
//   (re-rotation by _get_rerotation_cos_sin); vLLM paged KV blocks with slot_mapping.
// Not modelled: paging (a block table is a slot map: positions are unaffected); quantized
//   caches; MLA's latent cache (DeepSeek's softmax multiplier is rejected here).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reference/alibi.hpp"
#include "reference/attention.hpp"
#include "reference/common/errors.hpp"
#include "reference/rope.hpp"
#include "reference/rope_scaling.hpp"
#include "reference/sinusoidal.hpp"
#include "reference/t5_bias.hpp"

namespace posenc::reference {

enum class KvEncodingKind { kNope, kRope, kAlibi, kT5, kLearned, kSinusoidal };

constexpr const char* kv_encoding_name(KvEncodingKind k) {
  switch (k) {
    case KvEncodingKind::kNope: return "nope";
    case KvEncodingKind::kRope: return "rope";
    case KvEncodingKind::kAlibi: return "alibi";
    case KvEncodingKind::kT5: return "t5_bias";
    case KvEncodingKind::kLearned: return "learned";
    case KvEncodingKind::kSinusoidal: return "sinusoidal";
  }
  return "?";
}

/// Absolute encodings add to the token, so their keys cannot be renumbered.
constexpr bool kv_encoding_is_relative(KvEncodingKind k) {
  return k != KvEncodingKind::kLearned && k != KvEncodingKind::kSinusoidal;
}

/// What cached keys do when a length-dependent RoPE rule changes its tables between calls.
enum class KvTablePolicy { kKeepCachedRotation, kRerotateCache };

constexpr const char* kv_table_policy_name(KvTablePolicy p) {
  return p == KvTablePolicy::kKeepCachedRotation ? "keep_cached_rotation" : "rerotate_cache";
}

/// How positions enter attention; `kind` selects the fields that are read.
struct KvEncoding {
  KvEncodingKind kind = KvEncodingKind::kNope;
  RopeParams rope;                  // kRope (head_dim = the attention's head_dim)
  RopeScaling scaling;              // kRope: type kNone = plain; seq_len is set per call
  DynamicPolicy dynamic_policy = DynamicPolicy::kPerCall;
  KvTablePolicy table_policy = KvTablePolicy::kKeepCachedRotation;
  AlibiForm alibi_form = AlibiForm::kPaper;  // kAlibi: slopes of n_heads (paper or symmetric)
  T5BiasParams t5;                  // kT5 (n_heads = the attention's)
  std::vector<double> t5_table;     // [num_buckets, n_heads]
  std::int64_t learned_rows = 0;    // kLearned: P [rows, n_heads * head_dim]
  std::int64_t learned_offset = 0;  // o (OPT, BART: 2)
  std::vector<double> learned_table;
  SinusoidalParams sinusoidal;      // kSinusoidal (d_model = n_heads * head_dim)
};

/// A session's shape: attention (heads, dims, scale, window), cache capacity and sinks.
///   capacity 0            unbounded (a token never leaves)
///   capacity C, window w  ring buffer, 0 < w <= C: the oldest token is evicted
///   capacity C, n_sink k  StreamingLLM: k sinks kept, the rest a window renumbered in cache
///   capacity C alone      fixed size: a step that does not fit is an error (shift first)
struct KvCacheParams {
  AttentionParams attn;  // causal is implied; query_offset is unused (positions are the cache's)
  std::int64_t capacity = 0;
  std::int64_t n_sink = 0;
  KvEncoding enc;
};

inline void kv_cache_check(const KvCacheParams& p, const char* function = "kv_cache_check") {
  attention_check(p.attn, 0, 0, function);
  if (p.capacity < 0) throw_invalid(function, "capacity must be >= 0", p.capacity);
  if (p.n_sink < 0) throw_invalid(function, "n_sink must be >= 0", p.n_sink);
  // Llama 4's chunk mask reads absolute positions; a StreamingLLM cache renumbers them.
  if (p.attn.chunk > 0 && p.n_sink > 0) {
    throw_invalid(function, "attn.chunk: a sink cache renumbers positions, a chunk mask needs "
                  "absolute ones (n_sink must be 0)", p.attn.chunk);
  }
  if (p.attn.window > 0 && p.capacity > 0 && p.capacity < p.attn.window) {
    throw_invalid(function, "capacity must hold the window " + std::to_string(p.attn.window),
                  p.capacity);
  }
  if (p.n_sink > 0) {
    if (p.capacity <= p.n_sink) {
      throw_invalid(function, "capacity must exceed n_sink " + std::to_string(p.n_sink), p.capacity);
    }
    if (p.attn.window > 0) throw_invalid(function, "attention sinks use the cache as the window; window must be 0", p.attn.window);
    if (!kv_encoding_is_relative(p.enc.kind)) {
      throw_invalid(function, "attention sinks renumber positions; an absolute encoding cannot",
                    kv_encoding_name(p.enc.kind));
    }
  }
  const KvEncoding& e = p.enc;
  const int H = p.attn.n_heads, d = p.attn.head_dim;
  switch (e.kind) {
    case KvEncodingKind::kRope:
      rope_scaling_check(e.rope, e.scaling, function);
      if (e.rope.head_dim != d) throw_invalid(function, "rope.head_dim must equal head_dim " + std::to_string(d), e.rope.head_dim);
      if (e.scaling.mla) throw_invalid(function, "MLA's softmax multiplier is not modelled by the cache", "mla");
      break;
    case KvEncodingKind::kT5:
      t5_bias_check(e.t5, function);
      if (e.t5.n_heads != H) throw_invalid(function, "t5.n_heads must equal n_heads " + std::to_string(H), e.t5.n_heads);
      t5_bias_check_table(e.t5, e.t5_table.size(), function);
      break;
    case KvEncodingKind::kLearned:
    case KvEncodingKind::kSinusoidal:
      if (p.attn.n_kv_heads != H || p.attn.value_dim != d) {
        throw_invalid(function, "absolute encodings add one row to q, k and v: n_kv_heads must equal n_heads and value_dim head_dim", p.attn.n_kv_heads);
      }
      if (e.kind == KvEncodingKind::kLearned &&
          e.learned_table.size() != static_cast<std::size_t>(e.learned_rows * H * d)) {
        throw_invalid(function, "learned_table must have learned_rows * n_heads * head_dim entries", e.learned_table.size());
      }
      if (e.kind == KvEncodingKind::kSinusoidal && e.sinusoidal.d_model != H * d) {
        throw_invalid(function, "sinusoidal.d_model must equal n_heads * head_dim " + std::to_string(H * d), e.sinusoidal.d_model);
      }
      break;
    default:
      break;
  }
}

/// What a step produced for one sequence: the new tokens' positions and slots, out [n, H, dv],
/// and what the attention saw (for error analyses): the keys in the order used (cached slots in
/// slot order, then the step's tokens) with their positions, encoded q [n, H, d], keys
/// [nk, Hkv, d], values [nk, Hkv, dv], probabilities and bias [n, H, nk] (0 where masked).
template <class Real>
struct KvStepResult {
  std::vector<std::int64_t> positions, slots;
  std::vector<Real> out;
  std::vector<std::int64_t> key_positions;
  std::vector<Real> q, keys, values, probs, bias;
  std::vector<Real> sink_mass;  // [n, H]: the sink logit's share of the softmax (0 without)
};

/// The cache after a step, slot by slot: position (-1 empty), encoded key [C, Hkv, d] (RoPE:
/// rotated to the slot's rotation record), value [C, Hkv, dv]; empty slots hold zeros.
template <class Real>
struct KvSnapshot {
  std::vector<std::int64_t> positions;
  std::vector<Real> k, v;
};

/// Engine mistakes a session can reproduce (golden negative controls; a correct session has
/// none): a decode path (single-token steps) that leaves out the chunk mask, or the sink logits,
/// which the prefill path applies.
struct KvDecodeFaults {
  bool ignore_chunk_in_decode = false;
  bool drop_sink_logits_in_decode = false;
};

/// One sequence's decoding session, in any Real.
template <class Real>
class KvSession {
 public:
  explicit KvSession(KvCacheParams p) : p_(std::move(p)) {
    kv_cache_check(p_, "KvSession");
    if (p_.enc.kind == KvEncodingKind::kAlibi) {
      AlibiParams ap{p_.attn.n_heads, p_.enc.alibi_form};
      slopes_ = alibi_slopes<Real>(ap);
    }
    if (p_.enc.kind == KvEncodingKind::kSinusoidal) omega_ = sinusoidal_inv_freq<Real>(p_.enc.sinusoidal);
  }

  const KvCacheParams& params() const { return p_; }
  std::int64_t next_position() const { return next_; }
  /// Engine mistakes, for golden negative controls only (see KvDecodeFaults).
  void set_decode_faults(const KvDecodeFaults& f) { faults_ = f; }
  /// Number of slots (grows for an unbounded cache) and of occupied ones.
  std::int64_t n_slots() const { return static_cast<std::int64_t>(slots_.size()); }
  std::int64_t n_cached() const {
    return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.position >= 0; });
  }

  /// Appends n tokens: q [n, H, d], k [n, Hkv, d], v [n, Hkv, dv] (raw, before any encoding).
  /// `positions` empty: the session numbers them (next, next + 1, ...). Given: the caller's
  /// numbering is used as is (what an engine's scheduler passes; golden negative controls model
  /// the scheduler's mistakes this way), and the next position becomes the last one + 1.
  KvStepResult<Real> append(std::int64_t n, const std::vector<Real>& q, const std::vector<Real>& k,
                            const std::vector<Real>& v, const std::vector<std::int64_t>& positions = {}) {
    const AttentionParams& a = p_.attn;
    const int H = a.n_heads, Hkv = a.n_kv_heads, d = a.head_dim, dv = a.value_dim;
    if (n <= 0) throw_invalid("KvSession::append", "a step appends at least one token", n);
    if (q.size() != static_cast<std::size_t>(n * H * d)) throw_invalid("KvSession::append", "q must have n*H*d elements", q.size());
    if (k.size() != static_cast<std::size_t>(n * Hkv * d)) throw_invalid("KvSession::append", "k must have n*Hkv*d elements", k.size());
    if (v.size() != static_cast<std::size_t>(n * Hkv * dv)) throw_invalid("KvSession::append", "v must have n*Hkv*dv elements", v.size());
    if (p_.capacity > 0 && p_.attn.window == 0) {
      const std::int64_t room = p_.capacity - n_cached();
      if (p_.n_sink == 0 && n > room) {
        throw_invalid("KvSession::append", "the cache has room for " + std::to_string(room) +
                      " tokens (capacity " + std::to_string(p_.capacity) + "; shift first)", n);
      }
      if (p_.n_sink > 0 && n > 1 && n > room) {
        throw_invalid("KvSession::append", "a multi-token step must fit the sink cache (room " +
                      std::to_string(room) + "); decode one token at a time once it is full", n);
      }
    }
    if (p_.n_sink > 0 && n_cached() == p_.capacity) evict_and_renumber();

    if (!positions.empty() && positions.size() != static_cast<std::size_t>(n)) {
      throw_invalid("KvSession::append", "positions must be empty or have n entries", positions.size());
    }
    for (std::int64_t p : positions) {
      if (p < 0) throw_invalid("KvSession::append", "positions must be >= 0", p);
    }
    KvStepResult<Real> r;
    r.positions = positions;
    for (std::int64_t t = 0; positions.empty() && t < n; ++t) {
      r.positions.push_back(next_ + t);
    }
    const std::int64_t table_len = call_tables(r.positions.back() + 1);

    // The step's own tokens, encoded at their positions.
    std::vector<Slot> fresh(static_cast<std::size_t>(n));
    std::vector<std::vector<Real>> qe(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) {
      Slot& s = fresh[t];
      s.position = s.rotated_at = r.positions[t];
      s.table_len = table_len;
      s.k.assign(k.begin() + t * Hkv * d, k.begin() + (t + 1) * Hkv * d);
      s.v.assign(v.begin() + t * Hkv * dv, v.begin() + (t + 1) * Hkv * dv);
      qe[t].assign(q.begin() + t * H * d, q.begin() + (t + 1) * H * d);
      if (!kv_encoding_is_relative(p_.enc.kind)) {
        add_absolute(s.position, s.k);
        add_absolute(s.position, s.v);
        add_absolute(s.position, qe[t]);
      } else if (p_.enc.kind == KvEncodingKind::kRope) {
        qe[t] = rotate_heads(qe[t], H, s.position, table_len);
      }
    }

    // Keys: every cached slot, then the step's tokens.
    std::vector<const Slot*> keys;
    for (const Slot& s : slots_) {
      if (s.position >= 0) keys.push_back(&s);
    }
    for (const Slot& s : fresh) keys.push_back(&s);
    std::vector<std::vector<Real>> ke;  // encoded keys [Hkv * d] per key
    for (const Slot* s : keys) ke.push_back(encoded_key(*s, table_len));

    const Real scale = attention_scale<Real>(a);
    const int group = H / Hkv;
    // A negative control's engine mistake may drop the chunk mask or the sink logits in
    // single-token steps (decode); a correct session applies both in every step.
    const bool decode = n == 1;
    const std::int64_t chunk = decode && faults_.ignore_chunk_in_decode ? 0 : a.chunk;
    const bool sinks = !a.sinks.empty() && !(decode && faults_.drop_sink_logits_in_decode);
    const std::size_t nk = keys.size();
    r.out.assign(static_cast<std::size_t>(n * H * dv), Real(0));
    r.probs.assign(static_cast<std::size_t>(n * H) * nk, Real(0));
    r.bias.assign(static_cast<std::size_t>(n * H) * nk, Real(0));
    r.sink_mass.assign(static_cast<std::size_t>(n * H), Real(0));
    for (std::size_t j = 0; j < nk; ++j) {
      r.key_positions.push_back(keys[j]->position);
      r.keys.insert(r.keys.end(), ke[j].begin(), ke[j].end());
      r.values.insert(r.values.end(), keys[j]->v.begin(), keys[j]->v.end());
    }
    for (const auto& x : qe) r.q.insert(r.q.end(), x.begin(), x.end());
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t qp = r.positions[t];
      for (int h = 0; h < H; ++h) {
        const int kh = h / group;
        std::vector<Real> s(keys.size(), Real(0));
        std::vector<bool> vis(keys.size());
        for (std::size_t j = 0; j < keys.size(); ++j) {
          const std::int64_t kp = keys[j]->position;
          vis[j] = kp <= qp && (a.window == 0 || qp - a.window < kp) &&
                   (chunk == 0 || attention_chunk_start(chunk, kp) == attention_chunk_start(chunk, qp));
          if (!vis[j]) continue;
          Real dot = 0;
          for (int c = 0; c < d; ++c) dot += qe[t][h * d + c] * ke[j][kh * d + c];
          const Real b = bias(h, qp, kp);
          r.bias[(t * H + h) * nk + j] = b;
          s[j] = scale * dot + b;
        }
        const Real sink = sinks ? Real(a.sinks[static_cast<std::size_t>(h)]) : Real(0);
        const std::vector<Real> pr = sinks ? attention_softmax_sink(s, vis, sink) : attention_softmax(s, vis);
        if (sinks) r.sink_mass[t * H + h] = attention_sink_mass(s, vis, sink);
        for (std::size_t j = 0; j < keys.size(); ++j) {
          if (!vis[j]) continue;
          r.probs[(t * H + h) * nk + j] = pr[j];
          for (int c = 0; c < dv; ++c) r.out[(t * H + h) * dv + c] += pr[j] * keys[j]->v[kh * dv + c];
        }
      }
    }

    // Write the step's keys.
    for (Slot& s : fresh) {
      s.age = age_++;
      r.slots.push_back(insert(std::move(s)));
    }
    next_ = r.positions.back() + 1;
    return r;
  }

  /// llama.cpp's context shift: drops positions [n_keep, n_keep + n_discard) and moves the later
  /// ones down by n_discard, re-rotating their keys (R(-n_discard) applied to R(p) k).
  /// rerotate = false changes the position records alone: the engine mistake, for negative
  /// controls (the keys keep the rotation of their old positions).
  void shift(std::int64_t n_keep, std::int64_t n_discard, bool rerotate = true) {
    if (!kv_encoding_is_relative(p_.enc.kind)) {
      throw_invalid("KvSession::shift", "an absolute encoding cannot renumber positions", kv_encoding_name(p_.enc.kind));
    }
    if (p_.n_sink > 0) throw_invalid("KvSession::shift", "a sink cache renumbers itself; shift is for plain caches", p_.n_sink);
    if (n_keep < 0) throw_invalid("KvSession::shift", "n_keep must be >= 0", n_keep);
    if (n_discard <= 0) throw_invalid("KvSession::shift", "n_discard must be > 0", n_discard);
    if (n_keep + n_discard > next_) {
      throw_invalid("KvSession::shift", "n_keep + n_discard must be <= next position " + std::to_string(next_), n_keep + n_discard);
    }
    for (Slot& s : slots_) {
      if (s.position < 0) continue;
      if (s.position >= n_keep && s.position < n_keep + n_discard) {
        s = Slot{};
      } else if (s.position >= n_keep + n_discard) {
        s.position -= n_discard;
        if (rerotate) s.rotated_at -= n_discard;
      }
    }
    next_ -= n_discard;
  }

  KvSnapshot<Real> snapshot() const {
    const int Hkv = p_.attn.n_kv_heads, d = p_.attn.head_dim, dv = p_.attn.value_dim;
    KvSnapshot<Real> sn;
    for (const Slot& s : slots_) {
      sn.positions.push_back(s.position);
      if (s.position < 0) {
        sn.k.insert(sn.k.end(), static_cast<std::size_t>(Hkv * d), Real(0));
        sn.v.insert(sn.v.end(), static_cast<std::size_t>(Hkv * dv), Real(0));
        continue;
      }
      const auto ke = encoded_key(s, current_table_len_);
      sn.k.insert(sn.k.end(), ke.begin(), ke.end());
      sn.v.insert(sn.v.end(), s.v.begin(), s.v.end());
    }
    return sn;
  }

  /// The tables a call of seq_len `call_seq_len` rotates with (RoPE; rules that read no length
  /// give the same tables for every call), in Real.
  RopeTables<Real> tables_for(std::int64_t table_len) const {
    auto it = tables_.find(table_len);
    if (it != tables_.end()) return it->second;
    RopeScaling s = p_.enc.scaling;
    s.seq_len = table_len;
    RopeTables<Real> t = s.type == RopeScalingType::kNone ? rope_tables<Real>(p_.enc.rope)
                                                          : rope_scaling_tables<Real>(p_.enc.rope, s).tables;
    tables_.emplace(table_len, t);
    return t;
  }

 private:
  struct Slot {
    std::int64_t position = -1;   // logical position; -1 = empty
    std::int64_t rotated_at = -1; // RoPE: the position the key is rotated to
    std::int64_t table_len = 0;   // RoPE: the seq_len of the tables that rotated it
    std::int64_t age = 0;         // insertion order
    std::vector<Real> k, v;       // RoPE: raw key; absolute: encoded key; value (encoded)
  };

  bool length_dependent() const {
    const auto t = p_.enc.scaling.type;
    return p_.enc.kind == KvEncodingKind::kRope &&
           (t == RopeScalingType::kDynamic || t == RopeScalingType::kLongRope);
  }

  /// The table length of a call whose largest position + 1 is call_seq_len.
  std::int64_t call_tables(std::int64_t call_seq_len) {
    std::int64_t len = 0;
    if (length_dependent()) {
      len = p_.enc.scaling.type == RopeScalingType::kDynamic
                ? dynamic_ntk_call_seq_len(p_.enc.dynamic_policy, dyn_, call_seq_len, p_.enc.scaling.max_position)
                : call_seq_len;
    }
    current_table_len_ = len;
    return len;
  }

  std::vector<Real> rotate_heads(const std::vector<Real>& x, int heads, std::int64_t pos, std::int64_t table_len) const {
    const int d = p_.attn.head_dim;
    const RopeTables<Real> t = tables_for(table_len);
    std::vector<Real> y;
    for (int h = 0; h < heads; ++h) {
      const std::vector<Real> xh(x.begin() + h * d, x.begin() + (h + 1) * d);
      const auto yh = rope_apply(p_.enc.rope, t, pos, xh);
      y.insert(y.end(), yh.begin(), yh.end());
    }
    return y;
  }

  std::vector<Real> encoded_key(const Slot& s, std::int64_t current_len) const {
    if (p_.enc.kind != KvEncodingKind::kRope) return s.k;
    const bool rerotate = p_.enc.table_policy == KvTablePolicy::kRerotateCache;
    const std::int64_t len = rerotate ? current_len : s.table_len;
    return rotate_heads(s.k, p_.attn.n_kv_heads, s.rotated_at, len);
  }

  void add_absolute(std::int64_t pos, std::vector<Real>& x) const {
    const std::size_t w = x.size();
    if (p_.enc.kind == KvEncodingKind::kLearned) {
      const std::int64_t row = p_.enc.learned_offset + pos;
      if (row < 0 || row >= p_.enc.learned_rows) {
        throw_invalid("KvSession::append", "learned row offset + position must lie in [0, " +
                      std::to_string(p_.enc.learned_rows) + ")", row);
      }
      for (std::size_t c = 0; c < w; ++c) x[c] += Real(p_.enc.learned_table[row * w + c]);
    } else {
      const auto pe = sinusoidal_row<Real>(p_.enc.sinusoidal, omega_, pos);
      for (std::size_t c = 0; c < w; ++c) x[c] += pe[c];
    }
  }

  Real bias(int h, std::int64_t qp, std::int64_t kp) const {
    switch (p_.enc.kind) {
      case KvEncodingKind::kAlibi: return alibi_bias<Real>(p_.enc.alibi_form, slopes_[h], qp, 0, kp, 0);
      case KvEncodingKind::kT5:  // table[bucket(k - q), h]
        return Real(p_.enc.t5_table[static_cast<std::size_t>(t5_bias_bucket(p_.enc.t5, kp - qp)) * p_.enc.t5.n_heads + h]);
      default: return Real(0);
    }
  }

  /// StreamingLLM when full: evict the oldest token that is not a sink (the sinks are the first
  /// n_sink tokens the sequence wrote), move later positions down by one.
  void evict_and_renumber() {
    Slot* oldest = nullptr;
    for (Slot& s : slots_) {
      if (s.position < 0 || s.age < p_.n_sink) continue;  // empty or a sink
      if (!oldest || s.age < oldest->age) oldest = &s;
    }
    const std::int64_t gone = oldest->position;
    *oldest = Slot{};
    for (Slot& s : slots_) {
      if (s.position > gone) {
        s.position -= 1;
        s.rotated_at -= 1;
      }
    }
    next_ -= 1;
  }

  /// The lowest empty slot, else the oldest evictable token's slot (ring buffer).
  std::int64_t insert(Slot s) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].position < 0) {
        slots_[i] = std::move(s);
        return static_cast<std::int64_t>(i);
      }
    }
    if (p_.capacity == 0 || n_slots() < p_.capacity) {
      slots_.push_back(std::move(s));
      return n_slots() - 1;
    }
    std::size_t oldest = 0;
    for (std::size_t i = 1; i < slots_.size(); ++i) {
      if (slots_[i].age < slots_[oldest].age) oldest = i;
    }
    slots_[oldest] = std::move(s);
    return static_cast<std::int64_t>(oldest);
  }

  KvCacheParams p_;
  std::vector<Slot> slots_;
  std::int64_t next_ = 0, age_ = 0, current_table_len_ = 0;
  KvDecodeFaults faults_;
  DynamicNtkState dyn_;
  mutable std::map<std::int64_t, RopeTables<Real>> tables_;  // by table length (a cache of values)
  std::vector<Real> slopes_, omega_;
};

/// A batch of sequences, each with its own session; a step has T columns per sequence, of
/// which valid[b * T + t] != 0 are tokens and the rest padding (left, right or anywhere).
template <class Real>
struct KvBatchStep {
  std::vector<std::int64_t> positions, slots;  // [B, T], -1 for padding
  std::vector<Real> out;                       // [B, T, H, dv], zeros for padding
  std::vector<std::vector<std::int64_t>> columns;  // per sequence: its valid columns
  std::vector<KvStepResult<Real>> sequences;       // per sequence (empty when no column)
};

template <class Real>
class KvBatch {
 public:
  KvBatch(const KvCacheParams& p, int batch) {
    if (batch <= 0) throw_invalid("KvBatch", "batch must be > 0", batch);
    for (int b = 0; b < batch; ++b) seqs_.emplace_back(p);
  }
  int batch() const { return static_cast<int>(seqs_.size()); }
  KvSession<Real>& sequence(int b) { return seqs_.at(static_cast<std::size_t>(b)); }
  const KvSession<Real>& sequence(int b) const { return seqs_.at(static_cast<std::size_t>(b)); }

  /// q [B, T, H, d], k [B, T, Hkv, d], v [B, T, Hkv, dv]; a sequence with no valid column
  /// this step is left alone. `positions` [B, T] (read at valid columns) overrides each
  /// sequence's numbering, as in KvSession::append; empty = each sequence numbers its own.
  KvBatchStep<Real> append(std::int64_t T, const std::vector<std::uint8_t>& valid,
                           const std::vector<Real>& q, const std::vector<Real>& k,
                           const std::vector<Real>& v, const std::vector<std::int64_t>& positions = {}) {
    const AttentionParams& a = seqs_[0].params().attn;
    const int B = batch(), H = a.n_heads, Hkv = a.n_kv_heads, d = a.head_dim, dv = a.value_dim;
    if (valid.size() != static_cast<std::size_t>(B * T)) throw_invalid("KvBatch::append", "valid must have B*T entries", valid.size());
    if (q.size() != static_cast<std::size_t>(B * T * H * d)) throw_invalid("KvBatch::append", "q must have B*T*H*d elements", q.size());
    if (k.size() != static_cast<std::size_t>(B * T * Hkv * d)) throw_invalid("KvBatch::append", "k must have B*T*Hkv*d elements", k.size());
    if (v.size() != static_cast<std::size_t>(B * T * Hkv * dv)) throw_invalid("KvBatch::append", "v must have B*T*Hkv*dv elements", v.size());
    if (!positions.empty() && positions.size() != static_cast<std::size_t>(B * T)) {
      throw_invalid("KvBatch::append", "positions must be empty or have B*T entries", positions.size());
    }
    KvBatchStep<Real> r;
    r.positions.assign(static_cast<std::size_t>(B * T), -1);
    r.slots.assign(static_cast<std::size_t>(B * T), -1);
    r.out.assign(static_cast<std::size_t>(B * T * H * dv), Real(0));
    r.columns.resize(static_cast<std::size_t>(B));
    r.sequences.resize(static_cast<std::size_t>(B));
    for (int b = 0; b < B; ++b) {
      std::vector<std::int64_t> cols;
      for (std::int64_t t = 0; t < T; ++t) {
        if (valid[b * T + t]) cols.push_back(t);
      }
      if (cols.empty()) continue;
      // Mutant: positions numbered by column (next + column index), padding included.
      std::vector<std::int64_t> given;
      for (std::int64_t t : cols) {
        if (!positions.empty()) given.push_back(positions[b * T + t]);
      }
      std::vector<Real> qs, ks, vs;
      for (std::int64_t t : cols) {
        const std::size_t row = static_cast<std::size_t>(b * T + t);
        qs.insert(qs.end(), q.begin() + row * H * d, q.begin() + (row + 1) * H * d);
        ks.insert(ks.end(), k.begin() + row * Hkv * d, k.begin() + (row + 1) * Hkv * d);
        vs.insert(vs.end(), v.begin() + row * Hkv * dv, v.begin() + (row + 1) * Hkv * dv);
      }
      r.sequences[b] = seqs_[b].append(static_cast<std::int64_t>(cols.size()), qs, ks, vs, given);
      r.columns[b] = cols;
      const KvStepResult<Real>& st = r.sequences[b];
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const std::size_t row = static_cast<std::size_t>(b * T + cols[i]);
        r.positions[row] = st.positions[i];
        r.slots[row] = st.slots[i];
        std::copy(st.out.begin() + i * H * dv, st.out.begin() + (i + 1) * H * dv, r.out.begin() + row * H * dv);
      }
    }
    return r;
  }

 private:
  std::vector<KvSession<Real>> seqs_;
};

}  // namespace posenc::reference
