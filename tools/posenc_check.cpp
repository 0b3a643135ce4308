// `posenc check` (posenc's own kernels and pipelines against the catalog) and `posenc engine`
// (the built-in engine's outputs for a case): tools/posenc_common.hpp.
#include "tools/posenc_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/diagnose.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/plan_case.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/dir_lock.hpp"
#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/output_path.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/errors.hpp"
#include "tools/posenc_plan.hpp"
#include "tools/posenc_report.hpp"

namespace posenc::tools {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace posenc;
using namespace posenc::golden;

namespace {

bool profile_applies(const CaseSpec& spec, const std::string& profile) {
  return std::any_of(spec.expected.begin(), spec.expected.end(),
                     [&](const TensorSpec& t) { return t.check.profile(profile).applies; });
}

int cmd_check(const CaseSelection& sel, const fs::path& data, const std::string& pipeline,
              const std::string& profile_arg, const std::string& format, const fs::path& keep,
              bool force, ReportFile* html = nullptr) {
  int diagnoses_left = kReportDiagnoses;
  check_format(format);
  pipelines::profile_of(pipeline);  // validates the name
  const std::string profile =
      profile_arg.empty() ? pipelines::profile_of(pipeline) : canonical_or_usage(profile_arg);
  // Every catalog entry the selection matches (cases made from a config are in no registry).
  if (!sel.scheme.empty()) scheme_by_slug(sel.scheme);  // validates the name
  const CaseMatcher match(sel.case_regex);
  auto wanted = [&](const CatalogEntry& e) {
    return (sel.scheme.empty() || e.scheme == sel.scheme) && match.matches(e.id);
  };
  const auto entries = catalog_read(data);
  // Outputs (--report, --keep's files) are checked before any case runs.
  OutputRule rule(force);
  rule.add_read(data / "catalog.json");
  for (const auto& e : entries) {
    if (!wanted(e)) continue;
    rule.add_read(data / e.manifest);
    rule.add_read(data / e.tensors);
  }
  if (html) rule.check_file(html->path, OutputKind::kReport);
  fs::path work = keep;
  std::optional<ScratchFolder> scratch;
  if (work.empty()) {  // a fresh folder of this run's own, removed however the run ends
    scratch.emplace("posenc-check");
    work = scratch->path();
    rule.check_dir(work);
  } else {
    rule.check_dir(work);
    for (const auto& e : entries) {
      if (wanted(e)) rule.check_file(work / (e.id + ".safetensors"), OutputKind::kEngineOutput);
    }
  }
  fs::create_directories(work);
  std::vector<CaseReport> reports;
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress("check", static_cast<std::size_t>(
                                 std::count_if(entries.begin(), entries.end(), wanted)));
  for (const auto& e : entries) {
    if (!wanted(e)) continue;
    progress.step(e.id);
    CaseReport r;
    r.id = e.id;
    r.scheme = e.scheme;
    r.profile = profile;
    try {
      check_catalog_entry(data, e);
      const LoadedCase lc = load_case(data / e.manifest, CatalogCheck::kDone);
      const SchemeEntry& s = scheme_by_slug(lc.spec.scheme);
      if (!profile_applies(lc.spec, pipelines::profile_of(pipeline))) {
        r.status = Verdict::kNotApplicable;
        r.message = "pipeline " + pipeline + " does not apply to this case";
        reports.push_back(std::move(r));
        continue;
      }
      // Through files, exactly as an external engine: inputs read from the golden file,
      // outputs written as safetensors, read back, verified.
      EngineOptions eo;
      eo.pipeline = pipeline;
      const TensorMap out = s.run_engine(lc.spec, lc.golden, eo);
      std::vector<Tensor> ts;
      for (const auto& [k, v] : out) ts.push_back(v);
      const fs::path f = work / (e.id + ".safetensors");
      rule.write(f, OutputKind::kEngineOutput, safetensors_encode(ts, {{kEngineOutputKey, e.id}}));
      VerifyOptions vo;
      vo.profile = profile;
      vo.require_all = true;
      const TensorMap back = tensor_map(safetensors_read(f));
      if (scratch) fs::remove(f);  // nobody keeps it: one engine output on disk at a time
      ElementRatios ratios;
      r = html ? verify_case_with_ratios(lc.spec, lc.golden, back, vo, ratios)
               : verify_case(lc.spec, lc.golden, back, vo);
      if (html) {
        report_add_case(html->page, lc, &back, r, ratios, profile, &diagnoses_left,
                        "posenc engine " + e.id + " --pipeline " + pipeline +
                            " --out out.safetensors && posenc diagnose " +
                            (data / e.manifest).string() + " --actual out.safetensors --profile " +
                            profile);
      }
    } catch (const std::exception& ex) {
      r.status = Verdict::kError;
      r.message = ex.what();
    }
    reports.push_back(std::move(r));
  }
  progress.done();
  scratch.reset();
  if (reports.empty()) throw UsageError("no catalog case matches the selection");
  if (html) html->write(rule);
  if (format == "json") {
    print_reports(reports, format, false, false, profile);
    return exit_code_of(reports);
  }
  std::printf("posenc check: pipeline %s vs the golden catalog (%s), profile %s\n", pipeline.c_str(),
              data.c_str(), profile.c_str());
  std::printf("%-52s %-8s %-9s %-14s %s\n", "case", "checked", "worst", "of budget", "result");
  int pass = 0, fail = 0, na = 0;
  double worst_all = 0;
  for (const auto& r : reports) {
    if (r.status == Verdict::kNotApplicable) {
      ++na;
      std::printf("%-52s %-8s %-9s %-14s %s\n", r.id.c_str(), "-", "-", "-", to_string(r.status).c_str());
      continue;
    }
    const TensorReport* worst = nullptr;
    for (const auto& t : r.tensors) {
      if (!judged(t.status)) continue;
      if (!worst || t.max_ratio > worst->max_ratio) worst = &t;
    }
    // A negative control passes by differing from its (wrong) values: its ratio is a distance,
    // not a share of a budget, so the summary's worst element is over the valid cases only.
    if (worst && r.result != "invalid") worst_all = std::max(worst_all, worst->max_ratio);
    std::printf("%-52s %d/%-6zu %-9s %-14.3f %s\n", r.id.c_str(), r.n_checked(), r.tensors.size(),
                worst ? worst->name.c_str() : "-", worst ? worst->max_ratio : 0.0, to_string(r.status).c_str());
    if (r.status != Verdict::kPass) {
      if (!r.message.empty()) std::printf("    %s\n", r.message.c_str());
      std::cout << format_case_text(r, false);
    }
    pass += r.status == Verdict::kPass;
    fail += r.status != Verdict::kPass;
  }
  std::printf("check: %d passed, %d failed", pass, fail);
  if (na) std::printf(", %d not applicable", na);
  std::printf("; worst element of a valid case at %.3f of its budget (%.1f s)\n", worst_all,
              seconds_since(t0));
  return exit_code_of(reports);
}


}  // namespace

int cmd_engine(const std::string& which, const fs::path& data, const fs::path& out,
               const std::string& mistake, const std::string& pipeline, const std::string& format,
               bool force) {
  if (format != "safetensors" && format != "npy") {
    throw UsageError("--format must be safetensors or npy (got " + format + ")");
  }
  pipelines::profile_of(pipeline);  // validates the name
  const fs::path manifest = manifest_for(which, data);
  const LoadedCase lc = load_case(manifest);
  const SchemeEntry& s = scheme_by_slug(lc.spec.scheme);
  OutputRule rule(force);
  rule.add_read(manifest);
  rule.add_read(manifest.parent_path() / lc.spec.tensors_file);
  if (manifest.string() != which) rule.add_read(data / "catalog.json");
  if (format == "npy") {
    rule.check_dir(out);
  } else {
    rule.check_file(out, OutputKind::kEngineOutput);
  }
  EngineOptions eo;
  eo.mistake = mistake;
  eo.pipeline = pipeline;
  const TensorMap res = s.run_engine(lc.spec, lc.golden, eo);
  if (format == "npy") {
    for (const auto& [k, v] : res) rule.check_file(out / (k + ".npy"), OutputKind::kNpyOutput);
    for (const auto& [k, v] : res) rule.write(out / (k + ".npy"), OutputKind::kNpyOutput, npy_encode(v));
  } else {
    std::vector<Tensor> ts;
    for (const auto& [k, v] : res) ts.push_back(v);
    rule.write(out, OutputKind::kEngineOutput, safetensors_encode(ts, {{kEngineOutputKey, lc.spec.id}}));
  }
  std::fprintf(stderr, "engine: %s -> %s (pipeline %s%s)\n", lc.spec.id.c_str(), out.c_str(),
               pipeline.c_str(), mistake.empty() ? "" : (", deliberate mistake: " + mistake).c_str());
  return kExitPass;
}

int run_check(const tools::CheckArgs& a, int argc, char** argv) {
  std::optional<ReportFile> report;
  if (!a.report.empty()) {  // without a report, cmd_check resolves the profile itself
    report = report_for(a.report, "check", argc, argv,
                        a.profile.empty() ? pipelines::profile_of(a.pipeline)
                                          : canonical_or_usage(a.profile));
  }
  return cmd_check(a.sel, a.data, a.pipeline, a.profile, a.format, a.keep, a.force,
                   report ? &*report : nullptr);
}

}  // namespace posenc::tools
