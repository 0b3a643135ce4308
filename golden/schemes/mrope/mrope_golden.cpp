// Golden cases for M-RoPE (multimodal RoPE). Formula, maps and get_rope_index:
// reference/mrope.hpp; facts and conventions: docs/schemes/mrope.md.
//
// Level 1 (committed): the VL presets of golden/presets (Qwen2-VL-7B, Qwen2.5-VL-7B, Qwen3-VL-8B;
// read by the config reader below, exactly as `posenc generate --config` reads a user's file) x
// prompt layouts (text-image-text, two images, text-video-text with Qwen2.5-VL's temporal
// scaling, decode after an image with rope_deltas), 2 q heads and 1 kv head, stages:
//   positions [3, T] int64   index, exact: the (t, h, w) streams the engine computed (HF's
//                            position_ids [3, batch, T], one batch row); decode tokens at cache
//                            position + rope_delta
//   cos, sin [T, d/2]        table: pair i at the angle of its stream, p[s(i)] theta_i
//   q_rot [T, Hq, h], k_rot [T, Hk, h]   rotated
//   scores [Hq, T, T]        unscaled q_rot . k_rot, kv head = q head / (Hq / Hk)
// Inputs: input_ids [T] (text filler ids, vision_start before each visual span, the image or
// video token id over it, vision_end after), mm_token_type_ids [T] (HF 5.x's: 1 image token, 2
// video token, 0 else), image_grid_thw / video_grid_thw [n, 3], q, k; the manifest's params
// hold the layout, the map and the index rule.
// Declared alternatives (valid cases whose positions they change): HF 5.x's resume after a
// visual span at st + max(h, w) (hf5_resume_max_hw) and HF 4.52-5.15's integer second_per_grid
// on Qwen2.5-VL (hf_int_seconds, and both); every stage holds their values (alt.*.exact), the
// angle extras the larger of both conventions' (release_alternatives).
// Negative controls (result "invalid", each the twin of a valid case with its inputs): the
// sectioned map on Qwen3-VL and the interleaved one on Qwen2-VL, the streams fed as (w, h, t),
// rope_deltas dropped at decode, text after an image resuming at its token index.
//
// Budgets (docs/profiles.md): the RoPE stages' (rope_stage_budgets, golden/cases/rope_budgets.cpp)
// with one change: a pair's angle error is RoPE's at the position its stream gives,
//   E_P(t, i) = E_P,i(p[s(i)][t])         (rope_pipeline_angle_errors: HF's float32 angle
//                                          fl(fl(p) inv_freq), ggml's recurrence theta *= ts,
//                                          which MROPE / IMROPE run per stream)
// so cos/sin get extra a E, q_rot/k_rot c E (c = a (|x_a| + |x_b|)), scores
// sum_i w_i (E(q token, i) + E(k token, i)). Positions are integers: exact under every profile.
#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/cases/rope_fit.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/prng.hpp"
#include "reference/common/mutant.hpp"
#include "optimized/mrope.hpp"
#include "optimized/rope.hpp"
#include "reference/common/errors.hpp"
#include "reference/mrope.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kDraftSlotFromT, kGgmlImrope, kNoRopeDeltas, kPairLayout, kPromptNotSliced, kSeqRmCount, kStaleRopeDeltas, kStreamPermutation, kTokenIndexResume, kWrongMap };
const MistakeTable<MistakeId, 10> kMistakes(
    {"mrope"},
    {{
     {MistakeId::kDraftSlotFromT, "draft-slot-from-t"},
     {MistakeId::kGgmlImrope, "ggml-imrope"},
     {MistakeId::kNoRopeDeltas, "no-rope-deltas"},
     {MistakeId::kPairLayout, "pair-layout"},
     {MistakeId::kPromptNotSliced, "prompt-not-sliced"},
     {MistakeId::kSeqRmCount, "seq-rm-count"},
     {MistakeId::kStaleRopeDeltas, "stale-rope-deltas"},
     {MistakeId::kStreamPermutation, "stream-permutation"},
     {MistakeId::kTokenIndexResume, "token-index-resume"},
     {MistakeId::kWrongMap, "wrong-map"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::MropeDecode;
using reference::MropeIndexRule;
using reference::MropeMap;
using reference::MropeMapRule;
using reference::MropeSpan;
using reference::MropeSpanKind;
using reference::MropeTemporal;
using reference::MropeTextResume;
using reference::RopeParams;

// ---- the model ------------------------------------------------------------------------------

/// What a VL config says about the decoder's rotation and positions.
struct MropeModel {
  std::string id, hf_model, source, note, model_type, name_or_path;
  RopeParams p;  // half-split pairs (GLM-4.1V: interleaved, half the head), attention factor 1
  int n_heads = 0, n_kv_heads = 0;
  bool video_spans = true;  // GLM-4.1V: videos are not modelled (layouts of images and text)
  std::vector<int> sections;
  MropeMapRule map = MropeMapRule::kSectioned;
  MropeIndexRule index;
  std::int64_t image_token = 151655, video_token = 151656, vision_start = 151652,
               vision_end = 151653;
  // GLM-4.1V's video_start / video_end: not in any case's input_ids, but HF's get_rope_index
  // switches to video on video_start, so they must differ from the ids that are (-1: not GLM).
  std::int64_t glm_video_start = -1, glm_video_end = -1;
  Json config;
  std::vector<std::string> notes;
};

/// What a convention (case) or a mistake (engine) changes.
struct MropeKnobs {
  bool wrong_map = false;  // sectioned <-> interleaved
  bool permuted = false;   // streams fed as (w, h, t)
  MropeTextResume resume = MropeTextResume::kMaxPlusOne;
  std::optional<MropeTemporal> temporal;  // a video's time rule other than the model's
  MropeDecode decode = MropeDecode::kRopeDeltas;
  bool ggml_imrope = false;  // llama.cpp's IMROPE map: a fourth stream, 0 for every token here
  bool swap_pairs = false;   // the other pair layout: half-split (rotate_half) <-> interleaved
};

/// The rotation `k` applies: the model's, or its pairs in the other layout (an engine rotating
/// GLM-4.1V's adjacent channels (2i, 2i + 1) with Qwen2-VL's rotate_half, or the reverse).
RopeParams knob_params(RopeParams p, const MropeKnobs& k) {
  if (k.swap_pairs) {
    p.layout = p.layout == reference::RopeLayout::kInterleaved
                   ? reference::RopeLayout::kHalfSplit
                   : reference::RopeLayout::kInterleaved;
  }
  return p;
}

/// The interleaved rule of HF's apply_interleaved_mrope, slices clipped to the pairs (the
/// reference refuses sections too large for it; an engine applying it to a sectioned model's
/// [16, 24, 24] clips).
MropeMap interleaved_clipped(const std::vector<int>& s, int n) {
  MropeMap m{MropeMapRule::kInterleaved, 3, {}};
  for (int i = 0; i < n; ++i) {
    int st = 0;
    if (i % 3 == 1 && i < 3 * s[1]) st = 1;
    if (i % 3 == 2 && i < 3 * s[2]) st = 2;
    m.pairs.push_back({st, i, 2 * n});
  }
  return m;
}

MropeMap model_map(const MropeModel& m, const MropeKnobs& k) {
  const int n = m.p.rotary_dim / 2;
  if (k.ggml_imrope) return reference::mrope_map_ggml_imrope(m.sections, n);
  const bool sectioned = (m.map == MropeMapRule::kSectioned) != k.wrong_map;
  return sectioned ? reference::mrope_map_sectioned(m.sections, n)
                   : interleaved_clipped(m.sections, n);
}

/// Positions [3, T] extended to the map's streams: llama.cpp fills a fourth stream with 0 for
/// text and image tokens (what the ggml_imrope map reads past HF's ranges).
std::vector<std::int64_t> map_streams(const std::vector<std::int64_t>& pos, std::int64_t T,
                                      const MropeMap& map) {
  std::vector<std::int64_t> v = pos;
  if (static_cast<std::int64_t>(v.size()) < map.n_streams * T) {
    v.resize(static_cast<std::size_t>(map.n_streams * T), 0);
  }
  return v;
}

/// Positions [3, T] of the prompt `layout` and n_decode decode tokens after it.
std::vector<std::int64_t> mrope_positions(const std::vector<MropeSpan>& layout, MropeIndexRule r,
                                          std::int64_t n_decode, const MropeKnobs& k,
                                          std::int64_t* n_tokens) {
  r.text_resume = k.resume;
  if (k.temporal) r.temporal = *k.temporal;
  const auto P = reference::mrope_get_rope_index(layout, r);
  const std::int64_t T = P.n_tokens + n_decode;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * T));
  for (int s = 0; s < 3; ++s) {
    for (std::int64_t j = 0; j < P.n_tokens; ++j) pos[s * T + j] = P.at(s, j);
  }
  if (n_decode > 0) {
    const auto d =
        reference::mrope_decode_positions(P.rope_delta, P.n_tokens, n_decode, 3, k.decode);
    for (int s = 0; s < 3; ++s) {
      for (std::int64_t q = 0; q < n_decode; ++q) pos[s * T + P.n_tokens + q] = d[s * n_decode + q];
    }
  }
  if (k.permuted) {
    for (std::int64_t j = 0; j < T; ++j) std::swap(pos[j], pos[2 * T + j]);
  }
  *n_tokens = T;
  return pos;
}

// ---- the case ---------------------------------------------------------------------------------

struct MropeCaseDef {
  MropeModel model;
  std::string id, short_id, layout_name, what;
  std::vector<MropeSpan> layout;
  std::int64_t n_decode = 0;
  DType dtype = DType::kF32;
  std::uint64_t seed = 0;
  int n_q_heads = 2, n_kv_heads = 1;
  MropeKnobs expected;  // the convention the expected values follow
  std::string result = "valid", convention, reason,
              mistake;  // mistake: the engine's that reproduces it
  bool vision = false;  // a vision-tower case: layout = one image span, 2D axial RoPE
};

// ---- the vision tower (2D axial RoPE over an image's patches) -------------------------------

/// Qwen2-VL's vision tower: head_dim 80 (embed_dim 1280 / 16 heads), every channel rotated,
/// base 10000; VisionRotaryEmbedding(head_dim / 2) gives each of h and w 20 pairs with
/// frequencies 10000^(-2j/40), concatenated [h, w] and rotated by rotate_half.
RopeParams vision_params() {
  RopeParams p;
  p.head_dim = p.rotary_dim = 80;
  p.base = 10000.0;
  p.layout = reference::RopeLayout::kHalfSplit;
  return p;
}

/// The axial map of the tower, or (wrong) Pixtral's strided one: h the even, w the odd
/// frequencies of the plain table.
MropeMap vision_map(const RopeParams& p, bool wrong) {
  const int n = p.rotary_dim / 2;
  return wrong ? reference::mrope_map_axial_strided(2, n)
               : reference::mrope_map_axial({n / 2, n / 2}, n);
}

/// The patches' (h, w) positions; permuted: fed as (w, h).
std::vector<std::int64_t> vision_positions(const MropeSpan& grid, int merge, bool permuted,
                                           std::int64_t* n_tokens) {
  auto pos = reference::mrope_vision_positions(grid.grid_t, grid.grid_h, grid.grid_w, merge);
  const std::int64_t T = static_cast<std::int64_t>(pos.size() / 2);
  if (permuted) std::swap_ranges(pos.begin(), pos.begin() + T, pos.begin() + T);
  *n_tokens = T;
  return pos;
}

double input_value(DType t, std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 255)), -8);
  if (t == DType::kF16)
    return std::ldexp(static_cast<double>(prng_int(seed, stream, i, 2047)), -11);
  return std::ldexp(static_cast<double>(prng_int(seed, stream, i, (1 << 24) - 1)), -24);
}

/// input_ids of a layout (HF's: vision_start ends the text before a visual span, vision_end
/// starts the text after it, the image / video token id over the span) and the decode tokens.
std::vector<std::int64_t> input_ids(const MropeModel& m, const std::vector<MropeSpan>& layout,
                                    std::int64_t n_decode) {
  std::vector<std::int64_t> ids;
  const int merge = m.index.spatial_merge_size;
  for (std::size_t k = 0; k < layout.size(); ++k) {
    const MropeSpan& s = layout[k];
    const std::int64_t n = reference::mrope_span_tokens(s, merge);
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t id = 1000 + static_cast<std::int64_t>(ids.size()) % 1000;  // filler text
      if (s.kind == MropeSpanKind::kImage) id = m.image_token;
      if (s.kind == MropeSpanKind::kVideo) id = m.video_token;
      if (s.kind == MropeSpanKind::kText && j == n - 1 && k + 1 < layout.size() &&
          layout[k + 1].kind != MropeSpanKind::kText) {
        id = m.vision_start;
      } else if (s.kind == MropeSpanKind::kText && j == 0 && k > 0 &&
                 layout[k - 1].kind != MropeSpanKind::kText) {
        id = m.vision_end;
      }
      ids.push_back(id);
    }
  }
  for (std::int64_t q = 0; q < n_decode; ++q) ids.push_back(2000 + q);
  return ids;
}

/// HF 5.x's mm_token_type_ids of input_ids: 1 at the image token, 2 at the video token, 0
/// elsewhere (text, vision_start / vision_end, decode tokens).
std::vector<std::int64_t> mm_token_type_ids(const MropeModel& m,
                                            const std::vector<std::int64_t>& ids) {
  std::vector<std::int64_t> v(ids.size(), 0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    v[i] = ids[i] == m.image_token ? 1 : ids[i] == m.video_token ? 2 : 0;
  }
  return v;
}

Json layout_json(const std::vector<MropeSpan>& layout) {
  Json a = Json::array();
  for (const MropeSpan& s : layout) {
    if (s.kind == MropeSpanKind::kText) {
      a.push_back({{"type", "text"}, {"tokens", s.n_text}});
      continue;
    }
    Json j = {{"type", s.kind == MropeSpanKind::kImage ? "image" : "video"},
              {"grid_thw", {s.grid_t, s.grid_h, s.grid_w}}};
    if (s.kind == MropeSpanKind::kVideo) j["second_per_grid"] = s.second_per_grid;
    a.push_back(j);
  }
  return a;
}

template <class Real>
struct MropeOracle {
  std::vector<Real> cos, sin, q_rot, k_rot, scores;
};

/// cos, sin, the rotations and the scores, pair i at the angle of stream s(i) (the operations
/// of reference::mrope_apply, with the table values computed once per token).
template <class Real>
MropeOracle<Real> mrope_oracle(const RopeParams& p, const MropeMap& map,
                               const std::vector<std::int64_t>& pos, std::int64_t T, int hq, int hk,
                               const std::vector<double>& q, const std::vector<double>& k) {
  using std::cos;
  using std::sin;
  MropeOracle<Real> o;
  const auto tables = reference::mrope_tables<Real>(p, map);
  const int h = p.head_dim, np = p.rotary_dim / 2;
  for (std::int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < np; ++i) {
      const Real phi = reference::rope_angle(tables, pos[map.pairs[i].stream * T + t], i);
      o.cos.push_back(tables.attention_factor * cos(phi));
      o.sin.push_back(tables.attention_factor * sin(phi));
    }
  }
  rope_rotate_heads(p, o.cos, o.sin, static_cast<std::size_t>(T), q, hq, &o.q_rot);
  rope_rotate_heads(p, o.cos, o.sin, static_cast<std::size_t>(T), k, hk, &o.k_rot);
  const int group = hq / hk;
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        Real sum = 0;
        bool same = true;
        for (int st = 0; st < map.n_streams; ++st)
          same = same && pos[st * T + i] == pos[st * T + j];
        if (same && tables.attention_factor == Real(1)) {
          // Both rotated by the same angles: the score is q . k, exactly (the inputs are dyadic),
          // so a value on a rounding tie of the target dtype rounds the same in mp50 and mp100.
          for (int c = 0; c < h; ++c)
            sum += Real(q[(i * hq + hh) * h + c]) * Real(k[(j * hk + hh / group) * h + c]);
        } else {
          for (int c = 0; c < h; ++c)
            sum += o.q_rot[(i * hq + hh) * h + c] * o.k_rot[(j * hk + hh / group) * h + c];
        }
        o.scores.push_back(sum);
      }
    }
  }
  return o;
}

/// The plain RoPE whose table holds pair q's frequency base^(-2 k / D) at its pair k: p itself
/// when D is p's rotary_dim (sectioned, interleaved, Pixtral), else a RoPE of D channels (an
/// axial block: Qwen2-VL's vision tower).
RopeParams freq_params(const RopeParams& p, const reference::MropePair& q) {
  if (q.freq_dim == p.rotary_dim) return p;
  RopeParams r = p;
  r.head_dim = r.rotary_dim = q.freq_dim;
  return r;
}

/// Per profile whose tables apply: the angle error bound of every (token, pair), RoPE's at the
/// position the pair's stream gives (mutant gold_mrope_angle_term_dropped: 0).
std::map<std::string, std::vector<double>> angle_errors(
    const RopeParams& p, const MropeMap& map, const std::vector<std::int64_t>& pos, std::int64_t T,
    const std::map<std::string, RopeStageBudgets>& sb) {
  std::set<std::int64_t> distinct(pos.begin(), pos.end());
  for (std::int64_t t = 0; t < T; ++t) distinct.insert(t);
  const std::vector<std::int64_t> list(distinct.begin(), distinct.end());
  std::map<std::int64_t, std::size_t> row;
  for (std::size_t r = 0; r < list.size(); ++r) row[list[r]] = r;
  const int np = p.rotary_dim / 2;
  std::map<std::string, std::vector<double>> out;
  for (const auto& [prof, b] : sb) {
    if (prof == "strict" || !b.table.applies) continue;
    std::map<int, std::vector<double>> e;  // freq_dim -> [positions, freq_dim / 2]
    for (const auto& q : map.pairs) {
      if (!e.count(q.freq_dim)) {
        e[q.freq_dim] =
            rope_pipeline_angle_errors(prof, freq_params(p, q), reference::RopeScaling{}, list)
                .angle;
      }
    }
    std::vector<double>& x = out[prof];
    for (std::int64_t t = 0; t < T; ++t) {
      for (int i = 0; i < np; ++i) {
        const reference::MropePair& q = map.pairs[i];
        const std::int64_t m = pos[q.stream * T + t];
        x.push_back(POSENC_MUTANT("gold_mrope_angle_term_dropped")
                        ? 0.0
                        : e.at(q.freq_dim)[row.at(m) * (q.freq_dim / 2) + q.freq_index]);
      }
    }
  }
  return out;
}

/// Condition scales of a rotated tensor: per element a (|x_a| + |x_b|) of its pair (0 in the
/// tail), and per (token, head, pair) the same sum.
void pair_scales(const RopeParams& p, const std::vector<double>& x, std::int64_t T, int heads,
                 std::vector<double>* cond, std::vector<double>* pair_sum) {
  const int h = p.head_dim, np = p.rotary_dim / 2;
  cond->assign(x.size(), 0.0);
  pair_sum->assign(static_cast<std::size_t>(T * heads * np), 0.0);
  for (std::int64_t r = 0; r < T * heads; ++r) {
    for (int i = 0; i < np; ++i) {
      const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
      const double c = std::fabs(x[r * h + ca]) + std::fabs(x[r * h + cb]);
      (*cond)[r * h + ca] = (*cond)[r * h + cb] = c;
      (*pair_sum)[r * np + i] = c;
    }
  }
}

std::string map_words(const MropeModel& m, bool wrong) {
  const bool sectioned = (m.map == MropeMapRule::kSectioned) != wrong;
  return std::string(sectioned ? "sectioned" : "interleaved") + " mrope_section [" +
         std::to_string(m.sections[0]) + ", " + std::to_string(m.sections[1]) + ", " +
         std::to_string(m.sections[2]) + "]";
}

Json index_json(const MropeIndexRule& r) {
  Json j = {{"spatial_merge_size", r.spatial_merge_size},
            {"temporal", reference::mrope_temporal_name(r.temporal)}};
  if (r.temporal != MropeTemporal::kFrameIndex) j["tokens_per_second"] = r.tokens_per_second;
  return j;
}

/// The manifest's description, preset, conventions and params.
void describe(Json& m, const MropeCaseDef& d, std::int64_t T) {
  const MropeModel& mm = d.model;
  const bool interleaved_pairs = mm.p.layout == reference::RopeLayout::kInterleaved;
  std::string rot = ", head_dim " + std::to_string(mm.p.head_dim);
  if (mm.p.rotary_dim != mm.p.head_dim) rot += ", rotary_dim " + std::to_string(mm.p.rotary_dim);
  if (interleaved_pairs) rot += ", interleaved pairs";
  std::string desc = "M-RoPE, " + mm.id + " (" + map_words(mm, false) + rot + ", base " +
                     rope_base_tag(mm.p.base) + "), " + d.what + ", " + std::to_string(T) +
                     " tokens, target " + std::string(dtype_short(d.dtype));
  if (!d.convention.empty()) desc += "; convention " + d.convention + " (" + d.result + ")";
  m["description"] = desc;
  m["citation"] =
      "P. Wang et al., Qwen2-VL, arXiv:2409.12191v2, Sec. 2.1; S. Bai et al., Qwen2.5-VL "
      "Technical Report, arXiv:2502.13923v1, Sec. 2.1.2; HF transformers get_rope_index, "
      "apply_multimodal_rotary_pos_emb, apply_interleaved_mrope" +
      std::string(mm.model_type == "glm4v" ? "; HF transformers glm4v get_rope_index, "
                                             "apply_multimodal_rotary_pos_emb (GLM-4.1V)"
                                           : "");
  m["preset"] = {
      {"name", mm.id}, {"hf_model", mm.hf_model}, {"source", mm.source}, {"config", mm.config}};
  if (!mm.notes.empty()) m["preset"]["reader_notes"] = mm.notes;
  m["conventions"] = {
      {"pairing",
       interleaved_pairs
           ? "interleaved: pair i = channels (2i, 2i + 1) (GLM-4.1V: the sectioned cos, sin "
             "halved and repeat_interleave'd, rotate_half_llm); channels [rotary_dim, head_dim) "
             "pass unrotated"
           : "half_split: pair i = channels (i, i + rotary_dim/2) (rotate_half)"},
      {"map",
       mm.map == MropeMapRule::kSectioned
           ? "sectioned: pairs [0, s_t) read stream t, [s_t, s_t + s_h) h, the rest w"
           : "interleaved: pair i reads h if i mod 3 = 1 and i < 3 s_h, w if i mod 3 = 2 and "
             "i < 3 s_w, t otherwise"},
      {"angle", "phi[t][i] = positions[s(i)][t] * base^(-2i/rotary_dim), exact"},
      {"positions",
       "get_rope_index: text at max(previous) + 1 on every stream; a visual token (frame f, "
       "row y, column x) of a grid (T, H, W) merged by spatial_merge_size m at (st + tau(f), "
       "st + y, st + x); decode tokens at cache position + rope_delta"},
      {"layout",
       "q, k, q_rot, k_rot are [tokens, heads, head_dim]; positions [3 (t, h, w), tokens] "
       "(HF's position_ids [3, batch, tokens], one row); cos, sin [tokens, rotary_dim/2] (HF's "
       "[tokens, rotary_dim] tables after the section selection, each column twice); scores "
       "[q_heads, query token, key token]"},
      {"scores",
       "unscaled dot products q_rot . k_rot over all head_dim channels; kv head = q head / "
       "(q_heads / kv_heads)"}};
  std::int64_t n_prompt = T - d.n_decode;
  m["params"] = {{"head_dim", mm.p.head_dim},
                 {"rotary_dim", mm.p.rotary_dim},
                 {"base", mm.p.base},
                 {"layout", reference::rope_layout_name(mm.p.layout)},
                 {"attention_factor", 1.0},
                 {"map",
                  {{"rule", mm.map == MropeMapRule::kSectioned ? "sectioned" : "interleaved"},
                   {"mrope_section", mm.sections}}},
                 {"index", index_json(mm.index)},
                 {"prompt", {{"spans", layout_json(d.layout)}}},
                 {"n_prompt", n_prompt},
                 {"n_decode", d.n_decode},
                 {"n_tokens", T},
                 {"n_q_heads", d.n_q_heads},
                 {"n_kv_heads", d.n_kv_heads},
                 {"dtype", std::string(dtype_short(d.dtype))}};
  if (!d.convention.empty()) {
    m["negative_control"] = {
        {"convention", d.convention}, {"reason", d.reason}, {"mistake", d.mistake}};
  }
}

/// The manifest's description, preset, conventions and params of a vision-tower case.
void describe_vision(Json& m, const MropeCaseDef& d, std::int64_t T) {
  const MropeModel& mm = d.model;
  const MropeSpan& g = d.layout.at(0);
  const int np = mm.p.rotary_dim / 2, merge = mm.index.spatial_merge_size;
  std::string desc = "2D axial RoPE of the " + mm.id + " vision tower (head_dim 80, " +
                     std::to_string(np / 2) + " pairs per axis, base 1e4), " + d.what + ", " +
                     std::to_string(T) + " patches, target " + std::string(dtype_short(d.dtype));
  if (!d.convention.empty()) desc += "; convention " + d.convention + " (" + d.result + ")";
  m["description"] = desc;
  m["citation"] =
      "P. Wang et al., Qwen2-VL, arXiv:2409.12191v2, Sec. 2.1 (2D RoPE in the ViT); HF "
      "transformers qwen2_vl VisionRotaryEmbedding, VisionTransformer.rot_pos_emb, "
      "apply_rotary_pos_emb_vision";
  m["preset"] = {
      {"name", mm.id}, {"hf_model", mm.hf_model}, {"source", mm.source}, {"config", mm.config}};
  m["conventions"] = {
      {"pairing", "half_split over the whole head: pair i = channels (i, i + head_dim/2)"},
      {"map",
       "axial: pairs [0, n/2) read stream h with frequencies base^(-2j/n), pairs [n/2, n) "
       "stream w with the same frequencies (n = head_dim/2 pairs: VisionRotaryEmbedding"
       "(head_dim/2) per axis, concatenated [h, w])"},
      {"positions",
       "patch (row y, column x) at (y, x); the patches in the tower's order: frames, "
       "then spatial_merge_size x spatial_merge_size windows row by row, each window "
       "row by row (rot_pos_emb)"},
      {"layout",
       "q, k, q_rot, k_rot are [patches, heads, head_dim]; positions [2 (h, w), patches]; "
       "cos, sin [patches, head_dim/2] (each column once)"},
      {"scores", "unscaled dot products q_rot . k_rot over all head_dim channels, head by head"}};
  m["params"] = {
      {"head_dim", mm.p.head_dim},
      {"rotary_dim", mm.p.rotary_dim},
      {"base", mm.p.base},
      {"layout", "half_split"},
      {"attention_factor", 1.0},
      {"map", {{"rule", "axial"}, {"axis_pairs", {np / 2, np / 2}}}},
      {"grid", {{"grid_thw", {g.grid_t, g.grid_h, g.grid_w}}, {"spatial_merge_size", merge}}},
      {"n_tokens", T},
      {"n_q_heads", d.n_q_heads},
      {"n_kv_heads", d.n_kv_heads},
      {"dtype", std::string(dtype_short(d.dtype))}};
  if (!d.convention.empty()) {
    m["negative_control"] = {
        {"convention", d.convention}, {"reason", d.reason}, {"mistake", d.mistake}};
  }
}

/// The expected tensors of one case (positions, cos, sin, q_rot, k_rot, scores) and their budgets.
struct MropeGen {
  const MropeCaseDef& d;
  const RopeParams p = knob_params(d.model.p, d.expected);  // the rotation the values follow
  const int h = p.head_dim, np = p.rotary_dim / 2, hq = d.n_q_heads, hk = d.n_kv_heads;
  const DType t = d.dtype;
  std::int64_t T = 0;
  std::vector<std::int64_t> pos;
  MropeMap map;
  std::vector<double> q, k;
  std::map<std::string, RopeStageBudgets> sb;
  std::map<std::string, std::vector<double>> E;     // profile -> [T, np] angle error bound
  std::vector<std::string> labels = {"input_ids"};  // the token axis' label tensor (none: vision)

  ExpectedTensor table(const std::string& name, const std::vector<mp50>& v) {
    ExpectedTensor e = expected_tensor(name, "table", t, {T, np}, CheckKind::kConditioned,
                                       {{"token", "", {}, labels}, {"pair", "", {}, {}}});
    e.values = v;
    e.cond.assign(v.size(), 1.0);
    for (const auto& [prof, b] : sb) e.spec.check.profiles[prof] = b.table;
    for (const auto& [prof, x] : E) e.extra[prof] = x;
    return e;
  }

  ExpectedTensor rotated(const std::string& name, const std::vector<mp50>& v,
                         const std::vector<double>& x, int heads) {
    std::vector<int> channel_pairs(static_cast<std::size_t>(h));
    for (int c = 0; c < h; ++c) channel_pairs[c] = reference::rope_pair_of_channel(p, c);
    ExpectedTensor e = expected_tensor(
        name, "rotated", t, {T, heads, h}, CheckKind::kConditioned,
        {{"token", "", {}, labels}, {"head", "", {}, {}}, {"channel", "", channel_pairs, {}}});
    e.values = v;
    std::vector<double> pair_sum;
    pair_scales(p, x, T, heads, &e.cond, &pair_sum);
    for (const auto& [prof, b] : sb) e.spec.check.profiles[prof] = b.rotated;
    for (const auto& [prof, ang] : E) {
      std::vector<double> ex(v.size(), 0.0);
      for (std::int64_t r = 0; r < T * heads; ++r) {
        for (int c = 0; c < p.rotary_dim; ++c)
          ex[r * h + c] = e.cond[r * h + c] * ang[(r / heads) * np + channel_pairs[c]];
      }
      e.extra[prof] = ex;
    }
    return e;
  }

  ExpectedTensor scores(const std::vector<mp50>& v) {
    ExpectedTensor e =
        expected_tensor("scores", "scores", t, {hq, T, T}, CheckKind::kConditioned,
                        {{"head", "", {}, {}}, {"query", "", {}, labels}, {"key", "", {}, labels}});
    e.values = v;
    std::vector<double> qc, qs, kc, ks;
    pair_scales(p, q, T, hq, &qc, &qs);
    pair_scales(p, k, T, hk, &kc, &ks);
    const int group = hq / hk;
    for (const auto& [prof, b] : sb) e.spec.check.profiles[prof] = b.scores;
    for (const auto& [prof, ang] : E) e.extra[prof].assign(v.size(), 0.0);
    e.cond.assign(v.size(), 0.0);
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < T; ++i) {
        for (std::int64_t j = 0; j < T; ++j) {
          const std::size_t flat = static_cast<std::size_t>((hh * T + i) * T + j);
          const std::int64_t qr = i * hq + hh, kr = j * hk + hh / group;
          double c = 0;
          for (int pi = 0; pi < np; ++pi) {
            const double w = qs[qr * np + pi] * ks[kr * np + pi];
            c += w;
            for (auto& [prof, ang] : E)
              e.extra[prof][flat] += w * (ang[i * np + pi] + ang[j * np + pi]);
          }
          for (int ch = p.rotary_dim; ch < h; ++ch) c += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
          e.cond[flat] = c;
        }
      }
    }
    return e;
  }
};

/// The oracle of positions pos [S, T] (mp50, cross-checked against mp100).
MropeOracle<mp50> checked_oracle(const MropeCaseDef& d, const MropeGen& g,
                                 const std::vector<std::int64_t>& rot, const std::string& what) {
  auto o50 = mrope_oracle<mp50>(g.p, g.map, rot, g.T, g.hq, g.hk, g.q, g.k);
  const auto o100 = mrope_oracle<mp100>(g.p, g.map, rot, g.T, g.hq, g.hk, g.q, g.k);
  for (const auto& [name, a, b] :
       {std::tuple{"cos", &o50.cos, &o100.cos}, std::tuple{"sin", &o50.sin, &o100.sin},
        std::tuple{"q_rot", &o50.q_rot, &o100.q_rot}, std::tuple{"k_rot", &o50.k_rot, &o100.k_rot},
        std::tuple{"scores", &o50.scores, &o100.scores}}) {
    cross_check(d.id + what, name, d.dtype, *a, *b);
  }
  return o50;
}

/// A declared alternative of a valid case: the positions another HF release's get_rope_index
/// gives (docs/schemes/mrope.md, "Conventions") and the oracle at them.
struct MropeAlternative {
  std::string name, description;
  std::vector<std::int64_t> pos;  // [3, T]
  MropeOracle<mp50> o;
};

/// The release conventions that change a valid decoder case's positions: HF 5.x's resume at
/// st + max(h, w) after a visual span and, on Qwen2.5-VL's scaled time, HF 4.52-5.15's integer
/// second_per_grid, alone and with the 5.x resume. One that gives the positions of an earlier
/// one is not listed again (that one's description says so).
std::vector<MropeAlternative> release_alternatives(const MropeCaseDef& d, const MropeGen& g) {
  std::vector<MropeAlternative> out;
  if (d.vision || d.result != "valid" || POSENC_MUTANT("gold_mrope_release_alternatives_dropped"))
    return out;
  struct Def {
    const char* name;
    const char* what;
    bool max_hw, int_seconds;
  };
  static const Def defs[] = {
      {"hf5_resume_max_hw",
       "HF transformers 5.x get_rope_index (PR #43972, reported from 5.3.0): text after a visual "
       "span resumes at its start + max(h, w) / spatial_merge_size, a video's temporal extent "
       "ignored (rope_delta still from the overall max); the model was trained with max + 1 "
       "(HF <= 4.57 and Qwen's own code)",
       true, false},
      {"hf_int_seconds",
       "HF transformers 4.52 through 5.15 (Qwen2.5-VL): second_per_grid truncated to an integer "
       "before the temporal product; the model was trained with trunc(f * second_per_grid * "
       "tokens_per_second) in float32 (HF 4.49-4.51, again after PR #48669)",
       false, true},
      {"hf5_int_seconds_resume_max_hw",
       "HF transformers 5.x before PR #48669 (Qwen2.5-VL): second_per_grid truncated to an "
       "integer and text after a visual span at its start + max(h, w) / spatial_merge_size",
       true, true},
  };
  for (const Def& def : defs) {
    if (def.int_seconds && d.model.index.temporal != MropeTemporal::kScaledFloat32) continue;
    MropeKnobs k = d.expected;
    if (def.max_hw) k.resume = MropeTextResume::kMaxHw;
    if (def.int_seconds) k.temporal = MropeTemporal::kScaledIntSeconds;
    std::int64_t T = 0;
    const auto pos = mrope_positions(d.layout, d.model.index, d.n_decode, k, &T);
    if (pos == g.pos) continue;
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const MropeAlternative& a) { return a.pos == pos; });
    if (same != out.end()) {
      same->description += std::string("; on this case also what ") + def.name + " gives";
      continue;
    }
    out.push_back({def.name, def.what, pos,
                   checked_oracle(d, g, map_streams(pos, T, g.map),
                                  std::string(" (alternative ") + def.name + ")")});
  }
  return out;
}

/// Declares each alternative on an expected tensor: its exact values (`of` picks them from the
/// alternative's oracle) with the tensor's own condition scale.
void add_alternatives(ExpectedTensor& e, const std::vector<MropeAlternative>& alts,
                      const std::vector<mp50>& (*of)(const MropeOracle<mp50>&)) {
  for (const auto& a : alts)
    e.alternatives.push_back({a.name, a.description, to_f64(of(a.o)), e.cond});
}

GoldenCase mrope_case_generate(const MropeCaseDef& d) {
  MropeGen g{d};
  if (d.vision) {
    g.map = vision_map(g.p, d.expected.wrong_map);
    g.pos = vision_positions(d.layout.at(0), d.model.index.spatial_merge_size, d.expected.permuted,
                             &g.T);
    g.labels.clear();
  } else {
    g.map = model_map(d.model, d.expected);
    g.pos = mrope_positions(d.layout, d.model.index, d.n_decode, d.expected, &g.T);
  }
  const std::int64_t S = d.vision ? 2 : 3;
  const std::int64_t T = g.T;
  g.q.resize(static_cast<std::size_t>(T * g.hq * g.h));
  g.k.resize(static_cast<std::size_t>(T * g.hk * g.h));
  for (std::size_t i = 0; i < g.q.size(); ++i) g.q[i] = input_value(d.dtype, d.seed, 1, i);
  for (std::size_t i = 0; i < g.k.size(); ++i) g.k[i] = input_value(d.dtype, d.seed, 2, i);
  const std::vector<std::int64_t> rot = map_streams(g.pos, T, g.map);
  const auto o50 = checked_oracle(d, g, rot, "");
  for (const auto& prof : profiles())
    g.sb[prof.name] = rope_stage_budgets(prof.name, d.dtype, 0.0, g.h);
  g.E = angle_errors(g.p, g.map, rot, T, g.sb);
  const std::vector<MropeAlternative> alts = release_alternatives(d, g);
  for (const auto& a : alts) {  // a pipeline following an alternative has its angles' errors
    for (const auto& [prof, x] : angle_errors(g.p, g.map, map_streams(a.pos, T, g.map), T, g.sb)) {
      auto& e = g.E.at(prof);
      for (std::size_t i = 0; i < e.size(); ++i) e[i] = std::max(e[i], x[i]);
    }
  }

  std::vector<Tensor> tensors;
  std::vector<TensorSpec> inputs, expected;
  if (!d.vision) {
    const auto ids = input_ids(d.model, d.layout, d.n_decode);
    tensors.push_back(tensor_from_i64("input_ids", {T}, ids));
    tensors.push_back(tensor_from_i64("mm_token_type_ids", {T}, mm_token_type_ids(d.model, ids)));
  }
  std::vector<std::int64_t> img, vid;
  for (const MropeSpan& s : d.layout) {
    if (s.kind == MropeSpanKind::kText) continue;
    auto& v = s.kind == MropeSpanKind::kImage ? img : vid;
    v.insert(v.end(), {s.grid_t, s.grid_h, s.grid_w});
  }
  if (!img.empty())
    tensors.push_back(
        tensor_from_i64("image_grid_thw", {static_cast<std::int64_t>(img.size() / 3), 3}, img));
  if (!vid.empty())
    tensors.push_back(
        tensor_from_i64("video_grid_thw", {static_cast<std::int64_t>(vid.size() / 3), 3}, vid));
  tensors.push_back(input_tensor("q", d.dtype, {T, g.hq, g.h}, g.q));
  tensors.push_back(input_tensor("k", d.dtype, {T, g.hk, g.h}, g.k));
  for (const auto& x : tensors) inputs.push_back(input_spec(x));

  const Tensor pos_tensor = tensor_from_i64("positions", {S, T}, g.pos);
  ExpectedTensor ep = expected_tensor("positions", "index", DType::kI64, {S, T}, CheckKind::kExact,
                                      {{"stream", "", {}, {}}, {"token", "", {}, g.labels}});
  ep.spec.check.profiles = exact_budgets(d.dtype);
  ep.exact_tensor = &pos_tensor;
  for (const auto& a : alts) {
    ep.alternatives.push_back(
        {a.name, a.description, std::vector<double>(a.pos.begin(), a.pos.end()), {}});
  }
  expected.push_back(add_expected(&tensors, std::move(ep)));
  using O = MropeOracle<mp50>;
  std::vector<ExpectedTensor> es;
  es.push_back(g.table("cos", o50.cos));
  add_alternatives(es.back(), alts, [](const O& o) -> const std::vector<mp50>& { return o.cos; });
  es.push_back(g.table("sin", o50.sin));
  add_alternatives(es.back(), alts, [](const O& o) -> const std::vector<mp50>& { return o.sin; });
  es.push_back(g.rotated("q_rot", o50.q_rot, g.q, g.hq));
  add_alternatives(es.back(), alts, [](const O& o) -> const std::vector<mp50>& { return o.q_rot; });
  es.push_back(g.rotated("k_rot", o50.k_rot, g.k, g.hk));
  add_alternatives(es.back(), alts, [](const O& o) -> const std::vector<mp50>& { return o.k_rot; });
  es.push_back(g.scores(o50.scores));
  add_alternatives(es.back(), alts,
                   [](const O& o) -> const std::vector<mp50>& { return o.scores; });
  for (auto& e : es) expected.push_back(add_expected(&tensors, std::move(e)));

  Json m = manifest_header(
      d.id, "mrope",
      d.vision ? "vision" : (d.model.map == MropeMapRule::kSectioned ? "sectioned" : "interleaved"),
      d.result, 1);
  if (d.vision) {
    describe_vision(m, d, T);
  } else {
    describe(m, d, T);
  }
  m["oracle"] = mp_oracle_json();
  m["seed"] = d.seed;
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k; q, k = integer * 2^-24 "
      "(f32), "
      "2^-11 (f16) or 2^-8 (bf16), |integer| < 2^24, 2^11 or 2^8";
  manifest_add_tensors(m, d.id, inputs, expected);
  GoldenCase out;
  out.manifest = std::move(m);
  out.tensors = std::move(tensors);
  return out;
}

// ---- the catalog ------------------------------------------------------------------------------

MropeModel mrope_model_parse(std::string_view text, const std::string& source);

MropeModel preset(const char* file) {
  const auto path = default_presets_dir() / (std::string(file) + ".json");
  return mrope_model_parse(read_json_text(path), path.string());
}

std::string model_short(const MropeModel& m) { return config_name_sanitize(m.id); }

MropeCaseDef case_def(const MropeModel& m, const std::string& sid, const std::string& layout_name,
                      const std::string& what, std::vector<MropeSpan> layout, std::int64_t n_decode,
                      DType t) {
  MropeCaseDef d;
  d.model = m;
  d.short_id = sid;
  d.layout_name = layout_name;
  d.what = what;
  d.layout = std::move(layout);
  d.n_decode = n_decode;
  d.dtype = t;
  d.n_kv_heads = m.n_kv_heads == m.n_heads ? 2 : 1;
  d.id = "mrope_" + sid + "_" + layout_name + "_" + std::string(dtype_short(t));
  d.seed = rope_seed_of(d.id);
  return d;
}

/// A negative control of a valid case: the same inputs (seed), expected values under `k`.
MropeCaseDef control(MropeCaseDef d, const std::string& name, MropeKnobs k,
                     const std::string& mistake, const std::string& reason) {
  d.expected = k;
  d.result = "invalid";
  d.convention = name;
  d.mistake = mistake;
  d.reason = reason;
  d.id = "mrope_" + d.short_id + "_" + d.layout_name + "_" + name + "_invalid_" +
         std::string(dtype_short(d.dtype));
  return d;
}

std::vector<MropeSpan> text_image_text() {
  return {reference::mrope_text(3), reference::mrope_image(1, 4, 6), reference::mrope_text(4)};
}

/// The standard layouts of a model: text-image-text, two images, text-video-text (not for
/// Qwen3-VL, which lists video frames as single-frame spans, nor GLM-4.1V, whose videos are
/// not modelled), decode after an image.
std::vector<MropeCaseDef> standard_defs(const MropeModel& m, const std::string& sid, DType t) {
  using reference::mrope_image;
  using reference::mrope_text;
  std::vector<MropeCaseDef> v;
  v.push_back(case_def(m, sid, "text_image_text",
                       "text (3), image grid (1, 4, 6) (2 x 3 tokens), text (4)", text_image_text(),
                       0, t));
  v.push_back(case_def(
      m, sid, "two_images",
      "text (2), image grid (1, 4, 4), text (2), image grid (1, 6, 4), text (3)",
      {mrope_text(2), mrope_image(1, 4, 4), mrope_text(2), mrope_image(1, 6, 4), mrope_text(3)}, 0,
      t));
  if (m.map == MropeMapRule::kSectioned && m.video_spans) {
    v.push_back(case_def(
        m, sid, "text_video_text",
        "text (2), video grid (3, 4, 4) at second_per_grid 1.0 (2 x 2 tokens per frame), text (3)",
        {mrope_text(2), reference::mrope_video(3, 4, 4, 1.0), mrope_text(3)}, 0, t));
  }
  if (m.index.temporal == MropeTemporal::kScaledFloat32 && m.video_spans) {
    // A fractional second_per_grid (4 fps at temporal_patch_size 2): HF 4.52-5.15 truncate it
    // to 0 and put every frame at t = st (the declared alternative hf_int_seconds).
    v.push_back(case_def(
        m, sid, "text_video_half_second_text",
        "text (2), video grid (3, 4, 4) at second_per_grid 0.5 (2 x 2 tokens per frame), text "
        "(3), then 2 decode tokens at cache position + rope_delta",
        {mrope_text(2), reference::mrope_video(3, 4, 4, 0.5), mrope_text(3)}, 2, t));
  }
  v.push_back(case_def(m, sid, "decode_after_image",
                       "text (2), image grid (1, 4, 6), text (2), then 3 decode tokens at cache "
                       "position + rope_delta",
                       {mrope_text(2), mrope_image(1, 4, 6), mrope_text(2)}, 3, t));
  return v;
}

const std::vector<MropeCaseDef>& case_table() {
  static const std::vector<MropeCaseDef> table = [] {
    std::vector<MropeCaseDef> v;
    auto find = [&](const std::string& id) -> const MropeCaseDef& {
      for (const auto& d : v) {
        if (d.id == id) return d;
      }
      throw_invalid("mrope case table", "no case has this id", id);
    };
    for (const char* f : {"qwen2-vl-7b-instruct", "qwen2.5-vl-7b-instruct", "qwen3-vl-8b-instruct",
                          "glm-4.1v-9b-thinking"}) {
      const MropeModel m = preset(f);
      for (auto& d : standard_defs(m, model_short(m), DType::kF32)) v.push_back(std::move(d));
    }
    v.push_back(
        standard_defs(preset("qwen2.5-vl-7b-instruct"), "qwen2_5_vl_7b_instruct", DType::kBF16)
            .front());
    v.push_back(
        standard_defs(preset("qwen3-vl-8b-instruct"), "qwen3_vl_8b_instruct", DType::kF16).front());
    const std::string q2 = "mrope_qwen2_vl_7b_instruct_", q3 = "mrope_qwen3_vl_8b_instruct_";
    MropeKnobs k;
    k.wrong_map = true;
    std::vector<MropeCaseDef> c;
    c.push_back(control(
        find(q3 + "text_image_text_f32"), "sectioned_map", k, "wrong-map",
        "Qwen3-VL rotated with the sectioned map of Qwen2-VL (contiguous [24, 20, 20] blocks) "
        "instead of its interleaved one: an engine reusing the Qwen2-VL rotary code"));
    c.push_back(control(
        find(q2 + "text_image_text_f32"), "interleaved_map", k, "wrong-map",
        "Qwen2-VL rotated with Qwen3-VL's interleaved map (HF's apply_interleaved_mrope slices "
        "clipped to 64 pairs) instead of its sectioned one"));
    k = {};
    k.permuted = true;
    c.push_back(control(
        find(q2 + "text_image_text_f32"), "streams_permuted", k, "stream-permutation",
        "the position streams fed as (w, h, t) instead of (t, h, w): a transposed position_ids"));
    k = {};
    k.decode = MropeDecode::kCachePosition;
    c.push_back(control(
        find(q2 + "decode_after_image_f32"), "cache_position", k, "no-rope-deltas",
        "rope_deltas dropped: decode tokens at their cache slot instead of cache position + "
        "rope_delta (transformers #43952: stale or missing rope_deltas)"));
    k = {};
    k.resume = MropeTextResume::kTokenIndex;
    c.push_back(
        control(find(q2 + "text_image_text_f32"), "token_index", k, "token-index-resume",
                "text after the image resuming at its token index instead of max + 1 (transformers "
                "#40154: Qwen2.5-VL text position ids mis-prepared in generate)"));
    {  // the vision tower of Qwen2-VL: one image of 8 x 12 patches (merge windows of 2 x 2)
      MropeCaseDef vt = case_def(find(q2 + "text_image_text_f32").model, "qwen2_vl_7b_instruct",
                                 "vision_tower", "image grid (1, 8, 12) in 2 x 2 merge windows",
                                 {reference::mrope_image(1, 8, 12)}, 0, DType::kF32);
      vt.vision = true;
      vt.model.p = vision_params();
      vt.n_q_heads = vt.n_kv_heads = 2;
      v.push_back(vt);
      k = {};
      k.wrong_map = true;
      c.push_back(control(vt, "strided_map", k, "wrong-map",
                          "Qwen2-VL's vision tower rotated with Pixtral's strided 2D map (h the "
                          "even, w the odd frequencies of one table) instead of its two axial "
                          "blocks"));
    }
    k = {};
    k.swap_pairs = true;
    c.push_back(control(
        find("mrope_glm_4_1v_9b_thinking_text_image_text_f32"), "half_split_pairs", k,
        "pair-layout",
        "GLM-4.1V rotated with Qwen2-VL's rotate_half pairs (i, i + 32) instead of its adjacent "
        "channels (2i, 2i + 1) (same sectioned [8, 12, 12] angles, same 64 rotated channels): an "
        "engine reusing the Qwen2-VL M-RoPE kernel for GLM"));
    k = {};
    k.ggml_imrope = true;
    c.push_back(control(
        find(q3 + "text_image_text_f32"), "ggml_imrope", k, "ggml-imrope",
        "Qwen3-VL as llama.cpp's IMROPE rotates it (ggml_mrope_cache_init with sections [24, 20, "
        "20, 0]): pairs 61 and 62 read the fourth stream, 0 for text and image tokens, instead of "
        "t; a float32-recurrence engine with this map fails fp32-recurrence"));
    v.insert(v.end(), c.begin(), c.end());
    return v;
  }();
  return table;
}

// ---- the config reader (golden/cases/mrope_case.hpp) ----------------------------------------

const std::set<std::string>& vl_model_types() {
  static const std::set<std::string> t = {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe",
                                          "glm4v"};
  return t;
}

/// Reads keys of one JSON object for error messages that name the file, the key and the value.
struct KeyReader {
  const std::string& src;
  const Json& obj;
  std::string prefix;  // "text_config." etc.

  [[noreturn]] void bad(const std::string& key, const Json& v, const std::string& what) const {
    throw GoldenFileError(src + ": " + prefix + key + " = " + v.dump() + ": " + what);
  }
  const Json* find(const std::string& key) const {
    if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null()) return nullptr;
    return &obj.at(key);
  }
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> dflt,
                       std::vector<std::string>* notes = nullptr) const {
    const Json* v = find(key);
    const std::string range =
        "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!v) {
      if (!dflt) throw GoldenFileError(src + ": " + prefix + key + " is missing (" + range + ")");
      if (notes)
        notes->push_back(prefix + key + " absent: " + std::to_string(*dflt) + " (HF's default)");
      return *dflt;
    }
    if (v->is_number_integer() || v->is_number_unsigned()) {
      if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
        bad(key, *v, range);
      const std::int64_t x = v->get<std::int64_t>();
      if (x < lo || x > hi) bad(key, *v, range);
      return x;
    }
    if (v->is_number_float()) {
      const double x = v->get<double>();
      if (x == std::floor(x) && x >= static_cast<double>(lo) && x <= static_cast<double>(hi)) {
        return static_cast<std::int64_t>(x);
      }
    }
    bad(key, *v, range);
  }
  double number(const std::string& key, double lo, double hi, std::optional<double> dflt,
                std::vector<std::string>* notes = nullptr) const {
    const Json* v = find(key);
    char buf[96];
    std::snprintf(buf, sizeof buf, "must be a number in (%g, %g]", lo, hi);
    if (!v) {
      if (!dflt) throw GoldenFileError(src + ": " + prefix + key + " is missing (" + buf + ")");
      if (notes)
        notes->push_back(prefix + key + " absent: " + Json(*dflt).dump() + " (HF's default)");
      return *dflt;
    }
    if (!v->is_number() || !(v->get<double>() > lo && v->get<double>() <= hi)) bad(key, *v, buf);
    return v->get<double>();
  }
};

/// The token ids input_ids uses (the top level's, or the text block's when the top level has
/// none): Qwen's vision_start / vision_end around every visual span, GLM-4.1V's image_start /
/// image_end around an image; HF's config defaults when absent.
void read_token_ids(const KeyReader& ids, bool glm, MropeModel& m) {
  constexpr std::int64_t kMaxId = (std::int64_t{1} << 31) - 1;
  if (glm) {  // HF's Glm4vConfig defaults
    m.image_token = ids.integer("image_token_id", 0, kMaxId, 151343, &m.notes);
    m.video_token = ids.integer("video_token_id", 0, kMaxId, 151344, &m.notes);
    m.vision_start = ids.integer("image_start_token_id", 0, kMaxId, 151339, &m.notes);
    m.vision_end = ids.integer("image_end_token_id", 0, kMaxId, 151340, &m.notes);
    m.glm_video_start = ids.integer("video_start_token_id", 0, kMaxId, 151341, &m.notes);
    m.glm_video_end = ids.integer("video_end_token_id", 0, kMaxId, 151342, &m.notes);
    return;
  }
  m.image_token = ids.integer("image_token_id", 0, kMaxId, 151655, &m.notes);
  m.video_token = ids.integer("video_token_id", 0, kMaxId, 151656, &m.notes);
  m.vision_start = ids.integer("vision_start_token_id", 0, kMaxId, 151652, &m.notes);
  m.vision_end = ids.integer("vision_end_token_id", 0, kMaxId, 151653, &m.notes);
}

/// The token ids must differ (four; GLM-4.1V's six, with video_start and video_end): input_ids
/// written with two equal ids cannot give the case's positions (get_rope_index finds the spans
/// by them).
void check_token_ids_distinct(const std::string& src, bool glm, const MropeModel& m) {
  std::vector<std::pair<const char*, std::int64_t>> ids = {
      {"image_token_id", m.image_token},
      {"video_token_id", m.video_token},
      {glm ? "image_start_token_id" : "vision_start_token_id", m.vision_start},
      {glm ? "image_end_token_id" : "vision_end_token_id", m.vision_end}};
  if (glm) {
    ids.push_back({"video_start_token_id", m.glm_video_start});
    ids.push_back({"video_end_token_id", m.glm_video_end});
  }
  for (std::size_t a = 0; a < ids.size(); ++a) {
    for (std::size_t b = a + 1; b < ids.size(); ++b) {
      if (ids[a].second == ids[b].second) {
        throw GoldenFileError(src + ": " + ids[a].first + " = " + std::to_string(ids[a].second) +
                              " equals " + ids[b].first +
                              ": the token ids that mark visual spans must differ (input_ids "
                              "with equal ids cannot give the case's positions)");
      }
    }
  }
}

/// vision_config (an object when present): the merge size, and Qwen2.5-VL's tokens_per_second.
void read_vision_config(const Json& j, const std::string& src, MropeModel& m) {
  const Json empty = Json::object();
  if (j.contains("vision_config") && !j.at("vision_config").is_object() && !j.at("vision_config").is_null()) {
    throw GoldenFileError(src + ": vision_config = " + j.at("vision_config").dump().substr(0, 80) +
                          ": must be an object");
  }
  const Json& vj = j.contains("vision_config") && j.at("vision_config").is_object()
                       ? j.at("vision_config")
                       : empty;
  const KeyReader vision{src, vj, "vision_config."};
  m.index.spatial_merge_size =
      static_cast<int>(vision.integer("spatial_merge_size", 1, 64, 2, &m.notes));
  if (m.model_type == "qwen2_5_vl") {
    m.index.temporal = MropeTemporal::kScaledFloat32;
    m.index.tokens_per_second = vision.number("tokens_per_second", 0.0, 1e6, 4.0, &m.notes);
  }
}

MropeModel mrope_model_from_json(const Json& j, const std::string& src) {
  if (!j.is_object()) throw GoldenFileError(src + ": the config must be a JSON object");
  MropeModel m;
  const Json* pj =
      j.contains("_posenc") && j.at("_posenc").is_object() ? &j.at("_posenc") : nullptr;
  m.name_or_path = j.value("_name_or_path", std::string());
  m.id = pj ? pj->value("id", std::string()) : "";
  if (m.id.empty())
    m.id = m.name_or_path.empty() ? std::filesystem::path(src).stem().string() : m.name_or_path;
  m.hf_model = pj ? pj->value("hf_model", m.name_or_path) : m.name_or_path;
  m.source = pj ? pj->value("source", src) : src;
  m.note = pj ? pj->value("note", std::string()) : "";
  m.config = j;
  m.config.erase("_posenc");
  if (!j.contains("model_type") || !j.at("model_type").is_string() ||
      !vl_model_types().count(j.at("model_type").get<std::string>())) {
    throw GoldenFileError(src + ": model_type = " +
                          (j.contains("model_type") ? j.at("model_type").dump() : "absent") +
                          ": the M-RoPE reader knows qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, "
                          "glm4v");
  }
  m.model_type = j.at("model_type").get<std::string>();
  const bool glm = m.model_type == "glm4v";
  const bool has_text = j.contains("text_config") && j.at("text_config").is_object();
  const Json& tj = has_text ? j.at("text_config") : j;
  const KeyReader top{src, j, ""}, text{src, tj, has_text ? "text_config." : ""};
  const int heads = static_cast<int>(text.integer("num_attention_heads", 1, 4096, std::nullopt));
  const int kv = static_cast<int>(text.integer("num_key_value_heads", 1, heads, heads, &m.notes));
  if (heads % kv != 0)
    text.bad("num_key_value_heads", kv, "must divide num_attention_heads " + std::to_string(heads));
  int head_dim = 0;
  if (text.find("head_dim")) {
    head_dim = static_cast<int>(text.integer("head_dim", 2, 1024, std::nullopt));
  } else {
    const std::int64_t hidden = text.integer("hidden_size", 1, 1 << 20, std::nullopt);
    if (hidden % heads != 0)
      text.bad("hidden_size", hidden, "must be a multiple of num_attention_heads");
    head_dim = static_cast<int>(hidden / heads);
  }
  if (head_dim % 2 != 0 || head_dim > 1024)
    text.bad("head_dim", head_dim, "must be even and <= 1024");
  // The rope block: rope_scaling or rope_parameters, in the text block (or at the top level).
  const char* block_key = nullptr;
  const Json* rb = nullptr;
  for (const Json* o : {&tj, &j}) {
    for (const char* k : {"rope_parameters", "rope_scaling"}) {
      if (!rb && o->contains(k) && o->at(k).is_object()) {
        rb = &o->at(k);
        block_key = k;
      }
    }
  }
  if (!rb)
    throw GoldenFileError(src + ": " + text.prefix +
                          "rope_scaling (or rope_parameters) with mrope_section is missing");
  const KeyReader rope{src, *rb, text.prefix + block_key + "."};
  for (const auto& [key, v] : rb->items()) {
    static const std::set<std::string> known = {"type", "rope_type", "mrope_section",
                                                "mrope_interleaved", "rope_theta"};
    if (!known.count(key) && !(glm && key == "partial_rotary_factor")) {
      rope.bad(key, v,
               std::string("not an M-RoPE key (known: type, rope_type, mrope_section, "
                           "mrope_interleaved, rope_theta") +
                   (glm ? ", partial_rotary_factor" : "") + "; scaled M-RoPE is not modelled)");
    }
  }
  // GLM-4.1V rotates int(head_dim * partial_rotary_factor) channels (HF's default RoPE init;
  // the text block's key, or the rope block's in newer configs); Qwen rotates the whole head.
  int rotary = head_dim;
  if (glm) {
    const KeyReader& pr = rope.find("partial_rotary_factor") ? rope : text;
    const double f = pr.number("partial_rotary_factor", 0.0, 1.0, 1.0, &m.notes);
    rotary = static_cast<int>(head_dim * f);  // Python int() of the product, as HF
    if (rotary < 2 || rotary % 2 != 0) {
      pr.bad("partial_rotary_factor", *pr.find("partial_rotary_factor"),
             "rotates int(head_dim " + std::to_string(head_dim) + " * factor) = " +
                 std::to_string(rotary) + " channels: must be even and at least 2");
    }
  }
  for (const char* k : {"type", "rope_type"}) {
    if (const Json* v = rope.find(k);
        v && !(v->is_string() && (*v == "mrope" || *v == "default"))) {
      rope.bad(k, *v, "must be \"mrope\" or \"default\" (scaled M-RoPE is not modelled)");
    }
  }
  const Json* sec = rope.find("mrope_section");
  if (!sec) throw GoldenFileError(src + ": " + rope.prefix + "mrope_section is missing");
  if (!sec->is_array() || sec->size() != 3)
    rope.bad("mrope_section", *sec, "must be a list of 3 integers (t, h, w)");
  int sum = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    if (!(*sec)[i].is_number_integer() || (*sec)[i].get<std::int64_t>() < 0 ||
        (*sec)[i].get<std::int64_t>() > 512) {
      throw GoldenFileError(src + ": " + rope.prefix + "mrope_section[" + std::to_string(i) +
                            "] = " + (*sec)[i].dump() + ": must be an integer in [0, 512]");
    }
    m.sections.push_back((*sec)[i].get<int>());
    sum += m.sections.back();
  }
  if (sum != rotary / 2) {
    rope.bad("mrope_section", *sec,
             std::string(rotary == head_dim ? "must sum to head_dim / 2 = "
                                            : "must sum to rotary_dim / 2 = ") +
                 std::to_string(rotary / 2) + " pairs (sums to " + std::to_string(sum) + ")");
  }
  const bool qwen3 = m.model_type.rfind("qwen3_vl", 0) == 0;
  const Json* il = rope.find("mrope_interleaved");
  if (il && !il->is_boolean()) rope.bad("mrope_interleaved", *il, "must be true or false");
  if (il && il->get<bool>() != qwen3) {
    rope.bad("mrope_interleaved", *il,
             "contradicts model_type " + m.model_type + " (HF's " + m.model_type +
                 (qwen3 ? " always interleaves)" : " never interleaves)"));
  }
  if (!il && qwen3)
    m.notes.push_back(rope.prefix + "mrope_interleaved absent: interleaved (HF's Qwen3-VL rule)");
  m.map = qwen3 ? MropeMapRule::kInterleaved : MropeMapRule::kSectioned;
  if (qwen3) {
    try {
      reference::mrope_map_interleaved(m.sections, head_dim / 2);
    } catch (const InvalidArgument& e) {
      rope.bad("mrope_section", *sec, e.what());
    }
  }
  m.p.head_dim = head_dim;
  m.p.rotary_dim = rotary;
  // GLM-4.1V: apply_multimodal_rotary_pos_emb keeps the first half of the sectioned cos, sin
  // and repeat_interleave's it: pair i is channels (2i, 2i + 1) (rotate_half_llm).
  m.p.layout = glm ? reference::RopeLayout::kInterleaved : reference::RopeLayout::kHalfSplit;
  m.video_spans = !glm;
  m.p.base = rope.find("rope_theta") ? rope.number("rope_theta", 1.0, 1e12, std::nullopt)
                                     : text.number("rope_theta", 1.0, 1e12, 10000.0, &m.notes);
  m.n_heads = heads;
  m.n_kv_heads = kv;
  read_vision_config(j, src, m);
  read_token_ids(j.contains("image_token_id") || !has_text ? top : text, glm, m);
  check_token_ids_distinct(src, glm, m);
  return m;
}

Json parse_json(std::string_view text, const std::string& source) {
  check_json_depth(text, source, input_limits().json_depth);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    throw GoldenFileError(source + ": invalid JSON: " + e.what());
  }
}

MropeModel mrope_model_parse(std::string_view text, const std::string& source) {
  return mrope_model_from_json(parse_json(text, source), source);
}

/// A layout file (golden/cases/mrope_case.hpp) checked against the model.
void read_layout(const std::filesystem::path& file, const MropeModel& m,
                 std::vector<MropeSpan>* spans, std::int64_t* n_decode) {
  const std::string src = file.string();
  const Json j = parse_json(read_json_text(file), src);
  if (!j.is_object() || !j.contains("spans") || !j.at("spans").is_array() ||
      j.at("spans").empty() || j.at("spans").size() > 64) {
    throw GoldenFileError(src + ": spans must be a list of 1 to 64 spans");
  }
  for (const auto& [key, v] : j.items()) {
    if (key != "spans" && key != "decode")
      KeyReader{src, j, ""}.bad(key, v, "unknown key (known: spans, decode)");
  }
  *n_decode = KeyReader{src, j, ""}.integer("decode", 0, kMropeCaseMaxDecode, 0);
  const int merge = m.index.spatial_merge_size;
  std::int64_t total = *n_decode;
  for (std::size_t k = 0; k < j.at("spans").size(); ++k) {
    const Json& s = j.at("spans")[k];
    const KeyReader r{src, s, "spans[" + std::to_string(k) + "]."};
    const Json* type = r.find("type");
    if (!type || !type->is_string() || (*type != "text" && *type != "image" && *type != "video")) {
      r.bad("type", type ? *type : Json(), "must be \"text\", \"image\" or \"video\"");
    }
    for (const auto& [key, v] : s.items()) {
      static const std::set<std::string> known = {"type", "tokens", "grid_thw", "second_per_grid"};
      if (!known.count(key))
        r.bad(key, v, "unknown key (known: type, tokens, grid_thw, second_per_grid)");
    }
    if (*type == "video" && !m.video_spans) {
      r.bad("type", *type,
            "videos are not modelled for model_type " + m.model_type +
                " (HF's glm4v get_rope_index positions each frame as its own group between "
                "timestamp text, inside video_start / video_end; write each frame as an image "
                "span of grid_thw [1, h, w] after a text span for its positions)");
    }
    if (*type == "text") {
      spans->push_back(
          reference::mrope_text(r.integer("tokens", 1, kMropeCaseMaxTokens, std::nullopt)));
    } else {
      if (k == 0 || (*spans)[k - 1].kind != MropeSpanKind::kText) {
        r.bad("type", *type,
              "a visual span must follow a text span (its last token is vision_start_token_id)");
      }
      const Json* g = r.find("grid_thw");
      if (!g || !g->is_array() || g->size() != 3)
        r.bad("grid_thw", g ? *g : Json(), "must be a list of 3 integers (t, h, w)");
      std::vector<std::int64_t> gv;
      for (int a = 0; a < 3; ++a) {
        const Json& x = (*g)[static_cast<std::size_t>(a)];
        if (!x.is_number_integer() || x.get<std::int64_t>() < 1 || x.get<std::int64_t>() > 4096) {
          throw GoldenFileError(src + ": " + r.prefix + "grid_thw[" + std::to_string(a) +
                                "] = " + x.dump() + ": must be an integer in [1, 4096]");
        }
        gv.push_back(x.get<std::int64_t>());
      }
      for (int a : {1, 2}) {
        if (gv[a] % merge != 0) {
          throw GoldenFileError(src + ": " + r.prefix + "grid_thw[" + std::to_string(a) +
                                "] = " + std::to_string(gv[a]) +
                                ": must be a multiple of vision_config.spatial_merge_size " +
                                std::to_string(merge));
        }
      }
      if (*type == "image") {
        if (r.find("second_per_grid"))
          r.bad("second_per_grid", *r.find("second_per_grid"), "only a video has it");
        spans->push_back(reference::mrope_image(gv[0], gv[1], gv[2]));
      } else {
        const double spg =
            r.find("second_per_grid") ? r.number("second_per_grid", 0.0, 1e3, std::nullopt) : 1.0;
        spans->push_back(reference::mrope_video(gv[0], gv[1], gv[2], spg));
      }
    }
    total += reference::mrope_span_tokens(spans->back(), merge);
    if (total > kMropeCaseMaxTokens) {
      throw GoldenFileError(src + ": the layout has more than " +
                            std::to_string(kMropeCaseMaxTokens) + " tokens with spans[0.." +
                            std::to_string(k) + "] (scores hold tokens^2 values per head)");
    }
  }
}

// ---- the built-in engine ----------------------------------------------------------------------

/// The engine mistakes with their words (diagnose names the bug in engine terms). The last four
/// are KV-cache mistakes: they change nothing in a case without a trace.
const std::vector<std::pair<std::string, std::string>>& mistake_table() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"wrong-map", "the pair -> stream map of the other family: sectioned <-> interleaved"},
      {"stream-permutation", "the position streams fed as (w, h, t) instead of (t, h, w)"},
      {"no-rope-deltas", "rope_deltas dropped: tokens after the prompt at their cache position"},
      {"token-index-resume", "text after a visual span resuming at its token index, not max + 1"},
      {"ggml-imrope",
       "llama.cpp's IMROPE map: pairs past the interleaved t, h, w ranges (Qwen3-VL's 61 and 62) "
       "rotate with a fourth stream, 0 for text and image tokens, where HF uses t"},
      {"pair-layout",
       "the pairs of the other layout: Qwen2-VL's rotate_half pairs (i, i + rotary_dim/2) where "
       "the model rotates adjacent channels (2i, 2i + 1) (GLM-4.1V), or the reverse"},
      {"stale-rope-deltas",
       "rope_deltas kept from the previous request: a later request decodes at cache position + "
       "the earlier prompt's delta"},
      {"prompt-not-sliced",
       "prompt positions not sliced: a prefill chunk starting at token k > 0 takes the positions "
       "of tokens [0, n) (each chunk starts its three streams over)"},
      {"draft-slot-from-t",
       "the speculative drafter's KV slot taken from the temporal RoPE position instead of the "
       "cache position (it overwrites a prompt token's key)"},
      {"seq-rm-count",
       "cache removal given a token count where a RoPE position is meant (seq_rm / context shift "
       "after an image removes the wrong tokens)"}};
  return v;
}

std::vector<std::string> mistakes() {
  std::vector<std::string> names;
  for (const auto& m : mistake_table()) names.push_back(m.first);
  return names;
}

std::string mistake_words(const std::string& mistake) {
  for (const auto& m : mistake_table()) {
    if (m.first == mistake) return m.second;
  }
  return "";
}

/// The position and map knobs of an engine mistake (throws for an unknown one).
MropeKnobs knobs_of(const std::string& mistake) {
  const auto known = mistakes();
  if (!mistake.empty() && std::find(known.begin(), known.end(), mistake) == known.end()) {
    std::string list;
    for (const auto& m : known) list += (list.empty() ? "" : ", ") + m;
    throw_invalid("mrope_run_engine", "unknown mistake for an mrope case (known: " + list + ")",
                  mistake);
  }
  MropeKnobs k;
  k.wrong_map = kMistakes.is(mistake, MistakeId::kWrongMap);
  k.permuted = kMistakes.is(mistake, MistakeId::kStreamPermutation);
  if (kMistakes.is(mistake, MistakeId::kNoRopeDeltas)) k.decode = MropeDecode::kCachePosition;
  if (kMistakes.is(mistake, MistakeId::kTokenIndexResume)) k.resume = MropeTextResume::kTokenIndex;
  k.ggml_imrope = kMistakes.is(mistake, MistakeId::kGgmlImrope);
  k.swap_pairs = kMistakes.is(mistake, MistakeId::kPairLayout);
  return k;
}

/// The spans of a manifest's "spans" list (written by layout_json).
std::vector<MropeSpan> spans_from_json(const Json& spans) {
  std::vector<MropeSpan> layout;
  for (const Json& s : spans) {
    const std::string type = s.at("type").get<std::string>();
    if (type == "text") {
      layout.push_back(reference::mrope_text(s.at("tokens").get<std::int64_t>()));
      continue;
    }
    const auto g = s.at("grid_thw").get<std::vector<std::int64_t>>();
    layout.push_back(type == "image"
                         ? reference::mrope_image(g.at(0), g.at(1), g.at(2))
                         : reference::mrope_video(g.at(0), g.at(1), g.at(2),
                                                  s.at("second_per_grid").get<double>()));
  }
  return layout;
}

/// The rotation and index rule a manifest's params tell an engine (params.layout: the pairs).
MropeModel model_from_params(const Json& pj) {
  MropeModel m;
  m.p.head_dim = pj.at("head_dim").get<int>();
  m.p.rotary_dim = pj.at("rotary_dim").get<int>();
  m.p.base = pj.at("base").get<double>();
  m.p.layout = pj.value("layout", std::string("half_split")) == "interleaved"
                   ? reference::RopeLayout::kInterleaved
                   : reference::RopeLayout::kHalfSplit;
  m.map = pj.at("map").at("rule").get<std::string>() == "interleaved" ? MropeMapRule::kInterleaved
                                                                      : MropeMapRule::kSectioned;
  m.sections = pj.at("map").at("mrope_section").get<std::vector<int>>();
  const Json& ix = pj.at("index");
  m.index.spatial_merge_size = ix.at("spatial_merge_size").get<int>();
  const std::string temporal = ix.at("temporal").get<std::string>();
  m.index.temporal = temporal == "scaled_float32"       ? MropeTemporal::kScaledFloat32
                     : temporal == "scaled_int_seconds" ? MropeTemporal::kScaledIntSeconds
                     : temporal == "scaled_float64"     ? MropeTemporal::kScaledFloat64
                                                        : MropeTemporal::kFrameIndex;
  m.index.tokens_per_second = ix.value("tokens_per_second", 2.0);
  return m;
}

/// The case as the manifest tells an engine: model (rotation and index rule), layout, decode.
struct EngineCase {
  MropeModel m;
  std::vector<MropeSpan> layout;
  std::int64_t n_decode = 0;
  int hq = 0, hk = 0;
};

EngineCase read_case(const CaseSpec& spec) {
  const Json& pj = spec.manifest.at("params");
  EngineCase c;
  c.m = model_from_params(pj);
  c.layout = spans_from_json(pj.at("prompt").at("spans"));
  c.n_decode = pj.at("n_decode").get<std::int64_t>();
  c.hq = pj.at("n_q_heads").get<int>();
  c.hk = pj.at("n_kv_heads").get<int>();
  return c;
}

/// The engine's float tables [T, np]: pair i at its stream's position, by the pipeline's own
/// numerics (exact: posenc's RoPE kernel tables, which mrope_apply_qk_positions builds).
void engine_tables(const std::string& pipeline, const RopeParams& p, const MropeMap& map,
                   const std::vector<std::int64_t>& pos3, std::int64_t T, std::vector<float>* cs,
                   std::vector<float>* sn) {
  const int np = p.rotary_dim / 2;
  const std::vector<std::int64_t> pos = map_streams(pos3, T, map);
  std::set<std::int64_t> distinct(pos.begin(), pos.end());
  const std::vector<std::int64_t> list(distinct.begin(), distinct.end());
  std::map<std::int64_t, std::size_t> row;
  for (std::size_t r = 0; r < list.size(); ++r) row[list[r]] = r;
  std::map<int, std::pair<std::vector<float>, std::vector<float>>> tab;  // freq_dim -> cos, sin
  for (const auto& q : map.pairs) {
    if (tab.count(q.freq_dim)) continue;
    const RopeParams fp = freq_params(p, q);
    if (pipelines::of(pipeline) == Pipeline::kExact) {
      const auto cache = optimized::rope_cache_init(fp, list);
      tab[q.freq_dim] = {cache.cos_f32, cache.sin_f32};
    } else {
      const auto tb =
          rope_pipeline_tables(pipeline, fp, reference::RopeScaling{}, fp.head_dim, list);
      tab[q.freq_dim] = {tb.cos, tb.sin};
    }
  }
  cs->resize(static_cast<std::size_t>(T * np));
  sn->resize(cs->size());
  for (std::int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < np; ++i) {
      const reference::MropePair& q = map.pairs[i];
      const std::size_t r = row.at(pos[q.stream * T + t]);
      const auto& [c, s] = tab.at(q.freq_dim);
      (*cs)[t * np + i] = c[r * (q.freq_dim / 2) + q.freq_index];
      (*sn)[t * np + i] = s[r * (q.freq_dim / 2) + q.freq_index];
    }
  }
}

/// x [T, heads, head_dim] rotated at positions [streams, T] by the pipeline: exact, posenc's
/// kernel (mrope_apply_qk_positions); a float pipeline, its tables rounded to its compute dtype
/// and y_a = x_a c - x_b s, y_b = x_b c + x_a s, each product and sum rounded.
std::vector<float> engine_rotate(const std::string& pipeline, const RopeParams& p,
                                 const MropeMap& map, const std::vector<std::int64_t>& pos,
                                 std::int64_t T, const std::vector<float>& x, int heads) {
  const int h = p.head_dim, np = p.rotary_dim / 2;
  std::vector<float> y(x.size());
  if (pipelines::of(pipeline) == Pipeline::kExact) {
    const optimized::RopeShape s{T, heads, optimized::RopeTensorLayout::kTokensHeadsDim};
    optimized::mrope_apply_qk_positions(p, map, map_streams(pos, T, map), 0.0, s, x, y, {}, {}, {});
    return y;
  }
  std::vector<float> cs, sn;
  engine_tables(pipeline, p, map, pos, T, &cs, &sn);
  const DType ct = pipelines::compute_dtype(pipeline);
  for (auto& v : cs) v = pipelines::fl(v, ct);
  for (auto& v : sn) v = pipelines::fl(v, ct);
  for (std::int64_t r = 0; r < T * heads; ++r) {
    const std::int64_t tt = r / heads;
    for (int cc = p.rotary_dim; cc < h; ++cc) y[r * h + cc] = x[r * h + cc];
    for (int i = 0; i < np; ++i) {
      const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
      const float co = cs[tt * np + i], si = sn[tt * np + i], xa = x[r * h + ca],
                  xb = x[r * h + cb];
      y[r * h + ca] = pipelines::fl(pipelines::fl(xa * co, ct) + pipelines::fl(-xb * si, ct), ct);
      y[r * h + cb] = pipelines::fl(pipelines::fl(xb * co, ct) + pipelines::fl(xa * si, ct), ct);
    }
  }
  return y;
}

/// The engine's score x . y over h channels: in double (exact), else each term and the running
/// sum in the pipeline's compute dtype.
float engine_dot(const std::string& pipeline, const float* x, const float* y, int h) {
  if (pipelines::of(pipeline) == Pipeline::kExact) {
    double sum = 0;
    for (int c = 0; c < h; ++c) sum += static_cast<double>(x[c]) * y[c];
    return static_cast<float>(sum);
  }
  const DType ct = pipelines::compute_dtype(pipeline);
  float sum = 0;
  for (int c = 0; c < h; ++c) sum += pipelines::fl(x[c], ct) * pipelines::fl(y[c], ct);
  return pipelines::fl(sum, ct);
}

#include "golden/schemes/mrope/mrope_trace.inc"

/// What a fitted hypothesis changes besides the knobs of a mistake (mrope_fit_candidates).
struct FitKnobs {
  std::array<int, 3> order = {0, 1, 2};  // the rotation's stream s reads get_rope_index's order[s]
  std::array<int, 3> sections = {0, 1,
                                 2};  // mrope_section entry j taken from the config's sections[j]
  bool positions_as_rotated = true;   // the positions stage as the rotation read them
  bool grid_hw_swap = false;          // every grid read as (t, w, h)
  std::optional<MropeTemporal> temporal;  // the video time rule
  std::optional<double> tokens_per_second, base;
};

/// The stages of the rotation at positions pos [S, T] of map `map` (the pipeline's numerics).
TensorMap rotation_stages(const std::string& pipeline, const RopeParams& p, const MropeMap& map,
                          const std::vector<std::int64_t>& pos, std::int64_t T, int hq, int hk,
                          const TensorMap& golden, DType t) {
  const int h = p.head_dim, np = p.rotary_dim / 2;
  const std::vector<float> q = tensor_to_f32(golden.at("q")), kk = tensor_to_f32(golden.at("k"));
  std::vector<float> cs, sn;
  engine_tables(pipeline, p, map, pos, T, &cs, &sn);
  if (pipelines::of(pipeline) != Pipeline::kExact) {
    const DType ct = pipelines::compute_dtype(pipeline);
    for (auto& v : cs) v = pipelines::fl(v, ct);
    for (auto& v : sn) v = pipelines::fl(v, ct);
  }
  const std::vector<float> qr = engine_rotate(pipeline, p, map, pos, T, q, hq);
  const std::vector<float> kr = engine_rotate(pipeline, p, map, pos, T, kk, hk);
  std::vector<float> scores;
  const int group = hq / hk;
  for (int hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        scores.push_back(
            engine_dot(pipeline, &qr[(i * hq + hh) * h], &kr[(j * hk + hh / group) * h], h));
      }
    }
  }
  TensorMap out;
  out.emplace("cos", engine_tensor("cos", t, {T, np}, cs));
  out.emplace("sin", engine_tensor("sin", t, {T, np}, sn));
  out.emplace("q_rot", engine_tensor("q_rot", t, {T, hq, h}, qr));
  out.emplace("k_rot", engine_tensor("k_rot", t, {T, hk, h}, kr));
  out.emplace("scores", engine_tensor("scores", t, {hq, T, T}, scores));
  return out;
}

/// A decoder case (not the vision tower, not a trace) run by the pipeline with a mistake's
/// knobs and a fit's.
TensorMap single_call_run(EngineCase c, const MropeKnobs& k, const FitKnobs& f,
                          const std::string& pipeline, const TensorMap& golden, DType t) {
  if (f.temporal) c.m.index.temporal = *f.temporal;
  if (f.tokens_per_second) c.m.index.tokens_per_second = *f.tokens_per_second;
  if (f.base) c.m.p.base = *f.base;
  const std::vector<int> sec = c.m.sections;
  for (int j = 0; j < 3 && sec.size() == 3; ++j) c.m.sections[j] = sec[f.sections[j]];
  if (f.grid_hw_swap) {
    for (auto& s : c.layout) std::swap(s.grid_h, s.grid_w);
  }
  std::int64_t T = 0;
  const std::vector<std::int64_t> pos = mrope_positions(c.layout, c.m.index, c.n_decode, k, &T);
  std::vector<std::int64_t> rot(pos.size());
  for (int s = 0; s < 3; ++s) {
    std::copy_n(pos.begin() + f.order[s] * T, T, rot.begin() + s * T);
  }
  const MropeMap map = model_map(c.m, k);
  TensorMap out =
      rotation_stages(pipeline, knob_params(c.m.p, k), map, rot, T, c.hq, c.hk, golden, t);
  out.emplace("positions",
              tensor_from_i64("positions", {3, T}, f.positions_as_rotated ? rot : pos));
  return out;
}

TensorMap run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const MropeKnobs k = knobs_of(o.mistake);
  const DType t = golden.at(spec.manifest.contains("trace") ? "s00.q" : "q").dtype;
  if (const auto why = pipelines::dtype_mismatch(o.pipeline, t); !why.empty()) {
    throw_invalid("mrope_run_engine", why, o.pipeline);
  }
  if (spec.manifest.contains("trace")) return run_trace_engine(spec, golden, o);
  if (spec.manifest.value("variant", "") != "vision") {
    return single_call_run(read_case(spec), k, FitKnobs{}, o.pipeline, golden, t);
  }
  // The vision tower: 2D axial RoPE.
  const Json& pj = spec.manifest.at("params");
  RopeParams p = vision_params();
  p.head_dim = p.rotary_dim = pj.at("head_dim").get<int>();
  p.base = pj.at("base").get<double>();
  const auto g = pj.at("grid").at("grid_thw").get<std::vector<std::int64_t>>();
  std::int64_t T = 0;
  const std::vector<std::int64_t> pos =
      vision_positions(reference::mrope_image(g.at(0), g.at(1), g.at(2)),
                       pj.at("grid").at("spatial_merge_size").get<int>(), k.permuted, &T);
  const MropeMap map = vision_map(p, k.wrong_map);
  TensorMap out =
      rotation_stages(o.pipeline, knob_params(p, k), map, pos, T, pj.at("n_q_heads").get<int>(),
                      pj.at("n_kv_heads").get<int>(), golden, t);
  out.emplace("positions", tensor_from_i64("positions", {2, T}, pos));
  return out;
}

// ---- fitted hypotheses (golden/cases/rope_fit.hpp: mrope_fit_candidates) --------------------

std::string order_text(const std::array<int, 3>& o) {
  static const char* n[] = {"t", "h", "w"};
  return std::string("(") + n[o[0]] + ", " + n[o[1]] + ", " + n[o[2]] + ")";
}

std::string sections_text(const std::vector<int>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool same_tensors(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [n, x] : a) {
    const auto it = b.find(n);
    if (it == b.end() || it->second.shape != x.shape || it->second.data != x.data) return false;
  }
  return true;
}

/// The pair angles of one text token at position p in [1, 3] (all streams equal there), read
/// from the output's cos/sin, else from q_rot against q; empty when neither can be read.
std::vector<double> text_token_angles(const EngineCase& c, const TensorMap& golden,
                                      const TensorMap& actual, std::int64_t* p_used) {
  const Tensor& pos = golden.at("positions");
  const std::int64_t T = pos.shape.at(1);
  const int np = c.m.p.rotary_dim / 2, h = c.m.p.head_dim;
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t p = pos.get_i64(t);
    if (p < 1 || p > 3 || pos.get_i64(T + t) != p || pos.get_i64(2 * T + t) != p) continue;
    std::vector<double> phi(static_cast<std::size_t>(np), std::nan(""));
    const auto cs = actual.find("cos"), sn = actual.find("sin"), qr = actual.find("q_rot");
    if (cs != actual.end() && sn != actual.end() && cs->second.numel() == T * np &&
        sn->second.numel() == T * np) {
      for (int i = 0; i < np; ++i)
        phi[i] = std::atan2(sn->second.get_f64(t * np + i), cs->second.get_f64(t * np + i));
    } else if (qr != actual.end() && qr->second.numel() == T * c.hq * h) {
      const Tensor& q = golden.at("q");
      for (int i = 0; i < np; ++i) {
        const int a = reference::rope_pair_a(c.m.p, i), b = reference::rope_pair_b(c.m.p, i);
        double best = 0;
        for (int hh = 0; hh < c.hq; ++hh) {
          const std::int64_t off = (t * c.hq + hh) * h;
          const double xa = q.get_f64(off + a), xb = q.get_f64(off + b);
          const double ya = qr->second.get_f64(off + a), yb = qr->second.get_f64(off + b);
          if (!(std::hypot(xa, xb) > best)) continue;
          best = std::hypot(xa, xb);
          phi[i] = std::atan2(yb * xa - ya * xb, ya * xa + yb * xb);
        }
      }
    } else {
      return {};
    }
    *p_used = p;
    return phi;
  }
  return {};
}

/// Bases near the one the text tokens' pair frequencies fit (log w_i = -(2i / rotary_dim)
/// log base, least squares over the pairs fast enough to read and slow enough not to wrap),
/// rounded to 1, 2 and 3 significant digits; the estimate in *evidence.
std::vector<double> fitted_bases(const EngineCase& c, const TensorMap& golden,
                                 const TensorMap& actual, std::string* evidence) {
  std::int64_t p = 0;
  const std::vector<double> phi = text_token_angles(c, golden, actual, &p);
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int k = 0;
  for (std::size_t i = 1; i < phi.size(); ++i) {
    const double w = phi[i] / static_cast<double>(p);
    if (!(w > 1e-3) || !(phi[i] < 3.0)) continue;
    const double x = 2.0 * static_cast<double>(i) / c.m.p.rotary_dim, y = std::log(w);
    sx += x, sy += y, sxx += x * x, sxy += x * y, ++k;
  }
  if (k < 3) return {};
  const double est = std::exp(-(k * sxy - sx * sy) / (k * sxx - sx * sx));
  if (!std::isfinite(est) || est <= 1 || est > 1e12) return {};
  char buf[96];
  std::snprintf(buf, sizeof buf,
                "the pair frequencies of the text token at position %lld fit base %.6g",
                static_cast<long long>(p), est);
  *evidence = buf;
  std::vector<double> out;
  for (int digits : {1, 2, 3}) {
    const double e = std::pow(10.0, std::floor(std::log10(est)) - digits + 1);
    out.push_back(std::round(est / e) * e);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// tokens_per_second read back from the written positions of the first video with frames and
/// a second_per_grid > 0: tau(T - 1) / ((T - 1) s), rounded both ways; empty without them.
std::vector<double> fitted_tokens_per_second(const EngineCase& c, const TensorMap& actual) {
  const auto it = actual.find("positions");
  if (it == actual.end() || it->second.shape.size() != 2 || it->second.shape[0] != 3) return {};
  const std::int64_t T = it->second.shape[1];
  std::int64_t j = 0;
  const int m = c.m.index.spatial_merge_size;
  for (const MropeSpan& s : c.layout) {
    const std::int64_t n = reference::mrope_span_tokens(s, m);
    if (s.kind == MropeSpanKind::kVideo && s.grid_t > 1 && s.second_per_grid > 0 && j + n <= T) {
      const std::int64_t per = n / s.grid_t;
      const double tau =
          static_cast<double>(it->second.get_i64(j + (s.grid_t - 1) * per) - it->second.get_i64(j));
      const double est = tau / (static_cast<double>(s.grid_t - 1) * s.second_per_grid);
      if (!(est > 0)) return {};
      return {std::floor(est), std::ceil(est)};
    }
    j += n;
  }
  return {};
}

/// The fit variants of a case (FitKnobs with their words), before they are run.
struct FitVariant {
  std::string parameter, value, case_value, evidence;
  double number = 0;
  FitKnobs f;
};

std::vector<FitVariant> fit_variants(const EngineCase& c, const TensorMap& golden,
                                     const TensorMap& actual) {
  std::vector<FitVariant> v;
  // Stream orders: the positions stage as the engine wrote it (the case's, or as rotated).
  std::array<int, 3> o = {0, 1, 2};
  const auto ap = actual.find("positions");
  const bool wrote_right = ap != actual.end() && ap->second.data == golden.at("positions").data;
  while (std::next_permutation(o.begin(), o.end())) {
    FitVariant x{"stream-order", order_text(o), "(t, h, w)", "", 0, {}};
    x.f.order = o;
    x.f.positions_as_rotated = !wrote_right;
    x.evidence = wrote_right ? "the positions stage as get_rope_index gives them, the rotation "
                               "reading them in that order"
                             : "the position streams fed in that order";
    v.push_back(x);
  }
  if (c.m.sections.size() == 3) {
    std::set<std::vector<int>> seen = {c.m.sections};
    std::array<int, 3> so = {0, 1, 2};
    while (std::next_permutation(so.begin(), so.end())) {
      const std::vector<int> s = {c.m.sections[so[0]], c.m.sections[so[1]], c.m.sections[so[2]]};
      if (!seen.insert(s).second) continue;
      FitVariant x{"section-order", sections_text(s), sections_text(c.m.sections), "", 0, {}};
      x.f.sections = so;
      v.push_back(x);
    }
  }
  const bool video = std::any_of(c.layout.begin(), c.layout.end(), [](const MropeSpan& s) {
    return s.kind == MropeSpanKind::kVideo;
  });
  if (std::any_of(c.layout.begin(), c.layout.end(), [](const MropeSpan& s) {
        return s.kind != MropeSpanKind::kText && s.grid_h != s.grid_w;
      })) {
    FitVariant x{"grid-hw-swap", "(t, w, h)", "(t, h, w)", "", 0, {}};
    x.f.grid_hw_swap = true;
    v.push_back(x);
  }
  const MropeTemporal model_rule = c.m.index.temporal;
  const auto tps_fit = fitted_tokens_per_second(c, actual);
  if (video) {
    for (MropeTemporal r : {MropeTemporal::kFrameIndex, MropeTemporal::kScaledFloat32,
                            MropeTemporal::kScaledFloat64, MropeTemporal::kScaledIntSeconds}) {
      if (r == model_rule) continue;
      FitVariant x{"temporal",
                   reference::mrope_temporal_name(r),
                   reference::mrope_temporal_name(model_rule),
                   "",
                   0,
                   {}};
      x.f.temporal = r;
      if (model_rule == MropeTemporal::kFrameIndex && r != MropeTemporal::kFrameIndex) {
        x.f.tokens_per_second = tps_fit.empty() ? 2.0 : std::max(1.0, tps_fit.back());
      }
      v.push_back(x);
    }
    if (model_rule != MropeTemporal::kFrameIndex) {
      std::vector<double> tries = tps_fit.empty() ? std::vector<double>{1.0, 2.0, 4.0} : tps_fit;
      for (double tps : tries) {
        if (tps <= 0 || tps == c.m.index.tokens_per_second) continue;
        char b[32];
        std::snprintf(b, sizeof b, "%g", tps);
        char cb[32];
        std::snprintf(cb, sizeof cb, "%g", c.m.index.tokens_per_second);
        FitVariant x{"tokens-per-second",
                     b,
                     cb,
                     tps_fit.empty() ? "" : "read back from the video's written t positions",
                     tps,
                     {}};
        x.f.tokens_per_second = tps;
        v.push_back(x);
      }
    }
  }
  std::string ev;
  for (double b : fitted_bases(c, golden, actual, &ev)) {
    char buf[32], cb[32];
    std::snprintf(buf, sizeof buf, "%.6g", b);
    std::snprintf(cb, sizeof cb, "%.6g", c.m.p.base);
    if (std::string(buf) == cb) continue;
    FitVariant x{"base", buf, cb, ev, b, {}};
    x.f.base = b;
    v.push_back(x);
  }
  return v;
}

// ---- the catalog's entry points ----------------------------------------------------------------

std::vector<CaseRow> cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : case_table()) {
    std::string desc = c.model.id + ", " + c.layout_name + ", " + std::string(dtype_short(c.dtype));
    if (!c.convention.empty()) desc += ", invalid convention " + c.convention;
    rows.push_back({c.id, desc});
  }
  for (const auto& t : trace_table()) {
    std::string desc = t.model.id + ", KV-cache trace " + t.name + ", f32";
    if (!t.convention.empty()) desc += ", invalid convention " + t.convention;
    rows.push_back({t.id, desc});
  }
  return rows;
}

GoldenCase generate(const std::string& id) {
  for (const auto& c : case_table()) {
    if (c.id == id) return mrope_case_generate(c);
  }
  for (const auto& t : trace_table()) {
    if (t.id == id) return mrope_trace_generate(t);
  }
  throw_invalid("mrope_generate", "no M-RoPE case has this id", id);
}

}  // namespace

bool mrope_config_is_vl(const Json& config) {
  if (!config.is_object()) return false;
  if (config.contains("model_type") && config.at("model_type").is_string() &&
      vl_model_types().count(config.at("model_type").get<std::string>())) {
    return true;
  }
  for (const Json* o :
       {&config, config.contains("text_config") ? &config.at("text_config") : &config}) {
    for (const char* k : {"rope_parameters", "rope_scaling"}) {
      if (o->is_object() && o->contains(k) && o->at(k).is_object() &&
          o->at(k).contains("mrope_section"))
        return true;
    }
  }
  return false;
}

ConfigCases mrope_cases_for_config(std::string_view text, const std::string& source,
                                   const std::filesystem::path& layout_file, DType dtype) {
  const MropeModel m = mrope_model_parse(text, source);
  RopeModelConfig named;  // config_case_name's inputs
  named.id = m.id;
  named.name_or_path = m.name_or_path;
  named.model_type = m.model_type;
  const std::string name = config_case_name(named, text);
  ConfigCases out;
  std::string rot = ", head_dim " + std::to_string(m.p.head_dim);
  if (m.p.rotary_dim != m.p.head_dim) rot += ", rotary_dim " + std::to_string(m.p.rotary_dim);
  if (m.p.layout == reference::RopeLayout::kInterleaved) rot += ", interleaved pairs";
  out.model = m.id + " (cases named " + name + "): M-RoPE " + map_words(m, false) + rot +
              ", base " + Json(m.p.base).dump() + ", " + std::to_string(m.n_heads) + " q / " +
              std::to_string(m.n_kv_heads) + " kv heads, spatial_merge_size " +
              std::to_string(m.index.spatial_merge_size) + ", video time " +
              reference::mrope_temporal_name(m.index.temporal);
  out.notes = m.notes;
  std::vector<MropeCaseDef> defs;
  if (!layout_file.empty()) {
    std::vector<MropeSpan> spans;
    std::int64_t n_decode = 0;
    read_layout(layout_file, m, &spans, &n_decode);
    // The layout's own name: its file's SHA-256 (two layouts never share a case name).
    const std::string lh = sha256_file(layout_file).substr(0, 8);
    defs.push_back(
        case_def(m, name, "layout_" + lh,
                 "the layout of " + layout_file.filename().string() + " (SHA-256 " + lh + "...)",
                 spans, n_decode, dtype));
  } else {
    defs = standard_defs(m, name, dtype);
  }
  for (const MropeCaseDef& d : defs) {
    std::int64_t T = d.n_decode;
    for (const auto& s : d.layout) T += reference::mrope_span_tokens(s, m.index.spatial_merge_size);
    ConfigCase c{"mrope", d.id, d.layout_name + ": " + std::to_string(T) + " tokens",
                 [d] { return mrope_case_generate(d); }};
    const std::uint64_t h = static_cast<std::uint64_t>(m.p.head_dim), np = h / 2,
                        tt = static_cast<std::uint64_t>(T);
    const std::uint64_t hq = static_cast<std::uint64_t>(d.n_q_heads),
                        hk = static_cast<std::uint64_t>(d.n_kv_heads);
    const std::uint64_t scores = hq * tt * tt, expected = 2 * tt * np + (hq + hk) * tt * h + scores;
    c.largest_tensor_bytes = 8 * std::max(scores, (hq + hk) * tt * h);
    c.file_bytes = 32 * expected + 65536;
    // Fitted to `generate --config --layout` of 126 and 254 tokens (Qwen2-VL, 2 q heads): 1.6 and
    // 5.1 s measured, 1.5 and 5.7 s estimated.
    c.seconds = 4e-5 * static_cast<double>(scores) * static_cast<double>(h) / 128.0 +
                2e-3 * static_cast<double>(tt);
    out.cases.push_back(std::move(c));
  }
  return out;
}

std::vector<RopeFitCandidate> mrope_fit_candidates(const LoadedCase& lc, const TensorMap& actual,
                                                   const std::string& pipeline) {
  std::vector<RopeFitCandidate> out;
  const CaseSpec& spec = lc.spec;
  if (spec.scheme != "mrope" || spec.manifest.contains("trace") ||
      spec.manifest.value("variant", "") == "vision" ||
      POSENC_MUTANT("diagnose_mrope_fits_nothing")) {
    return out;
  }
  EngineCase c;
  try {
    c = read_case(spec);
  } catch (const std::exception&) {
    return out;
  }
  const DType t = lc.golden.at("q").dtype;
  const bool float_run = pipelines::of(pipeline) != Pipeline::kExact && pipelines::dtype_mismatch(pipeline, t).empty();
  const TensorMap right = single_call_run(c, MropeKnobs{}, FitKnobs{}, "exact", lc.golden, t);
  for (const FitVariant& v : fit_variants(c, lc.golden, actual)) {
    RopeFitCandidate x;
    x.parameter = v.parameter;
    x.value = v.value;
    x.case_value = v.case_value;
    x.evidence = v.evidence;
    x.number = v.number;
    try {
      x.run = single_call_run(c, MropeKnobs{}, v.f, "exact", lc.golden, t);
    } catch (const std::exception&) {
      continue;  // a variant the reference refuses (sections that do not fit the map)
    }
    if (same_tensors(x.run, right)) continue;  // invisible on this case
    if (float_run) {
      RopeFitCandidate y = x;
      y.pipeline = pipeline;
      y.widen = x.run;
      y.run = single_call_run(c, MropeKnobs{}, v.f, pipeline, lc.golden, t);
      out.push_back(std::move(y));
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::string mrope_fit_words(const RopeFitCandidate& c, const std::string& residual_text) {
  const std::string res = residual_text.empty() ? "" : ", residual " + residual_text;
  const std::string ev = c.evidence.empty() ? "" : c.evidence + res;
  auto paren = [&](const std::string& s) {
    return s.empty() ? res.empty() ? "" : " (" + res.substr(2) + ")" : " (" + s + ")";
  };
  if (c.parameter == "stream-order") {
    return "position streams in the order " + c.value + " instead of " + c.case_value + paren(ev);
  }
  if (c.parameter == "section-order") {
    return "mrope_section applied as " + c.value + "; the config says " + c.case_value + paren(ev);
  }
  if (c.parameter == "grid-hw-swap") {
    return "image and video grids read as (t, w, h): the patch rows and columns swapped" +
           paren(ev);
  }
  if (c.parameter == "temporal") {
    return "video time by the " + c.value + " rule; the model's is " + c.case_value + paren(ev);
  }
  if (c.parameter == "tokens-per-second") {
    return "tokens_per_second " + c.value + "; the config says " + c.case_value + paren(ev);
  }
  return "base fitted as " + c.value + "; the case says " + c.case_value + paren(ev);
}

SchemeEntry mrope_scheme() {
  SchemeEntry e{
      "mrope",
      "multimodal RoPE (Qwen2-VL, Qwen2.5-VL sectioned; Qwen3-VL interleaved; GLM-4.1V "
      "sectioned on adjacent pairs, half the head), positions from get_rope_index",
      &cases,
      &generate,
      &run_engine,
      &mistakes,
      &mistake_words};
  e.order = 130;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
