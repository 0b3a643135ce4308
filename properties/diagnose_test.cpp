// The diagnoser (golden/cases/diagnose.hpp) on posenc's own engines: every deliberate mistake of
// every scheme is the top hypothesis where a case can see it, a correct engine gets no
// diagnosis, and a float32 pipeline judged by strict is told which profile it matches.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/diagnose.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/errors.hpp"

namespace posenc::properties {
namespace {

namespace fs = std::filesystem;

/// The valid cases of a scheme, smallest tensors file first (fast to diagnose).
std::vector<fs::path> valid_cases_smallest_first(const std::string& slug) {
  const auto dir = golden::default_data_dir();
  std::vector<std::pair<std::uintmax_t, fs::path>> v;
  for (const auto& e : golden::catalog_read(dir)) {
    if (e.scheme != slug || e.result != "valid") continue;
    v.emplace_back(fs::file_size(dir / e.tensors), dir / e.manifest);
  }
  std::sort(v.begin(), v.end());
  std::vector<fs::path> out;
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

TEST(DiagnoseGolden, EveryMistakeIsTheTopHypothesisWhereACaseSeesIt) {
  int diagnosed = 0;
  for (const auto& s : golden::schemes()) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto cases = valid_cases_smallest_first(s.slug);
    for (const auto& m : s.mistakes()) {
      bool seen = false;
      for (const auto& path : cases) {
        const auto lc = golden::load_case(path);
        const auto out = s.run_engine(lc.spec, lc.golden, {m});
        if (golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, false}).status != "FAIL") {
          continue;  // invisible in this case: try the next one
        }
        seen = true;
        const auto d = golden::diagnose_case(lc, out, "strict");
        EXPECT_EQ(d.verdict, "explained") << lc.spec.id << " with " << m << ": "
                                          << golden::diagnosis_text(d, true);
        ASSERT_FALSE(d.ranked.empty()) << lc.spec.id;
        const double best = d.ranked.front().residual;
        const bool among_best = std::any_of(d.ranked.begin(), d.ranked.end(), [&](const auto& h) {
          return h.mistake == m && h.residual == best;
        });
        EXPECT_TRUE(among_best) << lc.spec.id << " with " << m << " was not the top hypothesis:\n"
                                << golden::diagnosis_text(d, true);
        EXPECT_NE(d.summary.find("`" + m + "`"), std::string::npos) << d.summary;
        ++diagnosed;
        break;
      }
      EXPECT_TRUE(seen) << s.slug << ": no valid case shows the mistake " << m;
    }
    std::printf("[ diagnose ] %-15s %zu mistakes in %.2f s\n", s.slug.c_str(), s.mistakes().size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  EXPECT_GE(diagnosed, 40);
}

TEST(DiagnoseGolden, ACorrectEngineGetsNoDiagnosis) {
  for (const auto& s : golden::schemes()) {
    const auto lc = golden::load_case(valid_cases_smallest_first(s.slug).front());
    const auto d = golden::diagnose_case(lc, s.run_engine(lc.spec, lc.golden, {}), "strict");
    EXPECT_EQ(d.verdict, "correct") << golden::diagnosis_text(d, true);
  }
}

TEST(DiagnoseGolden, AFloat32PipelineIsToldItsProfile) {
  // Fails strict (its tables are not correctly rounded), matches the fp32 pipeline: the answer
  // is a profile to claim, not a mistake.
  const auto lc = golden::load_case(golden::default_data_dir() / "rope" /
                                    "rope_half_d128_b5e5_llama3_8b_f32.json");
  const auto& s = golden::scheme_by_slug("rope");
  const auto out = s.run_engine(lc.spec, lc.golden, {"", "fp32"});
  const auto d = golden::diagnose_case(lc, out, "strict");
  EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
  EXPECT_EQ(d.ranked.front().pipeline, "fp32") << golden::diagnosis_text(d, true);
  EXPECT_TRUE(d.ranked.front().mistake.empty());
  EXPECT_NE(d.summary.find("claim --profile fp32"), std::string::npos) << d.summary;
}

TEST(DiagnoseGolden, UnexplainedOutputSaysSoWithTheClosestFit) {
  // An output no pipeline or mistake produces (q_rot scaled by 1.5): unexplained, honestly.
  const auto lc = golden::load_case(golden::default_data_dir() / "rope" /
                                    "rope_half_d128_b5e5_llama3_8b_f32.json");
  const auto& s = golden::scheme_by_slug("rope");
  auto out = s.run_engine(lc.spec, lc.golden, {});
  auto q = golden::tensor_to_f32(out.at("q_rot"));
  for (auto& x : q) x *= 1.5f;
  out["q_rot"] = golden::tensor_from_f32("q_rot", out.at("q_rot").shape, q);
  const auto d = golden::diagnose_case(lc, out, "strict");
  EXPECT_EQ(d.verdict, "unexplained") << golden::diagnosis_text(d, true);
  EXPECT_NE(d.summary.find("closest"), std::string::npos) << d.summary;
}

TEST(DiagnoseGolden, RefusesNegativeControlsAndUnknownProfiles) {
  const auto dir = golden::default_data_dir();
  for (const auto& e : golden::catalog_read(dir)) {
    if (e.result != "invalid") continue;
    const auto lc = golden::load_case(dir / e.manifest);
    EXPECT_THROW(golden::diagnose_case(lc, lc.golden, "strict"), InvalidArgument);
    break;
  }
  const auto lc = golden::load_case(dir / "rope" / "rope_half_d128_b5e5_llama3_8b_f32.json");
  EXPECT_THROW(golden::diagnose_case(lc, lc.golden, "fp64"), InvalidArgument);
}

}  // namespace
}  // namespace posenc::properties
