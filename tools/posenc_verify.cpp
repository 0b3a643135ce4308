// `posenc verify` and `posenc diagnose` (cases, folders, catalogs and plans):
// tools/posenc_common.hpp.
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

/// --map golden=engine: the engine's output must hold each name that this case expects.
template <class Has>
void check_maps(const VerifyOptions& opt, const CaseSpec& spec, Has has,
                std::set<std::string>& mapped_names) {
  for (const auto& [golden_name, engine_name] : opt.rename) {
    const bool expected = std::any_of(spec.expected.begin(), spec.expected.end(),
                                      [&](const TensorSpec& t) { return t.name == golden_name; });
    if (!expected) continue;
    mapped_names.insert(golden_name);
    if (!has(engine_name)) {
      throw UsageError("--map " + golden_name + "=" + engine_name + ": the engine output for " +
                       spec.id + " has no tensor \"" + engine_name + "\"");
    }
  }
}

/// The golden arguments, a plan manifest (one argument, "schema": "posenc-plan") replaced by its
/// types' case manifests (*plan set).
/// The plan.json of a folder (or of its catalog.json) that holds a plan's cases and nothing
/// else, as `generate --config` writes it: verifying the folder is verifying its plan (a type
/// without output fails its layers). Empty otherwise.
fs::path plan_of_folder(const std::string& arg) {
  const fs::path p(arg);
  const fs::path dir = fs::is_directory(p) ? p
                       : p.filename() == "catalog.json" ? (p.has_parent_path() ? p.parent_path() : ".")
                                                        : fs::path();
  if (dir.empty() || !fs::exists(dir / "catalog.json") || !is_plan_manifest(dir / "plan.json"))
    return {};
  std::set<std::string> listed, planned;
  for (const auto& e : catalog_read(dir)) listed.insert(e.id);
  for (const auto& t : plan_manifest_read(dir / "plan.json").types) planned.insert(t.case_id);
  return listed == planned ? dir / "plan.json" : fs::path();
}

std::vector<std::string> plan_case_args(const std::vector<std::string>& golden_args, std::optional<PlanManifest>* plan) {
  if (golden_args.size() != 1) return golden_args;
  std::string arg = golden_args.front();
  if (const fs::path pj = plan_of_folder(arg); !pj.empty()) {
    std::fprintf(stderr, "note: %s holds the cases of one plan: verifying %s (each layer type, "
                 "then the plan)\n", arg.c_str(), pj.c_str());
    arg = pj.string();
  }
  if (!is_plan_manifest(arg)) return golden_args;
  *plan = plan_manifest_read(arg);
  std::vector<std::string> args;
  for (const auto& t : (*plan)->types) args.push_back(t.manifest.string());
  return args;
}

/// verify on a plan manifest with --layer-table or per-layer outputs (ACT/layers/NN):
/// tools/posenc_plan.hpp. nullopt: the per-type path of cmd_verify does the rest (*table_rc set
/// by a layer table checked here).
std::optional<int> verify_plan_modes(const PlanManifest& plan, const fs::path& actual,
                                     const VerifyOptions& opt, const std::string& format,
                                     bool verbose, const std::string& layer_table, int* table_rc) {
  json j = {{"plan", plan.model}, {"profile", opt.profile}};
  if (!layer_table.empty()) {
    *table_rc = tools::plan_layer_table_report(plan, layer_table, format, &j) > 0 ? kExitMismatch
                                                                                  : kExitPass;
  }
  const bool layers = !actual.empty() && fs::is_directory(actual / "layers");
  if (layers) {
    const auto results = golden::plan_verify_layers(
        plan, actual, opt,
        [](const fs::path& d, const std::string& id) { return actual_for(d, id, 1); });
    const int failing = tools::print_plan_layers(plan, results, format, verbose, &j);
    if (format == "json") std::cout << j.dump(1) << "\n";
    for (const auto& r : results) {
      if (r.report.status == Verdict::kError) return kExitUsage;
    }
    return failing > 0 || *table_rc != kExitPass ? kExitMismatch : kExitPass;
  }
  if (actual.empty()) {
    if (format == "json") std::cout << j.dump(1) << "\n";
    return *table_rc;
  }
  return std::nullopt;
}

int cmd_verify(const std::vector<std::string>& golden_args, const fs::path& actual,
               const VerifyOptions& opt, const std::string& format, bool verbose, bool by_position,
               bool force, ReportFile* html = nullptr, const std::string& layer_table = "") {
  check_format(format);
  int diagnoses_left = kReportDiagnoses;
  // A plan manifest (plan.json of `generate --config`): the case of each of its layer types.
  std::optional<PlanManifest> plan;
  const auto cases = expand_golden(plan_case_args(golden_args, &plan));
  if (!layer_table.empty() && !plan) {
    throw UsageError("--layer-table needs one plan manifest (plan.json) as GOLDEN");
  }
  if (actual.empty() && layer_table.empty()) {
    throw UsageError(
        "verify: --actual is required (a plan.json with --layer-table alone checks the table)");
  }
  int table_rc = kExitPass;
  if (plan && (html == nullptr || actual.empty())) {
    if (const auto rc =
            verify_plan_modes(*plan, actual, opt, format, verbose, layer_table, &table_rc))
      return *rc;
  }
  // --report is checked before anything is verified (golden/format/output_path.hpp).
  const OutputRule rule = html ? golden_reads(cases, actual, force) : OutputRule(force);
  if (html) rule.check_file(html->path, OutputKind::kReport);
  std::vector<CaseReport> reports;
  std::set<std::string> mapped_names;  // golden names --map renames that some case expects
  Progress progress("verify", cases.size());
  for (const auto& ga : cases) {
    progress.step(ga.manifest.stem().string());
    CaseReport r;
    r.profile = opt.profile;
    try {
      if (ga.entry) check_catalog_entry(ga.data, *ga.entry);
      if (html) {
        const LoadedCase lc = load_case(ga.manifest, ga.entry ? CatalogCheck::kDone : CatalogCheck::kIfInCatalog);
        r.id = lc.spec.id;
        r.scheme = lc.spec.scheme;
        const auto act = actual_for(actual, lc.spec.id, cases.size());
        if (!act) {
          r.status = opt.require_all ? Verdict::kError : Verdict::kNoOutput;
          r.message = no_output_message(actual, lc.spec.id);
          reports.push_back(std::move(r));
          continue;
        }
        check_maps(opt, lc.spec, [&](const std::string& n) { return act->count(n) > 0; },
                   mapped_names);
        ElementRatios ratios;
        r = verify_case_with_ratios(lc.spec, lc.golden, *act, opt, ratios);
        report_add_case(html->page, lc, &*act, r, ratios, opt.profile, &diagnoses_left,
                        "posenc diagnose " + ga.manifest.string() + " --actual " +
                            actual.string() + " --profile " + opt.profile);
      } else {
        // Streaming: headers first, then each tensor in chunks; the golden tensors' SHA-256
        // is checked as they stream (finish(): before the report is used).
        const std::unique_ptr<OpenedCase> oc =
            open_case(ga.manifest, ga.entry ? CatalogCheck::kDone : CatalogCheck::kIfInCatalog);
        r.id = oc->spec.id;
        r.scheme = oc->spec.scheme;
        const auto act = actual_source_for(actual, oc->spec.id, cases.size());
        if (!act) {
          oc->finish();
          r.status = opt.require_all ? Verdict::kError : Verdict::kNoOutput;
          r.message = no_output_message(actual, oc->spec.id);
          reports.push_back(std::move(r));
          continue;
        }
        check_maps(opt, oc->spec, [&](const std::string& n) { return act->contains(n); },
                   mapped_names);
        CaseReport streamed = verify_case(oc->spec, oc->golden, *act, opt);
        oc->finish();
        r = std::move(streamed);
      }
    } catch (const std::exception& e) {
      if (r.id.empty()) r.id = ga.manifest.stem().string();
      r.status = Verdict::kError;
      r.message = e.what();
    }
    reports.push_back(std::move(r));
  }
  progress.done();
  for (const auto& [golden_name, engine_name] : opt.rename) {
    if (!mapped_names.count(golden_name)) {
      throw UsageError("--map " + golden_name + "=" + engine_name + ": no case given expects a "
                       "tensor \"" + golden_name + "\"");
    }
  }
  // A plan: a type without output fails its layers (exit 1), as a differing layer table does;
  // JSON carries the plan's verdict too ("plan_summary": per type, the failing layers).
  int plan_layers_failed = 0;
  json plan_json;
  if (plan && format != "text") {
    std::ostringstream quiet;
    std::streambuf* const old = std::cout.rdbuf(quiet.rdbuf());
    plan_layers_failed = tools::print_plan_summary(*plan, reports, &plan_json);
    std::cout.rdbuf(old);
  }
  print_reports(reports, format, verbose, by_position, opt.profile, plan ? &plan_json : nullptr);
  if (plan && format == "text") plan_layers_failed = tools::print_plan_summary(*plan, reports);
  if (html) html->write(rule);
  const bool failed = std::any_of(reports.begin(), reports.end(), [](const CaseReport& r) {
    return r.status == Verdict::kFail && r.result != "invalid";
  });
  if (failed && format == "text") {
    std::printf("what went wrong: posenc diagnose %s --actual %s --profile %s\n",
                golden_args.size() == 1 ? golden_args.front().c_str() : "GOLDEN...",
                actual.string().c_str(), opt.profile.c_str());
  }
  const int rc = exit_code_of(reports);
  if (plan && rc == kExitPass && (plan_layers_failed > 0 || table_rc != kExitPass))
    return kExitMismatch;
  return rc;
}

int cmd_diagnose(const std::vector<std::string>& golden_args, const fs::path& actual,
                 const std::string& profile, const std::string& format, bool verbose, bool force,
                 ReportFile* html = nullptr) {
  check_format(format);
  std::optional<PlanManifest> plan;  // a plan manifest: each layer type's case
  const auto cases = expand_golden(plan_case_args(golden_args, &plan));
  if (plan && html == nullptr && fs::is_directory(actual / "layers")) {  // per-layer outputs
    json j = {{"plan", plan->model}, {"profile", profile}};
    const int wrong = tools::plan_diagnose_layers(
        *plan, actual, profile, format,
        [](const fs::path& d, const std::string& id) { return actual_for(d, id, 1); }, &j);
    if (format == "json") std::cout << j.dump(1) << "\n";
    return wrong ? kExitMismatch : kExitPass;
  }
  const OutputRule rule = html ? golden_reads(cases, actual, force) : OutputRule(force);
  if (html) rule.check_file(html->path, OutputKind::kReport);
  nlohmann::json all = nlohmann::json::array();
  int n = 0, unexplained = 0, wrong = 0;
  Progress progress("diagnose", cases.size());
  for (const auto& ga : cases) {
    progress.step(ga.manifest.stem().string());
    if (ga.entry) check_catalog_entry(ga.data, *ga.entry);
    const LoadedCase lc = load_case(ga.manifest, ga.entry ? CatalogCheck::kDone : CatalogCheck::kIfInCatalog);
    if (lc.spec.result == "invalid") continue;  // negative controls hold a mistake already
    const auto act = actual_for(actual, lc.spec.id, cases.size());
    if (!act) continue;
    const Diagnosis d = diagnose_case(lc, *act, profile);
    if (html) {
      VerifyOptions vo;
      vo.profile = profile;
      ElementRatios ratios;
      const CaseReport r = verify_case_with_ratios(lc.spec, lc.golden, *act, vo, ratios);
      html->page.add_case(lc.spec, lc.golden, &*act, r, &ratios, diagnosis_json(d), "");
    }
    ++n;
    unexplained += d.verdict == "unexplained";
    wrong += d.verdict != "correct";
    if (format == "json") {
      all.push_back(diagnosis_json(d));
    } else {
      progress.done();
      std::cout << diagnosis_text(d, verbose);
      for (const auto& t : plan ? plan->types : std::vector<PlanManifest::Type>{}) {
        if (t.case_id == lc.spec.id) {
          std::cout << "  layer type " << t.name << " of " << plan->model << ": layers " << plan_layer_ranges(t.layers)
                    << " (" << t.layers.size() << " of " << plan->n_layers << ")\n";
        }
      }
    }
  }
  if (n == 0) {
    throw UsageError("diagnose: no valid case given has an engine output in " + actual.string());
  }
  if (format == "json") {
    std::cout << nlohmann::json{{"profile", profile}, {"cases", all}}.dump(2) << "\n";
  } else {
    std::printf("diagnose: %d case(s), %d correct, %d explained, %d unexplained\n", n, n - wrong,
                wrong - unexplained, unexplained);
  }
  if (html) html->write(rule);
  return wrong ? kExitMismatch : kExitPass;
}


}  // namespace

int run_verify(const tools::VerifyArgs& a, int argc, char** argv) {
  VerifyOptions opt;
  opt.profile = canonical_or_usage(a.profile);
  std::optional<ReportFile> report = report_for(a.report, "verify", argc, argv, opt.profile);
  opt.rename = parse_maps(a.maps);
  opt.require_all = a.require_all;
  if (a.max_position >= 0) opt.max_position = a.max_position;
  return cmd_verify(a.golden, a.actual, opt, a.format, a.verbose, a.by_position, a.force,
                    report ? &*report : nullptr, a.layer_table);
}

int run_diagnose(const tools::DiagnoseArgs& a, int argc, char** argv) {
  const std::string profile = canonical_or_usage(a.profile);
  std::optional<ReportFile> report = report_for(a.report, "diagnose", argc, argv, profile);
  return cmd_diagnose(a.golden, a.actual, profile, a.format, a.verbose, a.force,
                      report ? &*report : nullptr);
}

}  // namespace posenc::tools
