// Verdicts that say only what the data shows (issue 33, items 2 and 7; issue 32, item 4):
//   VerifyInconclusive  a negative control given only stages that are the same under the right
//                       and the known-wrong convention is INCONCLUSIVE (never PASS, never FAIL),
//                       naming the stages that would tell (manifest "control_detection");
//   VerifyNonFinite     +Inf and -Inf fail like NaN, negative controls included;
//   VerifyReports       an integer tensor's mismatch reports its difference (ratio 2 |d|);
//   DiagnoseConfirms    the claimed profile's pipeline first when several confirm, and a float
//                       engine's mistake confirmed within its hypothesis budget.
// The correct engine here is posenc's (`posenc engine`, exact pipeline); the independent numpy
// engines of python/tests run the same loop on the controls they model (test_verdicts.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/diagnose.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

using Json = nlohmann::json;

LoadedCase load(const std::string& id) {
  for (const auto& e : catalog_read(default_data_dir())) {
    if (e.id == id) return load_case(default_data_dir() / e.manifest);
  }
  throw std::runtime_error("no committed case " + id);
}

/// `out` restricted to the given stage names.
TensorMap only(const TensorMap& out, const std::vector<std::string>& names) {
  TensorMap r;
  for (const auto& n : names) {
    if (out.count(n)) r.emplace(n, out.at(n));
  }
  return r;
}

void set_f32(Tensor& t, std::int64_t i, float v) { std::memcpy(t.data.data() + 4 * i, &v, 4); }

VerifyOptions with_profile(const std::string& p) {
  VerifyOptions o;
  o.profile = p;
  return o;
}

// ---- INCONCLUSIVE --------------------------------------------------------------------------

// Every negative control of the catalog, every profile its manifest measured: the correct
// engine's output restricted to the stages that cannot tell is INCONCLUSIVE and names the
// stages that would; with one telling stage added it is a PASS (it differs from the known-wrong
// values); the stored known-wrong values on the same stages are INCONCLUSIVE too (never FAIL).
TEST(VerifyInconclusive, EveryControlGivenOnlyStagesThatCannotTellIsInconclusive) {
  int controls = 0, runs = 0, telling_runs = 0, wrong_runs = 0;
  for (const auto& e : catalog_read(default_data_dir())) {
    if (e.result != "invalid") continue;
    const LoadedCase lc = load_case(default_data_dir() / e.manifest);
    ASSERT_FALSE(lc.spec.control_stages.empty())
        << e.id << ": no control_detection in its manifest";
    ++controls;
    const TensorMap right = scheme_by_slug(lc.spec.scheme).run_engine(lc.spec, lc.golden, {});
    TensorMap stored;
    for (const auto& t : lc.spec.expected) stored.emplace(t.name, lc.golden.at(t.name));
    for (const auto& [profile, telling] : lc.spec.control_stages) {
      SCOPED_TRACE(e.id + " under " + profile);
      std::vector<std::string> blind;
      for (const auto& t : lc.spec.expected) {
        if (!t.check.profile(profile).applies) continue;
        if (std::find(telling.begin(), telling.end(), t.name) == telling.end())
          blind.push_back(t.name);
      }
      if (!blind.empty()) {
        for (const TensorMap* out : std::vector<const TensorMap*>{&right, &stored}) {
          const CaseReport r =
              verify_case(lc.spec, lc.golden, only(*out, blind), with_profile(profile));
          EXPECT_EQ(r.status, Verdict::kInconclusive) << format_case_text(r, false);
          EXPECT_EQ(r.telling_stages, telling);
          EXPECT_NE(r.message.find(telling.empty() ? "no stage of this case tells them apart"
                                                   : "give one of: "),
                    std::string::npos)
              << r.message;
        }
        // One element of a blind float32 stage far off (sign flipped, 64 times as large): wrong
        // under either convention, so FAIL, not INCONCLUSIVE.
        for (const auto& name : blind) {
          const Tensor& t = right.at(name);
          if (t.dtype != DType::kF32 || t.numel() == 0) continue;
          std::int64_t big = 0;
          for (std::int64_t i = 1; i < t.numel(); ++i) {
            if (std::fabs(t.get_f64(i)) > std::fabs(t.get_f64(big))) big = i;
          }
          TensorMap bad = only(right, blind);
          const double x = t.get_f64(big);
          set_f32(bad.at(name), big, static_cast<float>(-(std::fabs(x) + 1.0) * 64.0));
          const CaseReport w = verify_case(lc.spec, lc.golden, bad, with_profile(profile));
          EXPECT_EQ(w.status, Verdict::kFail) << name << "\n" << format_case_text(w, false);
          EXPECT_NE(w.message.find("wrong under either convention"), std::string::npos)
              << w.message;
          ++wrong_runs;
          break;
        }
        ++runs;
      }
      if (telling.empty()) continue;
      std::vector<std::string> with_one = blind;
      with_one.push_back(telling.front());
      const CaseReport r =
          verify_case(lc.spec, lc.golden, only(right, with_one), with_profile(profile));
      EXPECT_EQ(r.status, Verdict::kPass) << format_case_text(r, false);
      const CaseReport w =
          verify_case(lc.spec, lc.golden, only(stored, with_one), with_profile(profile));
      EXPECT_EQ(w.status, Verdict::kFail) << format_case_text(w, false);
      ++telling_runs;
    }
  }
  std::printf(
      "[ inconclusive ] %d controls: %d runs on undetecting stages INCONCLUSIVE, %d with one of "
      "them far off FAIL, %d with a telling stage judged\n",
      controls, runs, wrong_runs, telling_runs);
  EXPECT_GE(controls, 30);
  EXPECT_GE(runs, 40);
  EXPECT_GE(wrong_runs, 20);
}

/// Every trace step's positions, RoPE positions and rotations (what an engine writes when it
/// exports no cache or scores).
std::vector<std::string> positions_and_rotations(const CaseSpec& spec) {
  std::vector<std::string> v;
  for (const auto& t : spec.expected) {
    for (const char* s : {".positions", ".rope_positions", ".q_rot", ".k_rot"}) {
      if (t.name.ends_with(s)) v.push_back(t.name);
    }
  }
  return v;
}

// The runs: DeepSeek-V3's softmax-factor control without softmax_scale; the M-RoPE
// traces seq_rm_count and draft_slot_t with only positions and rotations; DeBERTa's p2c control
// under bf16 with out only. A correct engine and the engine with the control's mistake are
// INCONCLUSIVE there (no exit 1 for the correct one); an engine with an unrelated mistake is
// INCONCLUSIVE too, or FAIL "wrong under either convention" where the stages given show that
// mistake (never PASS, never "reproduces").
TEST(VerifyInconclusive, TheReportedRunsAreInconclusive) {
  struct Run {
    std::string id;
    std::vector<std::string> profiles;
    std::vector<std::string> stages;  // empty: positions and rotations of every step
    std::vector<std::string> drop;    // every stage but these
  };
  const std::vector<Run> runs = {
      {"rope_scaling_deepseek_v3_all_softmax_factor_missing_f32",
       {"strict", "fp32", "fp32-recurrence"},
       {},
       {"softmax_scale"}},
      {"mrope_qwen2_vl_7b_instruct_trace_prefix_reuse_seq_rm_count_invalid_f32",
       {"strict", "fp32", "fp32-recurrence"},
       {},
       {}},
      {"mrope_qwen3_vl_8b_instruct_trace_speculative_draft_slot_t_invalid_f32",
       {"strict", "fp32", "fp32-recurrence"},
       {},
       {}},
      {"deberta_v3_base_h1_d64_q8_o150_k300_p2c_literal_invalid_bf16", {"bf16"}, {"out"}, {}},
  };
  int n = 0, wrong = 0;
  for (const Run& run : runs) {
    const LoadedCase lc = load(run.id);
    const SchemeEntry& s = scheme_by_slug(lc.spec.scheme);
    std::vector<std::string> stages = run.stages;
    if (!run.drop.empty()) {
      for (const auto& t : lc.spec.expected) {
        if (std::find(run.drop.begin(), run.drop.end(), t.name) == run.drop.end())
          stages.push_back(t.name);
      }
    } else if (stages.empty()) {
      stages = positions_and_rotations(lc.spec);
    }
    std::vector<std::string> engines = {""};
    for (const auto& m : s.mistakes()) engines.push_back(m);
    for (const auto& profile : run.profiles) {
      for (const auto& m : engines) {
        TensorMap out;
        try {
          out = s.run_engine(lc.spec, lc.golden, {m});
        } catch (const InvalidArgument&) {
          continue;
        }
        const CaseReport r =
            verify_case(lc.spec, lc.golden, only(out, stages), with_profile(profile));
        const std::string what = run.id + " under " + profile + " with the engine " +
                                 (m.empty() ? "(correct)" : m) + ":\n" +
                                 format_case_text(r, false);
        EXPECT_FALSE(r.telling_stages.empty());
        if (m.empty() || r.status != Verdict::kFail) {
          EXPECT_EQ(r.status, Verdict::kInconclusive) << what;
        } else {  // an unrelated mistake far off on these stages: wrong either way, never PASS
          EXPECT_NE(r.message.find("wrong under either convention"), std::string::npos) << what;
          EXPECT_EQ(r.message.find("reproduces"), std::string::npos) << what;
          ++wrong;
        }
        n += m.empty();
      }
    }
  }
  EXPECT_EQ(n, 10);  // the correct engine's runs
  EXPECT_GT(wrong, 0);  // unrelated mistakes that these stages do show
}

TEST(VerifyInconclusive, ControlDetectionIsMeasuredWhenAControlIsGenerated) {
  const std::string id = "rope_scaling_deepseek_v3_all_softmax_factor_missing_f32";
  const GoldenCase fresh = generate_case(scheme_by_slug("rope_scaling"), id);
  ASSERT_TRUE(fresh.manifest.contains("control_detection"));
  EXPECT_EQ(fresh.manifest["control_detection"], load(id).spec.manifest["control_detection"]);
  EXPECT_EQ(fresh.manifest["control_detection"]["fp32"], Json::array({"softmax_scale"}));
  EXPECT_FALSE(generate_case(scheme_by_slug("rope"), "rope_half_d96_r24_b1e4_neox_20b_f32")
                   .manifest.contains("control_detection"));  // valid cases have none
}

TEST(VerifyInconclusive, ReportsShowIt) {
  const LoadedCase lc = load("rope_scaling_deepseek_v3_all_softmax_factor_missing_f32");
  TensorMap out = scheme_by_slug("rope_scaling").run_engine(lc.spec, lc.golden, {});
  out.erase("softmax_scale");
  const CaseReport r = verify_case(lc.spec, lc.golden, out, {});
  const Json j = case_report_json(r);
  EXPECT_EQ(j["status"], "INCONCLUSIVE");
  EXPECT_EQ(j["telling_stages"], Json::array({"softmax_scale"}));
  const std::string text = format_case_text(r, false);
  EXPECT_NE(text.find("profile=strict  INCONCLUSIVE"), std::string::npos) << text;
  EXPECT_NE(text.find("give one of: softmax_scale"), std::string::npos) << text;
  EXPECT_EQ(text.find("REPRODUCES"), std::string::npos) << text;
  EXPECT_EQ(to_string(Verdict::kInconclusive), "INCONCLUSIVE");
  EXPECT_FALSE(judged(Verdict::kInconclusive));
}

// ---- non-finite values ---------------------------------------------------------------------

// One +Inf or -Inf element fails, as NaN does, in a valid case and in every negative control of
// the f32 catalog (19 tensors were "DIFFERS", exit 0, before): the output is not finite.
TEST(VerifyNonFinite, InfNeverPassesNotEvenANegativeControl) {
  int n = 0;
  for (const auto& e : catalog_read(default_data_dir())) {
    if (e.result != "invalid") continue;
    const LoadedCase lc = load_case(default_data_dir() / e.manifest);
    const TensorMap right = scheme_by_slug(lc.spec.scheme).run_engine(lc.spec, lc.golden, {});
    for (const auto& t : lc.spec.expected) {
      if (t.dtype != DType::kF32 || !right.count(t.name) || right.at(t.name).numel() == 0) continue;
      for (float bad : {INFINITY, -INFINITY}) {
        TensorMap out = right;
        set_f32(out.at(t.name), out.at(t.name).numel() / 2, bad);
        const CaseReport r = verify_case(lc.spec, lc.golden, out, with_profile("fp32"));
        if (!judged(r.status) && r.status != Verdict::kFail) continue;  // fp32 does not apply
        EXPECT_EQ(r.status, Verdict::kFail) << e.id << " " << t.name << " " << bad << "\n"
                                            << format_case_text(r, false);
        EXPECT_NE(r.message.find("non-finite output"), std::string::npos) << r.message;
        ++n;
      }
    }
  }
  EXPECT_GE(n, 100);
  const LoadedCase v = load("rope_half_d96_r24_b1e4_neox_20b_f32");
  TensorMap out = scheme_by_slug("rope").run_engine(v.spec, v.golden, {});
  set_f32(out.at("q_rot"), 3, -INFINITY);
  const CaseReport r = verify_case(v.spec, v.golden, out, {});
  EXPECT_EQ(r.status, Verdict::kFail);
  for (const auto& t : r.tensors) {
    if (t.name != "q_rot") continue;
    EXPECT_EQ(t.n_inf, 1);
    EXPECT_NE(t.message.find("1 +-Inf element(s): non-finite values never pass"), std::string::npos)
        << t.message;
    EXPECT_EQ(case_report_json(r)["tensors"][3]["n_inf"], 1);
  }
}

// Beyond --max-position nothing is judged, yet a non-finite value there still fails the tensor
// (it once read "PASS (non-finite output: ...: non-finite values never pass)").
TEST(VerifyNonFinite, NonFiniteBeyondMaxPositionFails) {
  const LoadedCase v = load("rope_half_d96_r24_b1e4_neox_20b_f32");
  const TensorMap right = scheme_by_slug("rope").run_engine(v.spec, v.golden, {});
  VerifyOptions o;
  o.max_position = 0;  // judge position 0 only
  ASSERT_EQ(verify_case(v.spec, v.golden, right, o).status, Verdict::kPass);
  const std::int64_t last = right.at("q_rot").numel() - 1;  // the last token's position > 0
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    TensorMap out = right;
    set_f32(out.at("q_rot"), last, bad);
    const CaseReport r = verify_case(v.spec, v.golden, out, o);
    EXPECT_EQ(r.status, Verdict::kFail) << bad << "\n" << format_case_text(r, false);
    for (const auto& t : r.tensors) {
      if (t.name != "q_rot") continue;
      EXPECT_EQ(t.status, Verdict::kFail) << bad;
      EXPECT_EQ(t.n_over, 0) << bad << ": the element is beyond --max-position";
      EXPECT_NE(t.message.find("non-finite values never pass"), std::string::npos) << t.message;
    }
  }
}

// ---- integer differences -------------------------------------------------------------------

// A failing integer tensor reports its largest difference, and JSON a finite ratio (2 |d|: an
// integer matches exactly or is at least 2 budgets off), not null.
TEST(VerifyReports, IntegerMismatchesReportTheirDifference) {
  const LoadedCase lc = load("mrope_qwen2_vl_7b_instruct_text_image_text_f32");
  TensorMap out = scheme_by_slug("mrope").run_engine(lc.spec, lc.golden, {});
  const Tensor& p = out.at("positions");
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < p.numel(); ++i)
    v.push_back(p.get_i64(i) + (i == 7 ? 3 : i == 9 ? -1 : 0));
  out["positions"] = tensor_from_i64("positions", p.shape, v);
  const CaseReport r = verify_case(lc.spec, lc.golden, only(out, {"positions"}), {});
  ASSERT_EQ(r.status, Verdict::kFail);
  const Json j = case_report_json(r);
  Json t;
  for (const auto& x : j["tensors"]) {
    if (x["name"] == "positions") t = x;
  }
  ASSERT_TRUE(t["ratio"].is_number()) << t.dump();
  EXPECT_EQ(t["ratio"], 6.0);
  EXPECT_EQ(t["max_difference"], 3.0);
  EXPECT_EQ(t["n_over"], 2);
  EXPECT_EQ(t["worst"]["index"], 7);
  EXPECT_EQ(t["worst"]["abs_error"], 3.0);
  EXPECT_NE(format_case_text(r, false).find("|err|=3"), std::string::npos)
      << format_case_text(r, false);
}

// ---- diagnose's confirmations (the slower diagnose tests: properties/diagnose_test.cpp) ------

/// The valid cases of a scheme, smallest tensors file first.
std::vector<LoadedCase> smallest_valid(const std::string& slug, std::size_t n) {
  std::vector<std::pair<std::uintmax_t, std::string>> v;
  for (const auto& e : catalog_read(default_data_dir())) {
    if (e.scheme == slug && e.result == "valid") {
      v.emplace_back(std::filesystem::file_size(default_data_dir() / e.tensors), e.manifest);
    }
  }
  std::sort(v.begin(), v.end());
  std::vector<LoadedCase> out;
  for (std::size_t i = 0; i < v.size() && out.size() < n; ++i)
    out.push_back(load_case(default_data_dir() / v[i].second));
  return out;
}

// When several pipelines' runs of a mistake confirm it, the claimed profile's pipeline comes
// first (a PyTorch engine claiming fp32 was told its bug on ggml's recurrence): ggml-style
// outputs (fp32-recurrence with a mistake) claimed fp32, and fp32 outputs claimed
// fp32-recurrence, on the smallest RoPE f32 cases.
TEST(DiagnoseConfirms, TheClaimedProfilesPipelineFirstWhenSeveralConfirm) {
  int several = 0;
  DiagnoseRunCache cache;
  for (const auto& lc : smallest_valid("rope", 8)) {
    if (lc.golden.at("q").dtype != DType::kF32) continue;
    for (const auto& [made, claimed] :
         {std::pair{"fp32-recurrence", "fp32"}, std::pair{"fp32", "fp32-recurrence"}}) {
      for (const std::string m : {"offset", "pairing"}) {
        const auto out = scheme_by_slug("rope").run_engine(lc.spec, lc.golden, {m, made});
        const auto d = diagnose_case(lc, out, claimed, &cache);
        int confirming = 0;
        for (const auto& h : d.ranked)
          confirming += h.confirmed() && h.mistake == m && h.pipeline != "exact";
        if (confirming < 2) continue;
        ++several;
        // The claimed pipeline's run, or the exact run judged by the claimed profile's budget;
        // never the other float pipeline (these pipelines share their profile's name).
        const auto& top = d.ranked.front();
        EXPECT_TRUE(top.pipeline == claimed || (top.pipeline == "exact" && top.profile == claimed))
            << lc.spec.id << " " << m << " made by " << made << "\n"
            << diagnosis_text(d, true);
        EXPECT_EQ(top.mistake, m);
      }
    }
  }
  EXPECT_GE(several, 2);
}

/// An HF-style float32 RoPE written here (not posenc's pipelines) with GPT-J pairs (2i, 2i + 1)
/// on a half-split case, its angle rounded once from the exact product fl(p w) (a kernel forming
/// it in double) instead of fl(fl(p) w), float32 cos and sin: q_rot and k_rot.
TensorMap gptj_on_neox(const LoadedCase& lc) {
  const auto& pj = lc.spec.manifest.at("params");
  const int h = pj.at("head_dim").get<int>(), rd = pj.at("rotary_dim").get<int>(), np = rd / 2;
  const float base = pj.at("base").get<float>();
  const Tensor& tp = lc.golden.at("positions");
  TensorMap out;
  for (const auto& [in, name] : {std::pair{"q", "q_rot"}, std::pair{"k", "k_rot"}}) {
    if (!lc.golden.count(in)) continue;
    const auto x = tensor_to_f32(lc.golden.at(in));
    std::vector<float> y = x;
    const std::int64_t heads = lc.golden.at(in).shape[1];
    for (std::int64_t p = 0; p < tp.numel(); ++p) {
      for (int i = 0; i < np; ++i) {
        const float w = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rd));
        const float phi =
            static_cast<float>(static_cast<double>(tp.get_i64(p)) * static_cast<double>(w));
        const float c = std::cos(phi), sn = std::sin(phi);
        for (std::int64_t hh = 0; hh < heads; ++hh) {
          const std::size_t a = static_cast<std::size_t>((p * heads + hh) * h + 2 * i), b = a + 1;
          y[a] = x[a] * c - x[b] * sn;
          y[b] = x[b] * c + x[a] * sn;
        }
      }
    }
    out.emplace(name, tensor_from_f32(name, lc.golden.at(in).shape, y));
  }
  return out;
}

// GPT-J pairing on NeoX cases from that engine: at position 2^24 + 1 its angle differs from the
// fp32 pipeline's by up to 0.006 rad on the pairs that the wrong pairing routes through slow
// channels (numpy's float32 RoPE gives the same kind of difference). Named, within residual 1,
// because a float pipeline's hypothesis budget also carries that pipeline's own rounding of the
// mistaken computation and the largest angle extra of each position.
TEST(DiagnoseConfirms, GptjPairingWithAnotherFloat32AngleIsNamed) {
  for (const char* id :
       {"rope_half_d128_b5e5_llama3_8b_f32", "rope_half_d96_r24_b1e4_neox_20b_f32"}) {
    const LoadedCase lc = load(id);
    const auto d = diagnose_case(lc, gptj_on_neox(lc), "fp32");
    const std::string text = diagnosis_text(d, true);
    EXPECT_EQ(d.verdict, "explained") << text;
    ASSERT_FALSE(d.ranked.empty());
    EXPECT_EQ(d.ranked.front().mistake, "pairing") << text;
    EXPECT_LE(d.ranked.front().residual, 1.0) << text;
  }
}

}  // namespace
}  // namespace posenc::golden
