// The three golden-catalog tests every scheme runs (called from each <scheme>_test.cpp):
//   FilesAreUpToDate       regenerating every case reproduces the committed files byte for
//                          byte, and catalog.json holds their SHA-256
//   OptimizedPassesVerify  the scheme's built-in engine (its optimized kernels) passes every
//                          case with the strict profile, every stage present
//   EngineMistakesAreCaught  each deliberate engine mistake fails every case (unless declared invisible)
//   PipelinesPassTheirProfiles  each emulated engine pipeline (fp32, fp32-recurrence, bf16, f16,
//                          and exact) passes its own profile on every case the profile applies
//                          to, and its worst element over the scheme uses at least a quarter of
//                          the budget (the budget is tight, not just passing)
//   FloatPipelinesFailStrict  the float32 pipelines fail the strict profile where their tables
//                          are not correctly rounded
//   EachStageFailsAlone    one wrong element in any one stage of a correct engine's output fails
//                          the case (every stage has teeth of its own)
//   VerifyFailsTheNegativeControl...  a negative control passes the correct engine and fails
//                          the engine with the mistake it models
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/cases/catalog.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/format/format.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::properties {

inline void expect_golden_files_up_to_date(const std::string& slug, std::size_t min_cases) {
  const auto dir = golden::default_data_dir();
  const auto& scheme = golden::scheme_by_slug(slug);
  const auto rows = scheme.cases();
  ASSERT_GE(rows.size(), min_cases);
  for (const auto& row : rows) {
    const auto f = golden::case_files(golden::generate_case(scheme, row.id));
    const auto committed_m = golden::read_file(dir / slug / (row.id + ".json"));
    const auto committed_t = golden::read_file(dir / slug / (row.id + ".safetensors"));
    // ASSERT: the first stale case says enough (and a mutant run stops there).
    ASSERT_TRUE(committed_m == std::vector<std::uint8_t>(f.manifest_text.begin(), f.manifest_text.end()))
        << row.id << ".json differs from a fresh generation: run `posenc generate`";
    ASSERT_TRUE(committed_t == f.tensors)
        << row.id << ".safetensors differs from a fresh generation: run `posenc generate`";
  }
  for (const auto& f : std::filesystem::directory_iterator(dir / slug)) {
    const std::string stem = f.path().stem().string();
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.id == stem; }))
        << f.path() << " belongs to no case: run `posenc generate --scheme " << slug << "`";
  }
  std::size_t n = 0;
  for (const auto& e : golden::catalog_read(dir)) {
    if (e.scheme != slug) continue;
    ++n;
    EXPECT_EQ(golden::sha256_hex(golden::read_file(dir / e.manifest)), e.manifest_sha256) << e.id;
    EXPECT_EQ(golden::sha256_hex(golden::read_file(dir / e.tensors)), e.tensors_sha256) << e.id;
  }
  EXPECT_EQ(n, rows.size()) << "catalog.json does not list every " << slug << " case";
}

/// True in the mutant twin when the active mutant is in a generator (its name starts with
/// "gold_"): its effect is in freshly generated cases, not in the committed files.
inline bool generator_mutant_active() {
#ifdef POSENC_ENABLE_MUTANTS
  return posenc::active_mutant().substr(0, 5) == "gold_";
#else
  return false;
#endif
}

/// A case generated afresh and read back through its encoded bytes, once per process (a mutant
/// run executes every test in one process).
inline const golden::LoadedCase& fresh_case(const golden::SchemeEntry& scheme, const std::string& id) {
  static std::map<std::string, golden::LoadedCase> fresh;
  auto it = fresh.find(id);
  if (it == fresh.end()) {
    const auto f = golden::case_files(golden::generate_case(scheme, id));
    golden::LoadedCase lc;
    lc.spec = golden::case_spec_from_json(nlohmann::json::parse(f.manifest_text), id);
    lc.golden = golden::tensor_map(golden::safetensors_decode(f.tensors, id));
    it = fresh.emplace(id, std::move(lc)).first;
  }
  return it->second;
}

/// Runs fn(loaded case, scheme) for every case of the scheme: the committed files, or, under a
/// generator mutant, the same case generated afresh and read back through its encoded bytes.
template <class Fn>
void for_each_golden_case(const std::string& slug, Fn fn) {
  const auto dir = golden::default_data_dir();
  const auto& scheme = golden::scheme_by_slug(slug);
  for (const auto& row : scheme.cases()) {
    if (!generator_mutant_active()) {
      fn(golden::load_case(dir / slug / (row.id + ".json")), scheme);
      continue;
    }
    fn(fresh_case(scheme, row.id), scheme);
  }
}

inline void expect_optimized_passes_verify(const std::string& slug) {
  for_each_golden_case(slug, [](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    const auto out = s.run_engine(lc.spec, lc.golden, {});
    const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kPass)
        << golden::format_case_text(r, true);
    EXPECT_EQ(r.n_checked(), static_cast<int>(lc.spec.expected.size())) << lc.spec.id;
  });
}

/// One wrong element (an integer + 1, a float + 1 %) in one stage of the correct engine's output
/// of the committed case `file` (relative to golden/data/<slug>/) fails it under strict, stage by
/// stage; the unchanged output passes.
inline void expect_each_stage_fails_alone(const std::string& slug, const std::string& file) {
  const auto lc = golden::load_case(golden::default_data_dir() / slug / file);
  const auto& s = golden::scheme_by_slug(slug);
  const auto good = s.run_engine(lc.spec, lc.golden, {});
  EXPECT_EQ(golden::verify_case(lc.spec, lc.golden, good, {"strict", {}, true}).status, golden::Verdict::kPass);
  for (const auto& e : lc.spec.expected) {
    auto bad = good;
    golden::Tensor& t = bad.at(e.name);
    const std::int64_t at = t.numel() / 3;
    if (t.dtype == DType::kI64) {  // positions an engine exports (mrope)
      std::vector<std::int64_t> b(static_cast<std::size_t>(t.numel()));
      for (std::int64_t x = 0; x < t.numel(); ++x) b[x] = t.get_i64(x);
      b[at] += 1;
      t = golden::tensor_from_i64(e.name, t.shape, b);
    } else if (t.dtype == DType::kI32) {
      std::vector<std::int32_t> b(static_cast<std::size_t>(t.numel()));
      for (std::int64_t x = 0; x < t.numel(); ++x) b[x] = static_cast<std::int32_t>(t.get_i64(x));
      b[at] += 1;
      t = golden::tensor_from_i32(e.name, t.shape, b);
    } else {
      std::vector<float> f = golden::tensor_to_f32(t);
      f[at] += 0.01f * std::max(1.0f, std::fabs(f[at]));
      t = golden::tensor_from_f32(e.name, t.shape, f);
    }
    const auto r = golden::verify_case(lc.spec, lc.golden, bad, {"strict", {}, true});
    EXPECT_EQ(r.status, golden::Verdict::kFail) << "one wrong element of " << e.name << " went unnoticed\n"
                                << golden::format_case_text(r, true);
  }
}

/// Every negative control (result "invalid") of the scheme passes the correct engine and fails
/// the engine with `mistake`, the one it models; there is at least one.
inline void expect_negative_controls_fail_only_for(const std::string& slug,
                                                   const std::string& mistake) {
  int n = 0;
  for_each_golden_case(slug, [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (lc.spec.result != "invalid") return;
    ++n;
    const auto good = golden::verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {}),
                                          {"strict", {}, true});
    EXPECT_EQ(good.status, golden::Verdict::kPass) << golden::format_case_text(good, true);
    const auto bad = golden::verify_case(lc.spec, lc.golden,
                                         s.run_engine(lc.spec, lc.golden, {mistake}),
                                         {"strict", {}, true});
    EXPECT_EQ(bad.status, golden::Verdict::kFail) << golden::format_case_text(bad, true);
  });
  EXPECT_GE(n, 1) << slug << " has no negative control";
}

inline bool profile_applies(const golden::CaseSpec& spec, const std::string& profile);

/// Every mistake must fail every case, unless `allowed_pass(case, mistake)` says the mistake is
/// invisible for that case (e.g. a position offset cannot change relative scores). Judged by
/// `profile` (strict unless given) on every case that profile applies to.
template <class AllowedPass>
void expect_engine_mistakes_caught(const std::string& slug, AllowedPass allowed_pass,
                                   const std::string& profile = "strict") {
  for_each_golden_case(slug, [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    if (!profile_applies(lc.spec, profile)) return;
    for (const auto& mistake : s.mistakes()) {
      const auto out = s.run_engine(lc.spec, lc.golden, {mistake});
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {profile, {}, true});
      if (allowed_pass(lc.spec.id, mistake)) continue;
      EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id << " with mistake " << mistake << " under "
                                                  << profile;
    }
  });
}

/// True when the profile judges some expected tensor of the case.
inline bool profile_applies(const golden::CaseSpec& spec, const std::string& profile) {
  return std::any_of(spec.expected.begin(), spec.expected.end(), [&](const golden::TensorSpec& t) {
    return t.check.profile(profile).applies;
  });
}

/// The worst share of its budget a pipeline's engine reaches on one stage over the scheme's cases.
struct PipelineWorst {
  double ratio = 0;
  std::string where;
};

/// Every pipeline passes its own profile on each case that profile applies to, and on every
/// stage not listed in `loose` (reductions whose bound admits any summation order,
/// docs/profiles.md; an entry "pipeline/stage" names one pipeline's stage, "*.out" every
/// tensor whose name ends with ".out") its worst element reaches
/// at least min_share of the budget: the budget is tight.
/// Returns the worst share per (pipeline, stage).
/// by_stage: the worst share is taken per stage rather than per tensor (a trace has one tensor
/// of each stage per step; the budget must be tight for the stage, not for every step).
inline std::map<std::pair<std::string, std::string>, PipelineWorst>
expect_pipelines_pass_their_profiles(const std::string& slug, double min_share,
                                     const std::vector<std::string>& loose = {}, bool by_stage = false) {
  std::map<std::pair<std::string, std::string>, PipelineWorst> worst;
  for_each_golden_case(slug, [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    for (const auto& pipeline : golden::pipelines::names()) {
      const std::string profile = golden::pipelines::profile_of(pipeline);
      if (!profile_applies(lc.spec, profile)) continue;
      golden::EngineOptions eo;
      eo.pipeline = pipeline;
      const auto out = s.run_engine(lc.spec, lc.golden, eo);
      golden::VerifyOptions vo;
      vo.profile = profile;
      vo.require_all = true;
      const auto r = golden::verify_case(lc.spec, lc.golden, out, vo);
      if (lc.spec.result == "invalid") continue;  // a negative control: see the mistakes test
      EXPECT_EQ(r.status, golden::Verdict::kPass) << "pipeline " << pipeline << "\n" << golden::format_case_text(r, true);
      for (const auto& t : r.tensors) {
        if ((t.status != golden::Verdict::kPass && t.status != golden::Verdict::kFail) || t.kind == golden::CheckKind::kExact) continue;
        PipelineWorst& w = worst[{pipeline, by_stage ? t.stage : t.name}];
        if (t.max_ratio >= w.ratio) {
          w.ratio = t.max_ratio;
          w.where = by_stage ? lc.spec.id + " " + t.name : lc.spec.id;
        }
      }
    }
  });
  for (const auto& [key, w] : worst) {
    const bool is_loose = std::any_of(loose.begin(), loose.end(), [&](const std::string& l) {
      if (l == key.second || l == key.first + "/" + key.second) return true;
      // "*suffix": every tensor whose name ends with it (per-step tensors of a trace)
      return l.size() > 1 && l[0] == '*' && key.second.size() >= l.size() - 1 &&
             key.second.compare(key.second.size() - (l.size() - 1), l.size() - 1, l, 1) == 0;
    });
    std::printf("[ tight    ] %s pipeline %-16s %-9s worst element at %.3f of its budget (%s)%s\n",
                slug.c_str(), key.first.c_str(), key.second.c_str(), w.ratio, w.where.c_str(),
                is_loose ? " [loose by design]" : "");
    if (!is_loose) {
      EXPECT_GE(w.ratio, min_share) << "pipeline " << key.first << ", stage " << key.second
                                    << ": the budget is more than " << 1 / min_share
                                    << "x what the pipeline needs";
    }
    EXPECT_LE(w.ratio, 1.0) << key.first << " " << key.second;
  }
  return worst;
}

/// The float32 pipelines fail strict on every (case, pipeline) `select(id, pipeline)` picks.
template <class Select>
void expect_float_pipelines_fail_strict(const std::string& slug, Select select) {
  int n = 0;
  for_each_golden_case(slug, [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    for (const std::string pipeline : {"fp32", "fp32-recurrence"}) {
      if (!select(lc.spec.id, pipeline) || !profile_applies(lc.spec, pipeline)) continue;
      golden::EngineOptions eo;
      eo.pipeline = pipeline;
      const auto out = s.run_engine(lc.spec, lc.golden, eo);
      golden::VerifyOptions strict;
      strict.require_all = true;
      const auto r = golden::verify_case(lc.spec, lc.golden, out, strict);
      EXPECT_EQ(r.status, golden::Verdict::kFail) << lc.spec.id << ": pipeline " << pipeline
                                  << " passes strict, so strict cannot tell it from an exact engine";
      ++n;
    }
  });
  EXPECT_GT(n, 0) << "no case selected";
}

/// llama.cpp's scores on a 16-bit KV cache: q_rot and k_rot as the fp32-recurrence pipeline
/// stores them (in the target dtype), their products (exact in float32) summed in float32 in
/// the order `order` (0: channel order, 1: reversed, 2: ggml's CPU scalar path, a double sum
/// rounded to float32 once), the score written in the target dtype.
inline std::vector<float> llama_cpp_kv_scores(const golden::TensorMap& out, int order) {
  const golden::Tensor& qt = out.at("q_rot");
  const golden::Tensor& kt = out.at("k_rot");
  const std::vector<float> q = golden::tensor_to_f32(qt), k = golden::tensor_to_f32(kt);
  const std::int64_t tn = qt.shape[0], hq = qt.shape[1], hk = kt.shape[1], h = qt.shape[2];
  std::vector<float> s;
  for (std::int64_t hh = 0; hh < hq; ++hh) {
    for (std::int64_t i = 0; i < tn; ++i) {
      for (std::int64_t j = 0; j < tn; ++j) {
        const float* x = &q[(i * hq + hh) * h];
        const float* y = &k[(j * hk + hh / (hq / hk)) * h];
        float f = 0;
        double d = 0;
        for (std::int64_t c = 0; c < h; ++c) {
          const std::int64_t cc = order == 1 ? h - 1 - c : c;
          f += x[cc] * y[cc];
          d += static_cast<double>(x[cc]) * y[cc];
        }
        s.push_back(order == 2 ? static_cast<float>(d) : f);
      }
    }
  }
  return s;
}

/// Every 16-bit case of the scheme: llama.cpp's KV-cache scores (llama_cpp_kv_scores, every
/// summation order) from the fp32-recurrence pipeline's stored q_rot and k_rot pass
/// fp32-recurrence. Returns the number of cases.
inline int expect_llama_cpp_kv_cache_scores_pass(const std::string& slug) {
  int n = 0;
  for_each_golden_case(slug, [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    const DType t = lc.golden.at("q").dtype;
    if (t != DType::kBF16 && t != DType::kF16) return;
    golden::EngineOptions eo;
    eo.pipeline = "fp32-recurrence";
    golden::TensorMap out = s.run_engine(lc.spec, lc.golden, eo);
    const std::vector<std::int64_t> shape = out.at("scores").shape;
    for (int order = 0; order < 3; ++order) {
      out.insert_or_assign("scores", golden::engine_tensor("scores", t, shape, llama_cpp_kv_scores(out, order)));
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {"fp32-recurrence", {}, true});
      EXPECT_EQ(r.status, golden::Verdict::kPass) << "summation order " << order << "\n"
                                                  << golden::format_case_text(r, true);
    }
    ++n;
  });
  return n;
}

}  // namespace posenc::properties
