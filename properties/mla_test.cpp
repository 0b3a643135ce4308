// Golden cases of MLA decoupled RoPE (golden/schemes/mla/mla_golden.cpp). The reference's and the kernel's
// own properties are in properties/plans_rope_test.cpp (binary posenc_plans_test); this binary
// holds the scheme's golden-catalog tests.
#include "reference/mla.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "golden/cases/diagnose.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/format.hpp"
#include "golden/verify/manifest_check.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::properties {
namespace {

using Json = nlohmann::json;

const char* kValid = "mla_deepseek_v3_h2_f32";

/// The mistake a negative control models (its manifest's negative_control.mistake).
std::string mistake_of(const golden::CaseSpec& spec) {
  return spec.manifest.at("negative_control").at("mistake").get<std::string>();
}

/// The twin of a negative control: the valid case with the same inputs.
const golden::LoadedCase& twin_of(const golden::LoadedCase& lc) {
  const std::string id = lc.spec.manifest.at("negative_control").at("twin").get<std::string>();
  static std::map<std::string, golden::LoadedCase> loaded;
  auto it = loaded.find(id);
  if (it == loaded.end()) {
    it = loaded
             .emplace(id, generator_mutant_active() ? fresh_case(golden::scheme_by_slug("mla"), id)
                                                    : golden::load_case(golden::default_data_dir() /
                                                                        "mla" / (id + ".json")))
             .first;
  }
  return it->second;
}

TEST(MlaGolden, FilesAreUpToDate) { expect_golden_files_up_to_date("mla", 4); }
TEST(MlaGolden, OptimizedPassesVerify) { expect_optimized_passes_verify("mla"); }
TEST(MlaGolden, EachStageFailsAlone) {
  expect_each_stage_fails_alone("mla", std::string(kValid) + ".json");
}

TEST(MlaGolden, EngineMistakesAreCaught) {
  // Every mistake fails the valid case; on a negative control only the mistake it models must
  // fail (the others differ from it, so they pass there).
  auto may_pass = [](const std::string& id, const std::string& mistake) {
    if (id == kValid) return false;
    std::string tag = mistake;
    std::replace(tag.begin(), tag.end(), '-', '_');
    return id.find("_" + tag + "_invalid") == std::string::npos;
  };
  expect_engine_mistakes_caught("mla", may_pass);
  expect_engine_mistakes_caught("mla", may_pass, "fp32");
  expect_engine_mistakes_caught("mla", may_pass, "fp32-recurrence");
}

TEST(MlaGolden, NegativeControlsFailForTheirMistakeOnly) {
  // Each control: posenc's engine passes it (it differs from the wrong values), the engine with
  // the control's mistake fails it, and the control's own values reproduce under every profile
  // that applies while they FAIL the twin (the mistake is visible).
  int n = 0;
  for_each_golden_case("mla", [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid") return;
    ++n;
    const std::string mistake = mistake_of(lc.spec);
    for (const std::string profile : {"strict", "fp32", "fp32-recurrence"}) {
      const auto good = golden::verify_case(
          lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {}), {profile, {}, true});
      EXPECT_EQ(good.status, golden::Verdict::kPass) << lc.spec.id << " " << profile << "\n"
                                                     << golden::format_case_text(good, true);
      const auto bad = golden::verify_case(
          lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {mistake}), {profile, {}, true});
      EXPECT_EQ(bad.status, golden::Verdict::kFail) << lc.spec.id << " " << profile;
    }
    golden::TensorMap own;
    for (const auto& t : lc.spec.expected) own.emplace(t.name, lc.golden.at(t.name));
    const auto& twin = twin_of(lc);
    const auto r = golden::verify_case(twin.spec, twin.golden, own, {"strict", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id << ": its values pass the twin";
  });
  EXPECT_EQ(n, 3);
}

TEST(MlaGolden, DiagnoseNamesEachNegativeControlsMistake) {
  // A control's own values, as an engine's output for its twin, are explained first by the
  // control's mistake.
  for_each_golden_case("mla", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    if (lc.spec.result != "invalid") return;
    golden::TensorMap own;
    for (const auto& t : lc.spec.expected) own.emplace(t.name, lc.golden.at(t.name));
    const auto d = golden::diagnose_case(twin_of(lc), own, "strict");
    EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
    ASSERT_FALSE(d.ranked.empty()) << lc.spec.id;
    EXPECT_EQ(d.ranked.front().mistake, mistake_of(lc.spec)) << lc.spec.id << "\n"
                                                             << golden::diagnosis_text(d, true);
  });
}

TEST(MlaGolden, PipelinesPassTheirProfiles) {
  // Loose by design: the scores (a dot product's bound admits any summation order, as in the
  // RoPE cases); and in this one small case (19 positions, 2 heads) ggml's recurrence angles and
  // its float32 softmax-scale formula stay far from their worst case (the same budgets are
  // tight over the rope_scaling catalog, RopeScalingGolden.PipelinesPassTheirProfiles).
  expect_pipelines_pass_their_profiles(
      "mla", 0.25,
      {"scores", "fp32-recurrence/q_pe_rot", "fp32-recurrence/k_pe_rot",
       "fp32-recurrence/softmax_scale"});
}

TEST(MlaGolden, ManifestFormRefusesAKPeHeadPerQHead) {
  // The committed manifest fits the mla form; the same manifest with k_pe given one head per q
  // head ([H, T, dr], not the one shared head) is refused, naming the tensor and the shape.
  const auto lc =
      golden::load_case(golden::default_data_dir() / "mla" / (std::string(kValid) + ".json"));
  EXPECT_NO_THROW(golden::check_manifest_schema(lc.spec, kValid));
  golden::CaseSpec bad = lc.spec;
  for (auto& t : bad.inputs) {
    if (t.name == "k_pe") t.shape.at(0) = lc.spec.manifest.at("params").at("n_heads").get<int>();
  }
  try {
    golden::check_manifest_schema(bad, kValid);
    ADD_FAILURE() << "a per-head k_pe was accepted";
  } catch (const GoldenFileError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor \"k_pe\" shape"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, n_tokens, qk_rope_head_dim]"), std::string::npos)
        << e.what();
  }
}

TEST(MlaGolden, ScoresAreTheReferencesMlaScores) {
  // The stored scores (their .exact doubles) are reference::mla_scores on the case's inputs,
  // q and k_nope laid out as the reference takes them ([T, H, dn + dr], [T, H, dn]), and the
  // stored softmax scale is DeepSeek-V3's mscale(40, 1)^2 / sqrt(192).
  const auto lc =
      golden::load_case(golden::default_data_dir() / "mla" / (std::string(kValid) + ".json"));
  const Json& pj = lc.spec.manifest.at("params");
  reference::MlaParams p;
  p.n_heads = pj.at("n_heads").get<int>();
  p.nope_dim = pj.at("qk_nope_head_dim").get<int>();
  p.rope_dim = pj.at("qk_rope_head_dim").get<int>();
  p.base = pj.at("base").get<double>();
  const reference::RopeScaling s = golden::rope_scaling_from_json(pj.at("scaling"));
  const auto st = reference::rope_scaling_tables<mp50>(reference::mla_rope_params(p), s);
  const golden::Tensor& pt = lc.golden.at("positions");
  std::vector<std::int64_t> pos;
  for (std::int64_t i = 0; i < pt.numel(); ++i) pos.push_back(pt.get_i64(i));
  const std::int64_t T = static_cast<std::int64_t>(pos.size());
  const int H = p.n_heads, dn = p.nope_dim, dr = p.rope_dim, dq = dn + dr;
  const auto qn = golden::tensor_to_f32(lc.golden.at("q_nope")),
             qp = golden::tensor_to_f32(lc.golden.at("q_pe"));
  const auto kn = golden::tensor_to_f32(lc.golden.at("k_nope")),
             kp = golden::tensor_to_f32(lc.golden.at("k_pe"));
  std::vector<mp50> q(static_cast<std::size_t>(T * H * dq)),
      knt(static_cast<std::size_t>(T * H * dn));
  for (int h = 0; h < H; ++h) {
    for (std::int64_t t = 0; t < T; ++t) {
      for (int c = 0; c < dn; ++c) q[(t * H + h) * dq + c] = qn[(h * T + t) * dn + c];
      for (int c = 0; c < dr; ++c) q[(t * H + h) * dq + dn + c] = qp[(h * T + t) * dr + c];
      for (int c = 0; c < dn; ++c) knt[(t * H + h) * dn + c] = kn[(h * T + t) * dn + c];
    }
  }
  const std::vector<mp50> kpe(kp.begin(), kp.end());
  const auto want =
      reference::mla_scores(p, st.tables, st.softmax_scale_multiplier, pos, pos, q, knt, kpe);
  const golden::Tensor& ex = lc.golden.at("scores.exact");
  ASSERT_EQ(static_cast<std::size_t>(ex.numel()), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double a = round_to_f64(want[i]), b = ex.get_f64(static_cast<std::int64_t>(i));
    ASSERT_TRUE(a == b || std::nextafter(a, b) == b) << "scores[" << i << "]: " << a << " vs " << b;
  }
  const double sigma = golden::tensor_to_f32(lc.golden.at("softmax_scale"))[0];
  EXPECT_NEAR(sigma, 0.135234, 1e-6);
  EXPECT_NE(st.softmax_scale_multiplier, mp50(1));
}

}  // namespace
}  // namespace posenc::properties
