// -----------------------------------------------------------------------------
// M-RoPE: multimodal (multi-axis) rotary position embedding (reference, closed form)
// -----------------------------------------------------------------------------
// A token carries S position streams p_0 .. p_{S-1} (Qwen-VL decoders: S = 3, (t, h, w); a 2D
// vision encoder: (h, w); FLUX: (index, h, w); ggml: a fourth "extra" stream). Every frequency
// pair i of RoPE (reference/rope.hpp: the same pair layouts, tail copy and attention factor a)
// reads one stream s(i) and has its own frequency exponent (code indices 0-based):
//
//   theta_i = base^(-2 k(i) / D(i))               k(i), D(i): the map's frequency index, dim
//   phi_i   = p_{s(i)} * theta_i                  (one rounding in Real, no cache)
//   y_a = a (x_a cos(phi_i) - x_b sin(phi_i)),  y_b = a (x_a sin(phi_i) + x_b cos(phi_i))
//
// Maps (n = rotary_dim / 2 pairs; mrope_section = [s_0, s_1, s_2] counts pairs, sum n):
//   sectioned      s(i) = the block of i in [0, s_0), [s_0, s_0 + s_1), [s_0 + s_1, n);
//                  k(i) = i, D = rotary_dim (Qwen2-VL, Qwen2.5-VL; GLM-4.1V with the
//                  interleaved pair layout and partial rotary). HF splits cos into
//                  mrope_section * 2 chunks, chunk j reading stream j mod 3: one map over the
//                  pair index, repeated over both halves of rotate_half.
//   interleaved    s(i) = 1 if i mod 3 = 1 and i < 3 s_1; 2 if i mod 3 = 2 and i < 3 s_2;
//                  else 0; k(i) = i, D = rotary_dim (Qwen3-VL: HF apply_interleaved_mrope).
//   ggml_imrope    llama.cpp's IMROPE over c = i mod (s_0 + s_1 + s_2 + s_3): h and w as above
//                  (with c), t if c mod 3 = 0 and c < 3 s_0, any other pair the fourth stream
//                  (S = 4; llama.cpp fills it with 0 for text and image tokens).
//   axial          consecutive blocks of n_a pairs, one per axis a, frequencies restarting in
//                  each block: k(i) = i - start_a, D = 2 n_a (Qwen2-VL's vision tower with
//                  n_a = head_dim / 4, FLUX with axes_dim = 2 n_a, ggml's VISION mode).
//   axial_strided  S blocks of n / S pairs; pair j of block a takes frequency k = a + S j of
//                  the plain table, D = rotary_dim (Pixtral: h the even, w the odd ones).
//   Text tokens of a Qwen-VL decoder have p_0 = p_1 = p_2 = m; with k(i) = i and
//   D = rotary_dim the rotation is RoPE at m, computed by the same operations (identical bits).
//
// Positions: mrope_get_rope_index below (Qwen2-VL's get_rope_index). The sequence is a list of
//   spans; st = max(every position so far) + 1 (0 at the start). A text span of L tokens takes
//   st + j on every stream. A visual span with grid (T, H, W) patches and merge size m has
//   T (H/m) (W/m) tokens in (frame f, row y, column x) order at
//     (st + tau(f), st + y, st + x)
//   tau(f) = f (Qwen2-VL; Qwen3-VL lists each video frame as its own span between timestamp
//   text), or for Qwen2.5-VL videos tau(f) = floor(f * second_per_grid * tokens_per_second)
//   (images: second_per_grid = 0; HF evaluates the product in float32 and truncates). Decode:
//   rope_delta = max + 1 - sequence length (left padding included); a token at cache position c
//   takes c + rope_delta on every stream.
//   Release conventions (MropeTextResume::kMaxHw, MropeTemporal::kScaledIntSeconds): HF 5.x
//   resumes after a visual span at st + max(H/m, W/m), ignoring its temporal extent (rope_delta
//   still from the overall max); HF 4.52 through 5.15 truncate second_per_grid to an integer
//   before the product (docs/schemes/mrope.md, "Conventions").
// Vision tower (Qwen2-VL's ViT, 2D axial map): mrope_vision_positions gives each patch (row,
//   column) in the tower's order (merge windows of m x m patches, row by row).
//
// Sources: P. Wang et al., "Qwen2-VL", arXiv:2409.12191v2, Sec. 2.1 (M-RoPE); S. Bai et al.,
//   "Qwen2.5-VL Technical Report", arXiv:2502.13923v1, Sec. 2.1.2 (absolute time alignment);
//   HF transformers qwen2_vl / qwen2_5_vl / qwen3_vl / glm4v modeling (get_rope_index,
//   apply_multimodal_rotary_pos_emb, apply_interleaved_mrope, VisionRotaryEmbedding), pixtral
//   PixtralRotaryEmbedding; ggml-cpu rope (ggml_mrope_cache_init). Facts: docs/schemes/mrope.md.
// Index note: HF's mrope_section counts pairs (half of the channels it rotates).
// Names elsewhere: HF rope_scaling / rope_parameters {"type": "mrope", "mrope_section"},
//   "mrope_interleaved"; vLLM MRotaryEmbedding; ggml GGML_ROPE_TYPE_MROPE (= sectioned, half
//   split), GGML_ROPE_TYPE_IMROPE (= ggml_imrope), GGML_ROPE_TYPE_VISION (= axial over the whole
//   head, half split); llama.cpp rope.dimension_sections (padded to 4 entries).
// Not modelled: float32 angles and ggml's theta *= theta_scale recurrence (profiles budget for
//   them); the vision tower's window ordering of patches (it only permutes tokens); frequency
//   scaling of M-RoPE (the rope_scaling tables plug in through RopeTables).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"
#include "reference/rope.hpp"

namespace posenc::reference {

// ---- the pair -> stream map ------------------------------------------------------------------

enum class MropeMapRule { kSectioned, kInterleaved, kGgmlImrope, kAxial, kAxialStrided };

constexpr const char* mrope_map_rule_name(MropeMapRule r) {
  switch (r) {
    case MropeMapRule::kSectioned:
      return "sectioned";
    case MropeMapRule::kInterleaved:
      return "interleaved";
    case MropeMapRule::kGgmlImrope:
      return "ggml_imrope";
    case MropeMapRule::kAxial:
      return "axial";
    case MropeMapRule::kAxialStrided:
      return "axial_strided";
  }
  return "?";
}

/// What pair i reads: stream s(i) and theta_i = base^(-2 freq_index / freq_dim).
struct MropePair {
  int stream = 0;
  int freq_index = 0;  // k(i)
  int freq_dim = 0;    // D(i)
};

/// The map of every pair, built by one of the mrope_map_* rules below.
struct MropeMap {
  MropeMapRule rule = MropeMapRule::kSectioned;
  int n_streams = 0;
  std::vector<MropePair> pairs;  // size rotary_dim / 2
};

/// Largest stream count a map may have (3 for Qwen-VL, 4 for ggml).
inline constexpr int kMropeMaxStreams = 8;

namespace detail {
inline void mrope_check_sections(const char* fn, const std::vector<int>& sections, int n_pairs,
                                 std::size_t max_entries) {
  if (n_pairs <= 0) throw_invalid(fn, "the pair count (rotary_dim/2) must be positive", n_pairs);
  if (sections.empty() || sections.size() > max_entries) {
    throw_invalid(fn, "mrope_section must have 1 to " + std::to_string(max_entries) + " entries",
                  sections.size());
  }
  long long sum = 0;
  for (std::size_t j = 0; j < sections.size(); ++j) {
    if (sections[j] < 0) {
      throw_invalid(fn, "mrope_section[" + std::to_string(j) + "] must be >= 0", sections[j]);
    }
    sum += sections[j];
  }
  if (sum != n_pairs) {
    throw_invalid(
        fn, "mrope_section must sum to rotary_dim/2 = " + std::to_string(n_pairs) + " pairs", sum);
  }
}
}  // namespace detail

/// Contiguous blocks of mrope_section pairs, block j reading stream j (Qwen2-VL, Qwen2.5-VL).
inline MropeMap mrope_map_sectioned(const std::vector<int>& sections, int n_pairs) {
  detail::mrope_check_sections("mrope_map_sectioned", sections, n_pairs, kMropeMaxStreams);
  MropeMap m{MropeMapRule::kSectioned, static_cast<int>(sections.size()), {}};
  for (int j = 0; j < static_cast<int>(sections.size()); ++j) {
    for (int c = 0; c < sections[j]; ++c) {
      const int i = static_cast<int>(m.pairs.size());
      m.pairs.push_back({j, i, 2 * n_pairs});
    }
  }
  return m;
}

/// Qwen3-VL's interleaved rule over [s_t, s_h, s_w]: h at i = 1 mod 3 below 3 s_h, w at
/// i = 2 mod 3 below 3 s_w, t elsewhere. Each stream then gets exactly its section's count.
inline MropeMap mrope_map_interleaved(const std::vector<int>& sections, int n_pairs) {
  constexpr const char* fn = "mrope_map_interleaved";
  if (sections.size() != 3) {
    throw_invalid(fn, "mrope_section must have 3 entries (t, h, w)", sections.size());
  }
  detail::mrope_check_sections(fn, sections, n_pairs, 3);
  if (3 * sections[1] - 2 >= n_pairs && sections[1] > 0) {
    throw_invalid(fn,
                  "mrope_section[1] too large for " + std::to_string(n_pairs) +
                      " interleaved pairs (3 s_h - 2 must be < pairs)",
                  sections[1]);
  }
  if (3 * sections[2] - 1 >= n_pairs && sections[2] > 0) {
    throw_invalid(fn,
                  "mrope_section[2] too large for " + std::to_string(n_pairs) +
                      " interleaved pairs (3 s_w - 1 must be < pairs)",
                  sections[2]);
  }
  MropeMap m{MropeMapRule::kInterleaved, 3, {}};
  for (int i = 0; i < n_pairs; ++i) {
    int s = 0;
    if (i % 3 == 1 && i < 3 * sections[1]) {
      s = 1;
    } else if (i % 3 == 2 && i < 3 * sections[2]) {
      s = 2;
    }
    m.pairs.push_back({s, i, 2 * n_pairs});
  }
  return m;
}

/// llama.cpp's IMROPE (ggml_mrope_cache_init with is_imrope): four streams, sections padded
/// to 4 entries with 0; pairs outside the three interleaved ranges read the fourth stream.
inline MropeMap mrope_map_ggml_imrope(std::vector<int> sections, int n_pairs) {
  constexpr const char* fn = "mrope_map_ggml_imrope";
  if (sections.empty() || sections.size() > 4) {
    throw_invalid(fn, "sections must have 1 to 4 entries", sections.size());
  }
  sections.resize(4, 0);
  long long sum = 0;
  for (int j = 0; j < 4; ++j) {
    if (sections[j] < 0) {
      throw_invalid(fn, "sections[" + std::to_string(j) + "] must be >= 0", sections[j]);
    }
    sum += sections[j];
  }
  if (sum <= 0 || sum > n_pairs) {
    throw_invalid(fn, "the sections must sum to 1 .. rotary_dim/2 = " + std::to_string(n_pairs),
                  sum);
  }
  MropeMap m{MropeMapRule::kGgmlImrope, 4, {}};
  for (int i = 0; i < n_pairs; ++i) {
    const int c = i % static_cast<int>(sum);
    int s = 3;
    if (c % 3 == 1 && c < 3 * sections[1]) {
      s = 1;
    } else if (c % 3 == 2 && c < 3 * sections[2]) {
      s = 2;
    } else if (c % 3 == 0 && c < 3 * sections[0]) {
      s = 0;
    }
    m.pairs.push_back({s, i, 2 * n_pairs});
  }
  return m;
}

/// One block of axis_pairs[a] pairs per axis, each with its own frequencies base^(-2j/(2 n_a)).
inline MropeMap mrope_map_axial(const std::vector<int>& axis_pairs, int n_pairs) {
  constexpr const char* fn = "mrope_map_axial";
  detail::mrope_check_sections(fn, axis_pairs, n_pairs, kMropeMaxStreams);
  MropeMap m{MropeMapRule::kAxial, static_cast<int>(axis_pairs.size()), {}};
  for (int a = 0; a < static_cast<int>(axis_pairs.size()); ++a) {
    if (axis_pairs[a] == 0) {
      throw_invalid(fn, "axis " + std::to_string(a) + " must have >= 1 pair", 0);
    }
    for (int j = 0; j < axis_pairs[a]; ++j) m.pairs.push_back({a, j, 2 * axis_pairs[a]});
  }
  return m;
}

/// n_axes blocks of n_pairs / n_axes pairs; block a takes frequencies a, a + n_axes, ... of the
/// plain table (Pixtral's 2D RoPE: n_axes = 2).
inline MropeMap mrope_map_axial_strided(int n_axes, int n_pairs) {
  constexpr const char* fn = "mrope_map_axial_strided";
  if (n_axes < 1 || n_axes > kMropeMaxStreams) {
    throw_invalid(fn, "n_axes must be in [1, 8]", n_axes);
  }
  if (n_pairs <= 0 || n_pairs % n_axes != 0) {
    throw_invalid(fn,
                  "rotary_dim/2 must be a positive multiple of n_axes " + std::to_string(n_axes),
                  n_pairs);
  }
  MropeMap m{MropeMapRule::kAxialStrided, n_axes, {}};
  for (int a = 0; a < n_axes; ++a) {
    for (int j = 0; j < n_pairs / n_axes; ++j) m.pairs.push_back({a, a + n_axes * j, 2 * n_pairs});
  }
  return m;
}

/// Throws InvalidArgument naming `function` unless p is valid and the map fits it.
inline void mrope_check(const RopeParams& p, const MropeMap& m,
                        const char* function = "mrope_check") {
  rope_check(p, function);
  if (m.n_streams < 1 || m.n_streams > kMropeMaxStreams) {
    throw_invalid(function, "map.n_streams must be in [1, 8]", m.n_streams);
  }
  if (m.pairs.size() != static_cast<std::size_t>(p.rotary_dim / 2)) {
    throw_invalid(function,
                  "the map must have rotary_dim/2 = " + std::to_string(p.rotary_dim / 2) + " pairs",
                  m.pairs.size());
  }
  for (std::size_t i = 0; i < m.pairs.size(); ++i) {
    const MropePair& q = m.pairs[i];
    if (q.stream < 0 || q.stream >= m.n_streams) {
      throw_invalid(function, "map.pairs[" + std::to_string(i) + "].stream must be < n_streams",
                    q.stream);
    }
    if (q.freq_dim <= 0 || q.freq_index < 0 || 2 * q.freq_index >= q.freq_dim) {
      throw_invalid(function,
                    "map.pairs[" + std::to_string(i) + "] needs 0 <= 2 freq_index < freq_dim",
                    q.freq_index);
    }
  }
}

/// Stream count per stream index (the map's partition of the pairs).
inline std::vector<int> mrope_stream_counts(const MropeMap& m) {
  std::vector<int> n(static_cast<std::size_t>(m.n_streams), 0);
  for (const MropePair& q : m.pairs) ++n[static_cast<std::size_t>(q.stream)];
  return n;
}

// ---- rotation --------------------------------------------------------------------------------

/// theta_i = base^(-2 k(i) / D(i)) for every pair, in closed form (k = i, D = rotary_dim gives
/// rope_inv_freq's expression and bits), and p.attention_factor.
template <class Real>
RopeTables<Real> mrope_tables(const RopeParams& p, const MropeMap& m) {
  using std::pow;
  mrope_check(p, m, "mrope_tables");
  const Real base = Real(p.base);
  std::vector<Real> theta(m.pairs.size());
  for (std::size_t i = 0; i < m.pairs.size(); ++i) {
    theta[i] = pow(base, -Real(2 * m.pairs[i].freq_index) / Real(m.pairs[i].freq_dim));
  }
  return RopeTables<Real>{std::move(theta), Real(p.attention_factor)};
}

namespace detail {
/// Tables from outside (a scaling rule's) must have one frequency per pair of the map.
template <class Real>
void mrope_check_tables(const char* fn, const MropeMap& m, const RopeTables<Real>& t) {
  if (t.inv_freq.size() != m.pairs.size()) {
    throw_invalid(
        fn, "tables.inv_freq must have one entry per pair (" + std::to_string(m.pairs.size()) + ")",
        t.inv_freq.size());
  }
}

/// rope_rotate with the angle of pair i taken from stream s(i): the same operations.
template <class Real>
void mrope_rotate(const RopeParams& p, const MropeMap& m, const RopeTables<Real>& t,
                  const std::int64_t* pos, std::size_t pos_stride, const Real& factor,
                  span<const Real> x, span<Real> y) {
  using std::cos;
  using std::sin;
  const int d = p.rotary_dim;
  for (int c = d; c < p.head_dim; ++c) y[c] = x[c];
  for (int i = 0; i < d / 2; ++i) {
    const std::int64_t mi = pos[static_cast<std::size_t>(m.pairs[i].stream) * pos_stride];
    const Real phi = rope_angle(t, mi, i);
    const Real ca = factor * cos(phi);
    const Real sa = factor * sin(phi);
    const int a = rope_pair_a(p, i);
    const int b = rope_pair_b(p, i);
    const Real xa = x[a];
    const Real xb = x[b];
    y[a] = xa * ca - xb * sa;
    y[b] = xa * sa + xb * ca;
  }
}
}  // namespace detail

/// Rotates one head vector; pos holds the token's n_streams positions.
template <class Real>
std::vector<Real> mrope_apply(const RopeParams& p, const MropeMap& m, const RopeTables<Real>& t,
                              span<const std::int64_t> pos, const std::vector<Real>& x) {
  mrope_check(p, m, "mrope_apply");
  detail::mrope_check_tables("mrope_apply", m, t);
  if (pos.size() != static_cast<std::size_t>(m.n_streams)) {
    throw_invalid("mrope_apply",
                  "pos must have n_streams = " + std::to_string(m.n_streams) + " entries",
                  pos.size());
  }
  if (x.size() != static_cast<std::size_t>(p.head_dim)) {
    throw_invalid("mrope_apply",
                  "x must have head_dim = " + std::to_string(p.head_dim) + " entries", x.size());
  }
  std::vector<Real> y(x.size());
  detail::mrope_rotate<Real>(p, m, t, pos.data(), 1, t.attention_factor, x, y);
  return y;
}

/// The same with the map's own tables.
template <class Real>
std::vector<Real> mrope_apply(const RopeParams& p, const MropeMap& m, span<const std::int64_t> pos,
                              const std::vector<Real>& x) {
  return mrope_apply(p, m, mrope_tables<Real>(p, m), pos, x);
}

/// Inverse of mrope_apply: every stream negated, factor 1/a.
template <class Real>
std::vector<Real> mrope_apply_inverse(const RopeParams& p, const MropeMap& m,
                                      const RopeTables<Real>& t, span<const std::int64_t> pos,
                                      const std::vector<Real>& x) {
  std::vector<std::int64_t> neg(pos.begin(), pos.end());
  for (std::int64_t& v : neg) v = -v;
  mrope_check(p, m, "mrope_apply_inverse");
  detail::mrope_check_tables("mrope_apply_inverse", m, t);
  if (neg.size() != static_cast<std::size_t>(m.n_streams) ||
      x.size() != static_cast<std::size_t>(p.head_dim)) {
    throw_invalid("mrope_apply_inverse", "pos must have n_streams and x head_dim entries",
                  x.size());
  }
  std::vector<Real> y(x.size());
  detail::mrope_rotate<Real>(p, m, t, neg.data(), 1, Real(1) / t.attention_factor, x, y);
  return y;
}

/// Rows: positions [n_streams, n_rows] row-major (stream s of row r at s * n_rows + r), x and y
/// [n_rows, head_dim].
template <class Real>
void mrope_apply_rows(const RopeParams& p, const MropeMap& m, const RopeTables<Real>& t,
                      span<const std::int64_t> positions, span<const Real> x, span<Real> y) {
  constexpr const char* fn = "mrope_apply_rows";
  mrope_check(p, m, fn);
  detail::mrope_check_tables(fn, m, t);
  const std::size_t h = static_cast<std::size_t>(p.head_dim);
  const std::size_t rows = x.size() / h;
  if (x.size() != rows * h) throw_invalid(fn, "x must have rows * head_dim entries", x.size());
  if (y.size() != x.size()) throw_invalid(fn, "y must have as many entries as x", y.size());
  if (positions.size() != rows * static_cast<std::size_t>(m.n_streams)) {
    throw_invalid(
        fn,
        "positions must have n_streams * rows = " + std::to_string(rows * m.n_streams) + " entries",
        positions.size());
  }
  for (std::size_t r = 0; r < rows; ++r) {
    detail::mrope_rotate<Real>(p, m, t, positions.data() + r, rows, t.attention_factor,
                               x.subspan(r * h, h), y.subspan(r * h, h));
  }
}

// ---- positions: get_rope_index ---------------------------------------------------------------

enum class MropeSpanKind { kText, kImage, kVideo };

/// One span of the token sequence. Visual grids count patches before merging (HF grid_thw).
struct MropeSpan {
  MropeSpanKind kind = MropeSpanKind::kText;
  std::int64_t n_text = 0;                          // text: its token count (>= 1)
  std::int64_t grid_t = 1, grid_h = 0, grid_w = 0;  // image / video
  double second_per_grid = 1.0;                     // video: seconds per temporal grid step
};

inline MropeSpan mrope_text(std::int64_t n) { return {MropeSpanKind::kText, n, 1, 0, 0, 0.0}; }
inline MropeSpan mrope_image(std::int64_t t, std::int64_t h, std::int64_t w) {
  return {MropeSpanKind::kImage, 0, t, h, w, 0.0};
}
inline MropeSpan mrope_video(std::int64_t t, std::int64_t h, std::int64_t w,
                             double second_per_grid = 1.0) {
  return {MropeSpanKind::kVideo, 0, t, h, w, second_per_grid};
}

/// How a video's temporal index tau(f) of frame step f is computed.
enum class MropeTemporal {
  kFrameIndex,        // tau = f                       default: Qwen2-VL, Qwen3-VL (frames as spans)
  kScaledFloat32,     // tau = trunc(fl(fl(f s) tps))  default: Qwen2.5-VL in HF (float32 tensors)
  kScaledFloat64,     // tau = trunc(fl64(fl64(f s) tps)) acceptable: float64 engines (numpy)
  kScaledIntSeconds,  // tau = trunc(f trunc(s) tps)   acceptable: s cast to an integer first
                      // (HF 4.52 through 5.15)
};
/// Where text resumes after a visual span.
enum class MropeTextResume {
  kMaxPlusOne,  // default: max(every position so far) + 1 (HF <= 4.57, Qwen's own code)
  kTokenIndex,  // invalid: the token's index in the sequence, as 1D RoPE would
  kMaxHw,       // acceptable: the span's start + max(H/m, W/m), its temporal extent ignored
                // (HF 5.x); rope_delta still from the overall max
};
/// Which position a decode step takes.
enum class MropeDecode {
  kRopeDeltas,     // default: cache position + rope_delta on every stream
  kCachePosition,  // invalid: rope_delta dropped (the cache slot)
};

constexpr const char* mrope_temporal_name(MropeTemporal t) {
  switch (t) {
    case MropeTemporal::kFrameIndex:
      return "frame_index";
    case MropeTemporal::kScaledFloat32:
      return "scaled_float32";
    case MropeTemporal::kScaledFloat64:
      return "scaled_float64";
    case MropeTemporal::kScaledIntSeconds:
      return "scaled_int_seconds";
  }
  return "?";
}
constexpr const char* mrope_text_resume_name(MropeTextResume r) {
  return r == MropeTextResume::kMaxPlusOne ? "max_plus_one"
         : r == MropeTextResume::kMaxHw    ? "max_hw"
                                           : "token_index";
}
constexpr const char* mrope_decode_name(MropeDecode d) {
  return d == MropeDecode::kRopeDeltas ? "rope_deltas" : "cache_position";
}

/// A named engine behaviour and how the suite judges it (as the rope_scaling conventions).
struct MropeConvention {
  const char* name;
  const char* result;  // "default", "acceptable" or "invalid"
  const char* what;
};

/// Every convention of the scheme where engines differ (docs/schemes/mrope.md).
inline const std::vector<MropeConvention>& mrope_conventions() {
  static const std::vector<MropeConvention> c = {
      {"sectioned", "default", "Qwen2-VL, Qwen2.5-VL, GLM-4.1V: contiguous mrope_section blocks"},
      {"interleaved", "default",
       "Qwen3-VL: pair i reads h at i = 1 mod 3 < 3 s_h, w at 2 mod 3 < 3 s_w"},
      {"ggml_imrope", "invalid",
       "llama.cpp IMROPE: pairs outside the three ranges read a fourth stream (0 for text); "
       "Qwen3-VL [24, 20, 20, 0]: pairs 61 and 62"},
      {"half_split_pairs", "default",
       "Qwen2-VL, Qwen2.5-VL, Qwen3-VL: pair i = channels (i, i + rotary_dim/2) (rotate_half)"},
      {"interleaved_pairs", "default",
       "GLM-4.1V: pair i = channels (2i, 2i + 1), over int(head_dim * partial_rotary_factor) "
       "channels; half_split_pairs on GLM-4.1V is invalid"},
      {"frame_index", "default", "Qwen2-VL / Qwen3-VL video: t index = frame step"},
      {"scaled_float32", "default",
       "Qwen2.5-VL: trunc(f * s * tokens_per_second) in float32 (Qwen's absolute time, the "
       "trained rule; HF 4.49-4.51 and again after PR #48669)"},
      {"scaled_float64", "acceptable",
       "the same product in float64 (differs where float32 rounds it onto an integer)"},
      {"scaled_int_seconds", "acceptable",
       "Qwen2.5-VL in HF 4.52 through 5.15: second_per_grid truncated to an integer before the "
       "product (s = 0.5 puts every frame at t = 0)"},
      {"max_plus_one", "default",
       "text after a visual span resumes at max + 1 (HF <= 4.57 and Qwen's own code: the trained "
       "rule)"},
      {"max_hw", "acceptable",
       "HF 5.x (PR #43972, reported from 5.3.0): text after a visual span resumes at its start + "
       "max(H/m, W/m), ignoring a video's temporal extent; rope_delta from the overall max"},
      {"token_index", "invalid", "text after a visual span resumes at its token index"},
      {"rope_deltas", "default", "decode at cache position + rope_delta"},
      {"cache_position", "invalid", "decode at the cache position (rope_delta dropped)"},
      // KV-cache conventions (golden traces: docs/verifying-vl.md)
      {"stale_rope_deltas", "invalid",
       "a later request decodes with the previous one's rope_delta"},
      {"positions_not_sliced", "invalid",
       "a prefill chunk from token k > 0 takes the prompt's positions [0, n), not [k, k + n)"},
      {"draft_slot_t", "invalid", "a speculative drafter's KV slot = its t position"},
      {"seq_rm_count", "invalid",
       "a cache removal given the token count where the RoPE position is meant"},
  };
  return c;
}

/// The rule of get_rope_index (model config values and the engine's conventions).
struct MropeIndexRule {
  int spatial_merge_size = 2;  // vision_config.spatial_merge_size
  MropeTemporal temporal = MropeTemporal::kFrameIndex;
  double tokens_per_second = 2.0;  // vision_config.tokens_per_second (scaled rules)
  MropeTextResume text_resume = MropeTextResume::kMaxPlusOne;
  std::int64_t left_padding = 0;  // pad tokens before the sequence (attention mask 0)
  std::int64_t pad_position = 1;  // what HF writes at pad tokens (position_ids start as ones)
};

/// get_rope_index's answer: 3 streams (t, h, w) x n_tokens (padding included), row-major.
struct MropePositions {
  std::int64_t n_tokens = 0;
  std::vector<std::int64_t> pos;  // pos[s * n_tokens + j]
  std::int64_t rope_delta = 0;    // max + 1 - n_tokens
  std::int64_t at(int stream, std::int64_t j) const {
    return pos[static_cast<std::size_t>(stream * n_tokens + j)];
  }
};

/// Limits that keep every position far inside int64 and the kernels' range.
inline constexpr std::int64_t kMropeMaxGrid = std::int64_t{1} << 16;
inline constexpr std::int64_t kMropeMaxTokens = std::int64_t{1} << 26;

/// Tokens a span takes: text n_text, visual T (H/m) (W/m).
inline std::int64_t mrope_span_tokens(const MropeSpan& s, int merge) {
  if (s.kind == MropeSpanKind::kText) return s.n_text;
  return s.grid_t * (s.grid_h / merge) * (s.grid_w / merge);
}

namespace detail {
inline std::int64_t mrope_tau(const MropeIndexRule& r, const MropeSpan& s, std::int64_t f) {
  if (r.temporal == MropeTemporal::kFrameIndex) return f;
  const double sec = s.kind == MropeSpanKind::kImage ? 0.0 : s.second_per_grid;  // HF: 0 for images
  switch (r.temporal) {
    case MropeTemporal::kScaledFloat32: {
      const float prod = static_cast<float>(f) * static_cast<float>(sec);
      return static_cast<std::int64_t>(prod * static_cast<float>(r.tokens_per_second));
    }
    case MropeTemporal::kScaledFloat64:
      return static_cast<std::int64_t>(static_cast<double>(f) * sec * r.tokens_per_second);
    case MropeTemporal::kScaledIntSeconds:  // f * trunc(s) is an exact integer
      return static_cast<std::int64_t>(static_cast<double>(f) * std::trunc(sec) *
                                       r.tokens_per_second);
    case MropeTemporal::kFrameIndex:
      break;
  }
  return f;
}

inline void mrope_check_layout(const std::vector<MropeSpan>& layout, const MropeIndexRule& r) {
  constexpr const char* fn = "mrope_get_rope_index";
  const int m = r.spatial_merge_size;
  if (m < 1 || m > 64) throw_invalid(fn, "spatial_merge_size must be in [1, 64]", m);
  if (r.temporal != MropeTemporal::kFrameIndex &&
      !(r.tokens_per_second > 0.0 && r.tokens_per_second <= 1e6)) {
    throw_invalid(fn, "tokens_per_second must be in (0, 1e6]", r.tokens_per_second);
  }
  if (r.left_padding < 0 || r.left_padding > kMropeMaxTokens) {
    throw_invalid(fn, "left_padding must be in [0, 2^26]", r.left_padding);
  }
  if (layout.empty()) throw_invalid(fn, "the layout must have at least one span", 0);
  std::int64_t total = r.left_padding;
  for (std::size_t k = 0; k < layout.size(); ++k) {
    const MropeSpan& s = layout[k];
    const std::string at = "spans[" + std::to_string(k) + "]";
    if (s.kind == MropeSpanKind::kText) {
      if (s.n_text < 1 || s.n_text > kMropeMaxTokens) {
        throw_invalid(fn, at + ".n_text must be in [1, 2^26]", s.n_text);
      }
    } else {
      for (const auto& [name, v] : {std::pair{"grid_t", s.grid_t}, std::pair{"grid_h", s.grid_h},
                                    std::pair{"grid_w", s.grid_w}}) {
        if (v < 1 || v > kMropeMaxGrid) {
          throw_invalid(fn, at + "." + name + " must be in [1, 2^16]", v);
        }
      }
      if (s.grid_h % m != 0 || s.grid_w % m != 0) {
        throw_invalid(
            fn,
            at + ": grid_h and grid_w must be divisible by spatial_merge_size " + std::to_string(m),
            s.grid_h % m != 0 ? s.grid_h : s.grid_w);
      }
      if (s.kind == MropeSpanKind::kVideo && r.temporal != MropeTemporal::kFrameIndex &&
          !(s.second_per_grid >= 0.0 && s.second_per_grid <= 1e6)) {
        throw_invalid(fn, at + ".second_per_grid must be in [0, 1e6]", s.second_per_grid);
      }
    }
    total += mrope_span_tokens(s, m);
    if (total > kMropeMaxTokens) throw_invalid(fn, "the sequence must have <= 2^26 tokens", total);
  }
}
}  // namespace detail

/// Positions of every token of `layout` (Qwen2-VL's get_rope_index, one sequence) and its
/// rope_delta. Throws InvalidArgument naming the span and field of a bad layout.
inline MropePositions mrope_get_rope_index(const std::vector<MropeSpan>& layout,
                                           const MropeIndexRule& r = {}) {
  detail::mrope_check_layout(layout, r);
  const int merge = r.spatial_merge_size;
  std::int64_t n = r.left_padding;
  for (const MropeSpan& s : layout) n += mrope_span_tokens(s, merge);
  MropePositions out;
  out.n_tokens = n;
  out.pos.assign(static_cast<std::size_t>(3 * n), r.pad_position);
  std::int64_t j = r.left_padding;  // next column
  std::int64_t next = 0;            // max(every position so far) + 1
  std::int64_t cur = 0;             // kMaxHw: where the next span starts
  const bool max_hw = r.text_resume == MropeTextResume::kMaxHw;
  for (const MropeSpan& s : layout) {
    if (s.kind == MropeSpanKind::kText) {
      const std::int64_t st = r.text_resume == MropeTextResume::kTokenIndex ? j - r.left_padding
                              : max_hw                                      ? cur
                                                                            : next;
      for (std::int64_t q = 0; q < s.n_text; ++q, ++j) {
        for (int c = 0; c < 3; ++c) out.pos[static_cast<std::size_t>(c * n + j)] = st + q;
      }
      next = std::max(next, st + s.n_text);
      cur = st + s.n_text;
      continue;
    }
    const std::int64_t gh = s.grid_h / merge, gw = s.grid_w / merge, st = max_hw ? cur : next;
    cur = st + std::max(gh, gw);
    for (std::int64_t f = 0; f < s.grid_t; ++f) {
      const std::int64_t tau = detail::mrope_tau(r, s, f);
      for (std::int64_t y = 0; y < gh; ++y) {
        for (std::int64_t x = 0; x < gw; ++x, ++j) {
          out.pos[static_cast<std::size_t>(j)] = st + tau;
          out.pos[static_cast<std::size_t>(n + j)] = st + y;
          out.pos[static_cast<std::size_t>(2 * n + j)] = st + x;
          next = std::max({next, st + tau + 1, st + y + 1, st + x + 1});
        }
      }
    }
  }
  out.rope_delta = next - n;
  return out;
}

/// Positions [n_streams, n_new] of n_new decode tokens at cache positions
/// cache_position .. cache_position + n_new - 1 (padding included, as HF's cache_position).
inline std::vector<std::int64_t> mrope_decode_positions(
    std::int64_t rope_delta, std::int64_t cache_position, std::int64_t n_new, int n_streams = 3,
    MropeDecode rule = MropeDecode::kRopeDeltas) {
  constexpr const char* fn = "mrope_decode_positions";
  if (cache_position < 0 || cache_position > kMropeMaxTokens) {
    throw_invalid(fn, "cache_position must be in [0, 2^26]", cache_position);
  }
  if (n_new < 1 || n_new > kMropeMaxTokens) throw_invalid(fn, "n_new must be in [1, 2^26]", n_new);
  if (n_streams < 1 || n_streams > kMropeMaxStreams) {
    throw_invalid(fn, "n_streams must be in [1, 8]", n_streams);
  }
  if (rope_delta < -kMropeMaxTokens || rope_delta > kMropeMaxTokens) {
    throw_invalid(fn, "|rope_delta| must be <= 2^26", rope_delta);
  }
  const std::int64_t delta = rule == MropeDecode::kRopeDeltas ? rope_delta : 0;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n_streams * n_new));
  for (int c = 0; c < n_streams; ++c) {
    for (std::int64_t q = 0; q < n_new; ++q)
      pos[static_cast<std::size_t>(c * n_new + q)] = cache_position + q + delta;
  }
  return pos;
}

/// Patch positions (h, w) of Qwen2-VL's vision tower (HF VisionTransformer.rot_pos_emb) for a
/// grid of t x h x w patches: frames one after the other, each in merge windows of m x m
/// patches (windows row by row, patches in a window row by row); patch (row y, column x) at
/// (y, x). Returns [2, t h w] row-major (stream h, then w).
inline std::vector<std::int64_t> mrope_vision_positions(std::int64_t t, std::int64_t h,
                                                        std::int64_t w, int merge) {
  constexpr const char* fn = "mrope_vision_positions";
  if (merge < 1 || merge > 64) throw_invalid(fn, "merge must be in [1, 64]", merge);
  for (const auto& [name, v] : {std::pair{"t", t}, std::pair{"h", h}, std::pair{"w", w}}) {
    if (v < 1 || v > kMropeMaxGrid)
      throw_invalid(fn, std::string(name) + " must be in [1, 2^16]", v);
  }
  if (h % merge != 0 || w % merge != 0) {
    throw_invalid(fn, "h and w must be divisible by merge " + std::to_string(merge),
                  h % merge != 0 ? h : w);
  }
  if (t * h * w > kMropeMaxTokens)
    throw_invalid(fn, "the grid must have <= 2^26 patches", t * h * w);
  const std::int64_t n = t * h * w;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(2 * n));
  std::int64_t j = 0;
  for (std::int64_t f = 0; f < t; ++f) {
    for (std::int64_t by = 0; by < h / merge; ++by) {
      for (std::int64_t bx = 0; bx < w / merge; ++bx) {
        for (int iy = 0; iy < merge; ++iy) {
          for (int ix = 0; ix < merge; ++ix, ++j) {
            pos[static_cast<std::size_t>(j)] = by * merge + iy;
            pos[static_cast<std::size_t>(n + j)] = bx * merge + ix;
          }
        }
      }
    }
  }
  return pos;
}

/// Text-only positions: every stream m_j (what an M-RoPE model gives a text token).
inline std::vector<std::int64_t> mrope_text_positions(span<const std::int64_t> m, int n_streams) {
  std::vector<std::int64_t> pos;
  pos.reserve(m.size() * static_cast<std::size_t>(n_streams));
  for (int c = 0; c < n_streams; ++c) pos.insert(pos.end(), m.begin(), m.end());
  return pos;
}

}  // namespace posenc::reference
