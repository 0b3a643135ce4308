// What the posenc subcommands share: tools/posenc_common.hpp.
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_format(const std::string& f) {
  if (f != "text" && f != "json") throw UsageError("--format must be text or json (got " + f + ")");
}

/// The canonical name of a --profile value (aliases accepted); UsageError otherwise.
std::string canonical_or_usage(const std::string& p) {
  const std::string c = canonical_profile(p);
  if (c.empty()) throw UsageError("--profile must be one of " + profile_list_text() + " (got " + p + ")");
  return c;
}

/// Resolves a case argument: a manifest path, or a case id looked up in the data directory.
fs::path manifest_for(const std::string& arg, const fs::path& data) {
  if (fs::is_regular_file(arg)) return arg;
  if (const std::string kind = special_file_kind(arg); !kind.empty() && kind != "a directory") {
    throw UsageError(arg + ": is " + kind + ", not a regular file");
  }
  for (const auto& e : catalog_read(data)) {
    if (e.id == arg) return data / e.manifest;
  }
  throw UsageError("no case \"" + arg + "\" in " + (data / "catalog.json").string() +
                   " and no such manifest file (try `posenc list`)");
}


/// Golden arguments of verify: manifests, directories (a catalog folder, or all manifests
/// below) or catalog.json.
std::vector<GoldenArg> expand_golden(const std::vector<std::string>& args) {
  std::vector<GoldenArg> out;
  auto from_catalog = [&](const fs::path& dir) {
    for (const auto& e : catalog_read(dir)) out.push_back({dir / e.manifest, e, dir});
  };
  for (const auto& a : args) {
    const fs::path p(a);
    if (fs::is_directory(p)) {
      if (fs::exists(p / "catalog.json")) {
        from_catalog(p);
        continue;
      }
      std::vector<fs::path> found;
      for (auto it = fs::recursive_directory_iterator(p); it != fs::recursive_directory_iterator(); ++it) {
        const fs::directory_entry& f = *it;
        if (f.is_directory() && f.path().filename() == kShardRecordDir) {
          it.disable_recursion_pending();  // a batch's shard records, not manifests
        } else if (f.is_regular_file() && f.path().extension() == ".json" &&
                   f.path().filename() != "catalog.json" && f.path().filename() != "plan.json") {
          found.push_back(f.path());
        }
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) throw UsageError(a + ": directory holds no golden manifest");
      for (const auto& f : found) out.push_back({f, std::nullopt, {}});
    } else if (p.filename() == "catalog.json") {
      from_catalog(p.parent_path().empty() ? fs::path(".") : p.parent_path());
    } else if (fs::is_regular_file(p)) {
      out.push_back({p, std::nullopt, {}});
    } else {
      if (const std::string kind = special_file_kind(p); !kind.empty()) {
        throw UsageError(a + ": is " + kind + ", not a regular file");  // not "no such"
      }
      throw UsageError(a + ": no such golden manifest or directory");
    }
  }
  return out;
}

/// The output rule of verify and diagnose: every file they read (manifests, their tensors
/// files, catalogs, the --actual file or the files in the --actual folder and its case folders).
OutputRule golden_reads(const std::vector<GoldenArg>& cases, const fs::path& actual, bool force) {
  OutputRule rule(force);
  for (const auto& ga : cases) {
    rule.add_read(ga.manifest);
    if (ga.entry) {
      rule.add_read(ga.data / "catalog.json");
      rule.add_read(ga.data / ga.entry->tensors);
      continue;
    }
    try {  // the tensors file the manifest names (a bad manifest fails later, when verified)
      const json m = read_json_file(ga.manifest);
      if (m.is_object() && m.contains("tensors_file") && m["tensors_file"].is_string()) {
        rule.add_read(ga.manifest.parent_path() / m["tensors_file"].get<std::string>());
      }
    } catch (const std::exception&) {
    }
  }
  if (fs::is_directory(actual)) {
    rule.add_reads_below(actual, 2);
  } else {
    rule.add_read(actual);
  }
  return rule;
}

std::map<std::string, std::string> parse_maps(const std::vector<std::string>& maps) {
  std::map<std::string, std::string> r;
  for (const auto& m : maps) {
    const auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
      throw UsageError("--map must look like golden_name=engine_name (got " + m + ")");
    }
    r[m.substr(0, eq)] = m.substr(eq + 1);
  }
  return r;
}

/// 2 on any bad input; else 1 on a mismatch; else 0 when some case was judged (INCONCLUSIVE
/// negative controls beside it are listed, as N/A ones are); when none was: 3 if a negative
/// control is INCONCLUSIVE (the stages given cannot tell), else 2 (nothing checked).
int exit_code_of(const std::vector<CaseReport>& reports) {
  int rc = kExitPass, checked = 0, inconclusive = 0;
  for (const auto& r : reports) {
    if (r.status == Verdict::kError) return kExitUsage;
    if (r.status == Verdict::kFail) rc = kExitMismatch;
    checked += judged(r.status);
    inconclusive += r.status == Verdict::kInconclusive;
  }
  if (checked > 0) return rc;
  return inconclusive > 0 ? kExitInconclusive : kExitUsage;
}


Summary summarize(const std::vector<CaseReport>& reports) {
  Summary s;
  for (const auto& r : reports) {
    s.pass += r.status == Verdict::kPass;
    s.fail += r.status == Verdict::kFail;
    s.error += r.status == Verdict::kError;
    s.no_output += r.status == Verdict::kNoOutput;
    s.na += r.status == Verdict::kNotApplicable;
    s.inconclusive += r.status == Verdict::kInconclusive;
  }
  s.checked = s.pass + s.fail;
  return s;
}

void print_reports(const std::vector<CaseReport>& reports, const std::string& format, bool verbose,
                   bool by_position, const std::string& profile, const json* plan) {
  const Summary s = summarize(reports);
  if (format == "json") {
    json arr = json::array();
    for (const auto& r : reports) arr.push_back(case_report_json(r, by_position));
    json j = {{"profile", profile},
              {"summary",
               {{"checked", s.checked},
                {"passed", s.pass},
                {"failed", s.fail},
                {"errors", s.error},
                {"without_output", s.no_output},
                {"not_applicable", s.na},
                {"inconclusive", s.inconclusive}}},
              {"cases", arr}};
    if (plan && !plan->is_null()) j["plan_summary"] = *plan;  // per type, the failing layers
    std::cout << j.dump(1) << '\n';
    return;
  }
  for (const auto& r : reports) {
    if (r.status == Verdict::kNoOutput && !verbose) continue;
    std::cout << format_case_text(r, verbose, by_position);
  }
  std::cout << "verify: " << s.checked << " checked: " << s.pass << " passed, " << s.fail
            << " failed";
  if (s.error) std::cout << "; " << s.error << " errors";
  if (s.na) std::cout << "; " << s.na << " not applicable under profile " << profile;
  if (s.inconclusive) {
    std::cout << "; " << s.inconclusive << " inconclusive (negative controls whose given stages "
              << "cannot tell the right convention from the known-wrong one)";
  }
  if (s.no_output) std::cout << "; " << s.no_output << " without output";
  std::cout << '\n';
}

void write_catalog(const fs::path& out, const OutputRule& rule,
                   const std::map<std::string, std::string>& origins) {
  const std::size_t n = catalog_write_from_files(out, rule, origins);
  std::fprintf(stderr, "catalog: %zu cases in %s\n", n, (out / "catalog.json").c_str());
}

void write_catalog(const fs::path& out, const OutputRule& rule, const std::string& origin,
                   const std::set<std::string>& run) {
  std::map<std::string, std::string> origins;
  for (const auto& id : run) origins[id] = origin;
  write_catalog(out, rule, origins);
}


// --report FILE of verify, diagnose and check: the page, judged by `profile`.
std::optional<ReportFile> report_for(const std::string& report, const std::string& sub,
                                     int argc, char** argv, const std::string& profile) {
  if (report.empty()) return std::nullopt;
  return ReportFile{report, HtmlReport("posenc " + sub, report_command_line(argc, argv), profile)};
}

}  // namespace posenc::tools
