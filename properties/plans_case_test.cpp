// The golden face of the model-plan pieces: the `plan` scheme (one case per layer type,
// golden/cases/plan_case.hpp; the committed plans, golden/schemes/plan/plan_golden.cpp). The catalog's
// up-to-date check, the built-in engine under strict and its float32 pipeline under fp32, every
// engine mistake on every case it applies to, the negative controls and diagnose's answer, the
// positions at each type's boundaries, the type's JSON round trip and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "golden/cases/diagnose.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/plan_case.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/limits.hpp"
#include "golden/verify/catalog.hpp"
#include "golden/verify/manifest_check.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/errors.hpp"

namespace posenc::properties {
namespace {

bool is_control(const golden::LoadedCase& lc) { return lc.spec.result == "invalid"; }

TEST(PlanGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("plan", 21); }
TEST(PlanGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("plan"); }

TEST(PlanGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("plan", "plan_gpt_oss_20b_sliding_attention_f32.json");
}

// HF's float32 pipeline (tables, rotation, temperature, scores, eager softmax in float32) passes
// the fp32 profile on every valid case, and the same with ggml's tables fp32-recurrence; each
// uses a visible share of some stage's budget.
TEST(PlanGolden, FloatPipelinesPassTheirProfiles) {
  for (const std::string pipeline : {"fp32", "fp32-recurrence"}) {
    int n = 0;
    double worst = 0;
    for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
      if (is_control(lc)) return;
      ++n;
      golden::EngineOptions eo;
      eo.pipeline = pipeline;
      const auto r = golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, eo),
                                         {pipeline, {}, true});
      EXPECT_EQ(r.status, golden::Verdict::kPass) << golden::format_case_text(r, true);
      for (const auto& t : r.tensors) worst = std::max(worst, t.max_ratio);
    });
    EXPECT_EQ(n, 13);
    EXPECT_GT(worst, 0.05) << pipeline << ": the budgets are far looser than the pipeline's error";
  }
}

// Every mistake fails every valid case it applies to (the others refuse it), and each mistake
// applies to at least one case.
TEST(PlanGolden, EachMistakeFailsEveryCaseItAppliesTo) {
  std::set<std::string> applied;
  std::vector<std::string> mistakes = golden::plan_case_mistakes();
  mistakes.push_back("other-layer-type");  // planted by the engine, fitted by diagnose
  for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (is_control(lc)) return;
    for (const auto& mistake : mistakes) {
      golden::TensorMap out;
      try {
        out = s.run_engine(lc.spec, lc.golden, {mistake});
      } catch (const InvalidArgument&) {
        continue;
      }
      applied.insert(mistake);
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, true});
      EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id << " with mistake " << mistake;
    }
  });
  EXPECT_EQ(applied.size(), mistakes.size());
}

std::string twin_of(const golden::LoadedCase& lc) {
  const std::string conv =
      lc.spec.manifest.at("negative_control").at("convention").get<std::string>();
  std::string id = lc.spec.id;
  const std::string tag = "_" + conv + "_invalid";
  id.erase(id.find(tag), tag.size());
  return id;
}

// Each negative control: the correct engine passes it, the engine with its mistake fails it, and
// its values given as an engine's output for the valid twin fail the twin under every profile
// that applies there.
TEST(PlanGolden, NegativeControlsFailUnderEveryProfile) {
  const auto dir = golden::default_data_dir() / "plan";
  std::set<std::string> mistakes;
  for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (!is_control(lc)) return;
    const std::string mistake =
        lc.spec.manifest.at("negative_control").at("mistake").get<std::string>();
    mistakes.insert(mistake);
    EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {}),
                                  {"strict", {}, true})
                  .status,
              golden::Verdict::kPass)
        << lc.spec.id;
    EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {mistake}),
                                  {"strict", {}, true})
                  .status,
              golden::Verdict::kFail)
        << lc.spec.id << " with " << mistake;
    const auto twin = generator_mutant_active() ? fresh_case(s, twin_of(lc))
                                                : golden::load_case(dir / (twin_of(lc) + ".json"));
    golden::TensorMap actual;
    for (const auto& e : lc.spec.expected) actual.emplace(e.name, lc.golden.at(e.name));
    int judged = 0;
    for (const auto& prof : golden::profiles()) {
      if (!profile_applies(twin.spec, prof.name)) continue;
      ++judged;
      const auto r = golden::verify_case(twin.spec, twin.golden, actual, {prof.name, {}, true});
      EXPECT_EQ(r.status, golden::Verdict::kFail)
          << lc.spec.id << " passes " << twin.spec.id << " under " << prof.name;
    }
    EXPECT_GE(judged, 3) << lc.spec.id;
  });
  // every mistake diagnose runs, and the one it fits (the other layer type's output)
  const std::vector<std::string> fixed = golden::plan_case_mistakes();
  std::set<std::string> want(fixed.begin(), fixed.end());
  want.insert("other-layer-type");
  EXPECT_EQ(mistakes, want);
}

// diagnose names each negative control's mistake: the float32 pipeline with that mistake, run on
// the valid twin, is explained first by it.
TEST(PlanGolden, DiagnoseNamesEachNegativeControlsMistake) {
  const auto dir = golden::default_data_dir() / "plan";
  for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (!is_control(lc)) return;
    const std::string mistake =
        lc.spec.manifest.at("negative_control").at("mistake").get<std::string>();
    const auto twin = generator_mutant_active() ? fresh_case(s, twin_of(lc))
                                                : golden::load_case(dir / (twin_of(lc) + ".json"));
    golden::EngineOptions eo;
    eo.pipeline = "fp32";
    eo.mistake = mistake;
    const auto d = golden::diagnose_case(twin, s.run_engine(twin.spec, twin.golden, eo), "fp32");
    EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
    ASSERT_FALSE(d.ranked.empty());
    EXPECT_EQ(d.ranked.front().mistake, mistake) << lc.spec.id << "\n"
                                                 << golden::diagnosis_text(d, true);
  });
}

// The plans written by hand are the presets' plans: `generate --config` on each committed preset
// with layer types writes the catalog's files byte for byte, for every type the catalog holds.
TEST(PlanGolden, PresetsGiveTheCatalogsFiles) {
  const auto& scheme = golden::scheme_by_slug("plan");
  const auto rows = scheme.cases();
  int same = 0;
  for (const char* preset : {"gemma-2-9b", "gemma-3-4b-it", "llama-4-scout-17b-16e-instruct",
                             "gpt-oss-20b", "gemma-4-31b-it"}) {
    const auto cc = golden::cases_for_config(
        golden::default_presets_dir() / (std::string(preset) + ".json"), {}, DType::kF32);
    ASSERT_FALSE(cc.plan.is_null()) << preset;
    ASSERT_EQ(cc.cases.size(), 2u) << preset;
    for (const auto& c : cc.cases) {
      ASSERT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const auto& r) {
        return r.id == c.id;
      })) << c.id;
      const auto mine = golden::case_files(golden::generate_case(scheme, c.id));
      golden::GoldenCase g = c.generate();
      const auto d = golden::mistake_detection(scheme, g);
      if (!d.empty()) g.manifest["mistake_detection"] = d;
      const auto theirs = golden::case_files(g);
      EXPECT_EQ(mine.manifest_text, theirs.manifest_text) << c.id;
      EXPECT_TRUE(mine.tensors == theirs.tensors) << c.id;
      ++same;
    }
  }
  EXPECT_EQ(same, 10);
}

// A uniform plan writes what `generate --config` wrote before plans: no plan manifest and the
// RoPE cases of the config's rule (their bytes: cli.end_to_end compares them with the catalog's).
TEST(PlanGolden, UniformPresetsKeepTheirRopeCases) {
  int uniform = 0;
  for (const auto& e : std::filesystem::directory_iterator(golden::default_presets_dir())) {
    const std::string text = golden::read_json_text(e.path());
    if (golden::mrope_config_is_vl(nlohmann::json::parse(text))) continue;
    const auto m = golden::rope_config_parse(text, e.path().string());
    if (!golden::model_plan_from_config(m, e.path().string()).uniform()) continue;
    ++uniform;
    const auto cc = golden::cases_for_config(e.path(), {}, DType::kF32);
    EXPECT_TRUE(cc.plan.is_null()) << e.path();
    std::vector<std::string> want, got;
    for (const auto& d :
         golden::rope_cases_for_config(m, DType::kF32, {}, golden::config_case_name(m, text)))
      want.push_back(d.id);
    for (const auto& c : cc.cases) got.push_back(c.id);
    EXPECT_EQ(got, want) << e.path();
  }
  EXPECT_GE(uniform, 15);
}

golden::PlanLayerType sliding(std::int64_t w) {
  golden::PlanLayerType t;
  t.name = "sliding_attention";
  t.params.head_dim = t.params.rotary_dim = 64;
  t.mask = golden::PlanMask::kSliding;
  t.window = w;
  return t;
}

bool has(const std::vector<golden::HardPosition>& v, std::int64_t m) {
  return std::any_of(v.begin(), v.end(), [&](const auto& p) { return p.m == m; });
}

// Both sides of every boundary: the window edge, the chunk boundary, the temperature's steps (at
// k F - 1 for Llama 4, k L0 for Mistral), the end of the context; nothing at or past it.
TEST(PlanCase, PositionsStraddleEachBoundary) {
  auto s = golden::plan_type_positions(sliding(128), 131072);
  for (std::int64_t m : {0, 3, 127, 128, 131070, 131071}) EXPECT_TRUE(has(s, m)) << m;
  EXPECT_FALSE(has(s, 131072));
  EXPECT_TRUE(
      std::is_sorted(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.m < b.m; }));
  golden::PlanLayerType c = sliding(0);
  c.mask = golden::PlanMask::kChunked;
  c.chunk = 8192;
  c.has_temperature = true;
  c.temperature = {reference::QueryTemperatureRule::kLlama4, 8192, 0.1};
  auto p = golden::plan_type_positions(c, 0);
  for (std::int64_t m : {8191, 8192, 8190, 16382, 16383}) EXPECT_TRUE(has(p, m)) << m;
  c.temperature.rule = reference::QueryTemperatureRule::kMistral;
  p = golden::plan_type_positions(c, 0);
  for (std::int64_t m : {8191, 8192, 16383, 16384}) EXPECT_TRUE(has(p, m)) << m;
}

// A type survives its JSON (the manifests' params.type) unchanged: every committed case's type,
// written again, is the manifest's text.
TEST(PlanCase, TypeJsonRoundTrips) {
  for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    const auto& j = lc.spec.manifest.at("params").at("type");
    EXPECT_EQ(golden::plan_type_to_json(golden::plan_type_from_json(j, lc.spec.id)), j)
        << lc.spec.id;
  });
}

// A plan manifest's params are checked like every scheme's (golden/verify/manifest_check.cpp):
// a missing key and a grouping that does not divide are refused, naming the key.
TEST(PlanCase, ManifestParamsAreChecked) {
  const auto path = golden::default_data_dir() / "plan" / "plan_gpt_oss_20b_sliding_attention_f32.json";
  const auto good = nlohmann::json::parse(golden::read_json_text(path));
  EXPECT_NO_THROW(golden::check_manifest_schema(golden::case_spec_from_json(good, "m.json"), "m.json"));
  auto bad = good;
  bad["params"]["n_kv_heads"] = 3;
  try {
    golden::check_manifest_schema(golden::case_spec_from_json(bad, "m.json"), "m.json");
    ADD_FAILURE() << "a grouping that does not divide accepted";
  } catch (const GoldenFileError& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: params.n_kv_heads"), std::string::npos) << e.what();
  }
  bad = good;
  bad["params"].erase("type");
  EXPECT_THROW(golden::check_manifest_schema(golden::case_spec_from_json(bad, "m.json"), "m.json"),
               GoldenFileError);
}

// Bad types are refused with the function and the key named.
TEST(PlanCase, RefusesWhatItDoesNotModel) {
  golden::PlanCaseDef d;
  d.id = "x";
  d.type = d.expected = sliding(16);
  d.positions = golden::plan_type_positions(d.type, 0);
  d.type.logit_softcap = d.expected.logit_softcap = -1.0;
  try {
    golden::plan_case_generate(d);
    ADD_FAILURE() << "a negative soft cap accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("plan_case_generate: logit_softcap"), std::string::npos)
        << e.what();
  }
  d.type = d.expected = sliding(16);
  d.type.mla_rope_dim = d.expected.mla_rope_dim = 64;
  EXPECT_THROW(golden::plan_case_generate(d), InvalidArgument);
  nlohmann::json j = golden::plan_type_to_json(sliding(16));
  j["mask"] = "banded";
  try {
    golden::plan_type_from_json(j, "f.json");
    ADD_FAILURE() << "an unknown mask accepted";
  } catch (const GoldenFileError& e) {
    EXPECT_NE(std::string(e.what()).find("f.json: type.mask"), std::string::npos) << e.what();
  }
  j = golden::plan_type_to_json(sliding(16));
  j.erase("window");
  EXPECT_THROW(golden::plan_type_from_json(j, "f.json"), GoldenFileError);
}

}  // namespace
}  // namespace posenc::properties
