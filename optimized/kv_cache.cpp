// KV cache float kernels. Model: reference/kv_cache.hpp; contract: optimized/kv_cache.hpp.
#include "optimized/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <omp.h>

#include "optimized/rope.hpp"
#include "reference/common/dtype.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::optimized {
namespace {

/// Multiply-adds below which a step runs on one thread.
constexpr std::int64_t kParallelWork = std::int64_t{1} << 16;

float to_storage(float x, KvStorage s) {
  return s == KvStorage::kF16 ? static_cast<float>(f16_to_double(double_to_f16(x))) : x;
}

/// The number of occupied slots (position >= 0).
std::int64_t n_cached(const std::vector<std::int64_t>& pos) {
  return std::count_if(pos.begin(), pos.end(), [](std::int64_t p) { return p >= 0; });
}

}  // namespace

KvCache::KvCache(KvCacheConfig c) : c_(std::move(c)) {
  const char* fn = "KvCache";
  reference::attention_check(c_.attn, 0, 0, fn);
  if (c_.capacity <= 0) throw_invalid(fn, "capacity must be > 0", c_.capacity);
  if (c_.batch <= 0) throw_invalid(fn, "batch must be > 0", c_.batch);
  if (c_.n_sink < 0) throw_invalid(fn, "n_sink must be >= 0", c_.n_sink);
  if (c_.attn.chunk > 0 && c_.n_sink > 0) {
    throw_invalid(fn, "attn.chunk: a sink cache renumbers positions, a chunk mask needs absolute "
                  "ones (n_sink must be 0)", c_.attn.chunk);
  }
  if (c_.attn.window > 0 && c_.capacity < c_.attn.window) {
    throw_invalid(fn, "capacity must hold the window " + std::to_string(c_.attn.window), c_.capacity);
  }
  if (c_.n_sink > 0 && (c_.capacity <= c_.n_sink || c_.attn.window > 0)) {
    throw_invalid(fn, "sinks need capacity > n_sink and window 0", c_.n_sink);
  }
  if (c_.rope) {
    reference::rope_check(c_.rope_params, fn);
    if (c_.rope_params.head_dim != c_.attn.head_dim) {
      throw_invalid(fn, "rope_params.head_dim must equal head_dim " + std::to_string(c_.attn.head_dim),
                    c_.rope_params.head_dim);
    }
    if (!c_.inv_freq.empty() && c_.inv_freq.size() != static_cast<std::size_t>(c_.rope_params.rotary_dim / 2)) {
      throw_invalid(fn, "inv_freq must have rotary_dim/2 entries", c_.inv_freq.size());
    }
    if (!(c_.attention_factor > 0) || !std::isfinite(c_.attention_factor)) {
      throw_invalid(fn, "attention_factor must be finite and > 0", c_.attention_factor);
    }
  }
  const std::size_t C = static_cast<std::size_t>(c_.capacity);
  const std::size_t kn = C * c_.attn.n_kv_heads * c_.attn.head_dim;
  const std::size_t vn = C * c_.attn.n_kv_heads * c_.attn.value_dim;
  seqs_.resize(static_cast<std::size_t>(c_.batch));
  for (Seq& s : seqs_) {
    s.pos.assign(C, -1);
    s.age.assign(C, 0);
    if (c_.storage == KvStorage::kF32) {
      s.k32.assign(kn, 0.0f);
      s.v32.assign(vn, 0.0f);
    } else {
      s.k16.assign(kn, 0);
      s.v16.assign(vn, 0);
    }
  }
}

std::int64_t KvCache::next_position(int b) const { return seqs_.at(static_cast<std::size_t>(b)).next; }

std::int64_t KvCache::slot_position(int b, std::int64_t slot) const {
  const Seq& s = seqs_.at(static_cast<std::size_t>(b));
  if (slot < 0 || slot >= c_.capacity) throw_invalid("KvCache::slot_position", "slot must lie in [0, capacity)", slot);
  return s.pos[slot];
}

void KvCache::read_slot(int b, std::int64_t slot, span<float> key, span<float> value) const {
  const Seq& s = seqs_.at(static_cast<std::size_t>(b));
  if (slot < 0 || slot >= c_.capacity) throw_invalid("KvCache::read_slot", "slot must lie in [0, capacity)", slot);
  if (key.size() != static_cast<std::size_t>(c_.attn.n_kv_heads * c_.attn.head_dim)) {
    throw_invalid("KvCache::read_slot", "key must have Hkv*d elements", key.size());
  }
  if (value.size() != static_cast<std::size_t>(c_.attn.n_kv_heads * c_.attn.value_dim)) {
    throw_invalid("KvCache::read_slot", "value must have Hkv*dv elements", value.size());
  }
  load_key(s, slot, key.data());
  load_value(s, slot, value.data());
}

void KvCache::store(Seq& s, std::int64_t slot, const float* key, const float* value) {
  const std::size_t kd = static_cast<std::size_t>(c_.attn.n_kv_heads * c_.attn.head_dim);
  const std::size_t vd = static_cast<std::size_t>(c_.attn.n_kv_heads * c_.attn.value_dim);
  for (std::size_t i = 0; i < kd; ++i) {
    if (c_.storage == KvStorage::kF32) {
      s.k32[slot * kd + i] = key[i];
    } else {
      s.k16[slot * kd + i] = double_to_f16(key[i]);
    }
  }
  for (std::size_t i = 0; i < vd && value; ++i) {
    if (c_.storage == KvStorage::kF32) {
      s.v32[slot * vd + i] = value[i];
    } else {
      s.v16[slot * vd + i] = double_to_f16(value[i]);
    }
  }
}

void KvCache::load_key(const Seq& s, std::int64_t slot, float* key) const {
  const std::size_t kd = static_cast<std::size_t>(c_.attn.n_kv_heads * c_.attn.head_dim);
  for (std::size_t i = 0; i < kd; ++i) {
    key[i] = c_.storage == KvStorage::kF32 ? s.k32[slot * kd + i] : static_cast<float>(f16_to_double(s.k16[slot * kd + i]));
  }
}

void KvCache::load_value(const Seq& s, std::int64_t slot, float* value) const {
  const std::size_t vd = static_cast<std::size_t>(c_.attn.n_kv_heads * c_.attn.value_dim);
  for (std::size_t i = 0; i < vd; ++i) {
    value[i] = c_.storage == KvStorage::kF32 ? s.v32[slot * vd + i] : static_cast<float>(f16_to_double(s.v16[slot * vd + i]));
  }
}

void KvCache::rotate(float* x, int heads, std::int64_t m, double factor) const {
  if (c_.rotate) {
    c_.rotate(x, heads, m, factor);
    return;
  }
  const std::int64_t pos[1] = {m};
  const RopeCache rc = rope_cache_init(c_.rope_params, span<const std::int64_t>(pos, 1),
                                       span<const double>(c_.inv_freq.data(), c_.inv_freq.size()), factor);
  const std::size_t n = static_cast<std::size_t>(heads * c_.attn.head_dim);
  rope_apply(c_.rope_params, rc, RopeShape{1, heads, RopeTensorLayout::kTokensHeadsDim},
             span<const float>(x, n), span<float>(x, n));
}

/// The stored keys of `slots` times R(delta) (no attention factor: it is already in the keys);
/// the rotation's table is built once for all of them.
void KvCache::rerotate(Seq& s, const std::vector<std::int64_t>& slots, std::int64_t delta) {
  if (!c_.rope || !c_.rerotate || slots.empty() || POSENC_MUTANT("opt_kv_shift_not_rerotated")) return;
  const int Hkv = c_.attn.n_kv_heads, d = c_.attn.head_dim;
  const std::size_t n = static_cast<std::size_t>(Hkv * d);
  std::vector<float> key(n);
  const std::int64_t pos[1] = {delta};
  RopeCache rc;
  if (!c_.rotate) {
    rc = rope_cache_init(c_.rope_params, span<const std::int64_t>(pos, 1),
                         span<const double>(c_.inv_freq.data(), c_.inv_freq.size()), 1.0);
  }
  for (std::int64_t slot : slots) {
    load_key(s, slot, key.data());
    if (c_.rotate) {
      c_.rotate(key.data(), Hkv, delta, 1.0);
    } else {
      rope_apply(c_.rope_params, rc, RopeShape{1, Hkv, RopeTensorLayout::kTokensHeadsDim},
                 span<const float>(key.data(), n), span<float>(key.data(), n));
    }
    store(s, slot, key.data(), nullptr);
  }
}

std::int64_t KvCache::free_slot(const Seq& s) const {
  for (std::int64_t i = 0; i < c_.capacity; ++i) {
    if (s.pos[i] < 0) return i;
  }
  std::int64_t oldest = 0;
  for (std::int64_t i = 1; i < c_.capacity; ++i) {
    if (s.age[i] < s.age[oldest]) oldest = i;
  }
  return oldest;
}

std::int64_t KvCache::write_slot(const Seq& s, std::int64_t i) const {
  using Rule = KvCacheConfig::SlotRule;
  if (c_.slot_rule == Rule::kFromSlot0 && i < c_.capacity) return i;
  if (c_.slot_rule == Rule::kReuseNewest && i == 0) {
    std::int64_t newest = -1;
    for (std::int64_t k = 0; k < c_.capacity; ++k) {
      if (s.pos[k] >= 0 && (newest < 0 || s.age[k] > s.age[newest])) newest = k;
    }
    if (newest >= 0) return newest;
  }
  return free_slot(s);
}

/// The work of one sequence in one step: its new queries (rotated) and the keys they see.
struct KvCache::SeqWork {
  std::int64_t n = 0;
  std::vector<std::int64_t> cols, qpos, kpos;
  std::vector<float> q;     // [n, H, d], encoded
  std::vector<float> keys;  // [nk, Hkv, d] as stored (cached slots first, then the new ones)
  std::vector<float> vals;  // [nk, Hkv, dv]
  std::vector<float> out;   // [n, H, dv]
};

void KvCache::step(std::int64_t T, span<const std::uint8_t> valid, span<const float> q,
                   span<const float> k, span<const float> v, span<float> out,
                   span<std::int64_t> positions, span<const std::int64_t> given,
                   span<std::int64_t> slots) {
  const char* fn = "KvCache::step";
  const int B = c_.batch, H = c_.attn.n_heads, Hkv = c_.attn.n_kv_heads, d = c_.attn.head_dim,
            dv = c_.attn.value_dim;
  const std::size_t BT = static_cast<std::size_t>(B) * static_cast<std::size_t>(T);
  if (T < 0) throw_invalid(fn, "T must be >= 0", T);
  if (valid.size() != BT) throw_invalid(fn, "valid must have B*T entries", valid.size());
  if (q.size() != BT * H * d) throw_invalid(fn, "q must have B*T*H*d elements", q.size());
  if (k.size() != BT * Hkv * d) throw_invalid(fn, "k must have B*T*Hkv*d elements", k.size());
  if (v.size() != BT * Hkv * dv) throw_invalid(fn, "v must have B*T*Hkv*dv elements", v.size());
  if (out.size() != BT * H * dv) throw_invalid(fn, "out must have B*T*H*dv elements", out.size());
  if (positions.size() != BT) throw_invalid(fn, "positions must have B*T entries", positions.size());
  if (!given.empty() && given.size() != BT) throw_invalid(fn, "given must be empty or have B*T entries", given.size());
  if (!slots.empty() && slots.size() != BT) throw_invalid(fn, "slots must be empty or have B*T entries", slots.size());

  std::vector<SeqWork> work = step_plan(T, valid);  // 1. throws before anything changes
  std::fill(out.begin(), out.end(), 0.0f);
  std::fill(positions.begin(), positions.end(), -1);
  std::fill(slots.begin(), slots.end(), -1);
  for (int b = 0; b < B; ++b) {  // 2. per sequence
    if (work[b].n > 0) step_prepare(b, T, q, k, v, given, work[b]);
  }
  step_attend(work);                            // 3.
  step_commit(T, work, out, positions, slots);  // 4.
}

/// 1. The valid columns of every sequence, and the check that each fits its cache.
std::vector<KvCache::SeqWork> KvCache::step_plan(std::int64_t T,
                                                 span<const std::uint8_t> valid) const {
  const char* fn = "KvCache::step";
  const int B = c_.batch;
  std::vector<SeqWork> work(static_cast<std::size_t>(B));
  for (int b = 0; b < B; ++b) {
    SeqWork& w = work[b];
    for (std::int64_t t = 0; t < T; ++t) {
      if (valid[b * T + t]) w.cols.push_back(t);
    }
    w.n = static_cast<std::int64_t>(w.cols.size());
    const Seq& s = seqs_[b];
    const std::int64_t used = n_cached(s.pos);
    if (c_.attn.window == 0 && c_.n_sink == 0 && w.n > c_.capacity - used && !POSENC_MUTANT("opt_kv_room_check_dropped")) {
      throw_invalid(fn, "sequence " + std::to_string(b) + " has room for " +
                        std::to_string(c_.capacity - used) + " tokens (shift first)", w.n);
    }
    if (c_.n_sink > 0 && w.n > 1 && w.n > c_.capacity - used) {
      throw_invalid(fn, "sequence " + std::to_string(b) + ": a multi-token step must fit the sink cache", w.n);
    }
  }
  return work;
}

/// StreamingLLM's eviction when the sink cache of s is full: the oldest non-sink token goes,
/// later positions move down by one (their keys re-rotated by -1).
void KvCache::evict_for_sink(Seq& s) {
  std::int64_t oldest = -1;
  for (std::int64_t i = 0; i < c_.capacity; ++i) {
    // sinks: the first n_sink tokens the sequence wrote (capacity > n_sink: one exists)
    if (s.pos[i] >= 0 && s.age[i] >= c_.n_sink && (oldest < 0 || s.age[i] < s.age[oldest])) oldest = i;
  }
  const std::int64_t gone = s.pos[oldest];
  s.pos[oldest] = -1;
  std::vector<std::int64_t> moved;
  for (std::int64_t i = 0; i < c_.capacity; ++i) {
    if (s.pos[i] > gone) {
      s.pos[i] -= 1;
      moved.push_back(i);
    }
  }
  rerotate(s, moved, -1);
  s.next -= 1;
}

/// 2. Sequence b: sink eviction, positions, encoded queries and new keys, the keys they see.
void KvCache::step_prepare(int b, std::int64_t T, span<const float> q, span<const float> k,
                           span<const float> v, span<const std::int64_t> given, SeqWork& w) {
  const char* fn = "KvCache::step";
  const int H = c_.attn.n_heads, Hkv = c_.attn.n_kv_heads, d = c_.attn.head_dim,
            dv = c_.attn.value_dim;
  Seq& s = seqs_[b];
  if (c_.n_sink > 0 && n_cached(s.pos) == c_.capacity) evict_for_sink(s);
  for (std::int64_t i = 0; i < w.n; ++i) {
    std::int64_t p = given.empty() ? s.next + i : given[b * T + w.cols[i]];
    if (p < 0) throw_invalid(fn, "given positions must be >= 0", p);
    if (POSENC_MUTANT("opt_kv_restart_positions") && s.next > 0) p = i;
    if (POSENC_MUTANT("opt_kv_padding_as_position")) p = s.next + w.cols[i];
    w.qpos.push_back(p);
  }
  std::vector<float> kn(static_cast<std::size_t>(w.n * Hkv * d)), vn(static_cast<std::size_t>(w.n * Hkv * dv));
  w.q.resize(static_cast<std::size_t>(w.n * H * d));
  for (std::int64_t i = 0; i < w.n; ++i) {
    const std::size_t row = static_cast<std::size_t>(b * T + w.cols[i]);
    std::copy(q.begin() + row * H * d, q.begin() + (row + 1) * H * d, w.q.begin() + i * H * d);
    std::copy(k.begin() + row * Hkv * d, k.begin() + (row + 1) * Hkv * d, kn.begin() + i * Hkv * d);
    std::copy(v.begin() + row * Hkv * dv, v.begin() + (row + 1) * Hkv * dv, vn.begin() + i * Hkv * dv);
  }
  if (c_.rope && !c_.rotate) {  // the RoPE kernel: q and k of all new tokens in one pass
    const RopeCache rc = rope_cache_init(c_.rope_params, w.qpos,
                                         span<const double>(c_.inv_freq.data(), c_.inv_freq.size()),
                                         c_.attention_factor);
    rope_apply_qk(c_.rope_params, rc, RopeShape{w.n, H, RopeTensorLayout::kTokensHeadsDim}, w.q, w.q,
                  RopeShape{w.n, Hkv, RopeTensorLayout::kTokensHeadsDim}, kn, kn);
  } else if (c_.rope) {
    for (std::int64_t i = 0; i < w.n; ++i) {
      rotate(&w.q[i * H * d], H, w.qpos[i], c_.attention_factor);
      rotate(&kn[i * Hkv * d], Hkv, w.qpos[i], c_.attention_factor);
    }
  }
  for (float& x : kn) x = to_storage(x, c_.storage);  // as the cache will hold them
  for (float& x : vn) x = to_storage(x, c_.storage);
  std::vector<float> key(static_cast<std::size_t>(Hkv * d)), val(static_cast<std::size_t>(Hkv * dv));
  for (std::int64_t i = 0; i < c_.capacity; ++i) {
    if (s.pos[i] < 0) continue;
    load_key(s, i, key.data());
    load_value(s, i, val.data());
    w.keys.insert(w.keys.end(), key.begin(), key.end());
    w.vals.insert(w.vals.end(), val.begin(), val.end());
    w.kpos.push_back(POSENC_MUTANT("opt_kv_slot_as_position") ? i : s.pos[i]);
  }
  w.keys.insert(w.keys.end(), kn.begin(), kn.end());
  w.vals.insert(w.vals.end(), vn.begin(), vn.end());
  w.kpos.insert(w.kpos.end(), w.qpos.begin(), w.qpos.end());
  w.out.assign(static_cast<std::size_t>(w.n * H * dv), 0.0f);
}

/// 3. Attention, one (sequence, head) pair per iteration.
void KvCache::step_attend(std::vector<SeqWork>& work) const {
  const int B = c_.batch, H = c_.attn.n_heads, Hkv = c_.attn.n_kv_heads, d = c_.attn.head_dim,
            dv = c_.attn.value_dim;
  const float scale = static_cast<float>(static_cast<double>(reference::attention_scale<double>(c_.attn)));
  const int group = H / Hkv;
  const std::int64_t window = c_.attn.window;
  // Chunk mask and sink logits; the decode_* switches model engine mistakes (single-token steps).
  const std::int64_t chunk = c_.attn.chunk;
  const bool sinks = !c_.attn.sinks.empty();
  // A small step stays on one thread (the bits do not depend on it: one (sequence, head) pair
  // per iteration either way); waking threads for a few thousand multiply-adds costs more.
  std::int64_t madds = 0;
  for (const SeqWork& w : work) madds += w.n * static_cast<std::int64_t>(w.kpos.size()) * (d + dv) * H;
#pragma omp parallel for schedule(static) if (madds > kParallelWork)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H, kh = h / group;
    SeqWork& w = work[b];
    const std::size_t nk = w.kpos.size();
    std::vector<float> sc(nk), e(nk);
    const bool decode = w.n == 1;
    const std::int64_t ck = decode && c_.decode_ignores_chunk ? 0 : chunk;
    const bool with_sink = sinks && !(decode && c_.decode_drops_sink_logits) && !POSENC_MUTANT("opt_kv_sink_logits_dropped");
    // -inf (a sink that is not there) folds in as exp(-inf) = 0.
    const float sink = with_sink ? static_cast<float>(c_.attn.sinks[static_cast<std::size_t>(h)])
                                 : -std::numeric_limits<float>::infinity();
    for (std::int64_t t = 0; t < w.n; ++t) {
      const std::int64_t qp = w.qpos[t];
      const float* qv = &w.q[(t * H + h) * d];
      float mx = sink;
      for (std::size_t j = 0; j < nk; ++j) {
        const std::int64_t kp = w.kpos[j];
        if (kp > qp || (window > 0 && !(qp - window < kp || (c_.window_inclusive && qp - window == kp))) ||
            (ck > 0 && kp / ck != qp / ck && !POSENC_MUTANT("opt_kv_chunk_mask_dropped"))) {
          sc[j] = -std::numeric_limits<float>::infinity();
          continue;
        }
        const float* kv = &w.keys[(j * Hkv + kh) * d];
        float dot = 0.0f;
        for (int c = 0; c < d; ++c) dot += qv[c] * kv[c];
        sc[j] = dot * scale + (c_.bias ? c_.bias(h, qp, kp) : 0.0f);
        if (POSENC_MUTANT("opt_kv_thread_dependent") && omp_get_thread_num() != 0) sc[j] = std::nextafter(sc[j], 0.0f);
        mx = std::max(mx, sc[j]);
      }
      float sum = 0.0f;
      for (std::size_t j = 0; j < nk; ++j) {
        e[j] = sc[j] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(sc[j] - mx);
        sum += e[j];
      }
      if (sink != -std::numeric_limits<float>::infinity()) sum += std::exp(sink - mx);  // no key, no value
      float* o = &w.out[(t * H + h) * dv];
      if (!(sum > 0.0f)) continue;  // no visible key: zeros (cannot happen: a token sees itself)
      const float inv = 1.0f / sum;
      for (std::size_t j = 0; j < nk; ++j) {
        if (e[j] == 0.0f) continue;
        const float pj = e[j] * inv;
        const float* vv = &w.vals[(j * Hkv + kh) * dv];
        for (int c = 0; c < dv; ++c) o[c] += pj * vv[c];
      }
    }
  }
}

/// 4. Outputs, positions and the new keys written.
void KvCache::step_commit(std::int64_t T, std::vector<SeqWork>& work, span<float> out,
                          span<std::int64_t> positions, span<std::int64_t> slots) {
  const int B = c_.batch, H = c_.attn.n_heads, Hkv = c_.attn.n_kv_heads, d = c_.attn.head_dim,
            dv = c_.attn.value_dim;
  for (int b = 0; b < B; ++b) {
    SeqWork& w = work[b];
    if (w.n == 0) continue;
    Seq& s = seqs_[b];
    const std::size_t first_new = w.kpos.size() - static_cast<std::size_t>(w.n);
    for (std::int64_t i = 0; i < w.n; ++i) {
      const std::size_t row = static_cast<std::size_t>(b * T + w.cols[i]);
      positions[row] = w.qpos[i];
      std::copy(w.out.begin() + i * H * dv, w.out.begin() + (i + 1) * H * dv, out.begin() + row * H * dv);
      const std::int64_t slot = write_slot(s, i);
      if (!slots.empty()) slots[row] = slot;
      s.pos[slot] = w.qpos[i];
      s.age[slot] = s.age_counter++;
      store(s, slot, &w.keys[(first_new + i) * Hkv * d], &w.vals[(first_new + i) * Hkv * dv]);
    }
    s.next = w.qpos.back() + 1;
    if (POSENC_MUTANT("opt_kv_cache_length_position")) s.next = n_cached(s.pos);
  }
}

void KvCache::set_rope_tables(std::vector<double> inv_freq, double attention_factor) {
  const char* fn = "KvCache::set_rope_tables";
  if (!c_.rope) throw_invalid(fn, "the cache has no RoPE (config.rope is false)", 0);
  if (inv_freq.size() != static_cast<std::size_t>(c_.rope_params.rotary_dim / 2)) {
    throw_invalid(fn, "inv_freq must have rotary_dim/2 entries", inv_freq.size());
  }
  if (!(attention_factor > 0) || !std::isfinite(attention_factor)) {
    throw_invalid(fn, "attention_factor must be finite and > 0", attention_factor);
  }
  c_.inv_freq = std::move(inv_freq);
  c_.attention_factor = attention_factor;
}

void KvCache::shift(int b, std::int64_t n_keep, std::int64_t n_discard) {
  const char* fn = "KvCache::shift";
  if (b < 0 || b >= c_.batch) throw_invalid(fn, "b must lie in [0, batch)", b);
  if (c_.n_sink > 0) throw_invalid(fn, "a sink cache renumbers itself; shift is for plain caches", c_.n_sink);
  Seq& s = seqs_[b];
  if (n_keep < 0) throw_invalid(fn, "n_keep must be >= 0", n_keep);
  if (n_discard <= 0) throw_invalid(fn, "n_discard must be > 0", n_discard);
  if (n_keep + n_discard > s.next) {
    throw_invalid(fn, "n_keep + n_discard must be <= next position " + std::to_string(s.next), n_keep + n_discard);
  }
  std::vector<std::int64_t> moved;
  for (std::int64_t i = 0; i < c_.capacity; ++i) {
    if (s.pos[i] < 0) continue;
    if (s.pos[i] >= n_keep && s.pos[i] < n_keep + n_discard) {
      s.pos[i] = -1;
    } else if (s.pos[i] >= n_keep + n_discard) {
      s.pos[i] -= n_discard;
      moved.push_back(i);
    }
  }
  rerotate(s, moved, -n_discard);
  s.next -= n_discard;
}

}  // namespace posenc::optimized
