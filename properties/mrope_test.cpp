// M-RoPE properties: the pair -> stream maps, the rotation (float, double, mp50), the position
// oracle get_rope_index, and the float kernel against the mp50 oracle. Formula: see
// reference/mrope.hpp. Replay a failure: RC_PARAMS="reproduce=..." (printed by RapidCheck).
#include "optimized/mrope.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>
#include <set>
#include <functional>
#include <string>
#include <vector>

#include "golden/cases/diagnose.hpp"
#include "golden/cases/hard_positions.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/registry.hpp"
#include "golden/gtest.hpp"
#include "optimized/rope.hpp"
#include "properties/compare.hpp"
#include "properties/generators.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/scalar.hpp"
#include "reference/mrope.hpp"
#include "reference/rope.hpp"

namespace posenc::properties {
namespace {

using reference::MropeMap;
using reference::MropeMapRule;
using reference::MropeSpan;
using reference::MropeSpanKind;
using reference::MropeTemporal;
using reference::RopeLayout;
using reference::RopeParams;

constexpr std::int64_t kMaxTestPosition = std::int64_t{1} << 20;

// ---- generators ------------------------------------------------------------------------------

RopeParams gen_params() {
  RopeParams p;
  p.rotary_dim = 2 * *rc::gen::inRange(3, 65);
  p.head_dim = p.rotary_dim + *rc::gen::element(0, 0, 2, 8);
  p.base = *rc::gen::element(10000.0, 1000000.0, 5000000.0, 100.0);
  p.layout = *rc::gen::element(RopeLayout::kHalfSplit, RopeLayout::kInterleaved);
  return p;
}

/// A random split of n into k parts (zeros allowed unless positive).
std::vector<int> gen_split(int n, int k, bool positive) {
  std::vector<int> cuts;
  for (int j = 0; j + 1 < k; ++j) cuts.push_back(*rc::gen::inRange(0, n + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int> out;
  int prev = 0;
  for (int c : cuts) {
    out.push_back(c - prev);
    prev = c;
  }
  out.push_back(n - prev);
  if (positive) {  // move one pair into every empty part from the largest one
    for (int& v : out) {
      if (v == 0) {
        auto big = std::max_element(out.begin(), out.end());
        --*big;
        v = 1;
      }
    }
  }
  return out;
}

/// Sections valid for the interleaved rule: 3 s_h - 2 < n and 3 s_w - 1 < n.
std::vector<int> gen_interleaved_sections(int n) {
  const int sh = *rc::gen::inRange(0, (n + 1) / 3 + 1);
  const int sw = *rc::gen::inRange(0, n / 3 + 1);
  return {n - sh - sw, sh, sw};
}

/// A map of any rule for n pairs.
MropeMap gen_map(int n) {
  const auto rule = *rc::gen::element(MropeMapRule::kSectioned, MropeMapRule::kInterleaved,
                                      MropeMapRule::kGgmlImrope, MropeMapRule::kAxial,
                                      MropeMapRule::kAxialStrided);
  RC_CLASSIFY(true, reference::mrope_map_rule_name(rule));
  switch (rule) {
    case MropeMapRule::kSectioned:
      return reference::mrope_map_sectioned(gen_split(n, 3, false), n);
    case MropeMapRule::kInterleaved:
      return reference::mrope_map_interleaved(gen_interleaved_sections(n), n);
    case MropeMapRule::kGgmlImrope: {
      std::vector<int> s = gen_interleaved_sections(n);
      s.push_back(0);
      return reference::mrope_map_ggml_imrope(s, n);
    }
    case MropeMapRule::kAxial:
      return reference::mrope_map_axial(
          gen_split(n, *rc::gen::inRange(1, std::min(n, 3) + 1), true), n);
    case MropeMapRule::kAxialStrided: {
      std::vector<int> axes;
      for (int a : {1, 2, 3, 4})
        if (n % a == 0) axes.push_back(a);
      return reference::mrope_map_axial_strided(*rc::gen::elementOf(axes), n);
    }
  }
  return {};
}

/// One token's stream positions.
std::vector<std::int64_t> gen_stream_positions(int n_streams, std::int64_t max) {
  std::vector<std::int64_t> pos;
  for (int s = 0; s < n_streams; ++s) pos.push_back(*gen_position(max));
  return pos;
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

template <class Real>
Real dot(const std::vector<Real>& a, const std::vector<Real>& b) {
  Real s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

template <class Real>
Real abs_dot(const std::vector<Real>& a, const std::vector<Real>& b) {
  using std::fabs;
  Real s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += fabs(a[i]) * fabs(b[i]);
  return s;
}

// ---- the maps ----------------------------------------------------------------------------------

// (First in the binary: a mutant run stops at its first failing test.)
// The HF releases' positions are declared alternatives of the video cases: an engine whose
// every stage holds an alternative's values (its alt.<name>.exact rounded to the case dtype)
// passes strict, each stage naming the alternative; the trained rule's values name none.
TEST(MropeGoldenReleases, ReleaseConventionsAreDeclaredAlternatives) {
  int followed = 0;
  for_each_golden_case("mrope", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (lc.spec.id.find("_video_") == std::string::npos || lc.spec.result != "valid") return;
    std::set<std::string> names;
    for (const auto& t : lc.spec.expected) {
      for (const auto& a : t.alternatives) names.insert(a.name);
    }
    EXPECT_TRUE(names.count("hf5_resume_max_hw")) << lc.spec.id;
    if (lc.spec.id.find("half_second") != std::string::npos) {
      EXPECT_TRUE(names.count("hf_int_seconds")) << lc.spec.id;
    }
    for (const auto& name : names) {
      golden::TensorMap out;
      for (const auto& t : lc.spec.expected) {
        const auto alt =
            std::find_if(t.alternatives.begin(), t.alternatives.end(),
                         [&](const golden::AlternativeSpec& a) { return a.name == name; });
        ASSERT_NE(alt, t.alternatives.end()) << lc.spec.id << " " << t.name;
        const auto v = golden::tensor_to_f64(lc.golden.at(alt->exact));
        if (t.dtype == DType::kI64) {
          out.emplace(t.name, golden::tensor_from_i64(
                                  t.name, t.shape, std::vector<std::int64_t>(v.begin(), v.end())));
        } else {
          out.emplace(t.name, golden::tensor_from_f32(t.name, t.shape,
                                                      std::vector<float>(v.begin(), v.end())));
        }
      }
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {});
      EXPECT_EQ(r.status, golden::Verdict::kPass) << golden::format_case_text(r, false);
      for (const auto& t : r.tensors) EXPECT_EQ(t.convention, name) << lc.spec.id << " " << t.name;
      ++followed;
    }
  });
  EXPECT_GE(followed, 4);
}

/// The engine on an M-RoPE case whose params say something else (a fitted mistake planted).
golden::TensorMap mrope_with_params(const golden::LoadedCase& lc,
                                    const std::function<void(nlohmann::json&)>& edit,
                                    const std::string& pipeline) {
  golden::CaseSpec spec = lc.spec;
  edit(spec.manifest["params"]);
  return golden::scheme_by_slug("mrope").run_engine(spec, lc.golden, {"", pipeline});
}

// diagnose fits what the engine got wrong on the case: a section order, the base, Qwen2-VL's time
// rule on Qwen2.5-VL, grids read as (t, w, h), each on the exact and the fp32 pipeline.
TEST(MropeGoldenReleases, DiagnoseFitsSectionsBaseTimeAndGrids) {
  const auto dir = golden::default_data_dir() / "mrope";
  const auto video =
      golden::load_case(dir / "mrope_qwen2_5_vl_7b_instruct_text_video_text_f32.json");
  const auto image =
      golden::load_case(dir / "mrope_qwen2_5_vl_7b_instruct_text_image_text_f32.json");
  struct Plant {
    const golden::LoadedCase* lc;
    std::string parameter, value;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Plant> plants = {
      {&image, "section-order", "[24, 24, 16]",
       [](nlohmann::json& p) {
         p["map"]["mrope_section"] = {24, 24, 16};
       }},
      {&image, "base", "10000", [](nlohmann::json& p) { p["base"] = 10000.0; }},
      {&image, "grid-hw-swap", "(t, w, h)",
       [](nlohmann::json& p) {
         for (auto& sp : p["prompt"]["spans"]) {
           if (sp.contains("grid_thw")) std::swap(sp["grid_thw"][1], sp["grid_thw"][2]);
         }
       }},
      {&video, "temporal", "frame_index",
       [](nlohmann::json& p) { p["index"]["temporal"] = "frame_index"; }},
  };
  for (const auto& pl : plants) {
    for (const std::string pipeline : {"exact", "fp32"}) {
      const auto out = mrope_with_params(*pl.lc, pl.edit, pipeline);
      const auto d = golden::diagnose_case(*pl.lc, out, pipeline == "exact" ? "strict" : "fp32");
      const std::string text = golden::diagnosis_text(d, true);
      EXPECT_EQ(d.verdict, "explained") << text;
      ASSERT_FALSE(d.ranked.empty());
      const bool named = d.ranked.front().mistake == pl.parameter ||
                         std::find(d.tied.begin(), d.tied.end(), pl.parameter) != d.tied.end();
      EXPECT_TRUE(named) << pl.parameter << " on " << pipeline << "\n" << text;
      if (d.ranked.front().mistake == pl.parameter) {
        ASSERT_TRUE(d.ranked.front().fit.has_value()) << text;
        EXPECT_EQ(d.ranked.front().fit->value, pl.value) << text;
      }
    }
  }
}

RC_GTEST_PROP(MropeMaps, SectionMapPartitionsThePairs, ()) {
  const int n = *rc::gen::inRange(3, 129);
  const std::vector<int> sec = gen_split(n, 3, false);
  const MropeMap m = reference::mrope_map_sectioned(sec, n);
  RC_ASSERT(reference::mrope_stream_counts(m) == sec);
  for (int i = 1; i < n; ++i) RC_ASSERT(m.pairs[i].stream >= m.pairs[i - 1].stream);  // blocks
  const std::vector<int> isec = gen_interleaved_sections(n);
  const MropeMap im = reference::mrope_map_interleaved(isec, n);
  RC_ASSERT(reference::mrope_stream_counts(im) == isec);
  for (int i = 0; i < n; ++i) {
    RC_ASSERT(im.pairs[i].freq_index == i);
    RC_ASSERT(m.pairs[i].freq_index == i);
    if (im.pairs[i].stream != 0) RC_ASSERT(im.pairs[i].stream == i % 3);  // h at 1, w at 2 mod 3
  }
  const std::vector<int> ax = gen_split(n, *rc::gen::inRange(1, 4), true);
  RC_ASSERT(reference::mrope_stream_counts(reference::mrope_map_axial(ax, n)) == ax);
}

TEST(MropeMapsSpot, Qwen3VlInterleavedAndGgmlImrope) {
  // Qwen3-VL: 64 pairs, mrope_section [24, 20, 20]. HF apply_interleaved_mrope overwrites the
  // t-table at slice(1, 60, 3) with h and slice(2, 60, 3) with w: pairs 0..59 cycle t, h, w
  // and pairs 60..63 stay t.
  const MropeMap m = reference::mrope_map_interleaved({24, 20, 20}, 64);
  const std::vector<int> want_head = {0, 1, 2, 0, 1, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(m.pairs[i].stream, want_head[i]) << "pair " << i;
  EXPECT_EQ(m.pairs[58].stream, 1);
  EXPECT_EQ(m.pairs[59].stream, 2);
  for (int i = 60; i < 64; ++i) EXPECT_EQ(m.pairs[i].stream, 0) << "pair " << i;
  // llama.cpp IMROPE with the GGUF sections [24, 20, 20, 0]: t needs c = 0 mod 3, so 61 and 62
  // (1 and 2 mod 3, beyond 3 * 20) fall to the fourth stream; 60 and 63 stay t.
  const MropeMap g = reference::mrope_map_ggml_imrope({24, 20, 20, 0}, 64);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(g.pairs[i].stream, m.pairs[i].stream) << "pair " << i;
  EXPECT_EQ(g.pairs[60].stream, 0);
  EXPECT_EQ(g.pairs[61].stream, 3);
  EXPECT_EQ(g.pairs[62].stream, 3);
  EXPECT_EQ(g.pairs[63].stream, 0);
  // Qwen2-VL [16, 24, 24]: pairs 0..15 t, 16..39 h, 40..63 w.
  const MropeMap s = reference::mrope_map_sectioned({16, 24, 24}, 64);
  EXPECT_EQ(s.pairs[15].stream, 0);
  EXPECT_EQ(s.pairs[16].stream, 1);
  EXPECT_EQ(s.pairs[39].stream, 1);
  EXPECT_EQ(s.pairs[40].stream, 2);
}

TEST(MropeMapsSpot, VisionAxialFrequencies) {
  // Qwen2-VL vision tower: head_dim 80, VisionRotaryEmbedding(40): 20 frequencies
  // 10000^(-2j/40); h reads the first 20 pairs, w the next 20, each with those 20 frequencies.
  const RopeParams v{80, 80, 10000.0, RopeLayout::kHalfSplit, 1.0};
  const auto t = reference::mrope_tables<double>(v, reference::mrope_map_axial({20, 20}, 40));
  for (int j = 0; j < 20; ++j) {
    const double want = 1.0 / std::pow(10000.0, 2.0 * j / 40.0);
    EXPECT_NEAR(t.inv_freq[j], want, 4e-16 * want) << j;
    EXPECT_EQ(t.inv_freq[20 + j], t.inv_freq[j]) << j;
  }
  // Pixtral: head_dim 64, the plain 32 frequencies, h the even ones (freqs[::2]), w the odd.
  const RopeParams px{64, 64, 10000.0, RopeLayout::kHalfSplit, 1.0};
  const auto tp = reference::mrope_tables<double>(px, reference::mrope_map_axial_strided(2, 32));
  const auto plain = reference::rope_inv_freq<double>(px);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(tp.inv_freq[j], plain[2 * j]) << j;
    EXPECT_EQ(tp.inv_freq[16 + j], plain[2 * j + 1]) << j;
  }
}

TEST(MropeMapsSpot, RejectsBadSections) {
  auto expect_message = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message(
      [] {
        reference::mrope_map_sectioned({16, 24, 23}, 64);
      },
      "mrope_map_sectioned: mrope_section must sum to rotary_dim/2 = 64 pairs (got 63)");
  expect_message(
      [] {
        reference::mrope_map_sectioned({16, -1, 49}, 64);
      },
      "mrope_section[1] must be >= 0 (got -1)");
  expect_message(
      [] {
        reference::mrope_map_interleaved({16, 48}, 64);
      },
      "mrope_map_interleaved: mrope_section must have 3 entries (t, h, w) (got 2)");
  expect_message(
      [] {
        reference::mrope_map_interleaved({0, 32, 32}, 64);
      },
      "mrope_map_interleaved: mrope_section[1] too large");
  expect_message(
      [] { reference::mrope_map_axial_strided(3, 64); },
      "mrope_map_axial_strided: rotary_dim/2 must be a positive multiple of n_axes 3 (got 64)");
  const RopeParams p{128, 128, 1e6, RopeLayout::kHalfSplit, 1.0};
  expect_message(
      [&] {
        reference::mrope_tables<double>(p, reference::mrope_map_sectioned({8, 12, 12}, 32));
      },
      "mrope_tables: the map must have rotary_dim/2 = 64 pairs (got 32)");
  const MropeMap m = reference::mrope_map_sectioned({16, 24, 24}, 64);
  const std::vector<std::int64_t> two = {1, 2};
  expect_message([&] { reference::mrope_apply<double>(p, m, two, std::vector<double>(128)); },
                 "mrope_apply: pos must have n_streams = 3 entries (got 2)");
}

// ---- the rotation, typed over float, double and the oracle type -------------------------------

POSENC_TYPED_PROP(MropeReference, TextTokensEqualPlainRope) {
  const RopeParams p = gen_params();
  const int n = p.rotary_dim / 2;
  const MropeMap m =
      *rc::gen::element(reference::mrope_map_sectioned(gen_split(n, 3, false), n),
                        reference::mrope_map_interleaved(gen_interleaved_sections(n), n));
  const std::int64_t pos = *gen_position(kMaxTestPosition) * *rc::gen::element(1, -1);
  const std::vector<std::int64_t> streams(3, pos);
  const auto x = to_real<Real>(*gen_dyadic_vector(p.head_dim));
  const auto y = reference::mrope_apply(p, m, streams, x);
  const auto want = reference::rope_apply(p, pos, x);
  for (int c = 0; c < p.head_dim; ++c) {
    RC_ASSERT(y[c] == want[c]);  // the same operations: identical bits in every Real
  }
}

/// Positions for identities checked in Real: in float the angle's own rounding (|phi| eps)
/// would swamp the tolerance beyond a few thousand.
template <class Real>
constexpr std::int64_t identity_max_position() {
  return std::is_same_v<Real, float> ? 1024 : kMaxTestPosition;
}

POSENC_TYPED_PROP(MropeReference, ScoreDependsOnlyOnTheOffsetOfEachAxis) {
  const RopeParams p = gen_params();
  const MropeMap m = gen_map(p.rotary_dim / 2);
  const int axis = *rc::gen::inRange(0, m.n_streams);
  const std::int64_t lim = identity_max_position<Real>();
  const std::int64_t offset = *gen_position(lim) * *rc::gen::element(1, -1);
  // (P, Q) and (P2, Q2): within each pair the streams other than `axis` are equal, and the
  // offset on `axis` is the same.
  std::vector<std::int64_t> P = gen_stream_positions(m.n_streams, lim), Q = P;
  std::vector<std::int64_t> P2 = gen_stream_positions(m.n_streams, lim), Q2 = P2;
  Q[axis] = P[axis] - offset;
  Q2[axis] = P2[axis] - offset;
  const auto q = to_real<Real>(*gen_dyadic_vector(p.head_dim));
  const auto k = to_real<Real>(*gen_dyadic_vector(p.head_dim));
  const auto t = reference::mrope_tables<Real>(p, m);
  const Real s1 = dot(reference::mrope_apply(p, m, t, P, q), reference::mrope_apply(p, m, t, Q, k));
  const Real s2 =
      dot(reference::mrope_apply(p, m, t, P2, q), reference::mrope_apply(p, m, t, Q2, k));
  std::int64_t biggest = 0;
  for (const auto* v : {&P, &Q, &P2, &Q2}) {
    for (std::int64_t x : *v) biggest = std::max(biggest, x < 0 ? -x : x);
  }
  const Real tol = Real(64 * eps_of<Real>() * (1.0 + 4.0 * static_cast<double>(biggest)) *
                        (to_double(abs_dot(q, k)) + 1e-30));
  rc_assert_close(s2, s1, tol,
                  "q.k on axis " + std::to_string(axis) + " at offset " + std::to_string(offset) +
                      ", other axes moved");
}

POSENC_TYPED_PROP(MropeReference, SectionedAndInterleavedDifferOnlyInTheMap) {
  const RopeParams p = gen_params();
  const int n = p.rotary_dim / 2;
  const std::vector<int> sec = gen_interleaved_sections(n);
  const MropeMap s = reference::mrope_map_sectioned(sec, n);
  const MropeMap i = reference::mrope_map_interleaved(sec, n);
  const std::vector<std::int64_t> pos = gen_stream_positions(3, kMaxTestPosition);
  const auto x = to_real<Real>(*gen_dyadic_vector(p.head_dim));
  const auto ys = reference::mrope_apply(p, s, pos, x);
  const auto yi = reference::mrope_apply(p, i, pos, x);
  bool differ = false;
  for (int c = 0; c < p.head_dim; ++c) {
    const int pair = reference::rope_pair_of_channel(p, c);
    if (pair < 0 || pos[s.pairs[pair].stream] == pos[i.pairs[pair].stream]) {
      RC_ASSERT(ys[c] == yi[c]);  // the same position on the same frequency: the same bits
    } else if (ys[c] != yi[c]) {
      differ = true;
    }
  }
  if constexpr (std::is_same_v<Real, mp50>) {
    // Pair 1 reads t in the sectioned map (when s_t >= 2) and h in the interleaved one.
    const bool pair1_moves =
        sec[0] >= 2 && sec[1] >= 1 && pos[0] != pos[1] &&
        (x[reference::rope_pair_a(p, 1)] != 0 || x[reference::rope_pair_b(p, 1)] != 0);
    if (pair1_moves) RC_ASSERT(differ);
  }
}

POSENC_TYPED_PROP(MropeReference, InverseUndoesRotation) {
  const RopeParams p = gen_params();
  const MropeMap m = gen_map(p.rotary_dim / 2);
  const std::vector<std::int64_t> pos =
      gen_stream_positions(m.n_streams, identity_max_position<Real>());
  const auto x = to_real<Real>(*gen_dyadic_vector(p.head_dim));
  const auto t = reference::mrope_tables<Real>(p, m);
  const auto back =
      reference::mrope_apply_inverse(p, m, t, pos, reference::mrope_apply(p, m, t, pos, x));
  const double biggest = static_cast<double>(*std::max_element(pos.begin(), pos.end()));
  for (int c = 0; c < p.head_dim; ++c) {
    rc_assert_close(back[c], x[c], Real(64 * eps_of<Real>() * (1.0 + 2.0 * biggest) * 2.0),
                    "channel " + std::to_string(c));
  }
}

RC_GTEST_PROP(MropeReferenceRows, RowsEqualOneTokenAtATime, ()) {
  const RopeParams p = gen_params();
  const MropeMap m = gen_map(p.rotary_dim / 2);
  const std::size_t rows = *rc::gen::inRange<std::size_t>(1, 6);
  std::vector<std::int64_t> pos;  // [streams, rows]
  for (int s = 0; s < m.n_streams; ++s) {
    for (std::size_t r = 0; r < rows; ++r) pos.push_back(*gen_position(kMaxTestPosition));
  }
  const auto x = *gen_dyadic_vector(static_cast<int>(rows) * p.head_dim);
  const auto t = reference::mrope_tables<double>(p, m);
  std::vector<double> y(x.size());
  reference::mrope_apply_rows<double>(p, m, t, pos, x, y);
  const std::size_t h = static_cast<std::size_t>(p.head_dim);
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<std::int64_t> tp;
    for (int s = 0; s < m.n_streams; ++s) tp.push_back(pos[s * rows + r]);
    const auto one = reference::mrope_apply(
        p, m, t, tp, std::vector<double>(x.begin() + r * h, x.begin() + (r + 1) * h));
    for (std::size_t c = 0; c < h; ++c) RC_ASSERT(y[r * h + c] == one[c]);
  }
}

TEST(MropeReferenceRows, RejectsForeignTables) {
  const RopeParams p{128, 128, 1e6, RopeLayout::kHalfSplit, 1.0};
  const MropeMap m = reference::mrope_map_sectioned({16, 24, 24}, 64);
  const reference::RopeTables<double> long_tables{std::vector<double>(96, 1.0),
                                                  1.0};  // no read past its end
  const std::vector<std::int64_t> pos = {1, 2, 3};
  try {
    reference::mrope_apply(p, m, long_tables, pos, std::vector<double>(128));
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "mrope_apply: tables.inv_freq must have one entry per pair (64) (got 96)"),
              std::string::npos)
        << e.what();
  }
}

// ---- get_rope_index ---------------------------------------------------------------------------

struct IndexCase {
  std::vector<MropeSpan> layout;
  reference::MropeIndexRule rule;
};

rc::Gen<IndexCase> gen_index_case() {
  return rc::gen::exec([] {
    IndexCase c;
    c.rule.spatial_merge_size = *rc::gen::inRange(1, 4);
    c.rule.temporal =
        *rc::gen::element(MropeTemporal::kFrameIndex, MropeTemporal::kScaledFloat32,
                          MropeTemporal::kScaledFloat64, MropeTemporal::kScaledIntSeconds);
    c.rule.tokens_per_second = *rc::gen::element(2.0, 1.0, 0.5, 3.0, 25.0);
    c.rule.left_padding = *rc::gen::element<std::int64_t>(0, 0, 0, 1, 5);
    const int merge = c.rule.spatial_merge_size;
    const int n_spans = *rc::gen::inRange(1, 7);
    for (int k = 0; k < n_spans; ++k) {
      const auto kind =
          *rc::gen::element(MropeSpanKind::kText, MropeSpanKind::kImage, MropeSpanKind::kVideo);
      if (kind == MropeSpanKind::kText) {
        c.layout.push_back(reference::mrope_text(*rc::gen::inRange(1, 9)));
      } else {
        const std::int64_t t =
            kind == MropeSpanKind::kImage ? *rc::gen::element(1, 1, 2) : *rc::gen::inRange(1, 6);
        const std::int64_t h = merge * *rc::gen::inRange(1, 5), w = merge * *rc::gen::inRange(1, 5);
        MropeSpan s = kind == MropeSpanKind::kImage ? reference::mrope_image(t, h, w)
                                                    : reference::mrope_video(t, h, w);
        s.second_per_grid = *rc::gen::element(1.0, 0.5, 2.0, 2.0 / 3.0, 0.75, 1.5);
        c.layout.push_back(s);
      }
    }
    RC_CLASSIFY(c.rule.left_padding > 0, "padded");
    return c;
  });
}

RC_GTEST_PROP(MropeIndex, TextAdvancesAndResumesAtMaxPlusOne, ()) {
  const IndexCase c = *gen_index_case();
  const auto r = reference::mrope_get_rope_index(c.layout, c.rule);
  const int merge = c.rule.spatial_merge_size;
  std::int64_t j = c.rule.left_padding;
  std::int64_t max_so_far = -1;   // over every stream of every token before j
  std::int64_t last_text_t = -1;  // t of the previous text token
  bool after_visual = false;
  for (const MropeSpan& s : c.layout) {
    const std::int64_t len = reference::mrope_span_tokens(s, merge);
    const std::int64_t st = max_so_far + 1;  // where the span starts
    for (std::int64_t q = 0; q < len; ++q, ++j) {
      const std::int64_t t = r.at(0, j), h = r.at(1, j), w = r.at(2, j);
      if (s.kind == MropeSpanKind::kText) {
        RC_ASSERT(t == h && h == w);  // a text token: one position on every stream
        RC_ASSERT(t > last_text_t);   // increasing along the text
        RC_ASSERT(t == st + q);       // from max + 1, after a visual span too
        if (q == 0 && after_visual) RC_CLASSIFY(true, "text after a visual span");
        last_text_t = t;
      } else {
        // A visual token: (st + tau, st + row, st + column), the first one at st on all three.
        RC_ASSERT(t >= st && h >= st && w >= st);
        RC_ASSERT(h - st < s.grid_h / merge && w - st < s.grid_w / merge);
        if (q == 0) RC_ASSERT(t == st && h == st && w == st);
        after_visual = true;
      }
      max_so_far = std::max({max_so_far, t, h, w});
    }
  }
  RC_ASSERT(r.rope_delta == max_so_far + 1 - r.n_tokens);
}

RC_GTEST_PROP(MropeIndex, DecodeWithRopeDeltasEqualsRecomputing, ()) {
  const IndexCase c = *gen_index_case();
  const std::int64_t n_new = *rc::gen::inRange<std::int64_t>(1, 20);
  const auto prompt = reference::mrope_get_rope_index(c.layout, c.rule);
  std::vector<MropeSpan> longer = c.layout;
  if (longer.back().kind == MropeSpanKind::kText) {
    longer.back().n_text += n_new;  // the generated text continues the last text span
  } else {
    longer.push_back(reference::mrope_text(n_new));
  }
  const auto whole = reference::mrope_get_rope_index(longer, c.rule);
  const auto decode = reference::mrope_decode_positions(prompt.rope_delta, prompt.n_tokens, n_new);
  RC_ASSERT(whole.n_tokens == prompt.n_tokens + n_new);
  for (int s = 0; s < 3; ++s) {
    for (std::int64_t q = 0; q < prompt.n_tokens; ++q) RC_ASSERT(whole.at(s, q) == prompt.at(s, q));
    for (std::int64_t q = 0; q < n_new; ++q) {
      RC_ASSERT(whole.at(s, prompt.n_tokens + q) ==
                decode[static_cast<std::size_t>(s * n_new + q)]);
    }
  }
  RC_ASSERT(whole.rope_delta == prompt.rope_delta);  // text keeps the delta
}

std::vector<std::int64_t> stream(const reference::MropePositions& r, int s) {
  return std::vector<std::int64_t>(r.pos.begin() + s * r.n_tokens,
                                   r.pos.begin() + (s + 1) * r.n_tokens);
}

TEST(MropeIndexSpot, Qwen2VlTextImageText) {
  // Qwen2-VL, spatial_merge_size 2: 2 text tokens, an image of grid (1, 4, 6) patches = 2 x 3
  // merged tokens, 3 text tokens. Text 0, 1 on every stream. The image starts at st = 2:
  // t = 2 for all six, h = 2 + row (2, 2, 2, 3, 3, 3), w = 2 + column (2, 3, 4, 2, 3, 4).
  // Its largest position is 4, so the text resumes at 5: 5, 6, 7. Eleven tokens, largest
  // position 7: rope_delta = 7 + 1 - 11 = -3, and the first decode token (cache position 11)
  // takes 8 on every stream.
  const auto r = reference::mrope_get_rope_index(
      {reference::mrope_text(2), reference::mrope_image(1, 4, 6), reference::mrope_text(3)});
  EXPECT_EQ(stream(r, 0), (std::vector<std::int64_t>{0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 7}));
  EXPECT_EQ(stream(r, 1), (std::vector<std::int64_t>{0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 7}));
  EXPECT_EQ(stream(r, 2), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(r.rope_delta, -3);
  EXPECT_EQ(reference::mrope_decode_positions(r.rope_delta, 11, 1),
            (std::vector<std::int64_t>{8, 8, 8}));
  // The invalid conventions: text resuming at its token index (8, 9, 10), decode at the slot.
  reference::MropeIndexRule bad;
  bad.text_resume = reference::MropeTextResume::kTokenIndex;
  const auto b = reference::mrope_get_rope_index(
      {reference::mrope_text(2), reference::mrope_image(1, 4, 6), reference::mrope_text(3)}, bad);
  EXPECT_EQ(stream(b, 0), (std::vector<std::int64_t>{0, 1, 2, 2, 2, 2, 2, 2, 8, 9, 10}));
  EXPECT_EQ(reference::mrope_decode_positions(r.rope_delta, 11, 1, 3,
                                              reference::MropeDecode::kCachePosition),
            (std::vector<std::int64_t>{11, 11, 11}));
  // Two pad tokens on the left: they hold 1 (HF's ones), the rest is unchanged, and
  // rope_delta = 8 - 13 = -5, so decode at cache position 13 is again 8.
  reference::MropeIndexRule padded;
  padded.left_padding = 2;
  const auto pr = reference::mrope_get_rope_index(
      {reference::mrope_text(2), reference::mrope_image(1, 4, 6), reference::mrope_text(3)},
      padded);
  EXPECT_EQ(stream(pr, 2), (std::vector<std::int64_t>{1, 1, 0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(pr.rope_delta, -5);
}

TEST(MropeIndexSpot, Qwen25VlVideoTemporalScaling) {
  // Qwen2.5-VL: 1 text token, a video of grid (3, 2, 2) = 3 frames of one merged token,
  // second_per_grid 0.75, tokens_per_second 2: tau(f) = floor(1.5 f) = 0, 1, 3, so t = 1, 2, 4
  // (st = 1) and h = w = 1; the text after resumes at 5. Qwen2-VL's frame index gives t = 1, 2, 3
  // and text at 4; casting 0.75 to an integer first gives t = 1, 1, 1 and text at 2.
  const std::vector<MropeSpan> layout = {
      reference::mrope_text(1), reference::mrope_video(3, 2, 2, 0.75), reference::mrope_text(1)};
  auto t_stream = [&](MropeTemporal rule) {
    reference::MropeIndexRule r;
    r.temporal = rule;
    r.tokens_per_second = 2.0;
    return stream(reference::mrope_get_rope_index(layout, r), 0);
  };
  EXPECT_EQ(t_stream(MropeTemporal::kScaledFloat32), (std::vector<std::int64_t>{0, 1, 2, 4, 5}));
  EXPECT_EQ(t_stream(MropeTemporal::kScaledFloat64), (std::vector<std::int64_t>{0, 1, 2, 4, 5}));
  EXPECT_EQ(t_stream(MropeTemporal::kFrameIndex), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t_stream(MropeTemporal::kScaledIntSeconds), (std::vector<std::int64_t>{0, 1, 1, 1, 2}));
  // Where float32 (HF) and float64 part: s = 0.6, tokens_per_second 25 (Qwen2.5-Omni's
  // position_id_per_seconds), frame step 3. In float64, 3 * 0.6 = 1.7999999999999998 and
  // * 25 = 44.99999999999999 -> 44; in float32, 3 * 0.6f rounds to 1.8f (1.80000007) and
  // * 25 = 45.0000018 rounds to 45.0f -> 45 (the intended 1.8 s * 25).
  const std::vector<MropeSpan> tie = {reference::mrope_video(4, 2, 2, 0.6)};
  reference::MropeIndexRule r;
  r.tokens_per_second = 25.0;
  r.temporal = MropeTemporal::kScaledFloat64;
  EXPECT_EQ(stream(reference::mrope_get_rope_index(tie, r), 0),
            (std::vector<std::int64_t>{0, 15, 30, 44}));
  r.temporal = MropeTemporal::kScaledFloat32;
  EXPECT_EQ(stream(reference::mrope_get_rope_index(tie, r), 0),
            (std::vector<std::int64_t>{0, 15, 30, 45}));
}

// The HF releases' get_rope_index (docs/schemes/mrope.md, "Conventions"), on hand-computed
// layouts: text 3, a video of grid (T, 4, 4) merged 2 (2 x 2 tokens per frame), text 2.
// HF <= 4.57 resumes at max + 1; HF 5.x at the video's start + max(h, w) = 3 + 2, its frames
// ignored, rope_delta still from the overall max.
TEST(MropeIndexSpot, ReleaseConventionsOfTheTextAfterAVideo) {
  auto t_and_delta = [](std::int64_t frames, double s, MropeTemporal rule, reference::MropeTextResume resume) {
    const std::vector<MropeSpan> layout = {reference::mrope_text(3), reference::mrope_video(frames, 4, 4, s),
                                           reference::mrope_text(2)};
    reference::MropeIndexRule r;
    r.temporal = rule;
    r.tokens_per_second = 2.0;
    r.text_resume = resume;
    const auto P = reference::mrope_get_rope_index(layout, r);
    return std::make_pair(stream(P, 0), P.rope_delta);
  };
  using R = reference::MropeTextResume;
  // Qwen2-VL, T = 2 = max(h, w): both releases agree.
  for (R res : {R::kMaxPlusOne, R::kMaxHw}) {
    const auto [t, delta] = t_and_delta(2, 1.0, MropeTemporal::kFrameIndex, res);
    EXPECT_EQ(t, (std::vector<std::int64_t>{0, 1, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 6}));
    EXPECT_EQ(delta, -6);
  }
  // Qwen2.5-VL at s = 1.5: the trained float product trunc(3f) puts frame 1 at 6, text at 7, 8;
  // the integer seconds of HF 4.52-5.15 step by 2 (5), text at 6, 7; HF 5.x with the float
  // product resumes at 3 + 2 = 5, reusing the video's temporal positions, and decodes from 7.
  auto a = t_and_delta(2, 1.5, MropeTemporal::kScaledFloat32, R::kMaxPlusOne);
  EXPECT_EQ(a.first, (std::vector<std::int64_t>{0, 1, 2, 3, 3, 3, 3, 6, 6, 6, 6, 7, 8}));
  EXPECT_EQ(a.second, -4);
  a = t_and_delta(2, 1.5, MropeTemporal::kScaledIntSeconds, R::kMaxPlusOne);
  EXPECT_EQ(a.first, (std::vector<std::int64_t>{0, 1, 2, 3, 3, 3, 3, 5, 5, 5, 5, 6, 7}));
  EXPECT_EQ(a.second, -5);
  a = t_and_delta(2, 1.5, MropeTemporal::kScaledFloat32, R::kMaxHw);
  EXPECT_EQ(a.first, (std::vector<std::int64_t>{0, 1, 2, 3, 3, 3, 3, 6, 6, 6, 6, 5, 6}));
  EXPECT_EQ(a.second, -6);
  // s = 0.5: the integer seconds put every frame at 3.
  a = t_and_delta(2, 0.5, MropeTemporal::kScaledIntSeconds, R::kMaxPlusOne);
  EXPECT_EQ(a.first, (std::vector<std::int64_t>{0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 5, 6}));
  EXPECT_EQ(std::string(reference::mrope_text_resume_name(R::kMaxHw)), "max_hw");
}

// HF's rot_pos_emb on a grid of 4 x 4 patches merged 2 x 2: the windows row by row, each
// window's patches row by row; frames repeat the same positions.
TEST(MropeIndexSpot, VisionTowerPatchOrder) {
  const auto p = reference::mrope_vision_positions(2, 4, 4, 2);
  const std::vector<std::int64_t> h = {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3};
  const std::vector<std::int64_t> w = {0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3};
  ASSERT_EQ(p.size(), 64u);
  for (std::size_t f = 0; f < 2; ++f) {
    for (std::size_t j = 0; j < 16; ++j) {
      EXPECT_EQ(p[16 * f + j], h[j]) << "frame " << f << " patch " << j;
      EXPECT_EQ(p[32 + 16 * f + j], w[j]) << "frame " << f << " patch " << j;
    }
  }
  auto expect_message = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message([] { reference::mrope_vision_positions(1, 6, 5, 2); },
                 "mrope_vision_positions: h and w must be divisible by merge 2 (got 5)");
  expect_message([] { reference::mrope_vision_positions(0, 4, 4, 2); },
                 "mrope_vision_positions: t must be in [1, 2^16] (got 0)");
}

TEST(MropeIndexSpot, RejectsBadLayouts) {
  auto expect_message = [](const std::vector<MropeSpan>& l, reference::MropeIndexRule r,
                           const std::string& needle) {
    try {
      reference::mrope_get_rope_index(l, r);
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_message({reference::mrope_text(1), reference::mrope_image(1, 5, 4)}, {},
                 "mrope_get_rope_index: spans[1]: grid_h and grid_w must be divisible by "
                 "spatial_merge_size 2 (got 5)");
  expect_message({reference::mrope_image(0, 4, 4)}, {},
                 "spans[0].grid_t must be in [1, 2^16] (got 0)");
  expect_message({reference::mrope_text(0)}, {}, "spans[0].n_text must be in [1, 2^26] (got 0)");
  expect_message({}, {}, "the layout must have at least one span");
  reference::MropeIndexRule r;
  r.spatial_merge_size = 0;
  expect_message({reference::mrope_text(1)}, r, "spatial_merge_size must be in [1, 64] (got 0)");
  r = {};
  r.temporal = MropeTemporal::kScaledFloat64;
  r.tokens_per_second = -2.0;
  expect_message({reference::mrope_text(1)}, r, "tokens_per_second must be in (0, 1e6] (got -2)");
  r.tokens_per_second = 2.0;
  expect_message({reference::mrope_video(2, 2, 2, std::nan(""))}, r, "spans[0].second_per_grid");
  EXPECT_THROW(reference::mrope_decode_positions(0, -1, 1), InvalidArgument);
}

// ---- the float kernel against the oracle ------------------------------------------------------

struct OptCase {
  RopeParams p;
  MropeMap map;
  optimized::RopeShape qs, ks;
  std::vector<std::int64_t> pos;  // [n_streams, tokens]
  std::vector<double> q, k;
};

rc::Gen<OptCase> gen_opt_case(std::int64_t max_tokens) {
  return rc::gen::exec([max_tokens] {
    OptCase c;
    c.p = gen_params();
    c.p.attention_factor = *rc::gen::element(1.0, 1.0, 0.5, 1.2079441541679836);
    c.map = gen_map(c.p.rotary_dim / 2);
    const std::int64_t tokens = *rc::gen::inRange<std::int64_t>(1, max_tokens + 1);
    const auto layout = *rc::gen::element(optimized::RopeTensorLayout::kTokensHeadsDim,
                                          optimized::RopeTensorLayout::kHeadsTokensDim);
    c.qs = {tokens, *rc::gen::inRange(1, 4), layout};
    c.ks = {tokens, *rc::gen::inRange(1, 3), layout};
    for (int s = 0; s < c.map.n_streams; ++s) {
      for (std::int64_t t = 0; t < tokens; ++t) {
        c.pos.push_back(*rc::gen::oneOf(
            gen_position(kMaxTestPosition),
            rc::gen::inRange(-optimized::kMropeMaxPosition, optimized::kMropeMaxPosition + 1)));
      }
    }
    c.q = *gen_dyadic_vector(static_cast<int>(tokens * c.qs.n_heads * c.p.head_dim), 24);
    c.k = *gen_dyadic_vector(static_cast<int>(tokens * c.ks.n_heads * c.p.head_dim), 24);
    return c;
  });
}

void apply_kernel(const OptCase& c, std::vector<float>* qo, std::vector<float>* ko) {
  const std::vector<float> qf(c.q.begin(), c.q.end()), kf(c.k.begin(), c.k.end());
  qo->assign(qf.size(), 0.0f);
  ko->assign(kf.size(), 0.0f);
  optimized::mrope_apply_qk_positions(c.p, c.map, c.pos, 0.0, c.qs, qf, *qo, c.ks, kf, *ko);
}

/// Every element of y against the mp50 oracle: |y - y*| <= kMropeMaxError eps_f32 a (|x_a| +
/// |x_b|).
void check_against_oracle(const OptCase& c, const optimized::RopeShape& s,
                          const std::vector<double>& x, const std::vector<float>& y,
                          double* max_ratio) {
  const RopeParams& p = c.p;
  const auto tables = reference::mrope_tables<mp50>(p, c.map);
  const int h = p.head_dim;
  const std::int64_t n = s.n_tokens;
  for (std::int64_t t = 0; t < n; ++t) {
    std::vector<std::int64_t> tp;
    for (int st = 0; st < c.map.n_streams; ++st)
      tp.push_back(c.pos[static_cast<std::size_t>(st * n + t)]);
    for (int hh = 0; hh < s.n_heads; ++hh) {
      const std::int64_t row = s.layout == optimized::RopeTensorLayout::kTokensHeadsDim
                                   ? t * s.n_heads + hh
                                   : hh * n + t;
      const std::vector<double> xr(x.begin() + row * h, x.begin() + (row + 1) * h);
      const auto want = reference::mrope_apply(p, c.map, tables, tp, to_real<mp50>(xr));
      for (int ch = 0; ch < h; ++ch) {
        const double got = static_cast<double>(y[row * h + ch]);
        const int i = reference::rope_pair_of_channel(p, ch);
        if (i < 0) {
          RC_ASSERT(got == xr[ch]);
          continue;
        }
        const double cond = p.attention_factor * (std::fabs(xr[reference::rope_pair_a(p, i)]) +
                                                  std::fabs(xr[reference::rope_pair_b(p, i)]));
        const double bound = optimized::kMropeMaxError * 0x1p-23 * cond;
        const double err = std::fabs(static_cast<double>(mp50(got) - want[ch]));
        if (bound > 0) *max_ratio = std::max(*max_ratio, err / bound);
        if (err > bound) {
          RC_FAIL(describe_close("token " + std::to_string(t) + " head " + std::to_string(hh) +
                                     " channel " + std::to_string(ch) + " pair " +
                                     std::to_string(i) + " (stream " +
                                     std::to_string(c.map.pairs[i].stream) + " at " +
                                     std::to_string(tp[c.map.pairs[i].stream]) + ", map " +
                                     reference::mrope_map_rule_name(c.map.rule) + ")",
                                 got, static_cast<double>(want[ch]), bound));
        }
      }
    }
  }
}

TEST(MropeOptimized, MatchesOracleWithinBound) {
  double max_f32 = 0;
  rc::detail::checkGTest([&] {
    const OptCase c = *gen_opt_case(6);
    std::vector<float> qo, ko;
    apply_kernel(c, &qo, &ko);
    check_against_oracle(c, c.qs, c.q, qo, &max_f32);
    check_against_oracle(c, c.ks, c.k, ko, &max_f32);
  });
  std::printf("MropeOptimized measured max error: %.4f of kMropeMaxError\n", max_f32);
}

// The golden cases' hard positions (representability edges, 2^k - 1, angles near pi/2) up to
// 2^24, one axis at a time: the other streams hold a fixed ordinary position, so every pair of
// the moving stream meets every hard position. Qwen2-VL (sectioned), Qwen3-VL (interleaved,
// base 5e6), and the Qwen2-VL vision tower (axial, 2 streams).
TEST(MropeOptimized, HardPositionsPerAxisWithinOracleBound) {
  std::vector<std::int64_t> hard = golden::near_half_pi_positions(std::int64_t{1} << 24, 16);
  for (const auto& hp : golden::hard_positions()) {
    if (hp.m <= (std::int64_t{1} << 24)) hard.push_back(hp.m);
  }
  hard.push_back(std::int64_t{1} << 24);
  hard.push_back(-(std::int64_t{1} << 24));
  struct Model {
    const char* name;
    RopeParams p;
    MropeMap map;
  };
  const std::vector<Model> models = {
      {"qwen2-vl",
       {128, 128, 1e6, RopeLayout::kHalfSplit, 1.0},
       reference::mrope_map_sectioned({16, 24, 24}, 64)},
      {"qwen3-vl",
       {128, 128, 5e6, RopeLayout::kHalfSplit, 1.0},
       reference::mrope_map_interleaved({24, 20, 20}, 64)},
      {"qwen2-vl-vision",
       {80, 80, 1e4, RopeLayout::kHalfSplit, 1.0},
       reference::mrope_map_axial({20, 20}, 40)},
  };
  double max_f32 = 0;
  for (const Model& md : models) {
    for (int axis = 0; axis < md.map.n_streams; ++axis) {
      OptCase c;
      c.p = md.p;
      c.map = md.map;
      const auto n = static_cast<std::int64_t>(hard.size());
      for (int s = 0; s < md.map.n_streams; ++s) {
        for (std::int64_t t = 0; t < n; ++t) c.pos.push_back(s == axis ? hard[t] : 1000 + t);
      }
      c.qs = {n, 1, optimized::RopeTensorLayout::kTokensHeadsDim};
      c.ks = {n, 1, optimized::RopeTensorLayout::kHeadsTokensDim};
      for (std::int64_t i = 0; i < n * c.p.head_dim; ++i) {
        c.q.push_back(std::ldexp(static_cast<double>((i * 2654435761LL) % 2001 - 1000), -10));
        c.k.push_back(std::ldexp(static_cast<double>((i * 40503LL) % 2001 - 1000), -10));
      }
      std::vector<float> qo, ko;
      apply_kernel(c, &qo, &ko);
      try {  // the checks report through RapidCheck's assertions: one deterministic case here
        check_against_oracle(c, c.qs, c.q, qo, &max_f32);
        check_against_oracle(c, c.ks, c.k, ko, &max_f32);
      } catch (const rc::detail::CaseResult& r) {
        FAIL() << md.name << " axis " << axis << ": " << r.description;
      }
    }
  }
  std::printf(
      "MropeOptimized hard positions (%zu per axis, up to 2^24): max error %.4f of "
      "kMropeMaxError\n",
      hard.size(), max_f32);
}

RC_GTEST_PROP(MropeOptimized, IdenticalBitsForAnyThreadCount, ()) {
  const OptCase c = *gen_opt_case(5 * optimized::kMropeTokenBlock);
  rc_assert_same_bits_for_thread_counts([&] {
    std::vector<float> q2, k2;
    apply_kernel(c, &q2, &k2);
    return std::tuple{q2, k2};
  });
}

RC_GTEST_PROP(MropeOptimized, TextTokensGiveTheRopeKernelsBits, ()) {
  OptCase c = *gen_opt_case(3 * optimized::kMropeTokenBlock);
  const int n = c.p.rotary_dim / 2;
  c.map = *rc::gen::element(reference::mrope_map_sectioned(gen_split(n, 3, false), n),
                            reference::mrope_map_interleaved(gen_interleaved_sections(n), n));
  const std::vector<std::int64_t> m(c.pos.begin(), c.pos.begin() + c.qs.n_tokens);
  c.pos = reference::mrope_text_positions(m, 3);
  std::vector<float> qo, ko;
  apply_kernel(c, &qo, &ko);
  const std::vector<float> qf(c.q.begin(), c.q.end()), kf(c.k.begin(), c.k.end());
  std::vector<float> qr(qf.size()), kr(kf.size());
  optimized::rope_apply_qk_positions(c.p, m, {}, 0.0, c.qs, qf, qr, c.ks, kf, kr);
  RC_ASSERT(same_bits(qo, qr));
  RC_ASSERT(same_bits(ko, kr));
}

RC_GTEST_PROP(MropeOptimized, InPlaceEqualsOutOfPlace, ()) {
  const OptCase c = *gen_opt_case(20);
  std::vector<float> qo, ko;
  apply_kernel(c, &qo, &ko);
  std::vector<float> qf(c.q.begin(), c.q.end()), kf(c.k.begin(), c.k.end());
  optimized::mrope_apply_qk_positions(c.p, c.map, c.pos, 0.0, c.qs, qf, qf, c.ks, kf, kf);
  RC_ASSERT(same_bits(qf, qo));
  RC_ASSERT(same_bits(kf, ko));
}

TEST(MropeOptimized, RejectsBadArguments) {
  const RopeParams p{8, 8, 10000.0, RopeLayout::kHalfSplit, 1.0};
  const MropeMap m = reference::mrope_map_sectioned({2, 1, 1}, 4);
  std::vector<float> x(2 * 8), y(x.size());
  const optimized::RopeShape s{2, 1, optimized::RopeTensorLayout::kTokensHeadsDim};
  auto expect_message = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      FAIL() << "no exception for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<std::int64_t> pos = {0, 1, 0, 1, 0, 1};
  const std::vector<std::int64_t> short_pos = {0, 1, 0, 1};
  expect_message(
      [&] { optimized::mrope_apply_qk_positions(p, m, short_pos, 0, s, x, y, {}, {}, {}); },
      "mrope_apply_qk_positions: positions must have n_streams * tokens = 6 entries "
      "([streams, tokens]) (got 4)");
  std::vector<std::int64_t> far = pos;
  far[3] = optimized::kMropeMaxPosition + 1;
  expect_message([&] { optimized::mrope_apply_qk_positions(p, m, far, 0, s, x, y, {}, {}, {}); },
                 "mrope_apply_qk_positions: positions[stream 1, token 1] must satisfy |p| <= 2^28 "
                 "(got 268435457)");
  expect_message(
      [&] {
        optimized::mrope_apply_qk_positions(p, reference::mrope_map_sectioned({2, 2}, 4), pos, 0, s,
                                            x, y, {}, {}, {});
      },
      "positions must have n_streams * tokens = 4 entries");
  expect_message(
      [&] {
        optimized::mrope_apply_qk_positions(p, reference::mrope_map_sectioned({4, 2}, 6), pos, 0, s,
                                            x, y, {}, {}, {});
      },
      "mrope_apply_qk_positions: the map must have rotary_dim/2 = 4 pairs (got 6)");
  expect_message(
      [&] {
        optimized::mrope_apply_qk_positions(p, m, pos, 0, s, std::span<const float>(x).first(15), y,
                                            {}, {}, {});
      },
      "mrope_apply_qk_positions: q must have tokens*heads*head_dim = 16 elements (got 15)");
  expect_message(
      [&] {
        std::vector<float> kk(3 * 8), ko(kk.size());
        optimized::mrope_apply_qk_positions(p, m, pos, 0, s, x, y, {3, 1, s.layout}, kk, ko);
      },
      "k.n_tokens must equal q's 2 tokens (got 3)");
}


// ---- golden cases (golden/schemes/mrope/mrope_golden.cpp) ---------------------------------------------------

TEST(MropeGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("mrope", 34); }
TEST(MropeGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("mrope"); }

// Every mistake fails every valid case it can be seen in: rope_deltas only matter at decode (every
// trace decodes); the KV-cache mistakes only in the traces that have what they break: a second
// request (stale deltas), a prefill not starting at 0 (chunks, a reused prefix), a draft step, a
// removal by position (truncate after an image, shift).
TEST(MropeGolden, EngineMistakesAreCaught) {
  expect_engine_mistakes_caught("mrope", [](const std::string& id, const std::string& mistake) {
    if (id.find("_invalid_") != std::string::npos) return true;  // NegativeControls below
    auto in = [&](const char* s) { return id.find(s) != std::string::npos; };
    // the vision tower has no prompt, decode or cache: only its map and its two streams
    if (in("_vision_tower")) return mistake != "wrong-map" && mistake != "stream-permutation";
    if (mistake == "no-rope-deltas") return !in("decode") && !in("_trace_");
    // llama.cpp's IMROPE moves two pairs of angle ~4e-7 rad per position: below an f16 target's
    // budget at these positions
    if (mistake == "ggml-imrope") return in("qwen3_vl") && in("_f16");
    if (mistake == "stale-rope-deltas") return !in("_trace_prefix_reuse");
    if (mistake == "prompt-not-sliced") return !in("_trace_chunked_prefill") && !in("_trace_prefix_reuse");
    if (mistake == "draft-slot-from-t") return !in("_trace_speculative");
    if (mistake == "seq-rm-count") {  // a removal after an image: truncate or shift
      return !in("_trace_prefix_reuse") && !in("_trace_speculative") && !in("_trace_context_shift");
    }
    return false;
  });
}

// by stage: a trace has one tensor of each stage per step (cache: the cached keys).
TEST(MropeGolden, PipelinesPassTheirProfiles) {
  expect_pipelines_pass_their_profiles("mrope", 0.25, {"scores"}, true);
}

TEST(MropeGolden, FloatPipelinesFailStrict) {
  expect_float_pipelines_fail_strict("mrope", [](const std::string& id, const std::string&) {
    return id.find("_invalid_") == std::string::npos && id.find("_f32") != std::string::npos;
  });
}

TEST(MropeGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("mrope", "mrope_qwen2_vl_7b_instruct_decode_after_image_f32.json");
}

/// The valid case a negative control was made from (same inputs): its id without
/// "_<convention>_invalid".
std::string twin_of(const golden::LoadedCase& lc) {
  const std::string conv = lc.spec.manifest.at("negative_control").at("convention").get<std::string>();
  std::string id = lc.spec.id;
  const std::string tag = "_" + conv + "_invalid";
  id.erase(id.find(tag), tag.size());
  return id;
}

// Each negative control: the correct engine passes it (its output differs from the known-wrong
// values), the engine with the mistake it models fails it; and its values, given as an engine's
// output for its valid twin, fail the twin under every profile that applies there.
TEST(MropeGolden, NegativeControlsFailUnderEveryProfile) {
  const auto dir = golden::default_data_dir() / "mrope";
  int n = 0;
  for_each_golden_case("mrope", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid") return;
    ++n;
    const std::string mistake = lc.spec.manifest.at("negative_control").at("mistake").get<std::string>();
    EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {}), {"strict", {}, true}).status,
              golden::Verdict::kPass) << lc.spec.id;
    EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {mistake}), {"strict", {}, true}).status,
              golden::Verdict::kFail) << lc.spec.id << " with " << mistake;
    const auto twin = generator_mutant_active() ? fresh_case(s, twin_of(lc)) : golden::load_case(dir / (twin_of(lc) + ".json"));
    golden::TensorMap actual;
    for (const auto& e : lc.spec.expected) actual.emplace(e.name, lc.golden.at(e.name));
    int judged = 0;
    for (const auto& prof : golden::profiles()) {
      if (!profile_applies(twin.spec, prof.name)) continue;
      ++judged;
      const auto r = golden::verify_case(twin.spec, twin.golden, actual, {prof.name, {}, true});
      EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id << " passes " << twin.spec.id << " under " << prof.name;
    }
    EXPECT_GE(judged, 3) << lc.spec.id;
  });
  EXPECT_EQ(n, 12);
}

// diagnose names the mistake of each negative control: its values as a float32 engine's output
// for the twin are explained first by the control's own mistake.
TEST(MropeGolden, DiagnoseNamesEachNegativeControlsMistake) {
  const auto dir = golden::default_data_dir() / "mrope";
  for_each_golden_case("mrope", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid") return;
    const std::string mistake = lc.spec.manifest.at("negative_control").at("mistake").get<std::string>();
    const auto twin = generator_mutant_active() ? fresh_case(s, twin_of(lc)) : golden::load_case(dir / (twin_of(lc) + ".json"));
    golden::EngineOptions eo;
    eo.pipeline = "fp32";
    eo.mistake = mistake;
    const auto actual = s.run_engine(twin.spec, twin.golden, eo);
    const auto d = golden::diagnose_case(twin, actual, "fp32");
    EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
    ASSERT_FALSE(d.ranked.empty());
    EXPECT_EQ(d.ranked.front().mistake, mistake) << lc.spec.id << "\n" << golden::diagnosis_text(d, true);
  });
}

// llama.cpp's IMROPE as a float32-recurrence engine computes it (ggml's theta *= theta_scale
// with the ggml_imrope map: Qwen3-VL's pairs 61 and 62 on the fourth stream, 0) fails the
// Qwen3-VL case under fp32-recurrence, and diagnose names the map; the same recurrence with HF's
// interleaved map passes.
TEST(MropeGolden, LlamaCppImropeFailsFp32RecurrenceAndIsNamed) {
  const auto lc = golden::load_case(golden::default_data_dir() / "mrope" / "mrope_qwen3_vl_8b_instruct_text_image_text_f32.json");
  const auto& s = golden::scheme_by_slug("mrope");
  golden::EngineOptions eo;
  eo.pipeline = "fp32-recurrence";
  EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, eo), {"fp32-recurrence", {}, true}).status,
            golden::Verdict::kPass);
  eo.mistake = "ggml-imrope";
  const auto actual = s.run_engine(lc.spec, lc.golden, eo);
  const auto r = golden::verify_case(lc.spec, lc.golden, actual, {"fp32-recurrence", {}, true});
  EXPECT_EQ(r.status, golden::Verdict::kFail) << golden::format_case_text(r, true);
  const auto d = golden::diagnose_case(lc, actual, "fp32-recurrence");
  EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
  ASSERT_FALSE(d.ranked.empty());
  EXPECT_EQ(d.ranked.front().mistake, "ggml-imrope") << golden::diagnosis_text(d, true);
}

// ---- KV-cache traces (golden/schemes/mrope/mrope_trace.inc) --------------------------------------------------

/// The layout of a manifest's "spans" list, read here (not by the generator's reader).
std::vector<reference::MropeSpan> spans_of(const nlohmann::json& spans) {
  std::vector<reference::MropeSpan> v;
  for (const auto& s : spans) {
    if (s.at("type") == "text") {
      v.push_back(reference::mrope_text(s.at("tokens").get<std::int64_t>()));
      continue;
    }
    const auto g = s.at("grid_thw").get<std::vector<std::int64_t>>();
    v.push_back(s.at("type") == "image" ? reference::mrope_image(g[0], g[1], g[2])
                                        : reference::mrope_video(g[0], g[1], g[2], s.at("second_per_grid").get<double>()));
  }
  return v;
}

// Every valid trace's RoPE positions are get_rope_index of its request's whole prompt (sliced at
// the token's cache position) for prompt tokens, and cache position + that prompt's rope_delta
// after it (and after a shift, which moves both alike): chunking, prefix reuse, drafts and shifts
// change where a token is computed and stored, never its position.
TEST(MropeTrace, RopePositionsEqualGetRopeIndexOfTheirRequest) {
  int n = 0;
  for_each_golden_case("mrope", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (lc.spec.result != "valid" || !lc.spec.manifest.contains("trace")) return;
    ++n;
    const auto& pj = lc.spec.manifest.at("params");
    reference::MropeIndexRule rule;
    rule.spatial_merge_size = pj.at("index").at("spatial_merge_size").get<int>();
    std::vector<reference::MropePositions> P;
    for (const auto& r : lc.spec.manifest.at("trace").at("requests")) {
      P.push_back(reference::mrope_get_rope_index(spans_of(r.at("spans")), rule));
    }
    bool shifted = false;
    int checked = 0;
    for (const auto& js : lc.spec.manifest.at("trace").at("steps")) {
      const std::string sn = js.at("name").get<std::string>();
      shifted |= js.at("kind") == "shift";
      if (!js.contains("tokens")) continue;
      const auto& p = P.at(js.at("request").get<std::size_t>());
      const golden::Tensor& c = lc.golden.at(sn + ".positions");
      const golden::Tensor& rp = lc.golden.at(sn + ".rope_positions");
      for (std::int64_t i = 0; i < c.numel(); ++i, ++checked) {
        const std::int64_t cp = c.get_i64(i);
        for (int st = 0; st < 3; ++st) {
          const std::int64_t want = !shifted && cp < p.n_tokens ? p.at(st, cp) : cp + p.rope_delta;
          EXPECT_EQ(rp.get_i64(3 * i + st), want) << lc.spec.id << " " << sn << " token " << i << " stream " << st;
        }
      }
    }
    EXPECT_GT(checked, 0) << lc.spec.id;
  });
  EXPECT_EQ(n, 4);
}

// Each trace negative control, as the output of the engine with its mistake for the valid twin:
// verify fails it and names as the first failing step the first step whose expected tensors
// differ between the control and the twin (read from the two files); the steps before it pass.
TEST(MropeTrace, VerifyNamesTheFirstStepTheMistakeChanges) {
  const auto dir = golden::default_data_dir() / "mrope";
  int n = 0;
  for_each_golden_case("mrope", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid" || !lc.spec.manifest.contains("trace")) return;
    ++n;
    const std::string mistake = lc.spec.manifest.at("negative_control").at("mistake").get<std::string>();
    const auto twin = generator_mutant_active() ? fresh_case(s, twin_of(lc)) : golden::load_case(dir / (twin_of(lc) + ".json"));
    int first = -1;
    for (const auto& js : twin.spec.manifest.at("trace").at("steps")) {
      for (const auto& name : js.at("expected")) {
        if (twin.golden.at(name.get<std::string>()).data != lc.golden.at(name.get<std::string>()).data) {
          first = js.at("index").get<int>();
        }
      }
      if (first >= 0) break;
    }
    ASSERT_GE(first, 0) << lc.spec.id << " equals its twin";
    golden::EngineOptions eo;
    eo.pipeline = "fp32";
    eo.mistake = mistake;
    const auto r = golden::verify_case(twin.spec, twin.golden, s.run_engine(twin.spec, twin.golden, eo), {"fp32", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id;
    ASSERT_TRUE(r.trace.has_value()) << lc.spec.id;
    EXPECT_EQ(r.trace->index, first) << lc.spec.id << ": " << golden::trace_text(*r.trace, false);
  });
  EXPECT_EQ(n, 4);
}

// ---- the VL config reader (golden/cases/mrope_case.hpp) -----------------------------------------

TEST(MropeConfig, EveryVlPresetGivesCases) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(golden::default_presets_dir())) {
    if (!golden::mrope_config_is_vl(nlohmann::json::parse(golden::read_json_text(e.path())))) continue;
    ++n;
    const auto cc = golden::cases_for_config(e.path(), {}, DType::kF32);
    EXPECT_GE(cc.cases.size(), 3u) << e.path();
    for (const auto& c : cc.cases) EXPECT_EQ(c.scheme, "mrope") << c.id;
  }
  EXPECT_EQ(n, 4);
}

TEST(MropeConfig, PresetFacts) {
  const auto dir = golden::default_presets_dir();
  const auto q2 = golden::cases_for_config(dir / "qwen2-vl-7b-instruct.json", {}, DType::kF32);
  EXPECT_NE(q2.model.find("sectioned mrope_section [16, 24, 24], head_dim 128, base 1000000.0"), std::string::npos) << q2.model;
  EXPECT_NE(q2.model.find("video time frame_index"), std::string::npos) << q2.model;
  const auto q25 = golden::cases_for_config(dir / "qwen2.5-vl-7b-instruct.json", {}, DType::kF32);
  EXPECT_NE(q25.model.find("video time scaled_float32"), std::string::npos) << q25.model;
  const auto q3 = golden::cases_for_config(dir / "qwen3-vl-8b-instruct.json", {}, DType::kF32);
  EXPECT_NE(q3.model.find("interleaved mrope_section [24, 20, 20], head_dim 128, base 5000000.0, 32 q / 8 kv"),
            std::string::npos) << q3.model;
  // A committed preset gives the catalog's own cases, byte for byte.
  int same = 0;
  for (const auto& c : q3.cases) {
    if (c.id != "mrope_qwen3_vl_8b_instruct_text_image_text_f32") continue;
    const auto f = golden::case_files(c.generate());
    const auto committed = golden::case_files(golden::scheme_by_slug("mrope").generate(c.id));
    EXPECT_EQ(f.tensors, committed.tensors);
    EXPECT_EQ(f.manifest_text, committed.manifest_text);
    ++same;
  }
  EXPECT_EQ(same, 1);
}

// GLM-4.1V (golden/presets/glm-4.1v-9b-thinking.json): the sectioned [8, 12, 12] map over
// int(128 * 0.5) = 64 rotated channels in adjacent pairs; no video layout; the config's cases
// are the catalog's, byte for byte. Its text tokens checked against HF's
// apply_multimodal_rotary_pos_emb written out in double (t = h = w = m: pair (2i, 2i + 1)
// rotated by m 10000^(-2i/64); channels 64..127 unchanged).
TEST(MropeConfig, Glm41vPresetFacts) {
  const auto g = golden::cases_for_config(golden::default_presets_dir() / "glm-4.1v-9b-thinking.json",
                                          {}, DType::kF32);
  EXPECT_NE(g.model.find("sectioned mrope_section [8, 12, 12], head_dim 128, rotary_dim 64, interleaved "
                         "pairs, base 10000.0, 32 q / 2 kv"),
            std::string::npos)
      << g.model;
  const std::string id = "mrope_glm_4_1v_9b_thinking_";
  std::vector<std::string> ids;
  for (const auto& c : g.cases) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<std::string>{id + "text_image_text_f32", id + "two_images_f32",
                                           id + "decode_after_image_f32"}));
  ASSERT_FALSE(g.cases.empty());
  const golden::GoldenCase gc = g.cases.front().generate();
  const auto f = golden::case_files(gc);
  const auto committed = golden::case_files(golden::scheme_by_slug("mrope").generate(ids.front()));
  EXPECT_EQ(f.tensors, committed.tensors);
  EXPECT_EQ(f.manifest_text, committed.manifest_text);
  EXPECT_EQ(gc.manifest.at("params").at("layout"), "interleaved");
  EXPECT_EQ(gc.manifest.at("params").at("rotary_dim"), 64);
  std::map<std::string, const golden::Tensor*> t;
  for (const auto& x : gc.tensors) t[x.name] = &x;
  for (const char* n : {"input_ids", "positions", "q", "q_rot"}) ASSERT_TRUE(t.count(n)) << n;
  const std::int64_t T = t["input_ids"]->numel();
  const int H = 2, D = 128;
  ASSERT_EQ(t["q"]->numel(), T * H * D);
  int text_tokens = 0;
  double worst = 0;
  for (std::int64_t j = 0; j < T; ++j) {
    const std::int64_t m = t["positions"]->get_i64(j);
    if (t["positions"]->get_i64(T + j) != m || t["positions"]->get_i64(2 * T + j) != m) continue;
    ++text_tokens;
    for (int h = 0; h < H; ++h) {
      const std::int64_t row = (j * H + h) * D;
      for (int i = 0; i < 32; ++i) {
        const double phi = static_cast<double>(m) * std::pow(10000.0, -2.0 * i / 64.0);
        const double a = t["q"]->get_f64(row + 2 * i), b = t["q"]->get_f64(row + 2 * i + 1);
        worst = std::max(worst, std::fabs(t["q_rot"]->get_f64(row + 2 * i) - (a * std::cos(phi) - b * std::sin(phi))));
        worst = std::max(worst, std::fabs(t["q_rot"]->get_f64(row + 2 * i + 1) - (b * std::cos(phi) + a * std::sin(phi))));
      }
      for (int c = 64; c < D; ++c) EXPECT_EQ(t["q_rot"]->get_f64(row + c), t["q"]->get_f64(row + c)) << j << " " << c;
    }
  }
  EXPECT_EQ(text_tokens, 8);  // t = h = w: the 3 + 4 text tokens and the image's first patch
  EXPECT_LT(worst, 1e-6);     // float32 rounding of values below 1 (and the libm's cos, sin)
}

TEST(MropeConfig, BadValuesNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_mrope_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto expect_error = [&](const std::string& config, const std::string& layout, const std::string& what) {
    std::ofstream(dir / "config.json") << config;
    std::filesystem::path lp;
    if (!layout.empty()) {
      lp = dir / "layout.json";
      std::ofstream(lp) << layout;
    }
    try {
      golden::cases_for_config(dir / "config.json", {}, DType::kF32, 1, lp);
      ADD_FAILURE() << "accepted: " << config << " " << layout;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const std::string base = R"({"model_type": "qwen2_vl", "hidden_size": 256, "num_attention_heads": 4,
    "num_key_value_heads": 2, "rope_theta": 10000.0, "vision_config": {"spatial_merge_size": 2},
    "rope_scaling": {"type": "mrope", "mrope_section": )";
  expect_error(base + "[8, 12, 10]}}", "", "rope_scaling.mrope_section = [8,12,10]: must sum to head_dim / 2 = 32");
  expect_error(base + "[8, 12, 12], \"factor\": 2}}", "", "rope_scaling.factor = 2: not an M-RoPE key");
  expect_error(base + "[8, 12, 12], \"mrope_interleaved\": true}}", "", "mrope_interleaved = true: contradicts");
  expect_error(base + "[8, 12, -12]}}", "", "mrope_section[2] = -12: must be an integer in [0, 512]");
  const std::string ok = base + "[8, 12, 12]}}";
  expect_error(ok, R"({"spans": [{"type": "text", "tokens": 2}, {"type": "image", "grid_thw": [1, 3, 4]}]})",
               "spans[1].grid_thw[1] = 3: must be a multiple of vision_config.spatial_merge_size 2");
  expect_error(ok, R"({"spans": [{"type": "image", "grid_thw": [1, 2, 2]}]})",
               "spans[0].type = \"image\": a visual span must follow a text span");
  expect_error(ok, R"({"spans": [{"type": "text", "tokens": 0}]})", "spans[0].tokens = 0: must be an integer in [1, 512]");
  expect_error(ok, R"({"spans": [{"type": "text", "tokens": 2}], "decode": 65})", "decode = 65: must be an integer in [0, 64]");
  expect_error(ok, R"({"spans": [{"type": "audio"}]})", "spans[0].type = \"audio\": must be \"text\", \"image\" or \"video\"");
  const std::string glm = R"({"model_type": "glm4v", "hidden_size": 256, "num_attention_heads": 4,
    "num_key_value_heads": 2, "partial_rotary_factor": 0.5, "rope_scaling": {"rope_type": "default", "mrope_section": )";
  expect_error(glm + "[8, 12, 12]}}", "", "rope_scaling.mrope_section = [8,12,12]: must sum to rotary_dim / 2 = 16");
  expect_error(glm + "[4, 6, 6], \"mrope_interleaved\": true}}", "", "contradicts model_type glm4v");
  expect_error(R"({"model_type": "qwen2_vl", "hidden_size": 256, "num_attention_heads": 4,
    "rope_scaling": {"mrope_section": [4, 6, 6], "partial_rotary_factor": 0.5}})", "",
               "rope_scaling.partial_rotary_factor = 0.5: not an M-RoPE key");
  expect_error(glm + "[4, 6, 6]}}", R"({"spans": [{"type": "text", "tokens": 2}, {"type": "video", "grid_thw": [2, 2, 2]}]})",
               "spans[1].type = \"video\": videos are not modelled for model_type glm4v");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc::properties
