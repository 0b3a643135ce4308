// Golden traces for KV-cache position handling: an engine replays a trace step by step (prefill,
// decode, speculative verify, padded batches, sliding-window wrap, context shift, attention
// sinks) and verify names the first step that fails. Model: reference/kv_cache.hpp.
//
// A trace case holds, per step sNN (two digits), in one safetensors file:
//   inputs    sNN.q [B, T, H, d], sNN.k [B, T, Hkv, d], sNN.v [B, T, Hkv, dv] (raw: before any
//             positional encoding), sNN.valid [B, T] int32 (batch traces: 0 = padding column);
//             trace-wide tables: t5_table [N, H], learned_table [rows, H d]
//   expected  sNN.positions [B, T] int64 (-1 for padding)      the positions the engine assigns
//             sNN.slots [B, T] int64                            posenc's slot rule (optional)
//             sNN.out [B, T, H, dv]                             attention output of the step
//             sNN.cache_positions [B, C] int64                  cached positions, ascending, -1 pad
//             sNN.cache_k [B, C, Hkv, d]                        the cached keys in that order
// A shift step (llama.cpp context shift) has no inputs and expects the cache only. The
// manifest's "trace" block lists the steps in order with their kind, columns and tensors.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/budgets.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/kv_call_case.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/prng.hpp"
#include "optimized/alibi.hpp"
#include "optimized/kv_cache.hpp"
#include "optimized/rope.hpp"
#include "optimized/rope_scaling.hpp"
#include "reference/common/errors.hpp"
#include "reference/kv_cache.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kCacheLengthPosition, kChunkMaskIgnoredInDecode, kFactorsFlipWithoutRerotation, kPaddingPosition, kRestartAt0, kShiftNPastKept, kShiftNotRerotated, kShiftRestartAt0, kSinkLogitsDroppedInDecode, kSlotRestartAt0, kSlotReused, kVerifyWindowStart, kWindowOffByOne };
const MistakeTable<MistakeId, 13> kMistakes(
    {"kv_cache"},
    {{
     {MistakeId::kCacheLengthPosition, "cache-length-position"},
     {MistakeId::kChunkMaskIgnoredInDecode, "chunk-mask-ignored-in-decode"},
     {MistakeId::kFactorsFlipWithoutRerotation, "factors-flip-without-rerotation"},
     {MistakeId::kPaddingPosition, "padding-position"},
     {MistakeId::kRestartAt0, "restart-at-0"},
     {MistakeId::kShiftNPastKept, "shift-n-past-kept"},
     {MistakeId::kShiftNotRerotated, "shift-not-rerotated"},
     {MistakeId::kShiftRestartAt0, "shift-restart-at-0"},
     {MistakeId::kSinkLogitsDroppedInDecode, "sink-logits-dropped-in-decode"},
     {MistakeId::kSlotRestartAt0, "slot-restart-at-0"},
     {MistakeId::kSlotReused, "slot-reused"},
     {MistakeId::kVerifyWindowStart, "verify-window-start"},
     {MistakeId::kWindowOffByOne, "window-off-by-one"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::AlibiForm;
using reference::AttentionParams;
using reference::AttentionScale;
using reference::KvCacheParams;
using reference::KvEncodingKind;
using reference::RopeScaling;
using reference::RopeScalingType;

struct TraceStep {
  std::string kind;                 // prefill, decode, verify, batch, shift
  std::int64_t T = 0;               // columns per sequence
  std::vector<std::uint8_t> valid;  // [B, T]; empty = every column a token
  std::int64_t n_keep = 0, n_discard = 0;  // shift
  std::int64_t first_position = -1;        // >= 0: the step's first position (an empty cache
                                           // that starts mid-sequence); -1: the next one
  std::string note;
};

/// The engine mistakes (a scheduler's numbering, a shift that renumbers without rotating, a
/// cache that writes the wrong slot, a window one key too wide), each with its words: the bug in
/// engine terms, as diagnose names it.
const std::vector<std::pair<std::string, std::string>>& kv_mistake_table() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"restart-at-0", "positions restarted at 0 at every step after the first"},
      {"cache-length-position", "the next position taken from the cache length (wrong once a ring buffer wraps)"},
      {"padding-position", "left-padding columns counted as positions"},
      {"shift-not-rerotated", "context shift without re-rotating the cached keys (positions renumbered only)"},
      {"verify-window-start", "every row of a multi-token step rotated at the window's start"},
      {"slot-reused", "cache slot reused before eviction: each step's first token overwrites the newest "
                      "cached token (write index one slot early)"},
      {"slot-restart-at-0", "cache restarted at slot 0: each step writes its keys from slot 0, over the "
                            "oldest cached tokens, while positions continue"},
      {"window-off-by-one", "sliding window one key too wide: p - w <= k instead of p - w < k"},
      {"shift-n-past-kept", "context shift without reducing n_past: the cache is renumbered but the next "
                            "token keeps the old numbering (a gap of n_discard)"},
      {"shift-restart-at-0", "positions restarted at 0 after a context shift"},
      {"chunk-mask-ignored-in-decode", "chunk mask ignored in decode: a single-token step past a chunk "
                                       "boundary still sees the previous chunk's keys (the prefill path "
                                       "applies the mask)"},
      {"sink-logits-dropped-in-decode", "sink logits dropped in decode: single-token steps leave the "
                                        "per-head sink out of the softmax denominator (the prefill path "
                                        "keeps it)"},
      {"factors-flip-without-rerotation", "LongRoPE factors switched mid-sequence without re-rotating the "
                                          "cache: cached keys keep the short factors' rotation while new "
                                          "tokens use the long ones"}};
  return v;
}

const std::vector<std::string>& kv_mistakes() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> names;
    for (const auto& m : kv_mistake_table()) names.push_back(m.first);
    return names;
  }();
  return v;
}

struct TraceDef {
  std::string id, variant, description;
  std::string result = "valid";
  std::string mistake;  // invalid traces: the engine mistake whose values they hold
  KvCacheParams params;
  int batch = 1;
  DType dtype = DType::kF32;
  std::uint64_t seed = 0;
  std::vector<TraceStep> steps;
  std::string model;     // preset the RoPE parameters come from ("" = given here)
  Json model_config;     // its canonical config
  std::vector<std::string> flags;
  std::string citation;
};

/// Dyadic value exactly representable in t, in [-range, range].
double input_value(DType t, double range, std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const int bits = t == DType::kBF16 ? 7 : (t == DType::kF16 ? 10 : 23);
  const std::int64_t lim = (std::int64_t{1} << bits) - 1;
  return range * std::ldexp(static_cast<double>(prng_int(seed, stream, i, lim)), -bits);
}

std::string step_name(std::size_t s) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "s%02zu", s);
  return buf;
}

TraceStep append_step(const std::string& kind, std::int64_t T, std::string note = "") {
  TraceStep s;
  s.kind = kind;
  s.T = T;
  s.note = std::move(note);
  return s;
}

TraceStep shift_step(std::int64_t n_keep, std::int64_t n_discard, std::string note) {
  TraceStep s;
  s.kind = "shift";
  s.n_keep = n_keep;
  s.n_discard = n_discard;
  s.note = std::move(note);
  return s;
}

AttentionParams attn(int H, int Hkv, int d, std::int64_t window = 0, AttentionScale sk = AttentionScale::kInvSqrtHeadDim) {
  AttentionParams a;
  a.n_heads = H;
  a.n_kv_heads = Hkv;
  a.head_dim = d;
  a.value_dim = d;
  a.scale_kind = sk;
  a.causal = true;
  a.window = window;
  return a;
}

reference::KvEncoding plain_rope(int d, double base) {
  reference::KvEncoding e;
  e.kind = KvEncodingKind::kRope;
  e.rope.head_dim = d;
  e.rope.rotary_dim = d;
  e.rope.base = base;
  e.rope.layout = reference::RopeLayout::kHalfSplit;
  return e;
}

/// A negative control of a valid trace: the same steps and inputs, with the values an engine
/// with `mistake` produces.
TraceDef negative_control(TraceDef t, std::string id, std::string mistake, std::string description) {
  t.id = std::move(id);
  t.result = "invalid";
  t.mistake = std::move(mistake);
  t.description = std::move(description);
  return t;
}

/// The RoPE traces of positions across steps: Llama-3.1 continuation with a verify window, a
/// sliding-window ring buffer, a left-padded batch (each with its negative control).
void add_rope_position_traces(std::vector<TraceDef>& v) {
  {  // Llama-3.1-8B: RoPE with the llama3 rule, prefill, decode, a speculative verify window
    const RopeModelConfig m = rope_config_read(default_presets_dir() / "llama-3.1-8b.json");
    TraceDef t;
    t.id = "kv_cache_rope_llama3_1_8b_prefill_decode_f32";
    t.variant = "continuation";
    t.description = "Llama-3.1-8B RoPE (llama3 rule, head_dim 128), 2 query heads over 1 kv head: "
                    "prefill of 12, 3 decodes, a 3-token speculative verify, 2 decodes";
    t.params.attn = attn(2, 1, m.params.head_dim);
    t.params.enc.kind = KvEncodingKind::kRope;
    t.params.enc.rope = m.params;
    t.params.enc.scaling = m.scaling;
    t.model = m.id;
    t.model_config = rope_config_to_json(m);
    t.steps = {append_step("prefill", 12), append_step("decode", 1, "the next token is position 12, alone in its step"),
               append_step("decode", 1), append_step("decode", 1),
               append_step("verify", 3, "speculative verify: rows at positions 15, 16, 17, not all at 15"),
               append_step("decode", 1), append_step("decode", 1)};
    t.flags = {"KvCacheOffset", "SpeculativeWindow", "RopeScaled"};
    t.citation = "bug class K, docs/bug-classes.md (onnxruntime-genai #2354, mlx-vlm #1983, omlx #2363)";
    v.push_back(t);
    v.push_back(negative_control(t, "kv_cache_rope_llama3_1_8b_restart_invalid_f32", "restart-at-0",
                                 "negative control: the Llama-3.1 trace with every step after the prefill "
                                 "numbered from 0 (the engine forgets the cache offset)"));
  }
  {  // Mistral-style sliding window: a ring buffer of 8 slots through the wrap point
    TraceDef t;
    t.id = "kv_cache_rope_window8_ring_wrap_f32";
    t.variant = "sliding_window";
    t.description = "Mistral-style sliding window w = 8 in a ring buffer of 8 slots (RoPE base 1e4, "
                    "head_dim 32): prefill 6, decodes through the wrap at position 8, a 4-token "
                    "verify across it, 2 decodes";
    t.params.attn = attn(2, 1, 32, 8);
    t.params.capacity = 8;
    t.params.enc = plain_rope(32, 10000.0);
    t.steps = {append_step("prefill", 6), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1, "position 8 overwrites slot 0 (position 0): slot != position"),
               append_step("decode", 1), append_step("verify", 4, "crosses the next wrap"),
               append_step("decode", 1, "the next token is 14, not the cache length 8"),
               append_step("decode", 1)};
    t.flags = {"SlidingWindow", "RingBuffer", "KvCacheOffset"};
    t.citation = "A. Q. Jiang et al., Mistral 7B, arXiv:2310.06825v1, Sec. 2 (rolling buffer cache); "
                 "bug class M, docs/bug-classes.md";
    v.push_back(t);
    v.push_back(negative_control(t, "kv_cache_rope_window8_cache_length_invalid_f32", "cache-length-position",
                                 "negative control: the ring-buffer trace with each step numbered from the "
                                 "number of cached tokens (wrong once the window is full)"));
  }
  {  // a left-padded batch of three sequences of different lengths
    TraceDef t;
    t.id = "kv_cache_rope_left_padded_batch3_f32";
    t.variant = "padding";
    t.description = "a left-padded batch of 3 prompts of lengths 5, 2, 4 (RoPE base 1e4, head_dim "
                    "32, 2 heads), then 3 batched decodes: each sequence continues from its own length";
    t.batch = 3;
    t.params.attn = attn(2, 2, 32);
    t.params.enc = plain_rope(32, 10000.0);
    TraceStep pre = append_step("batch", 5, "columns are not positions: [PAD, PAD, PAD, A, B] gives A, B positions 0, 1");
    pre.valid = {1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1};
    t.steps = {pre, append_step("decode", 1, "positions 5, 2, 4"), append_step("decode", 1), append_step("decode", 1)};
    t.flags = {"Padding", "BatchPositions"};
    t.citation = "bug class L, docs/bug-classes.md (unsloth #3699, transformers #22161, fla #967)";
    v.push_back(t);
    v.push_back(negative_control(t, "kv_cache_rope_left_padded_batch3_padding_position_invalid_f32", "padding-position",
                                 "negative control: the padded batch with positions numbered by column "
                                 "(padding counted as positions)"));
  }
}

/// The traces that move cached keys: llama.cpp context shifts (two, with a negative control;
/// 24 in a row) and StreamingLLM attention sinks.
void add_key_moving_traces(std::vector<TraceDef>& v) {
  {  // llama.cpp context shift, twice
    TraceDef t;
    t.id = "kv_cache_rope_context_shift_f32";
    t.variant = "context_shift";
    t.description = "a 16-slot cache (RoPE base 1e4, head_dim 32): prefill 12, 4 decodes fill it, "
                    "a context shift keeps 4 and discards 6 (keys re-rotated by -6), 3 decodes, a "
                    "second shift (keep 4, discard 4), 2 decodes";
    t.params.attn = attn(2, 1, 32);
    t.params.capacity = 16;
    t.params.enc = plain_rope(32, 10000.0);
    t.steps = {append_step("prefill", 12), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1), append_step("decode", 1),
               shift_step(4, 6, "positions 10-15 become 4-9: their keys re-rotated by R(-6)"),
               append_step("decode", 1, "the next token is position 10"), append_step("decode", 1),
               append_step("decode", 1), shift_step(4, 4, "a second shift of the same keys: R(-4) R(-6)"),
               append_step("decode", 1), append_step("decode", 1)};
    t.flags = {"ContextShift", "KeyRerotation"};
    t.citation = "bug class N, docs/bug-classes.md (llama.cpp #4097, #2060: R(a) R(b) = R(a + b))";
    v.push_back(t);
    v.push_back(negative_control(t, "kv_cache_rope_context_shift_not_rerotated_invalid_f32", "shift-not-rerotated",
                                 "negative control: the context-shift trace with the position records "
                                 "changed and the keys left as rotated"));
  }
  {  // the same keys shifted again and again (llama.cpp #4097: coherence degrades over shifts)
    TraceDef t;
    t.id = "kv_cache_rope_repeated_shift24_f32";
    t.variant = "context_shift";
    t.description = "an 8-slot cache (RoPE base 1e4, head_dim 32): prefill 8, then 24 times a "
                    "context shift (keep 4, discard 1) and a decode; the last keys carry up to 24 "
                    "re-rotations by R(-1), whose rounding the budget adds up";
    t.params.attn = attn(2, 1, 32);
    t.params.capacity = 8;
    t.params.enc = plain_rope(32, 10000.0);
    t.steps = {append_step("prefill", 8)};
    for (int i = 0; i < 24; ++i) {
      t.steps.push_back(shift_step(4, 1, i == 0 ? "positions 5-7 move to 4-6; each shift re-rotates every key above 4 once more" : ""));
      t.steps.push_back(append_step("decode", 1));
    }
    t.flags = {"ContextShift", "KeyRerotation", "RepeatedShift"};
    t.citation = "bug class N, docs/bug-classes.md (llama.cpp #4097: repeated shifts of the same cells)";
    v.push_back(t);
  }
  {  // StreamingLLM attention sinks
    TraceDef t;
    t.id = "kv_cache_rope_sinks2_cache8_f32";
    t.variant = "attention_sinks";
    t.description = "StreamingLLM: 2 sink tokens and 6 window slots (RoPE base 1e4, head_dim 32): "
                    "prefill 6, then 14 decodes; once full, each decode evicts the oldest window "
                    "token and the rest move down one position (keys re-rotated by R(-1))";
    t.params.attn = attn(2, 1, 32);
    t.params.capacity = 8;
    t.params.n_sink = 2;
    t.params.enc = plain_rope(32, 10000.0);
    t.steps = {append_step("prefill", 6), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1, "full: evicts position 2, the new token is position 7 (cache length)")};
    for (int i = 0; i < 11; ++i) t.steps.push_back(append_step("decode", 1));
    t.flags = {"AttentionSinks", "KeyRerotation"};
    t.citation = "G. Xiao et al., arXiv:2309.17453v4, Sec. 3.2 (positions within the cache)";
    v.push_back(t);
  }
}

/// The decode traces of the other encodings: ALiBi, T5 decoder bias, learned absolute.
void add_other_encoding_traces(std::vector<TraceDef>& v) {
  {  // ALiBi decode
    TraceDef t;
    t.id = "kv_cache_alibi_decode_h4_f32";
    t.variant = "continuation";
    t.description = "ALiBi (paper slopes, 4 heads, head_dim 16): prefill 8, 4 decodes, a 3-token "
                    "verify; the bias uses the query's position in the sequence, not in the step";
    t.params.attn = attn(4, 4, 16);
    t.params.enc.kind = KvEncodingKind::kAlibi;
    t.params.enc.alibi_form = AlibiForm::kPaper;
    t.steps = {append_step("prefill", 8), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1), append_step("decode", 1), append_step("verify", 3)};
    t.flags = {"AlibiDecode", "KvCacheOffset"};
    t.citation = "O. Press et al., arXiv:2108.12409v2, Sec. 3; bug class K, docs/bug-classes.md";
    v.push_back(t);
  }
  {  // T5 decoder self-attention decode
    TraceDef t;
    t.id = "kv_cache_t5_decoder_decode_h4_f32";
    t.variant = "continuation";
    t.description = "T5 decoder self-attention (causal buckets: 32, max_distance 128; 4 heads, "
                    "head_dim 16, no 1/sqrt(d)): prefill 24, 6 decodes; distances reach the log "
                    "buckets (>= 16)";
    t.params.attn = attn(4, 4, 16, 0, AttentionScale::kNone);
    t.params.enc.kind = KvEncodingKind::kT5;
    t.params.enc.t5.num_buckets = 32;
    t.params.enc.t5.max_distance = 128;
    t.params.enc.t5.bidirectional = false;
    t.params.enc.t5.n_heads = 4;
    t.steps = {append_step("prefill", 24), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1)};
    t.flags = {"T5Decode", "KvCacheOffset"};
    t.citation = "C. Raffel et al., arXiv:1910.10683v4, Sec. 2.1; bug class O, docs/bug-classes.md (candle #899)";
    v.push_back(t);
  }
  {  // learned absolute, OPT-style offset 2
    TraceDef t;
    t.id = "kv_cache_learned_decode_offset2_f32";
    t.variant = "continuation";
    t.description = "learned absolute positions with OPT's row offset 2 (table 64 rows, 2 heads, "
                    "head_dim 16): prefill 8, 4 decodes; decode token p reads row p + 2, not row 2";
    t.params.attn = attn(2, 2, 16);
    t.params.enc.kind = KvEncodingKind::kLearned;
    t.params.enc.learned_rows = 64;
    t.params.enc.learned_offset = 2;
    t.steps = {append_step("prefill", 8), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1), append_step("decode", 1)};
    t.flags = {"LearnedDecode", "KvCacheOffset"};
    t.citation = "bug class K, docs/bug-classes.md (mlx-lm #93, transformers #15751)";
    v.push_back(t);
  }
}

/// The attention masks of model-plan layers in decode: Llama 4's chunked layers (chunk 8192,
/// crossing the boundary) and GPT-OSS's sliding layers with sink logits (each with its negative
/// control).
void add_plan_layer_traces(std::vector<TraceDef>& v) {
  {  // Llama 4 chunked attention across the 8192 boundary
    TraceDef t;
    t.id = "kv_cache_rope_llama4_chunk8192_boundary_f32";
    t.variant = "chunked_attention";
    t.description = "a Llama 4 chunked layer (attention_chunk_size 8192; interleaved RoPE base 5e5, "
                    "head_dim 32, 2 query heads over 1 kv head): the cache starts empty at position "
                    "8186, prefill 4, a decode, a 3-token verify across the boundary, 2 decodes; "
                    "from position 8192 on the previous chunk is invisible";
    t.params.attn = attn(2, 1, 32);
    t.params.attn.chunk = 8192;
    t.params.enc = plain_rope(32, 500000.0);
    t.params.enc.rope.layout = reference::RopeLayout::kInterleaved;
    TraceStep pre = append_step("prefill", 4, "an empty cache starting at position 8186 (positions are absolute: "
                                              "the chunk mask reads them; the cache holds fewer keys than positions)");
    pre.first_position = 8186;
    t.steps = {pre, append_step("decode", 1, "position 8190"),
               append_step("verify", 3, "positions 8191, 8192, 8193: row 8191 sees 8186-8191, row 8192 only "
                                        "itself, row 8193 sees 8192-8193"),
               append_step("decode", 1, "position 8194 sees 8192-8194, not chunk 0"), append_step("decode", 1)};
    t.flags = {"ChunkedAttention", "KvCacheOffset"};
    t.citation = "Meta Llama 4 (HF Llama4TextConfig attention_chunk_size 8192, no_rope_layers: RoPE "
                 "layers use the chunked causal mask)";
    v.push_back(t);
    v.push_back(negative_control(t, "kv_cache_rope_llama4_chunk_ignored_invalid_f32", "chunk-mask-ignored-in-decode",
                                 "negative control: the Llama 4 chunk trace with decode steps that ignore the "
                                 "chunk mask (position 8194 still sees 8186-8191)"));
  }
  {  // GPT-OSS sliding layer: window 128 and a learned sink logit per head
    TraceDef t;
    t.id = "kv_cache_rope_gpt_oss_window128_sink_logits_f32";
    t.variant = "sink_logits";
    t.description = "a GPT-OSS sliding layer (window 128 in a ring of 128 slots, a sink logit per head "
                    "in the softmax, 2.5 and 0.5; RoPE base 150000, head_dim 16, 2 query heads over 1 kv "
                    "head): prefill 126, decodes through the wrap at 128, a 3-token verify, a decode";
    t.params.attn = attn(2, 1, 16, 128);
    t.params.attn.sinks = {2.5, 0.5};
    t.params.capacity = 128;
    t.params.enc = plain_rope(16, 150000.0);
    t.steps = {append_step("prefill", 126), append_step("decode", 1), append_step("decode", 1),
               append_step("decode", 1, "position 128 overwrites slot 0; the sink logits stay (no slot)"),
               append_step("decode", 1), append_step("verify", 3), append_step("decode", 1)};
    t.flags = {"SinkLogits", "SlidingWindow", "RingBuffer"};
    t.citation = "OpenAI gpt-oss (HF GptOssAttention: sinks concatenated to the scores, dropped after "
                 "softmax; sliding_window 128 on alternate layers)";
    v.push_back(t);
    v.push_back(negative_control(t, "kv_cache_rope_gpt_oss_sink_logits_dropped_invalid_f32", "sink-logits-dropped-in-decode",
                                 "negative control: the GPT-OSS trace with decode steps that leave the sink "
                                 "logits out of the softmax"));
  }
}

/// LongRoPE's short / long switch across L0 in decode (Phi-3.5-mini, L0 = 4096), one trace per
/// convention: HF's per-call switch with the cache re-rotated (its negative control: the factors
/// flip and the cache keeps the short rotation) and vLLM's choice made once (llama.cpp's rule
/// has the same form: long iff n_ctx / n_seq_max > L0).
void add_longrope_switch_traces(std::vector<TraceDef>& v) {
  const RopeModelConfig m = rope_config_read(default_presets_dir() / "phi-3.5-mini-instruct.json");
  TraceDef t;
  t.id = "kv_cache_rope_phi3_5_mini_longrope_hf_switch_f32";
  t.variant = "longrope_switch";
  t.description = "Phi-3.5-mini LongRoPE (L0 4096, head_dim 96, 2 query heads over 1 kv head), HF's "
                  "switch: an empty cache from position 4090, prefill 4, decodes to 4095 (short "
                  "factors), the decode at 4096 switches to the long factors and re-rotates the cache "
                  "(HF re-prefills), 2 decodes, a 3-token verify";
  t.params.attn = attn(2, 1, m.params.head_dim);
  t.params.enc.kind = KvEncodingKind::kRope;
  t.params.enc.rope = m.params;
  t.params.enc.scaling = m.scaling;
  t.params.enc.scaling.longrope_policy = reference::LongRopePolicy::kHfSeqLen;
  t.params.enc.table_policy = reference::KvTablePolicy::kRerotateCache;
  t.model = m.id;
  t.model_config = rope_config_to_json(m);
  TraceStep pre = append_step("prefill", 4, "an empty cache starting at position 4090; seq_len 4094 <= 4096: short factors");
  pre.first_position = 4090;
  t.steps = {pre, append_step("decode", 1), append_step("decode", 1, "position 4095: seq_len 4096, still short"),
             append_step("decode", 1, "position 4096: seq_len 4097 > 4096, long factors; every cached key "
                                      "re-rotated with them"),
             append_step("decode", 1), append_step("decode", 1), append_step("verify", 3)};
  t.flags = {"LongRopeSwitch", "KeyRerotation", "KvCacheOffset"};
  t.citation = "HF Phi3 (LongRoPE: long factors iff max(position_ids) + 1 > original_max_position_embeddings; "
               "generation drops the cache and re-prefills when crossing it); vLLM #27414, llama.cpp #8995, "
               "transformers #33129";
  v.push_back(t);
  v.push_back(negative_control(t, "kv_cache_rope_phi3_5_mini_longrope_flip_not_rerotated_invalid_f32",
                               "factors-flip-without-rerotation",
                               "negative control: the Phi-3.5-mini HF-switch trace with the factors flipped at "
                               "position 4096 and the cached keys left as the short factors rotated them"));
  TraceDef w = t;
  w.id = "kv_cache_rope_phi3_5_mini_longrope_max_model_len_f32";
  w.result = "acceptable";
  w.description = "Phi-3.5-mini LongRoPE, vLLM's convention (llama.cpp's too, with n_ctx per sequence for "
                  "max_model_len): the long factors for every call because max_model_len 131072 > 4096, "
                  "chosen once; the same steps as the HF-switch trace";
  w.params.enc.scaling.longrope_policy = reference::LongRopePolicy::kVllmMaxModelLen;
  w.steps[0].note = "an empty cache starting at position 4090; long factors from the first call";
  w.steps[3].note = "position 4096: nothing changes (the factors were chosen once)";
  w.citation = "vLLM phi3_long_rope_scaled_rope.py (vllm #27431: long factors when max_model_len > L0); "
               "llama.cpp llama_model::get_rope_factors (long iff n_ctx / n_seq_max > n_ctx_orig_yarn)";
  v.push_back(w);
}

/// The kv_cache catalog in order; seeds follow that order (a negative control takes its twin's).
std::vector<TraceDef> trace_table() {
  std::vector<TraceDef> v;
  std::uint64_t seed = POSENC_MUTANT("data_kv_seed_changed") ? 0x6b760001 : 0x6b760000;
  add_rope_position_traces(v);
  add_key_moving_traces(v);
  add_other_encoding_traces(v);
  add_plan_layer_traces(v);
  add_longrope_switch_traces(v);
  for (auto& t : v) t.seed = seed++;
  // A negative control draws the same inputs as its valid twin.
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (v[i].result == "invalid") v[i].seed = v[i - 1].seed;
  }
  return v;
}

const TraceDef& trace_by_id(const std::string& id) {
  static const std::vector<TraceDef> table = trace_table();
  for (const auto& t : table) {
    if (t.id == id) return t;
  }
  throw_invalid("kv_cache_generate", "no kv_cache case has this id", id);
}

// ---- the encoding in the manifest -----------------------------------------------------------

Json encoding_json(const TraceDef& t) {
  const auto& e = t.params.enc;
  Json j = {{"kind", reference::kv_encoding_name(e.kind)}};
  switch (e.kind) {
    case KvEncodingKind::kRope:
      j["head_dim"] = e.rope.head_dim;
      j["rotary_dim"] = e.rope.rotary_dim;
      j["base"] = e.rope.base;
      j["layout"] = reference::rope_layout_name(e.rope.layout);
      j["scaling"] = rope_scaling_to_json(e.scaling);
      j["table_policy"] = reference::kv_table_policy_name(e.table_policy);
      if (!t.model.empty()) j["model"] = t.model;
      break;
    case KvEncodingKind::kAlibi: j["form"] = reference::alibi_form_name(e.alibi_form); break;
    case KvEncodingKind::kT5:
      j["num_buckets"] = e.t5.num_buckets;
      j["max_distance"] = e.t5.max_distance;
      j["bidirectional"] = e.t5.bidirectional;
      j["table"] = "t5_table [num_buckets, n_heads]: bias = t5_table[bucket(key - query), head]";
      break;
    case KvEncodingKind::kLearned:
      j["rows"] = e.learned_rows;
      j["offset"] = e.learned_offset;
      j["table"] = "learned_table [rows, n_heads * head_dim]: row offset + position is added to q, k and v";
      break;
    default: break;
  }
  return j;
}

reference::KvEncoding encoding_from_json(const Json& j, const TensorMap& golden, const AttentionParams& a) {
  reference::KvEncoding e;
  const std::string kind = j.at("kind").get<std::string>();
  if (kind == "rope") {
    e.kind = KvEncodingKind::kRope;
    e.rope.head_dim = j.at("head_dim").get<int>();
    e.rope.rotary_dim = j.at("rotary_dim").get<int>();
    e.rope.base = j.at("base").get<double>();
    e.rope.layout = j.at("layout").get<std::string>() == "interleaved" ? reference::RopeLayout::kInterleaved
                                                                       : reference::RopeLayout::kHalfSplit;
    e.scaling = rope_scaling_from_json(j.at("scaling"));
    e.table_policy = j.value("table_policy", std::string("keep_cached_rotation")) == "rerotate_cache"
                         ? reference::KvTablePolicy::kRerotateCache
                         : reference::KvTablePolicy::kKeepCachedRotation;
  } else if (kind == "alibi") {
    e.kind = KvEncodingKind::kAlibi;
    e.alibi_form = j.at("form").get<std::string>() == "symmetric" ? AlibiForm::kSymmetric : AlibiForm::kPaper;
  } else if (kind == "t5_bias") {
    e.kind = KvEncodingKind::kT5;
    e.t5.num_buckets = j.at("num_buckets").get<int>();
    e.t5.max_distance = j.at("max_distance").get<std::int64_t>();
    e.t5.bidirectional = j.at("bidirectional").get<bool>();
    e.t5.n_heads = a.n_heads;
    e.t5_table = tensor_to_f64(golden.at("t5_table"));
  } else if (kind == "learned") {
    e.kind = KvEncodingKind::kLearned;
    e.learned_rows = j.at("rows").get<std::int64_t>();
    e.learned_offset = j.at("offset").get<std::int64_t>();
    e.learned_table = tensor_to_f64(golden.at("learned_table"));
  }
  return e;
}

// ---- budgets (docs/profiles.md; docs/schemes/kv_cache.md) ---------------------------------
// Traces are float32 (bf16 and f16 profiles do not apply: their pipelines write 16-bit
// activations). eps = eps_f32, r = 1, a = the RoPE attention factor (1 for these rules).
//   attention arithmetic: optimized::kKvCacheMaxError (16) eps (A + B), A and B as in the
//     attention kernel's contract with the exact encoded q and keys, +1.5 eps for learned
//     (q, k and v are x + P rounded once in float32: the scores move by <= eps S, v by u |v|)
//   RoPE enters through the scores: a rotated component of pair i carries
//     e_q = a c_q ((2 + A) eps + E_P,i(p))          (tables, two products and a sum, then the
//                                                    angle's chord <= its arc; strict: 2 eps,
//                                                    posenc's kernel bound, E = 0)
//     e_k = a c_k ((2 + A) eps + E_P,i(p0)) + sum over re-rotations by delta of
//           sqrt(2) a c_k (2 eps + E_P,i(|delta|))  (a rotated pair's L1 norm is <= sqrt(2) a c)
//   with c = |x_a| + |x_b| of the raw pair and E_P the profile's angle error bound
//   (rope_pipeline_angle_errors: HF's float32 angle, ggml's recurrence). A score moves by
//     ds_j = scale sum_i ((|q_a| + |q_b|) e_k,i + (|k_a| + |k_b|) e_q,i)    (encoded q, k)
//   and the output by sum_j p_j ds_j |v_j - o| (first order), the extra of each profile.
//   ALiBi in fp32 pipelines: float32 slopes (BLOOM's, ggml's powers) move the bias by rho |b|
//   (budgets.hpp enumerates rho), added to ds_j.
//   cache_k: the e_k above per component (learned: 0.5 ulp of the sum; others exact: 0).
// Every extra gets 1% for second-order terms. Padded rows and empty cache rows: any finite
// value (extra FLT_MAX); NaN and Inf fail.

constexpr double kEps = 0x1p-23;
constexpr double kAnyFinite = FLT_MAX;

/// A key's history: raw key, the position it was rotated at when written, later re-rotations.
struct KeyRecord {
  std::vector<double> raw;  // [Hkv, d]
  std::int64_t position = 0;  // now (the cache's record)
  std::int64_t p0 = 0;
  std::vector<std::int64_t> deltas;
  std::int64_t age = 0;  // insertion order in its sequence (the first n_sink are sinks)
};

struct ProfileModel {
  std::string name;
  bool applies = true;
  std::string na;
  std::map<std::int64_t, std::vector<double>> angle_cache;  // |position| -> E_i
  double A = 0;
};

class TraceBudgets {
 public:
  TraceBudgets(const TraceDef& t) : t_(t) {
    for (const auto& prof : profiles()) {
      ProfileModel m;
      m.name = prof.name;
      m.na = activation_na(prof.name, t.dtype);
      if (m.na.empty() && prof.name != "strict" && t.params.enc.kind == KvEncodingKind::kRope &&
          t.params.enc.scaling.type == RopeScalingType::kLongRope) {
        // The budgets' angle errors are one table's; a LongRoPE trace has one table per call.
        m.na = "the float32 pipelines are not modelled with LongRoPE's per-call tables in a KV cache";
      }
      m.applies = m.na.empty();
      models_.push_back(m);
    }
  }
  std::vector<ProfileModel>& models() { return models_; }

  /// E_P,i at |m| (RoPE only), cached.
  const std::vector<double>& angle(ProfileModel& pm, std::int64_t m) {
    m = std::llabs(m);
    auto it = pm.angle_cache.find(m);
    if (it != pm.angle_cache.end()) return it->second;
    const auto& e = t_.params.enc;
    auto ae = rope_pipeline_angle_errors(pm.name, e.rope, e.scaling, {m});
    if (POSENC_MUTANT("gold_kv_angle_term_dropped")) ae.angle.assign(ae.angle.size(), 0.0);
    pm.A = ae.A;
    return pm.angle_cache.emplace(m, ae.angle).first->second;
  }

  double rot_const(const ProfileModel& pm) const {
    return pm.name == "strict" ? optimized::kRopeMaxError * kEps : (2 + pm.A) * kEps;
  }

  /// Per component bound of a rotated key [Hkv, d] with its history (0 for tail channels).
  std::vector<double> key_error(ProfileModel& pm, const KeyRecord& r, double a) {
    const auto& p = t_.params.enc.rope;
    const int Hkv = t_.params.attn.n_kv_heads, d = p.head_dim, np = p.rotary_dim / 2;
    std::vector<double> e(static_cast<std::size_t>(Hkv * d), 0.0);
    const auto& E0 = angle(pm, r.p0);
    std::vector<std::vector<double>> Ed;
    for (std::int64_t dl : r.deltas) Ed.push_back(angle(pm, dl));
    const double rc = rot_const(pm);
    const double step_c = pm.name == "strict" ? optimized::kRopeMaxError * kEps : 2 * kEps;
    for (int h = 0; h < Hkv; ++h) {
      for (int i = 0; i < np; ++i) {
        const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
        const double c = std::fabs(r.raw[h * d + ca]) + std::fabs(r.raw[h * d + cb]);
        double x = a * c * (rc + E0[i]);
        for (const auto& Em : Ed) {
          if (POSENC_MUTANT("gold_kv_rerotation_term_dropped")) break;
          x += std::sqrt(2.0) * a * c * (step_c + Em[i]);
        }
        e[h * d + ca] = e[h * d + cb] = x * 1.01;
      }
    }
    return e;
  }

 private:
  const TraceDef& t_;
  std::vector<ProfileModel> models_;
};

/// Relative error of a pipeline's ALiBi slope of head h (0 for strict).
double alibi_rel_error(const std::string& profile, int n, int h) {
  if (profile == "strict") return 0.0;
  const double powers = budgets::alibi_slope_rel_error_powers(n, h);
  if (profile == "fp32-recurrence") return powers;
  return std::max(powers, budgets::alibi_slope_rel_error_mpt(n, h));
}

// ---- the generator --------------------------------------------------------------------------

/// The positions a scheduler with `mistake` gives the valid columns of one sequence's step;
/// empty where the mistake numbers them as a correct scheduler does (the cache then numbers
/// them itself, as a sink cache must).
std::vector<std::int64_t> mistaken_positions(const std::string& mistake, bool first_step,
                                             std::int64_t next, std::int64_t n_cached,
                                             const std::vector<std::int64_t>& cols) {
  std::vector<std::int64_t> p;
  const std::int64_t n = static_cast<std::int64_t>(cols.size());
  if (n == 0) return p;
  if (kMistakes.is(mistake, MistakeId::kRestartAt0) && !first_step && next != 0) {
    for (std::int64_t i = 0; i < n; ++i) p.push_back(i);
  } else if (kMistakes.is(mistake, MistakeId::kCacheLengthPosition) && n_cached != next) {
    for (std::int64_t i = 0; i < n; ++i) p.push_back(n_cached + i);
  } else if (kMistakes.is(mistake, MistakeId::kPaddingPosition) && cols.back() != n - 1) {
    for (std::int64_t c : cols) p.push_back(next + c);
  } else if (kMistakes.is(mistake, MistakeId::kVerifyWindowStart) && !first_step && n > 1) {
    p.assign(static_cast<std::size_t>(n), next);
  }
  return p;
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& x) {
  return std::vector<Real>(x.begin(), x.end());
}

// ---- the generator's stages: tables, oracle sessions, steps (inputs, scheduler, budgets), manifest

/// The trace-wide input tables (t5_table, learned_table) and the parameters that hold them.
struct TraceTables {
  std::vector<Tensor> tensors;
  KvCacheParams Pt;
};

/// Draws the trace-wide tables and checks the parameters (throws for a trace not generated).
TraceTables draw_trace_tables(const TraceDef& t) {
  const KvCacheParams& P = t.params;
  const int H = P.attn.n_heads, d = P.attn.head_dim;
  const DType dt = t.dtype;
  const bool rope = P.enc.kind == KvEncodingKind::kRope;
  TraceTables tt{{}, P};
  if (P.enc.kind == KvEncodingKind::kT5) {
    std::vector<double> tab(static_cast<std::size_t>(P.enc.t5.num_buckets * H));
    for (std::size_t i = 0; i < tab.size(); ++i) tab[i] = input_value(dt, 4.0, t.seed, 1, i);
    tt.Pt.enc.t5_table = tab;
    tt.tensors.push_back(input_tensor("t5_table", dt, {P.enc.t5.num_buckets, H}, tab));
  }
  if (P.enc.kind == KvEncodingKind::kLearned) {
    std::vector<double> tab(static_cast<std::size_t>(P.enc.learned_rows * H * d));
    for (std::size_t i = 0; i < tab.size(); ++i) tab[i] = input_value(dt, 0.5, t.seed, 2, i);
    tt.Pt.enc.learned_table = tab;
    tt.tensors.push_back(input_tensor("learned_table", dt, {P.enc.learned_rows, H * d}, tab));
  }
  if (!P.attn.sinks.empty()) {
    tt.tensors.push_back(input_tensor("sink_logits", dt, {H}, P.attn.sinks));
  }
  reference::kv_cache_check(tt.Pt, "kv_cache_generate");
  if (rope && P.enc.scaling.type == RopeScalingType::kDynamic) {
    throw_invalid("kv_cache_generate", "golden traces of dynamic NTK are not generated (the reference and "
                  "properties cover it)", t.id);
  }
  if (kMistakes.is(t.mistake, MistakeId::kFactorsFlipWithoutRerotation) && !POSENC_MUTANT("gold_kv_negative_control_mistake_ignored")) {
    tt.Pt.enc.table_policy = reference::KvTablePolicy::kKeepCachedRotation;
  }
  return tt;
}

/// The cache rows of the trace's cache tensors: the capacity, else every token appended.
std::int64_t trace_cache_rows(const TraceDef& t) {
  std::int64_t rows = t.params.capacity;
  if (rows == 0) {
    for (const auto& s : t.steps) rows += s.kind == "shift" ? 0 : s.T;
  }
  return rows;
}

/// What the stages of one trace share: the oracle sessions (mp50, mp100, double), the budget
/// models, the generator's record of every cached key, and the tensors written so far.
struct TraceGen {
  TraceGen(const TraceDef& def, TraceTables tt)
      : t(def), P(def.params), a(def.params.attn), B(def.batch), H(a.n_heads), Hkv(a.n_kv_heads),
        d(a.head_dim), dv(a.value_dim), dt(def.dtype), rope(P.enc.kind == KvEncodingKind::kRope),
        tensors(std::move(tt.tensors)), Pt(std::move(tt.Pt)), rows(trace_cache_rows(def)),
        b50(Pt, B), b100(Pt, B), bd(Pt, B), tb(def),
        a_factor(rope ? rope_pipeline_angle_errors("strict", P.enc.rope, P.enc.scaling, {0}).a : 1.0),
        scale(static_cast<double>(reference::attention_scale<mp50>(a))),
        live(static_cast<std::size_t>(B)), age(static_cast<std::size_t>(B), 0) {
    for (const auto& x : tensors) inputs.push_back(input_spec(x));
  }
  const TraceDef& t;
  const KvCacheParams& P;
  const AttentionParams& a;
  const int B, H, Hkv, d, dv;
  const DType dt;
  const bool rope;
  std::vector<Tensor> tensors;
  KvCacheParams Pt;
  std::int64_t rows;
  reference::KvBatch<mp50> b50;
  reference::KvBatch<mp100> b100;
  reference::KvBatch<double> bd;
  TraceBudgets tb;
  double a_factor, scale;
  // The generator's own record of every cached key by slot (to budget its rotations); checked
  // against the session's snapshot after every step. Keyed by slot: a negative control may hold
  // two keys at one position.
  std::vector<std::map<std::int64_t, KeyRecord>> live;
  std::vector<std::int64_t> age;  // per sequence, as the session's
  std::vector<TensorSpec> inputs, expected;
  bool first_append = true;
};

/// Writes an input tensor.
void add_input(TraceGen& g, Tensor x) {
  g.inputs.push_back(input_spec(x));
  g.tensors.push_back(std::move(x));
}

/// Writes an int64 expected tensor checked exactly (positions, slots).
void expect_exact_i64(TraceGen& g, const std::string& name, const std::string& stage, std::vector<std::int64_t> shape,
                      const std::vector<std::int64_t>& vals, std::vector<AxisSpec> axes) {
  Tensor x = tensor_from_i64(name, shape, vals);
  ExpectedTensor e = expected_tensor(name, stage, DType::kI64, shape, CheckKind::kExact, std::move(axes));
  e.spec.check.profiles = exact_budgets(g.dt);
  for (const auto& pm : g.tb.models()) {  // a profile the trace's budgets leave out (LongRoPE: float32)
    if (!pm.applies) e.spec.check.profiles[pm.name] = not_applicable(pm.na);
  }
  e.exact_tensor = &x;
  g.expected.push_back(add_expected(&g.tensors, std::move(e)));
}

/// The cache after a step: ascending positions, keys in that order, and their budgets.
void expect_cache(TraceGen& g, const std::string& sn) {
  const int B = g.B, Hkv = g.Hkv, d = g.d;
  const std::int64_t rows = g.rows;
  auto& tb = g.tb;
  auto& live = g.live;
  std::vector<std::int64_t> cpos(static_cast<std::size_t>(B * rows), -1);
  std::vector<mp50> ck(static_cast<std::size_t>(B * rows * Hkv * d), mp50(0));
  std::vector<mp100> ck100(ck.size(), mp100(0));
  std::map<std::string, std::vector<double>> extra;
  for (auto& pm : tb.models()) {
    if (pm.applies) extra[pm.name].assign(ck.size(), kAnyFinite);
  }
  for (int b = 0; b < B; ++b) {
    const auto s50 = g.b50.sequence(b).snapshot();
    const auto s100 = g.b100.sequence(b).snapshot();
    std::vector<std::pair<std::int64_t, std::size_t>> order;  // (position, slot)
    for (std::size_t s = 0; s < s50.positions.size(); ++s) {
      if (s50.positions[s] >= 0) order.push_back({s50.positions[s], s});
    }
    std::sort(order.begin(), order.end());
    if (static_cast<std::int64_t>(order.size()) > rows) throw std::logic_error("kv_cache_generate: cache rows");
    for (std::size_t r = 0; r < order.size(); ++r) {
      const auto [pos, s] = order[r];
      const std::size_t row = static_cast<std::size_t>(b * rows) + r;
      cpos[row] = pos;
      for (int x = 0; x < Hkv * d; ++x) {
        ck[row * Hkv * d + x] = s50.k[s * Hkv * d + x];
        ck100[row * Hkv * d + x] = s100.k[s * Hkv * d + x];
      }
      const auto it = live[b].find(static_cast<std::int64_t>(s));
      if (it == live[b].end() || it->second.position != pos) {
        throw std::logic_error("kv_cache_generate: the key records lost slot " + std::to_string(s));
      }
      for (auto& pm : tb.models()) {
        if (!pm.applies) continue;
        std::vector<double> e(static_cast<std::size_t>(Hkv * d), 0.0);
        if (g.rope) {
          e = tb.key_error(pm, it->second, g.a_factor);
        } else if (g.P.enc.kind == KvEncodingKind::kLearned) {
          for (int x = 0; x < Hkv * d; ++x) e[x] = kEps * std::fabs(static_cast<double>(s50.k[s * Hkv * d + x]));
        }
        std::copy(e.begin(), e.end(), extra[pm.name].begin() + row * Hkv * d);
      }
    }
  }
  cross_check(g.t.id, sn + ".cache_k", g.dt, ck, ck100);
  expect_exact_i64(g, sn + ".cache_positions", "cache", {B, rows}, cpos, {{"sequence", "", {}, {}}, {"row", "", {}, {}}});
  ExpectedTensor e = expected_tensor(sn + ".cache_k", "cache", g.dt, {B, rows, Hkv, d}, CheckKind::kConditioned,
                                     {{"sequence", "", {}, {}}, {"row", "", {}, {}}, {"head", "", {}, {}}, {"channel", "", {}, {}}});
  for (auto& pm : tb.models()) e.spec.check.profiles[pm.name] = pm.applies ? bound_of(0.0) : not_applicable(pm.na);
  e.values = ck;
  e.cond.assign(ck.size(), 0.0);
  e.extra = std::move(extra);
  g.expected.push_back(add_expected(&g.tensors, std::move(e)));
}

/// A shift step: the sessions and the key records drop and renumber; the cache is expected.
void shift_stage(TraceGen& g, const TraceStep& st, const std::string& sn, Json& js) {
  auto& live = g.live;
  const bool rerotate = !kMistakes.is(g.t.mistake, MistakeId::kShiftNotRerotated) || POSENC_MUTANT("gold_kv_negative_control_mistake_ignored");
  for (int b = 0; b < g.B; ++b) {
    g.b50.sequence(b).shift(st.n_keep, st.n_discard, rerotate);
    g.b100.sequence(b).shift(st.n_keep, st.n_discard, rerotate);
    g.bd.sequence(b).shift(st.n_keep, st.n_discard, rerotate);
    for (auto it = live[b].begin(); it != live[b].end();) {
      KeyRecord& rec = it->second;
      if (rec.position >= st.n_keep && rec.position < st.n_keep + st.n_discard) {
        it = live[b].erase(it);
        continue;
      }
      if (rec.position >= st.n_keep + st.n_discard) {
        rec.position -= st.n_discard;
        if (rerotate) rec.deltas.push_back(-st.n_discard);
      }
      ++it;
    }
  }
  js["n_keep"] = st.n_keep;
  js["n_discard"] = st.n_discard;
  expect_cache(g, sn);
}

/// The inputs of an append step: columns, valid mask and the raw q, k, v.
struct StepInputs {
  std::int64_t T = 0;
  std::vector<std::uint8_t> valid;
  std::vector<double> q, k, v;
};

/// Draws step si's q, k, v (streams 16 + 4 si, +1, +2) and its valid mask.
StepInputs draw_step_inputs(const TraceGen& g, std::size_t si, const TraceStep& st) {
  const int B = g.B;
  StepInputs in;
  const std::int64_t T = in.T = st.T;
  in.valid = st.valid.empty() ? std::vector<std::uint8_t>(static_cast<std::size_t>(B * T), 1) : st.valid;
  in.q.resize(static_cast<std::size_t>(B * T * g.H * g.d));
  in.k.resize(static_cast<std::size_t>(B * T * g.Hkv * g.d));
  in.v.resize(static_cast<std::size_t>(B * T * g.Hkv * g.dv));
  const std::uint64_t base_stream = 16 + 4 * si;
  for (std::size_t i = 0; i < in.q.size(); ++i) in.q[i] = input_value(g.dt, 1.0, g.t.seed, base_stream, i);
  for (std::size_t i = 0; i < in.k.size(); ++i) in.k[i] = input_value(g.dt, 1.0, g.t.seed, base_stream + 1, i);
  for (std::size_t i = 0; i < in.v.size(); ++i) in.v[i] = input_value(g.dt, 1.0, g.t.seed, base_stream + 2, i);
  return in;
}

/// The scheduler's positions (a negative control's mistake), per sequence; empty = the
/// sessions number the tokens themselves.
std::vector<std::int64_t> scheduler_positions(TraceGen& g, const StepInputs& in, const TraceStep& st) {
  const int B = g.B;
  const std::int64_t T = in.T;
  std::vector<std::int64_t> given;
  if (st.first_position >= 0) {  // the step starts at a given position (every valid column in order)
    given.assign(static_cast<std::size_t>(B * T), 0);
    for (int b = 0; b < B; ++b) {
      std::int64_t p = st.first_position;
      for (std::int64_t c = 0; c < T; ++c) {
        if (in.valid[b * T + c]) given[b * T + c] = p++;
      }
    }
    return given;
  }
  if (!g.t.mistake.empty() && !POSENC_MUTANT("gold_kv_negative_control_mistake_ignored")) {
    given.assign(static_cast<std::size_t>(B * T), 0);
    bool any = false;
    for (int b = 0; b < B; ++b) {
      std::vector<std::int64_t> cols;
      for (std::int64_t c = 0; c < T; ++c) {
        if (in.valid[b * T + c]) cols.push_back(c);
      }
      const auto mp = mistaken_positions(g.t.mistake, g.first_append, g.bd.sequence(b).next_position(),
                                         g.bd.sequence(b).n_cached(), cols);
      for (std::size_t i = 0; i < cols.size(); ++i) {
        given[b * T + cols[i]] = mp.empty() ? g.bd.sequence(b).next_position() + static_cast<std::int64_t>(i) : mp[i];
      }
      any |= !mp.empty();
    }
    if (!any) given.clear();
  }
  return given;
}

/// StreamingLLM eviction happens inside append: mirror it in the key records.
void mirror_sink_eviction(TraceGen& g) {
  auto& live = g.live;
  for (int b = 0; b < g.B; ++b) {
    if (g.P.n_sink > 0 && g.bd.sequence(b).n_cached() == g.P.capacity) {
      auto gone = live[b].end();
      for (auto it = live[b].begin(); it != live[b].end(); ++it) {
        if (it->second.age >= g.P.n_sink && (gone == live[b].end() || it->second.age < gone->second.age)) gone = it;
      }
      const std::int64_t gp = gone->second.position;
      live[b].erase(gone);
      for (auto& [slot, rec] : live[b]) {
        if (rec.position > gp) {
          rec.position -= 1;
          rec.deltas.push_back(-1);
        }
      }
    }
  }
}

/// One append step's oracle results: mp50 (the expected values) and double (the budgets' view).
struct StepRuns {
  reference::KvBatchStep<mp50> r50;
  reference::KvBatchStep<double> rd;
};

/// Runs the step through the three sessions; throws unless they agree.
StepRuns run_step_sessions(TraceGen& g, const StepInputs& in, const std::vector<std::int64_t>& given,
                           const std::string& sn) {
  const std::int64_t T = in.T;
  const auto& valid = in.valid;
  const auto& q = in.q;
  const auto& k = in.k;
  const auto& v = in.v;
  StepRuns r{g.b50.append(T, valid, to_real<mp50>(q), to_real<mp50>(k), to_real<mp50>(v), given), {}};
  const auto r100 = g.b100.append(T, valid, to_real<mp100>(q), to_real<mp100>(k), to_real<mp100>(v), given);
  r.rd = g.bd.append(T, valid, q, k, v, given);
  cross_check(g.t.id, sn + ".out", g.dt, r.r50.out, r100.out);
  if (r.r50.positions != r.rd.positions || r.r50.slots != r.rd.slots) throw std::logic_error("kv_cache_generate: sessions disagree");
  return r;
}

/// The output's budgets: per element the condition scale and each profile's extra.
struct OutputBudgets {
  std::vector<double> cond;
  std::map<std::string, std::vector<double>> extra;
};

/// Records of the keys step's sequence b saw: cached ones by slot, then the new tokens (throws
/// unless they match the session's key positions).
std::vector<KeyRecord> step_key_records(TraceGen& g, int b, const StepInputs& in,
                                        const std::vector<std::int64_t>& cols,
                                        const reference::KvStepResult<double>& sr) {
  const std::size_t nk = sr.key_positions.size();
  std::vector<KeyRecord> krec;  // cached slots in slot order, as the session lists them
  for (const auto& [slot, rec] : g.live[b]) krec.push_back(rec);
  for (std::size_t j = 0; j < krec.size() || krec.size() + cols.size() != nk; ++j) {
    if (krec.size() + cols.size() != nk || krec[j].position != sr.key_positions[j]) {
      throw std::logic_error("kv_cache_generate: the key records disagree with the session at key " + std::to_string(j));
    }
  }
  for (std::size_t i = 0; i < cols.size(); ++i) {
    KeyRecord rec;
    const std::size_t row = static_cast<std::size_t>(b * in.T + cols[i]);
    rec.raw.assign(in.k.begin() + row * g.Hkv * g.d, in.k.begin() + (row + 1) * g.Hkv * g.d);
    rec.p0 = rec.position = sr.positions[i];
    rec.age = g.age[b]++;
    krec.push_back(rec);
  }
  return krec;
}

/// One query row and head of a step (for the budget of its output).
struct QueryHead {
  std::size_t i, row;  // index among the sequence's new tokens; row [B, T] of the step
  int h, kh;
  std::int64_t qp;     // its position
};

/// Profile pm's error ds_j of each score of the query head (RoPE rotations, ALiBi slopes).
std::vector<double> score_errors(TraceGen& g, ProfileModel& pm, const StepInputs& in,
                                 const reference::KvStepResult<double>& sr, const std::vector<KeyRecord>& krec,
                                 const QueryHead& qh, const std::vector<double>& pr) {
  const int H = g.H, Hkv = g.Hkv, d = g.d, h = qh.h, kh = qh.kh;
  const std::size_t i = qh.i, row = qh.row, nk = pr.size();
  const auto& q = in.q;
  auto& tb = g.tb;
  std::vector<double> ds(nk, 0.0);
  if (g.rope) {
    const auto& p = g.P.enc.rope;
    const auto& Eq = tb.angle(pm, qh.qp);
    const double rc = tb.rot_const(pm);
    for (std::size_t j = 0; j < nk; ++j) {
      if (pr[j] == 0.0) continue;
      const auto ek = tb.key_error(pm, krec[j], g.a_factor);
      double x = 0;
      for (int pi = 0; pi < p.rotary_dim / 2; ++pi) {
        const int ca = reference::rope_pair_a(p, pi), cb = reference::rope_pair_b(p, pi);
        const double* qq = &sr.q[(i * H + h) * d];
        const double* kk = &sr.keys[(j * Hkv + kh) * d];
        const double cq = std::fabs(q[(row * H + h) * d + ca]) + std::fabs(q[(row * H + h) * d + cb]);
        const double eq = g.a_factor * cq * (rc + Eq[pi]);
        x += (std::fabs(qq[ca]) + std::fabs(qq[cb])) * ek[kh * d + ca] +
             (std::fabs(kk[ca]) + std::fabs(kk[cb])) * eq;
      }
      ds[j] = g.scale * x;
    }
  }
  if (g.P.enc.kind == KvEncodingKind::kAlibi) {
    const double rho = alibi_rel_error(pm.name, H, h);
    for (std::size_t j = 0; j < nk; ++j) ds[j] += rho * std::fabs(sr.bias[(i * H + h) * nk + j]);
  }
  return ds;
}

/// The budgets of one query head's outputs: each profile's extra and the condition scale.
void budget_query_head(TraceGen& g, const StepInputs& in, const reference::KvStepResult<double>& sr,
                       const std::vector<KeyRecord>& krec, const QueryHead& qh, OutputBudgets& ob) {
  const int H = g.H, Hkv = g.Hkv, d = g.d, dv = g.dv, h = qh.h, kh = qh.kh;
  const std::size_t i = qh.i, row = qh.row, nk = sr.key_positions.size();
  std::vector<double> S(nk, 0.0), pr(nk, 0.0);
  for (std::size_t j = 0; j < nk; ++j) {
    pr[j] = sr.probs[(i * H + h) * nk + j];
    if (pr[j] == 0.0) continue;
    double sd = 0;
    for (int c = 0; c < d; ++c) sd += std::fabs(sr.q[(i * H + h) * d + c] * sr.keys[(j * Hkv + kh) * d + c]);
    S[j] = g.scale * sd + std::fabs(sr.bias[(i * H + h) * nk + j]);
  }
  for (auto& pm : g.tb.models()) {
    if (!pm.applies) continue;
    const std::vector<double> ds = score_errors(g, pm, in, sr, krec, qh, pr);
    for (int c = 0; c < dv; ++c) {
      const std::size_t oi = (row * H + h) * dv + c;
      const double o = sr.out[(i * H + h) * dv + c];
      double x = 0;
      for (std::size_t j = 0; j < nk; ++j) x += pr[j] * ds[j] * std::fabs(sr.values[(j * Hkv + kh) * dv + c] - o);
      ob.extra[pm.name][oi] = x * 1.01;
    }
  }
  // The sink logit: one more score (exact input, |s_h|) with value 0.
  const double sink_term = g.a.sinks.empty() ? 0.0 : sr.sink_mass[i * H + h] * std::fabs(g.a.sinks[h]);
  for (int c = 0; c < dv; ++c) {
    const std::size_t oi = (row * H + h) * dv + c;
    const double o = sr.out[(i * H + h) * dv + c];
    double A = 0, Bs = sink_term * std::fabs(o);
    for (std::size_t j = 0; j < nk; ++j) {
      const double vj = sr.values[(j * Hkv + kh) * dv + c];
      A += pr[j] * std::fabs(vj);
      Bs += pr[j] * std::fabs(vj - o) * S[j];
    }
    ob.cond[oi] = A + Bs;
  }
}

/// Output budgets from the double session's view of the step; updates the key records.
OutputBudgets output_budgets(TraceGen& g, const StepInputs& in, const StepRuns& r) {
  const int B = g.B, H = g.H, Hkv = g.Hkv, dv = g.dv;
  const std::int64_t T = in.T;
  const auto& rd = r.rd;
  OutputBudgets ob;
  ob.cond.assign(r.r50.out.size(), 0.0);
  for (auto& pm : g.tb.models()) {
    if (pm.applies) ob.extra[pm.name].assign(r.r50.out.size(), 0.0);
  }
  for (int b = 0; b < B; ++b) {
    // Pad rows: any finite value.
    for (std::int64_t c = 0; c < T; ++c) {
      if (in.valid[b * T + c]) continue;
      for (int x = 0; x < H * dv; ++x) {
        for (auto& [name, ex] : ob.extra) ex[(b * T + c) * H * dv + x] = kAnyFinite;
      }
    }
    const auto& cols = rd.columns[b];
    if (cols.empty()) continue;
    const auto& sr = rd.sequences[b];
    const std::size_t nk = sr.key_positions.size();
    std::vector<KeyRecord> krec = step_key_records(g, b, in, cols, sr);
    for (std::size_t i = 0; i < cols.size(); ++i) {
      const std::size_t row = static_cast<std::size_t>(b * T + cols[i]);
      const std::int64_t qp = sr.positions[i];
      for (int h = 0; h < H; ++h) {
        budget_query_head(g, in, sr, krec, QueryHead{i, row, h, h / (H / Hkv), qp}, ob);
      }
    }
    // The records after the step: the new tokens, minus what the ring evicted.
    for (std::size_t i = 0; i < cols.size(); ++i) g.live[b][sr.slots[i]] = krec[nk - cols.size() + i];
  }
  return ob;
}

/// An append step: draws its inputs, runs the sessions, writes inputs, positions, slots, the
/// output with its budgets and the cache.
void append_stage(TraceGen& g, std::size_t si, const TraceStep& st, const std::string& sn, Json& js) {
  const int B = g.B, H = g.H, Hkv = g.Hkv, d = g.d, dv = g.dv;
  const DType dt = g.dt;
  const StepInputs in = draw_step_inputs(g, si, st);
  const std::int64_t T = in.T;
  const std::vector<std::int64_t> given = scheduler_positions(g, in, st);
  mirror_sink_eviction(g);
  const StepRuns r = run_step_sessions(g, in, given, sn);

  add_input(g, input_tensor(sn + ".q", dt, {B, T, H, d}, in.q));
  add_input(g, input_tensor(sn + ".k", dt, {B, T, Hkv, d}, in.k));
  add_input(g, input_tensor(sn + ".v", dt, {B, T, Hkv, dv}, in.v));
  if (!st.valid.empty()) {
    add_input(g, tensor_from_i32(sn + ".valid", {B, T}, std::vector<std::int32_t>(in.valid.begin(), in.valid.end())));
  }
  const std::vector<AxisSpec> bt_axes = {{"sequence", "", {}, {}}, {"column", "", {}, {}}};
  expect_exact_i64(g, sn + ".positions", "positions", {B, T}, r.r50.positions, bt_axes);
  expect_exact_i64(g, sn + ".slots", "slots", {B, T}, r.r50.slots, bt_axes);

  OutputBudgets ob = output_budgets(g, in, r);
  const double base = optimized::kKvCacheMaxError * 1.01 + (g.P.enc.kind == KvEncodingKind::kLearned ? 1.5 : 0.0);
  ExpectedTensor eo = expected_tensor(sn + ".out", "output", dt, {B, T, H, dv}, CheckKind::kConditioned,
                                      {{"sequence", "", {}, {}}, {"column", "", {}, {}}, {"head", "", {}, {}}, {"channel", "", {}, {}}});
  for (auto& pm : g.tb.models()) {
    eo.spec.check.profiles[pm.name] = pm.applies ? bound_of(base, 0.0, "attention kernel bound; RoPE and slope errors in the extra") : not_applicable(pm.na);
  }
  eo.values = r.r50.out;
  eo.cond = ob.cond;
  eo.extra = std::move(ob.extra);
  g.expected.push_back(add_expected(&g.tensors, std::move(eo)));
  expect_cache(g, sn);
  js["columns"] = T;
  if (st.first_position >= 0) js["first_position"] = st.first_position;
  g.first_append = false;
}

/// The trace's manifest (without its tensors): conventions, parameters, encoding, steps.
Json trace_manifest(const TraceGen& g, const Json& jsteps) {
  const TraceDef& t = g.t;
  const KvCacheParams& P = g.P;
  const AttentionParams& a = g.a;
  const int B = g.B, H = g.H, Hkv = g.Hkv, d = g.d, dv = g.dv;
  const DType dt = g.dt;
  const std::int64_t rows = g.rows;
  Json m = manifest_header(t.id, "kv_cache", t.variant, t.result, 1, t.description);
  m["conventions"] = {
      {"positions", "each sequence numbers its own tokens 0, 1, 2, ... across steps; padding "
                    "columns get no position (-1); a context shift moves later positions down"},
      {"visibility", "key at position k is visible to the query at position q iff k <= q (and "
                     "q - window < k when window > 0)"},
      {"slots", "a token takes the lowest empty slot, else replaces the oldest evictable one "
                "(ring buffer); sNN.slots follow this rule, an engine with another one leaves them out"},
      {"cache", "sNN.cache_positions and sNN.cache_k list the cached tokens in ascending position "
                "(keys as the engine stores them: RoPE rotated to their current position)"},
      {"padding", "padded rows of sNN.out: any finite value (NaN and Inf fail)"},
      {"sinks", "n_sink > 0 (StreamingLLM): positions are indexes in the cache; when full, the "
                "oldest window token is evicted and later ones move down one position"},
      {"layout", "q [B, T, H, d], k and v [B, T, Hkv, d|dv], out [B, T, H, dv]; kv head of query "
                 "head h = h / (H / Hkv)"}};
  m["params"] = {{"n_heads", H}, {"n_kv_heads", Hkv}, {"head_dim", d}, {"value_dim", dv},
                 {"scale_kind", a.scale_kind == AttentionScale::kNone ? "none" : "inv_sqrt_head_dim"},
                 {"window", a.window}, {"capacity", P.capacity}, {"n_sink", P.n_sink},
                 {"batch", B}, {"cache_rows", rows}, {"dtype", std::string(dtype_short(dt))}};
  if (a.chunk > 0) {
    m["params"]["chunk"] = a.chunk;
    m["conventions"]["chunk"] = "chunk C > 0 (Llama 4): key k is visible to the query at q only when "
                                "floor(k / C) = floor(q / C), by absolute position; keys of earlier "
                                "chunks may stay cached, unseen";
  }
  if (std::any_of(t.steps.begin(), t.steps.end(), [](const TraceStep& s) { return s.first_position >= 0; })) {
    m["conventions"]["first_position"] = "a step with first_position numbers its tokens from there, with the "
                                         "cache as it is (the engine's scheduler is given that position; "
                                         "an empty cache may so start mid-sequence)";
  }
  if (t.params.enc.kind == KvEncodingKind::kRope && t.params.enc.scaling.type == RopeScalingType::kLongRope) {
    m["conventions"]["longrope"] =
        "each append step is one call: its tables are LongRoPE's for seq_len = the step's largest "
        "position + 1, short or long factors by encoding.scaling.switch (hf_seq_len: long iff seq_len > "
        "original_max_position_embeddings; vllm_max_model_len: long for every call iff "
        "max_position_embeddings > it, chosen once). encoding.table_policy rerotate_cache: when a call's "
        "tables differ from the last one's, every cached key is rotated again with the new tables (HF "
        "drops the cache and re-prefills); keep_cached_rotation: cached keys keep the tables that wrote them";
  }
  if (!a.sinks.empty()) {
    m["conventions"]["sink_logits"] = "sink_logits [H] (GPT-OSS): head h's softmax denominator also "
                                      "holds exp(sink_logits[h]) (compared with the scaled scores, no "
                                      "key, no value, no cache slot) in every step, prefill and decode; "
                                      "not StreamingLLM's n_sink kept tokens";
  }
  m["encoding"] = encoding_json(t);
  if (!t.model_config.is_null()) m["model_config"] = t.model_config;
  m["trace"] = {{"steps", jsteps},
                {"replay", "for each step in order: a shift step drops positions [n_keep, n_keep + "
                           "n_discard) and moves later ones down (re-rotating RoPE keys); any other "
                           "step appends the valid columns of sNN.q/k/v to each sequence's cache "
                           "and attends; write sNN.positions, sNN.out and, where the engine can "
                           "export them, sNN.slots, sNN.cache_positions, sNN.cache_k"}};
  if (!t.mistake.empty()) {
    m["negative_control"] = {{"mistake", t.mistake},
                             {"meaning", "the expected values follow this engine mistake: a correct "
                                         "engine differs from them (verify PASS), an engine with "
                                         "the mistake reproduces them (verify FAIL)"}};
  }
  m["flags"] = t.flags;
  m["citation"] = t.citation;
  m["oracle"] = mp_oracle_json();
  m["seed"] = t.seed;
  m["prng"] = "splitmix64 counter: value(seed, stream, i); stream 1 = t5_table, 2 = learned_table, "
              "16 + 4 s, +1, +2 = q, k, v of step s";
  m["budgets"] = "docs/schemes/kv_cache.md: attention bound kKvCacheMaxError eps (A + B); RoPE "
                 "angle and rotation errors of each profile's pipeline (and re-rotations) in the extras";
  return m;
}

GoldenCase kv_cache_generate_trace(const TraceDef& t) {
  TraceGen g(t, draw_trace_tables(t));
  if (!POSENC_MUTANT("gold_kv_negative_control_mistake_ignored")) {  // a decode path's mistake
    reference::KvDecodeFaults f;
    f.ignore_chunk_in_decode = kMistakes.is(t.mistake, MistakeId::kChunkMaskIgnoredInDecode);
    f.drop_sink_logits_in_decode = kMistakes.is(t.mistake, MistakeId::kSinkLogitsDroppedInDecode);
    for (int b = 0; b < g.B; ++b) {
      g.b50.sequence(b).set_decode_faults(f);
      g.b100.sequence(b).set_decode_faults(f);
      g.bd.sequence(b).set_decode_faults(f);
    }
  }
  Json jsteps = Json::array();
  for (std::size_t si = 0; si < t.steps.size(); ++si) {
    const TraceStep& st = t.steps[si];
    const std::string sn = step_name(si);
    Json js = {{"index", si}, {"name", sn}, {"kind", st.kind}};
    if (!st.note.empty()) js["note"] = st.note;
    const std::size_t first_expected = g.expected.size();
    const std::size_t first_input = g.inputs.size();
    if (st.kind == "shift") {
      shift_stage(g, st, sn, js);
    } else {
      append_stage(g, si, st, sn, js);
    }
    Json ins = Json::array(), exs = Json::array();
    for (std::size_t i = first_input; i < g.inputs.size(); ++i) ins.push_back(g.inputs[i].name);
    for (std::size_t i = first_expected; i < g.expected.size(); ++i) exs.push_back(g.expected[i].name);
    js["inputs"] = ins;
    js["expected"] = exs;
    jsteps.push_back(js);
  }
  Json m = trace_manifest(g, jsteps);
  manifest_add_tensors(m, t.id, g.inputs, g.expected);
  return GoldenCase{m, std::move(g.tensors)};
}

std::vector<CaseRow> kv_cache_cases() {
  std::vector<CaseRow> rows;
  for (const auto& t : trace_table()) rows.push_back({t.id, t.description});
  return rows;
}

GoldenCase kv_cache_generate(const std::string& id) { return kv_cache_generate_trace(trace_by_id(id)); }

std::vector<std::string> kv_cache_mistakes() { return kv_mistakes(); }

std::string kv_cache_mistake_words(const std::string& mistake) {
  for (const auto& m : kv_mistake_table()) {
    if (m.first == mistake) return m.second;
  }
  return "";
}

// ---- the built-in engine ---------------------------------------------------------------------

/// The pipeline's rotation: HF's float32 tables (fp32) or ggml's recurrence (fp32-recurrence),
/// applied as q * cos + rotate_half(q) * sin in float32.
optimized::KvRotate pipeline_rotation(const std::string& pipeline, const reference::KvEncoding& e) {
  const auto p = e.rope;
  const auto s = e.scaling;
  return [pipeline, p, s](float* x, int heads, std::int64_t m, double /*factor: 1 here*/) {
    const int np = p.rotary_dim / 2;
    const RopePipelineTables tb = rope_pipeline_tables(pipeline, p, s, p.head_dim, {m});
    for (int h = 0; h < heads; ++h) {
      float* y = x + h * p.head_dim;
      for (int i = 0; i < np; ++i) {
        const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
        const float c = tb.cos[i], sn = tb.sin[i];
        const float xa = y[ca], xb = y[cb];
        y[ca] = xa * c + (-xb) * sn;
        y[cb] = xb * c + xa * sn;
      }
    }
  };
}


/// A trace case as the engine reads it: attention parameters, batch, cache rows, the stored
/// dtype of the float outputs, the encoding.
struct EngineTrace {
  AttentionParams a;
  int B = 0;
  std::int64_t rows = 0;
  DType dt = DType::kF32;
  reference::KvEncoding enc;
};

/// Checks the mistake and pipeline, reads the case's parameters and encoding.
EngineTrace read_engine_trace(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const auto& mk = kv_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    std::string known;
    for (const auto& m : mk) known += (known.empty() ? "" : ", ") + m;
    throw_invalid("kv_cache_run_engine", "unknown mistake (known: " + known + ")", o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("kv_cache_run_engine", "mistakes run on the exact pipeline only", o.mistake);
  }
  const Json& pj = spec.manifest.at("params");
  EngineTrace tr;
  AttentionParams& a = tr.a;
  a.n_heads = pj.at("n_heads").get<int>();
  a.n_kv_heads = pj.at("n_kv_heads").get<int>();
  a.head_dim = pj.at("head_dim").get<int>();
  a.value_dim = pj.at("value_dim").get<int>();
  a.scale_kind = pj.at("scale_kind").get<std::string>() == "none" ? AttentionScale::kNone : AttentionScale::kInvSqrtHeadDim;
  a.causal = true;
  a.window = pj.at("window").get<std::int64_t>();
  a.chunk = pj.value("chunk", std::int64_t{0});
  if (auto it = golden.find("sink_logits"); it != golden.end()) {
    for (float x : tensor_to_f32(it->second)) a.sinks.push_back(x);
  }
  tr.B = pj.at("batch").get<int>();
  tr.rows = pj.at("cache_rows").get<std::int64_t>();
  for (const auto& e : spec.expected) {
    if (e.check.kind == CheckKind::kConditioned) tr.dt = e.dtype;
  }
  tr.enc = encoding_from_json(spec.manifest.at("encoding"), golden, a);
  if (const auto why = pipelines::dtype_mismatch(o.pipeline, tr.dt); !why.empty() && pipelines::of(o.pipeline) != Pipeline::kExact) {
    throw_invalid("kv_cache_run_engine", why, o.pipeline);
  }
  return tr;
}

/// The cache configuration: posenc's kernels (exact) or the pipeline's rotation, slopes and
/// T5 buckets; the mistake `shift-not-rerotated` turns re-rotation off.
optimized::KvCacheConfig engine_config(const CaseSpec& spec, const TensorMap& golden, const EngineTrace& tr,
                                       const EngineOptions& o) {
  const Json& pj = spec.manifest.at("params");
  const reference::KvEncoding& enc = tr.enc;
  const int H = tr.a.n_heads;
  optimized::KvCacheConfig c;
  c.attn = tr.a;
  c.capacity = tr.rows;
  c.n_sink = pj.at("n_sink").get<std::int64_t>();
  c.batch = tr.B;
  c.rerotate = !kMistakes.is(o.mistake, MistakeId::kShiftNotRerotated);
  using SlotRule = optimized::KvCacheConfig::SlotRule;
  if (kMistakes.is(o.mistake, MistakeId::kSlotReused)) c.slot_rule = SlotRule::kReuseNewest;
  if (kMistakes.is(o.mistake, MistakeId::kSlotRestartAt0)) c.slot_rule = SlotRule::kFromSlot0;
  c.window_inclusive = kMistakes.is(o.mistake, MistakeId::kWindowOffByOne);
  c.decode_ignores_chunk = kMistakes.is(o.mistake, MistakeId::kChunkMaskIgnoredInDecode);
  c.decode_drops_sink_logits = kMistakes.is(o.mistake, MistakeId::kSinkLogitsDroppedInDecode);
  const bool exact = pipelines::of(o.pipeline) == Pipeline::kExact;
  if (enc.kind == KvEncodingKind::kRope) {
    c.rope = true;
    c.rope_params = enc.rope;
    if (exact) {
      const auto tabs = optimized::rope_scaling_tables(enc.rope, enc.scaling);
      c.inv_freq = tabs.inv_freq;
      c.attention_factor = tabs.attention_factor;
    } else if (!POSENC_MUTANT("engine_kv_pipeline_exact_rotation")) {  // a float pipeline that is not one
      if (rope_pipeline_tables(o.pipeline, enc.rope, enc.scaling, enc.rope.head_dim, {0}).a != 1.0f) {
        throw_invalid("kv_cache_run_engine", "the emulated pipelines model shifts with attention factor 1 only", o.pipeline);
      }
      c.rotate = pipeline_rotation(o.pipeline, enc);
    }
  }
  if (enc.kind == KvEncodingKind::kAlibi) {
    const auto m = exact ? optimized::alibi_slopes(reference::AlibiParams{H, enc.alibi_form})
                         : (pipelines::of(o.pipeline) == Pipeline::kFp32Recurrence ? pipelines::ggml_slopes(H) : pipelines::bloom_slopes(H));
    c.bias = [m](int h, std::int64_t qp, std::int64_t kp) { return -m[h] * static_cast<float>(qp - kp); };
  }
  if (enc.kind == KvEncodingKind::kT5) {
    const auto tab = tensor_to_f32(golden.at("t5_table"));
    const auto t5 = enc.t5;
    c.bias = [tab, t5, exact](int h, std::int64_t qp, std::int64_t kp) {
      const int bucket = exact ? reference::t5_bias_bucket(t5, kp - qp)
                               : pipelines::hf_t5_bucket_f32(kp - qp, t5.bidirectional, t5.num_buckets, t5.max_distance);
      return tab[static_cast<std::size_t>(bucket) * t5.n_heads + h];
    };
  }
  return c;
}

/// Writes the cache after step sn: positions ascending and the keys in that order.
void engine_cache_out(const optimized::KvCache& cache, const EngineTrace& tr, const std::string& sn, TensorMap& res) {
  const int B = tr.B, Hkv = tr.a.n_kv_heads, d = tr.a.head_dim, dv = tr.a.value_dim;
  const std::int64_t rows = tr.rows;
  std::vector<std::int64_t> cpos(static_cast<std::size_t>(B * rows), -1);
  std::vector<float> ck(static_cast<std::size_t>(B * rows * Hkv * d), 0.0f);
  std::vector<float> key(static_cast<std::size_t>(Hkv * d)), val(static_cast<std::size_t>(Hkv * dv));
  for (int b = 0; b < B; ++b) {
    std::vector<std::pair<std::int64_t, std::int64_t>> order;
    for (std::int64_t s = 0; s < rows; ++s) {
      if (cache.slot_position(b, s) >= 0) order.push_back({cache.slot_position(b, s), s});
    }
    std::sort(order.begin(), order.end());
    for (std::size_t r = 0; r < order.size(); ++r) {
      cache.read_slot(b, order[r].second, key, val);
      cpos[b * rows + r] = order[r].first;
      std::copy(key.begin(), key.end(), ck.begin() + (b * rows + r) * Hkv * d);
    }
  }
  res.emplace(sn + ".cache_positions", tensor_from_i64(sn + ".cache_positions", {B, rows}, cpos));
  res.emplace(sn + ".cache_k", engine_tensor(sn + ".cache_k", tr.dt, {B, rows, Hkv, d}, ck));
}

/// A shift step: every sequence drops [n_keep, n_keep + n_discard) and moves later keys down.
/// `shifted` [B] adds each sequence's n_discard (the scheduler's shift mistakes read it).
void engine_shift(optimized::KvCache& cache, const EngineTrace& tr, const Json& js, const EngineOptions& o,
                  std::vector<std::int64_t>& shifted) {
  const std::int64_t n_keep = js.at("n_keep").get<std::int64_t>(), n_discard = js.at("n_discard").get<std::int64_t>();
  for (int b = 0; b < tr.B; ++b) {
    // A mistaken scheduler may have numbered fewer positions than the shift names; like
    // llama.cpp's seq_rm / seq_add on cells that do not exist, the shift then does nothing.
    if (!o.mistake.empty() && cache.next_position(b) < n_keep + n_discard) continue;
    cache.shift(b, n_keep, n_discard);
    shifted[static_cast<std::size_t>(b)] += n_discard;
  }
}

/// An append step as the engine runs it: its inputs and the scheduler's positions.
struct EngineStep {
  std::int64_t T = 0;
  std::vector<float> q, k, v;
  std::vector<std::uint8_t> valid;
  std::vector<std::int64_t> given;  // [B, T]: the scheduler's positions (used when any_given)
  bool any_given = false;
};

/// Reads step sn's q, k, v and valid mask (every column valid without one).
EngineStep read_engine_step(const TensorMap& golden, const std::string& sn, std::int64_t T, int B) {
  EngineStep st;
  st.T = T;
  st.q = tensor_to_f32(golden.at(sn + ".q"));
  st.k = tensor_to_f32(golden.at(sn + ".k"));
  st.v = tensor_to_f32(golden.at(sn + ".v"));
  st.valid.assign(static_cast<std::size_t>(B * T), 1);
  if (auto it = golden.find(sn + ".valid"); it != golden.end()) {
    for (std::int64_t i = 0; i < it->second.numel(); ++i) st.valid[i] = it->second.get_i64(i) != 0;
  }
  return st;
}

/// The scheduler: each sequence's positions (or the mistake's). `shifted` [B]: positions the
/// shifts since the sequence's last step discarded (read by the shift mistakes, then cleared).
void engine_scheduler(const optimized::KvCache& cache, const EngineTrace& tr, const EngineOptions& o, bool first,
                      std::vector<std::int64_t>& shifted, std::int64_t first_position, EngineStep& st) {
  const int B = tr.B;
  const std::int64_t T = st.T, rows = tr.rows;
  st.given.assign(static_cast<std::size_t>(B * T), 0);
  if (first_position >= 0) {  // the trace gives the step's first position
    for (int b = 0; b < B; ++b) {
      std::int64_t p = first_position;
      for (std::int64_t t = 0; t < T; ++t) {
        if (st.valid[b * T + t]) st.given[b * T + t] = p++;
      }
    }
    st.any_given = true;
    return;
  }
  for (int b = 0; b < B; ++b) {
    std::vector<std::int64_t> cols;
    for (std::int64_t t = 0; t < T; ++t) {
      if (st.valid[b * T + t]) cols.push_back(t);
    }
    std::int64_t n_cached = 0;
    for (std::int64_t s = 0; s < rows; ++s) n_cached += cache.slot_position(b, s) >= 0;
    auto g = mistaken_positions(o.mistake, first, cache.next_position(b), n_cached, cols);
    std::int64_t& gap = shifted[static_cast<std::size_t>(b)];
    if (gap > 0 && !cols.empty()) {  // the first step after a shift
      const std::int64_t from = kMistakes.is(o.mistake, MistakeId::kShiftNPastKept) ? cache.next_position(b) + gap : 0;
      if (kMistakes.is(o.mistake, MistakeId::kShiftNPastKept) || kMistakes.is(o.mistake, MistakeId::kShiftRestartAt0)) {
        g.clear();
        for (std::size_t i = 0; i < cols.size(); ++i) g.push_back(from + static_cast<std::int64_t>(i));
      }
      gap = 0;
    }
    for (std::size_t i = 0; i < cols.size(); ++i) {  // a sequence without the mistake: its own numbering
      st.given[b * T + cols[i]] = g.empty() ? cache.next_position(b) + static_cast<std::int64_t>(i) : g[i];
    }
    st.any_given |= !g.empty();
  }
}

/// Learned positions: the engine adds P[offset + position] to q, k and v first.
void add_learned_rows(const optimized::KvCache& cache, const EngineTrace& tr, const std::vector<float>& learned,
                      EngineStep& st) {
  const int B = tr.B, H = tr.a.n_heads, Hkv = tr.a.n_kv_heads, d = tr.a.head_dim, dv = tr.a.value_dim;
  const std::int64_t T = st.T;
  const reference::KvEncoding& enc = tr.enc;
  for (int b = 0; b < B; ++b) {
    std::int64_t next = cache.next_position(b);
    for (std::int64_t t = 0; t < T; ++t) {
      if (!st.valid[b * T + t]) continue;
      const std::int64_t pos = st.any_given ? st.given[b * T + t] : next++;
      const std::int64_t row = enc.learned_offset + pos;
      if (row < 0 || row >= enc.learned_rows) throw_invalid("kv_cache_run_engine", "learned row out of the table", row);
      const float* pe = &learned[static_cast<std::size_t>(row * H * d)];
      const std::size_t r = static_cast<std::size_t>(b * T + t);
      for (int x = 0; x < H * d; ++x) st.q[r * H * d + x] += pe[x];
      for (int x = 0; x < Hkv * d; ++x) st.k[r * Hkv * d + x] += pe[x];
      for (int x = 0; x < Hkv * dv; ++x) st.v[r * Hkv * dv + x] += pe[x];
    }
  }
}

/// Runs an append step and writes its positions, slots and output; false when a mistaken
/// engine's cache overflowed (it stops there; later steps are missing).
bool engine_append(optimized::KvCache& cache, const EngineTrace& tr, const EngineOptions& o, const EngineStep& st,
                   const std::string& sn, TensorMap& res) {
  const int B = tr.B, H = tr.a.n_heads, dv = tr.a.value_dim;
  const std::int64_t T = st.T;
  std::vector<float> out(static_cast<std::size_t>(B * T * H * dv));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * T)), slots(static_cast<std::size_t>(B * T));
  try {
    cache.step(T, st.valid, st.q, st.k, st.v, out, pos,
               st.any_given ? span<const std::int64_t>(st.given.data(), st.given.size()) : span<const std::int64_t>(), slots);
  } catch (const InvalidArgument&) {
    if (o.mistake.empty()) throw;
    return false;
  }
  res.emplace(sn + ".positions", tensor_from_i64(sn + ".positions", {B, T}, pos));
  res.emplace(sn + ".slots", tensor_from_i64(sn + ".slots", {B, T}, slots));
  res.emplace(sn + ".out", engine_tensor(sn + ".out", tr.dt, {B, T, H, dv}, out));
  return true;
}

/// A LongRoPE engine (batch 1, exact pipeline): each step is a call whose tables follow the
/// rule's switch for seq_len = the step's largest position + 1. When they change, HF's engine
/// re-prefills (a fresh cache, every logged token written again at its position with the new
/// tables); the mistake `factors-flip-without-rerotation` keeps the cache as rotated.
class LongRopeEngine {
 public:
  LongRopeEngine(const EngineTrace& tr, const EngineOptions& o) : tr_(tr), o_(o) {
    if (tr.B != 1) throw_invalid("kv_cache_run_engine", "LongRoPE traces are replayed for batch 1 only", tr.B);
    if (pipelines::of(o.pipeline) != Pipeline::kExact) {
      throw_invalid("kv_cache_run_engine", "LongRoPE traces run on the exact pipeline only (the float32 "
                    "pipelines are not modelled with per-call tables)", o.pipeline);
    }
  }
  /// Before the step: the call's tables; a re-prefill when they change and the policy re-rotates.
  void before_step(optimized::KvCache& cache, const optimized::KvCacheConfig& c, const EngineStep& st) {
    positions_.clear();
    std::int64_t next = cache.next_position(0), last = -1;
    for (std::int64_t t = 0; t < st.T; ++t) {
      if (!st.valid[t]) continue;
      positions_.push_back(st.any_given ? st.given[t] : next++);
      last = std::max(last, positions_.back());
    }
    if (last < 0) return;
    reference::RopeScaling s = tr_.enc.scaling;
    s.seq_len = last + 1;
    const auto tabs = optimized::rope_scaling_tables(tr_.enc.rope, s);
    if (tabs.inv_freq == inv_ && tabs.attention_factor == a_) return;
    const bool first = inv_.empty();
    inv_ = tabs.inv_freq;
    a_ = tabs.attention_factor;
    const bool reprefill = tr_.enc.table_policy == reference::KvTablePolicy::kRerotateCache &&
                           !kMistakes.is(o_.mistake, MistakeId::kFactorsFlipWithoutRerotation);
    if (first || !reprefill) {
      cache.set_rope_tables(inv_, a_);
      return;
    }
    optimized::KvCacheConfig c2 = c;
    c2.inv_freq = inv_;
    c2.attention_factor = a_;
    cache = optimized::KvCache(c2);
    const std::int64_t n = static_cast<std::int64_t>(log_pos_.size());
    if (n == 0) return;
    std::vector<float> q(static_cast<std::size_t>(n * tr_.a.n_heads * tr_.a.head_dim), 0.0f);
    std::vector<float> out(static_cast<std::size_t>(n * tr_.a.n_heads * tr_.a.value_dim));
    std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
    cache.step(n, std::vector<std::uint8_t>(static_cast<std::size_t>(n), 1), q, log_k_, log_v_, out, pos, log_pos_);
  }
  /// After the step: its raw keys, values and positions join the log (what a re-prefill writes).
  void after_step(const EngineStep& st) {
    const int kd = tr_.a.n_kv_heads * tr_.a.head_dim, vd = tr_.a.n_kv_heads * tr_.a.value_dim;
    std::size_t i = 0;
    for (std::int64_t t = 0; t < st.T; ++t) {
      if (!st.valid[t]) continue;
      log_k_.insert(log_k_.end(), st.k.begin() + t * kd, st.k.begin() + (t + 1) * kd);
      log_v_.insert(log_v_.end(), st.v.begin() + t * vd, st.v.begin() + (t + 1) * vd);
      log_pos_.push_back(positions_[i++]);
    }
  }

 private:
  const EngineTrace& tr_;
  const EngineOptions& o_;
  std::vector<double> inv_;
  double a_ = 0;
  std::vector<std::int64_t> positions_, log_pos_;
  std::vector<float> log_k_, log_v_;
};

TensorMap kv_cache_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const EngineTrace tr = read_engine_trace(spec, golden, o);
  const optimized::KvCacheConfig c = engine_config(spec, golden, tr, o);
  std::vector<float> learned;
  if (tr.enc.kind == KvEncodingKind::kLearned) learned = tensor_to_f32(golden.at("learned_table"));
  optimized::KvCache cache(c);
  std::optional<LongRopeEngine> longrope;
  if (tr.enc.kind == KvEncodingKind::kRope && tr.enc.scaling.type == RopeScalingType::kLongRope) longrope.emplace(tr, o);

  TensorMap res;
  bool first = true;
  std::vector<std::int64_t> shifted(static_cast<std::size_t>(tr.B), 0);
  for (const auto& js : spec.manifest.at("trace").at("steps")) {
    const std::string sn = js.at("name").get<std::string>();
    if (js.at("kind").get<std::string>() == "shift") {
      engine_shift(cache, tr, js, o, shifted);
      engine_cache_out(cache, tr, sn, res);
      continue;
    }
    EngineStep st = read_engine_step(golden, sn, js.at("columns").get<std::int64_t>(), tr.B);
    engine_scheduler(cache, tr, o, first, shifted, js.value("first_position", std::int64_t{-1}), st);
    if (tr.enc.kind == KvEncodingKind::kLearned) add_learned_rows(cache, tr, learned, st);
    if (longrope) longrope->before_step(cache, c, st);
    if (!engine_append(cache, tr, o, st, sn, res)) break;
    if (longrope) longrope->after_step(st);
    engine_cache_out(cache, tr, sn, res);
    first = false;
  }
  return res;
}

}  // namespace

SchemeEntry kv_cache_scheme() {
  SchemeEntry e{"kv_cache", "KV-cache position traces: continuation, sliding window, padding, context shift, sinks",
                &kv_cache_cases, &kv_cache_generate, &kv_cache_run_engine, &kv_cache_mistakes,
                &kv_cache_mistake_words};
  e.order = 90;  // its place in `posenc list` and the catalog
  return e;
}

LoadedCase kv_call_case(const KvCallDef& def) {
  if (def.steps.empty()) throw_invalid("kv_call_case", "steps must not be empty", def.steps.size());
  TraceDef t;
  t.id = "kv_cache_call";
  t.variant = "call";
  t.description = "one drawn call sequence (check/kv_cache.hpp)";
  t.params = def.params;
  t.seed = def.seed;
  if (!def.mistake.empty()) t = negative_control(t, t.id, def.mistake, t.description);
  for (std::size_t s = 0; s < def.steps.size(); ++s) {
    t.steps.push_back(append_step(s == 0 ? "prefill" : "decode", def.steps[s]));
  }
  GoldenCase g = kv_cache_generate_trace(t);
  LoadedCase lc;
  lc.spec = case_spec_from_json(g.manifest, t.id);
  lc.golden = tensor_map(std::move(g.tensors));
  return lc;
}

}  // namespace posenc::golden
