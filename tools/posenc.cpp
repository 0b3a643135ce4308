// posenc: the command-line program. Subcommands list, show, generate, catalog, verify, check,
// engine, bench. Exit codes: 0 all pass, 1 at least one mismatch, 2 usage or input error.
// No scheme-specific code here: schemes are reached through golden/cases/registry.hpp.
// Each subcommand's options are declared in tools/posenc_cli.cpp; main parses and dispatches.
#include <unistd.h>

#include <CLI/CLI.hpp>
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
#include "tools/bench.hpp"
#include "tools/posenc_cli.hpp"
#include "tools/posenc_constants.hpp"
#include "tools/posenc_oracle.hpp"
#include "tools/posenc_plan.hpp"
#include "tools/posenc_report.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace posenc;
using namespace posenc::golden;

namespace {

constexpr int kExitPass = 0, kExitMismatch = 1, kExitUsage = 2, kExitInconclusive = 3;

/// A usage error found after parsing (bad file, unknown case): message and exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

/// One case to verify: its manifest, and its catalog entry when it came from a catalog (whose
/// SHA-256 of both files is then checked first).
struct GoldenArg {
  fs::path manifest;
  std::optional<CatalogEntry> entry;
  fs::path data;
};

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

TensorMap read_actual_file(const fs::path& f) {
  if (f.extension() == ".npy") {
    TensorMap m;
    m.emplace(f.stem().string(), npy_read(f, f.stem().string()));
    return m;
  }
  return tensor_map(safetensors_read(f));
}

TensorMap read_actual_dir(const fs::path& d) {
  TensorMap m;
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(d)) {
    // Not only regular files: a FIFO or device named like an output is refused by the reader.
    if (!f.is_directory() && (f.path().extension() == ".npy" || f.path().extension() == ".safetensors")) {
      files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    for (auto& [k, v] : read_actual_file(f)) m.insert_or_assign(k, std::move(v));
  }
  return m;
}

/// Finds an engine's output for one case (docs/verifying.md); nullopt when the
/// directory holds none for it.
std::optional<TensorMap> actual_for(const fs::path& actual, const std::string& id, std::size_t n_cases) {
  if (fs::is_regular_file(actual)) {
    if (n_cases > 1) {
      throw UsageError("--actual " + actual.string() + " is one file but " +
                       std::to_string(n_cases) + " cases were given: pass a directory holding "
                       "<case_id>.safetensors files");
    }
    return read_actual_file(actual);
  }
  if (!fs::is_directory(actual)) {
    if (const std::string kind = special_file_kind(actual); !kind.empty()) {
      throw UsageError("--actual " + actual.string() + ": is " + kind + ", not a regular file");
    }
    throw UsageError("--actual " + actual.string() + ": no such file or directory");
  }
  if (fs::exists(actual / (id + ".safetensors"))) {
    return read_actual_file(actual / (id + ".safetensors"));
  }
  if (fs::is_directory(actual / id)) return read_actual_dir(actual / id);
  if (n_cases == 1) {
    TensorMap m = read_actual_dir(actual);
    if (!m.empty()) return m;
  }
  return std::nullopt;
}

/// actual_for's files as a streaming source (`posenc verify`): headers read, data left on
/// disk; nullptr when the directory holds no output for the case.
void add_actual_file(FileSource& src, const fs::path& f) {
  if (f.extension() == ".npy") {
    src.add_npy(f, f.stem().string());
  } else {
    src.add_safetensors(f);
  }
}

void add_actual_dir(FileSource& src, const fs::path& d) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(d)) {
    // Not only regular files: a FIFO or device named like an output is refused by the reader.
    if (!f.is_directory() && (f.path().extension() == ".npy" || f.path().extension() == ".safetensors")) {
      files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) add_actual_file(src, f);
}

std::unique_ptr<FileSource> actual_source_for(const fs::path& actual, const std::string& id,
                                              std::size_t n_cases) {
  auto src = std::make_unique<FileSource>();
  if (fs::is_regular_file(actual)) {
    if (n_cases > 1) {
      throw UsageError("--actual " + actual.string() + " is one file but " +
                       std::to_string(n_cases) + " cases were given: pass a directory holding "
                       "<case_id>.safetensors files");
    }
    add_actual_file(*src, actual);
    return src;
  }
  if (!fs::is_directory(actual)) {
    if (const std::string kind = special_file_kind(actual); !kind.empty()) {
      throw UsageError("--actual " + actual.string() + ": is " + kind + ", not a regular file");
    }
    throw UsageError("--actual " + actual.string() + ": no such file or directory");
  }
  if (fs::exists(actual / (id + ".safetensors"))) {
    add_actual_file(*src, actual / (id + ".safetensors"));
    return src;
  }
  if (fs::is_directory(actual / id)) {
    add_actual_dir(*src, actual / id);
    return src;
  }
  if (n_cases == 1) {
    add_actual_dir(*src, actual);
    if (!src->names().empty()) return src;
  }
  return nullptr;
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

struct Summary {
  int checked = 0, pass = 0, fail = 0, error = 0, no_output = 0, na = 0, inconclusive = 0;
};

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
                   bool by_position, const std::string& profile, const json* plan = nullptr) {
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

// ---- subcommands ---------------------------------------------------------------------------

int cmd_list(const CaseSelection& sel, const std::string& format) {
  check_format(format);
  const auto cases = select_cases(sel);
  if (format == "json") {
    json arr = json::array();
    for (const auto& [s, row] : cases) {
      arr.push_back({{"id", row.id}, {"scheme", s->slug}, {"description", row.description},
                     {"cost", case_cost(s->slug, row.id)}});
    }
    std::cout << arr.dump(1) << '\n';
    return kExitPass;
  }
  std::uint64_t cost = 0;
  for (const auto& [s, row] : cases) {
    std::printf("%-48s %s\n", row.id.c_str(), row.description.c_str());
    cost += case_cost(s->slug, row.id);
  }
  std::printf("%zu cases", cases.size());
  if (sel.shard_count > 1) {
    std::printf(" (shard %d/%d, estimated %.1f s of one core)", sel.shard_index, sel.shard_count,
                static_cast<double>(cost) * 1e-4);
  }
  std::printf("\n");
  return kExitPass;
}

int cmd_show(const std::string& which, const fs::path& data, const std::string& format) {
  check_format(format);
  const auto lc = load_case(manifest_for(which, data));
  const json& m = lc.spec.manifest;
  if (format == "json") {
    std::cout << m.dump(1) << '\n';
    return kExitPass;
  }
  std::cout << m.value("id", "") << "\n  " << m.value("description", "") << "\n";
  std::cout << "  scheme " << lc.spec.scheme << ", variant " << lc.spec.variant << ", result "
            << lc.spec.result << "\n";
  if (m.contains("params")) std::cout << "  params       " << m["params"].dump() << "\n";
  if (m.contains("preset")) {
    std::cout << "  preset       " << m["preset"].value("name", "") << " ("
              << m["preset"].value("hf_model", "") << ")\n  config       "
              << m["preset"]["config"].dump() << "\n";
  }
  if (m.contains("conventions")) {
    std::cout << "  conventions\n";
    for (const auto& [k, v] : m["conventions"].items()) {
      std::cout << "    " << k << ": " << v.get<std::string>() << "\n";
    }
  }
  if (m.contains("scaling")) {  // a scaled case: the rule, what it derived, the call
    auto brief = [](json j) {  // factor lists as their length
      for (auto& [k, v] : j.items()) {
        if (v.is_array() && v.size() > 8) v = std::to_string(v.size()) + " values";
      }
      return j.dump();
    };
    const json& sc = m["scaling"];
    std::cout << "  scaling\n    rule: " << brief(sc.value("rule", json::object())) << "\n    derived: "
              << brief(sc.value("derived", json::object())) << "\n    call: " << sc.value("call", "") << "\n";
    for (const char* k : {"convention", "reason", "policy"}) {
      if (sc.contains(k)) std::cout << "    " << k << ": " << sc[k].get<std::string>() << "\n";
    }
  }
  if (m.contains("encoding")) std::cout << "  encoding     " << m["encoding"].dump() << "\n";
  if (m.contains("negative_control")) {
    std::cout << "  negative control of the mistake " << m["negative_control"].value("mistake", "") << "\n";
  }
  if (m.contains("trace")) {  // a KV-cache trace: the steps to replay, in order
    std::cout << "  trace (replay in order; docs/kv-cache.md)\n";
    for (const auto& st : m["trace"]["steps"]) {
      std::cout << "    " << st.value("name", "") << "  " << st.value("kind", "");
      if (st.contains("columns")) std::cout << "  columns " << st["columns"].get<long long>();
      if (st.contains("n_keep")) {
        std::cout << "  n_keep " << st["n_keep"].get<long long>() << " n_discard " << st["n_discard"].get<long long>();
      }
      if (st.contains("note")) std::cout << "  (" << st["note"].get<std::string>() << ")";
      std::cout << "\n";
    }
  }
  if (m.contains("positions")) {
    std::cout << "  positions    ";
    for (const auto& p : m["positions"]) std::cout << p["position"].get<long long>() << ' ';
    std::cout << "\n";
  }
  std::cout << "  inputs\n";
  for (const auto& t : lc.spec.inputs) {
    std::cout << "    " << t.name << "  " << dtype_short(t.dtype) << " " << json(t.shape).dump() << "\n";
  }
  std::cout << "  expected (budget per profile: bound x eps x cond (ulp: x ulp) + ulps x ulp + "
               "extra; n/a = the profile does not apply)\n";
  for (const auto& t : lc.spec.expected) {
    std::cout << "    " << t.name << "  " << t.stage << "  " << dtype_short(t.dtype) << " "
              << json(t.shape).dump() << "  " << to_string(t.check.kind) << "\n";
    for (const auto& prof : profiles()) {
      const ProfileBudget& b = t.check.profile(prof.name);
      std::printf("      %-16s ", prof.name.c_str());
      if (!b.applies) {
        std::printf("n/a: %s\n", b.not_applicable.c_str());
        continue;
      }
      if (t.check.kind == CheckKind::kExact) {
        std::printf("bit-exact\n");
        continue;
      }
      std::printf("bound %.4g", b.bound);
      if (b.ulps != 0) std::printf(", ulps %.4g", b.ulps);
      if (!b.extra.empty()) std::printf(", + %s", b.extra.c_str());
      if (!b.saturated.empty()) {
        std::printf("  (admits any angle at %zu position(s), e.g. %lld: %.0f%% of elements)",
                    b.saturated.size(), static_cast<long long>(b.saturated.rbegin()->first),
                    100 * b.saturated.rbegin()->second);
      }
      std::printf("\n");
    }
    for (const auto& a : t.alternatives) {
      std::cout << "      accepted alternative \"" << a.name << "\": " << a.description << "\n";
    }
  }
  for (const auto& d : lc.spec.detection) {
    std::cout << "  detects " << d.flag << " through: ";
    for (const auto& st : d.stages) std::cout << st << ' ';
    if (!d.blind.empty()) std::cout << "(" << d.blind << ")";
    std::cout << "\n";
  }
  if (m.contains("resolution")) {
    std::cout << "  resolution: " << m["resolution"].value("what", "") << "\n";
    for (const auto& [prof, rows] : m["resolution"]["profiles"].items()) {
      std::printf("    %-16s %12s %12s %14s %16s\n", prof.c_str(), "position", "min offset",
                  "base rel err", "inv_freq rel err");
      for (const auto& row : rows) {
        auto txt = [](const json& v) {
          if (v.is_null()) return std::string("none");
          char buf[32];
          if (v.is_number_integer()) {
            std::snprintf(buf, sizeof buf, "%lld", v.get<long long>());
          } else {
            std::snprintf(buf, sizeof buf, "%.2g", v.get<double>());
          }
          return std::string(buf);
        };
        std::printf("    %-16s %12lld %12s %14s %16s\n", "", row["position"].get<long long>(),
                    txt(row["min_offset"]).c_str(), txt(row["min_base_rel_error"]).c_str(),
                    txt(row["min_inv_freq_rel_error"]).c_str());
      }
    }
  }
  if (m.contains("flags")) std::cout << "  flags        " << m["flags"].dump() << "\n";
  return kExitPass;
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

int cmd_generate(const CaseSelection& sel, const fs::path& out, bool no_catalog, bool force) {
  const auto cases = select_cases(sel);
  if (cases.empty()) throw UsageError("no case matches the selection (try `posenc list`)");
  std::uint64_t cost = 0;
  for (const auto& [s, row] : cases) cost += case_cost(s->slug, row.id);
  std::fprintf(stderr, "estimate: %zu cases, about %.0f s on one core (the committed catalog is about 80 MB)\n",
               cases.size(), static_cast<double>(cost) * 1e-4);
  check_job_size("generate", 0, static_cast<double>(cost) * 1e-4, "Select fewer cases, or raise the limit");
  const OutputRule rule(force);  // generate reads no file
  rule.check_dir(out);
  for (const auto& [s, row] : cases) {
    rule.check_file(case_tensors_path(out, s->slug, row.id), OutputKind::kGoldenTensors);
    rule.check_file(case_manifest_path(out, s->slug, row.id), OutputKind::kGoldenManifest);
  }
  if (!no_catalog) rule.check_file(out / "catalog.json", OutputKind::kCatalog);
  const ShardRecord record = no_catalog ? level1_shard_record(sel) : ShardRecord{};
  if (no_catalog) rule.check_file(shard_record_path(out, record), OutputKind::kShardRecord);
  // Shards that only add files share the folder; a run that sweeps stale files or writes the
  // catalog has it alone (golden/format/dir_lock.hpp).
  const bool sweeps = sel.case_regex.empty() && sel.shard_count == 1;
  const DirectoryLock lock(out, no_catalog && !sweeps ? DirectoryLock::Mode::kShared
                                                      : DirectoryLock::Mode::kExclusive);
  // A run that leaves the catalog to a later `posenc catalog` records its selection and shard
  // before it starts: the merge then refuses the folder until every shard's cases are in it.
  if (no_catalog) {
    rule.write_text(shard_record_path(out, record), OutputKind::kShardRecord, shard_record_text(record));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto t1 = std::chrono::steady_clock::now();
    const auto& [s, row] = cases[i];
    std::uint64_t n = 0;
    write_case(out, s->slug, row.id, generate_case(*s, row.id), rule, &n);
    bytes += n;
    std::fprintf(stderr, "[%zu/%zu] %s  %.2f s\n", i + 1, cases.size(), row.id.c_str(), seconds_since(t1));
  }
  std::fprintf(stderr, "generated %zu cases, %zu bytes, in %.2f s\n", cases.size(), bytes, seconds_since(t0));
  // A whole scheme was regenerated: remove the files posenc wrote whose case no longer exists
  // (and nothing else: golden/cases/catalog.hpp, sweep_stale).
  if (sel.case_regex.empty() && sel.shard_count == 1) {
    std::set<std::string> slugs, keep;
    for (const auto& [sch, row] : cases) {
      slugs.insert(sch->slug);
      keep.insert(row.id);
    }
    const StaleSweep sw = sweep_stale(out, rule, slugs, keep);
    for (const auto& f : sw.removed) std::fprintf(stderr, "removed stale %s\n", (out / f).c_str());
    if (sw.temps > 0) std::fprintf(stderr, "removed %d temporary file(s) of a killed run\n", sw.temps);
    if (!sw.kept.empty()) {
      std::fprintf(stderr, "kept %zu file(s) in the scheme folders that this run neither wrote nor may remove:\n",
                   sw.kept.size());
      for (const auto& k : sw.kept) std::fprintf(stderr, "  %s\n", (out / k).c_str());
    }
  }
  if (!no_catalog) write_catalog(out, rule, std::map<std::string, std::string>{});
  return kExitPass;
}

/// The most positions --positions takes (2^22: level-2 tables chunk them; memory is the list).
constexpr std::size_t kMaxGivenPositions = std::size_t{1} << 22;

/// "0,5,4090-4100": positions and inclusive ranges; UsageError naming the bad entry.
std::vector<std::int64_t> parse_positions(const std::string& text) {
  std::vector<std::int64_t> v;
  auto number = [&](const std::string& tok, const std::string& entry) {
    if (!entry.empty() && entry[0] == '-') {
      throw UsageError("--positions: \"" + entry + "\" is negative (positions are >= 0)");
    }
    if (tok.size() > 12 && tok.find_first_not_of("0123456789") == std::string::npos) {
      throw UsageError("--positions: position " + tok + " is out of range (at most 2^28 = 268435456)");
    }
    if (tok.empty() || tok.size() > 12 || tok.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError("--positions: bad entry \"" + entry +
                       "\" (want N or A-B with 0 <= A <= B, comma-separated)");
    }
    return std::stoll(tok);
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t dash = entry.find('-');
    const std::int64_t a = number(entry.substr(0, dash), entry);
    const std::int64_t b = dash == std::string::npos ? a : number(entry.substr(dash + 1), entry);
    if (b < a) throw UsageError("--positions: range \"" + entry + "\" ends before it starts");
    // More than 2048 positions make level-2 cases (tables chunked, scores at sampled tokens).
    if (b - a >= static_cast<std::int64_t>(kMaxGivenPositions) || v.size() + static_cast<std::size_t>(b - a + 1) > kMaxGivenPositions) {
      throw UsageError("--positions: more than " + std::to_string(kMaxGivenPositions) + " positions (at \"" + entry + "\")");
    }
    for (std::int64_t x = a; x <= b; ++x) v.push_back(x);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return v;
}

DType parse_case_dtype(const std::string& t) {
  if (t == "f32") return DType::kF32;
  if (t == "bf16") return DType::kBF16;
  if (t == "f16") return DType::kF16;
  throw UsageError("--dtype must be f32, bf16 or f16 (got " + t + ")");
}

/// Prints what generating cc will take (bytes, seconds) and refuses, before anything is computed,
/// a case whose file or largest tensor `verify` could not read back under the input limits in
/// force (POSENC_MAX_FILE_BYTES, POSENC_MAX_TENSOR_BYTES).
void check_config_estimate(const ConfigCases& cc, std::size_t n_given_positions) {
  const InputLimits limits = input_limits();
  std::uint64_t total = 0;
  double seconds = 0;
  for (const ConfigCase& c : cc.cases) {
    total += c.file_bytes;
    seconds += c.seconds;
    auto refuse = [&](const char* what, std::uint64_t n, std::uint64_t limit, const char* var) {
      throw UsageError("generate --config: case " + c.id + " (" + c.description + ") would write " +
                       what + " of about " + std::to_string(n) + " bytes, over the limit of " +
                       std::to_string(limit) + " bytes that verify reads (" + var +
                       " raises it); give fewer --positions");
    };
    if (c.largest_tensor_bytes > limits.tensor_bytes) {
      refuse("a tensor", c.largest_tensor_bytes, limits.tensor_bytes, "POSENC_MAX_TENSOR_BYTES");
    }
    if (c.file_bytes > limits.file_bytes) refuse("a file", c.file_bytes, limits.file_bytes, "POSENC_MAX_FILE_BYTES");
  }
  std::uint64_t peak = 0;  // one case's tensors in memory at a time
  for (const ConfigCase& c : cc.cases) peak = std::max(peak, c.file_bytes);
  peak += 24 * static_cast<std::uint64_t>(n_given_positions);  // the list, sorted, in chunks
  std::fprintf(stderr, "estimate: %zu cases, about %.1f MB, about %.0f s on one core, peak memory about %.0f MB\n",
               cc.cases.size(), static_cast<double>(total) / 1e6, seconds, static_cast<double>(peak) / 1e6 + 30);
  check_job_size("generate --config", total, seconds,
                 "Give fewer --positions (or a smaller --layout), or raise the limit");
}

int cmd_generate_config(const fs::path& config, const std::string& positions, const std::string& layout,
                        const std::string& dtype, const fs::path& out, bool force) {
  const DType t = parse_case_dtype(dtype);
  const std::vector<std::int64_t> pos = positions.empty() ? std::vector<std::int64_t>() : parse_positions(positions);
  const ConfigCases cc = cases_for_config(config, pos, t, 1, layout);
  std::fprintf(stderr, "config %s\n  %s\n", config.c_str(), cc.model.c_str());
  for (const auto& n : cc.notes) std::fprintf(stderr, "  note: %s\n", n.c_str());
  check_config_estimate(cc, pos.size());
  OutputRule rule(force);
  rule.add_read(config);
  if (!layout.empty()) rule.add_read(layout);
  rule.check_dir(out);
  for (const ConfigCase& c : cc.cases) {
    rule.check_file(case_tensors_path(out, c.scheme, c.id), OutputKind::kGoldenTensors);
    rule.check_file(case_manifest_path(out, c.scheme, c.id), OutputKind::kGoldenManifest);
  }
  rule.check_file(out / "catalog.json", OutputKind::kCatalog);
  if (!cc.plan.is_null()) rule.check_file(out / "plan.json", OutputKind::kPlanManifest);
  const DirectoryLock lock(out, DirectoryLock::Mode::kExclusive);
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < cc.cases.size(); ++i) {
    const auto t1 = std::chrono::steady_clock::now();
    const ConfigCase& c = cc.cases[i];
    std::uint64_t n = 0;
    GoldenCase g = c.generate();
    add_detection(scheme_by_slug(c.scheme), g);
    write_case(out, c.scheme, c.id, g, rule, &n);
    bytes += n;
    std::fprintf(stderr, "[%zu/%zu] %s/%s (%s)  %.2f s\n", i + 1, cc.cases.size(), c.scheme.c_str(),
                 c.id.c_str(), c.description.c_str(), seconds_since(t1));
  }
  std::fprintf(stderr, "generated %zu cases, %zu bytes, in %.2f s\n", cc.cases.size(), bytes, seconds_since(t0));
  if (!cc.plan.is_null()) {  // after the cases (it holds their hashes), before the catalog (it
                             // holds its hash)
    nlohmann::json plan = cc.plan;
    plan_manifest_add_hashes(plan, out);
    rule.write_text(out / "plan.json", OutputKind::kPlanManifest, plan.dump(1) + "\n");
  }
  std::set<std::string> run;
  for (const ConfigCase& c : cc.cases) run.insert(c.id);
  write_catalog(out, rule, "generate --config", run);
  if (!cc.plan.is_null()) {
    std::fprintf(stderr, "plan: %s (%zu layers, one case per layer type)\n", (out / "plan.json").c_str(),
                 cc.plan.at("layers").size());
    std::fprintf(stderr, "next: run your engine on each layer type's case, then\n  posenc verify %s --actual OUT_DIR --profile P\n",
                 (out / "plan.json").c_str());
    return kExitPass;
  }
  std::fprintf(stderr, "next: run your engine on each case's inputs, then\n  posenc verify %s --actual OUT_DIR --profile P\n",
               out.c_str());
  return kExitPass;
}

/// The model configs of a level-2 run: --config's, else every committed text-RoPE preset
/// (sorted; the vision-language presets take prompt layouts, not sweeps).
std::vector<fs::path> level2_configs(const std::string& config) {
  if (!config.empty()) return {fs::path(config)};
  std::vector<fs::path> v;
  for (const auto& f : fs::directory_iterator(default_presets_dir())) {
    if (f.path().extension() != ".json") continue;
    if (mrope_config_is_vl(nlohmann::json::parse(read_json_text(f.path())))) continue;
    v.push_back(f.path());
  }
  std::sort(v.begin(), v.end());
  return v;
}

/// Estimated cost of a level-2 case in case_cost's units (0.1 ms of one core's CPU time), from its
/// shapes (ConfigCase::seconds, rope_case_estimate: positions x pairs for a table sweep, the
/// sampled rotations and scores of a full case); at least 1. A function of the build and the
/// configs only, so every shard of a batch computes the same assignment.
std::uint64_t level2_cost(const ConfigCase& c) {
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(c.seconds * 1e4)));
}

/// The level-2 cases of one config that --scheme and --case keep, in the config's order.
std::vector<ConfigCase> level2_matching(const fs::path& config, DType t, const CaseSelection& sel) {
  const CaseMatcher match(sel.case_regex);
  std::vector<ConfigCase> v;
  for (ConfigCase& c : cases_for_config(config, {}, t, 2).cases) {
    if (!sel.scheme.empty() && c.scheme != sel.scheme) continue;
    if (!match.matches(c.id)) continue;
    v.push_back(std::move(c));
  }
  return v;
}

/// A level-2 run's selection: its configs, and with --shard i/n the shard of each case that
/// --scheme and --case keep (in run order: config by config), balanced_shards by level2_cost
/// over the whole run, as level 1 balances by case_cost.
struct Level2Run {
  std::vector<fs::path> configs;
  DType dtype;
  CaseSelection sel;
  std::vector<int> shard_of;  // empty: one shard
  std::vector<ShardRecordCase> cases;  // sharded: every case of the run and its shard
};

Level2Run level2_run(std::vector<fs::path> configs, DType t, const CaseSelection& sel) {
  Level2Run r{std::move(configs), t, sel, {}, {}};
  if (sel.shard_count == 1) return r;
  std::vector<std::uint64_t> costs;
  for (const auto& c : r.configs) {
    for (const ConfigCase& cc : level2_matching(c, t, sel)) {
      costs.push_back(level2_cost(cc));
      r.cases.push_back({cc.scheme, cc.id, 0});
    }
  }
  r.shard_of = balanced_shards(costs, sel.shard_count);
  for (std::size_t k = 0; k < r.cases.size(); ++k) r.cases[k].shard = r.shard_of[k];
  return r;
}

/// The generate options that select a level-2 run (a shard record's rerun command).
std::vector<std::string> level2_options(const tools::GenerateArgs& a) {
  std::vector<std::string> o = {"--level", "2"};
  if (!a.config.empty()) o.insert(o.end(), {"--config", a.config});
  if (a.dtype != "f32") o.insert(o.end(), {"--dtype", a.dtype});
  if (!a.sel.scheme.empty()) o.insert(o.end(), {"--scheme", a.sel.scheme});
  if (!a.sel.case_regex.empty()) o.insert(o.end(), {"--case", a.sel.case_regex});
  return o;
}

/// Calls each(case) for every case of the run's shard, config by config (one config's cases in
/// memory at a time).
template <class Each>
void for_each_level2_case(const Level2Run& r, Each each) {
  std::size_t k = 0;
  for (const auto& c : r.configs) {
    for (ConfigCase& cc : level2_matching(c, r.dtype, r.sel)) {
      const bool mine = r.shard_of.empty() || r.shard_of[k] == r.sel.shard_index;
      ++k;
      if (mine) each(cc);
    }
  }
}

/// `generate --level 2`: the dense sweeps of every RoPE and scaling preset (or --config's
/// model), streamed case by case into --out (each case is one chunk of a sweep: memory is one
/// chunk's tensors), with a progress line per case.
int cmd_generate_level2(const tools::GenerateArgs& a) {
  if (a.out_option->count() == 0) {
    throw UsageError("generate --level 2 needs --out DIR (level 2 is never committed: it does not go "
                     "into the source tree's golden/data)");
  }
  if (fs::exists(a.out) && fs::exists(default_data_dir()) && fs::equivalent(a.out, default_data_dir())) {
    throw UsageError("generate --level 2: --out " + a.out + " is the committed catalog golden/data; choose another folder");
  }
  if (!a.positions.empty()) {
    throw UsageError("generate --level 2 takes no --positions (--config --positions with more than 2048 "
                     "positions writes level-2 cases of those positions)");
  }
  const DType t = parse_case_dtype(a.dtype);
  const fs::path out = a.out;
  const std::vector<fs::path> configs = level2_configs(a.config);
  OutputRule rule(a.force);
  for (const auto& c : configs) rule.add_read(c);
  rule.check_dir(out);
  const Level2Run run = level2_run(configs, t, a.sel);
  std::size_t total = 0;
  double est_bytes = 0, est_seconds = 0, est_peak = 0;
  for_each_level2_case(
      run, [&](const ConfigCase& cc) {  // every output checked before any long work
        rule.check_file(case_tensors_path(out, cc.scheme, cc.id), OutputKind::kGoldenTensors);
        rule.check_file(case_manifest_path(out, cc.scheme, cc.id), OutputKind::kGoldenManifest);
        est_bytes += static_cast<double>(cc.file_bytes);
        est_seconds += cc.seconds;
        est_peak = std::max(est_peak, static_cast<double>(cc.file_bytes));
        ++total;
      });
  if (total == 0) throw UsageError("generate --level 2: no case matches the selection");
  const std::string shard = a.sel.shard_count == 1
                                ? std::string()
                                : " (shard " + a.shard + ", balanced by estimated cost)";
  std::fprintf(stderr,
               "estimate: %zu level-2 cases from %zu model configs%s, about %.2f GB, about %.1f s "
               "on one core, peak memory about %.0f MB (one case at a time)\n",
               total, configs.size(), shard.c_str(), est_bytes / 1e9, est_seconds, est_peak / 1e6 + 30);
  check_job_size("generate --level 2", static_cast<std::uint64_t>(est_bytes), est_seconds,
                 "Run it in shards (--shard i/n, one per machine: docs/cluster.md), select fewer "
                 "cases (--scheme, --case, --config), or raise the limit");
  if (!a.no_catalog) rule.check_file(out / "catalog.json", OutputKind::kCatalog);
  // A shard that leaves the catalog to `posenc catalog` records the whole run's cases first: the
  // merge refuses the folder until every shard's cases are in it (as level 1).
  const bool record = a.no_catalog && a.sel.shard_count > 1;
  ShardRecord rec{2, a.sel.shard_index, a.sel.shard_count, level2_options(a), run.cases};
  if (record) rule.check_file(shard_record_path(out, rec), OutputKind::kShardRecord);
  const DirectoryLock lock(out, a.no_catalog ? DirectoryLock::Mode::kShared : DirectoryLock::Mode::kExclusive);
  if (record) rule.write_text(shard_record_path(out, rec), OutputKind::kShardRecord, shard_record_text(rec));
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t done = 0, bytes = 0;
  std::set<std::string> run_ids;
  for_each_level2_case(run, [&](const ConfigCase& cc) {
    const auto t1 = std::chrono::steady_clock::now();
    run_ids.insert(cc.id);
    std::uint64_t n = 0;
    write_case(out, cc.scheme, cc.id, cc.generate(), rule, &n);
    bytes += n;
    std::fprintf(stderr, "[%zu/%zu] %s/%s (%s)  %.2f s, %.1f MB\n", ++done, total,
                 cc.scheme.c_str(), cc.id.c_str(), cc.description.c_str(), seconds_since(t1),
                 static_cast<double>(n) / 1e6);
  });
  std::fprintf(stderr, "generated %zu level-2 cases, %zu bytes, in %.2f s\n", done, bytes, seconds_since(t0));
  if (!a.no_catalog) write_catalog(out, rule, "generate --level 2", run_ids);
  return kExitPass;
}

/// `list --level 2`: the cases `generate --level 2` of the same selection and --shard writes,
/// with each one's estimated cost (level2_cost).
int cmd_list_level2(const tools::ListArgs& a, const CaseSelection& sel) {
  check_format(a.format);
  const Level2Run run = level2_run(level2_configs(a.config), parse_case_dtype(a.dtype), sel);
  json arr = json::array();
  std::uint64_t cost = 0;
  std::size_t n = 0;
  for_each_level2_case(run, [&](const ConfigCase& cc) {
    if (a.format == "json") {
      arr.push_back({{"id", cc.id},
                     {"scheme", cc.scheme},
                     {"description", cc.description},
                     {"cost", level2_cost(cc)}});
    } else {
      std::printf("%-48s %s\n", cc.id.c_str(), cc.description.c_str());
    }
    cost += level2_cost(cc);
    ++n;
  });
  if (a.format == "json") {
    std::cout << arr.dump(1) << '\n';
    return kExitPass;
  }
  const std::string shard = sel.shard_count == 1 ? std::string()
                                                 : "shard " + std::to_string(sel.shard_index) +
                                                       "/" + std::to_string(sel.shard_count) + ", ";
  std::printf("%zu level-2 cases (%sestimated %.1f s of one core)\n", n, shard.c_str(),
              static_cast<double>(cost) * 1e-4);
  return kExitPass;
}

/// Progress of a long run on a terminal: "[i/n] case" rewritten in place on stderr, erased at
/// the end; silent when stderr is not a terminal (CI logs, pipes) or for a single case.
class Progress {
 public:
  Progress(const char* what, std::size_t n) : what_(what), n_(n), on_(n > 1 && ::isatty(2)) {}
  ~Progress() { done(); }
  /// Erases the line; call before printing results.
  void done() {
    if (on_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }
  void step(const std::string& id) {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K%s [%zu/%zu] %s", what_, ++i_, n_, id.c_str());
    std::fflush(stderr);
    shown_ = true;
  }

 private:
  const char* what_;
  std::size_t n_, i_ = 0;
  bool on_, shown_ = false;
};

std::string no_output_message(const fs::path& actual, const std::string& id) {
  return "no engine output for this case in " + actual.string() + " (looked for " + id +
         ".safetensors, " + id + "/*.npy|*.safetensors)";
}

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

/// True when some expected tensor of the case is judged under the profile.
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

// --report FILE of verify, diagnose and check: the page, judged by `profile`.
std::optional<ReportFile> report_for(const std::string& report, const std::string& sub,
                                     int argc, char** argv, const std::string& profile) {
  if (report.empty()) return std::nullopt;
  return ReportFile{report, HtmlReport("posenc " + sub, report_command_line(argc, argv), profile)};
}

int run_generate(tools::GenerateArgs a) {
  if (!a.shard.empty()) parse_shard(a.shard, &a.sel.shard_index, &a.sel.shard_count);
  if (a.level != "1" && a.level != "2") throw UsageError("--level must be 1 or 2 (got \"" + a.level + "\")");
  if (a.level == "2" && !a.layout.empty()) throw UsageError("generate --level 2 takes no --layout (level 2 sweeps text RoPE models)");
  if (a.level == "2") return cmd_generate_level2(a);
  if (!a.config.empty()) {
    if (a.out_option->count() == 0) {
      throw UsageError("generate --config needs --out DIR (the default, the source tree's "
                       "golden/data, holds posenc's own catalog)");
    }
    if (!a.sel.scheme.empty() || !a.sel.case_regex.empty() || !a.shard.empty() || a.no_catalog) {
      throw UsageError("generate --config takes no --scheme, --case, --shard or --no-catalog");
    }
    return cmd_generate_config(a.config, a.positions, a.layout, a.dtype, a.out, a.force);
  }
  if (!a.layout.empty()) throw UsageError("--layout needs --config (a vision-language model's config.json)");
  if (!a.positions.empty() || a.dtype != "f32") {
    throw UsageError("--positions and --dtype need --config (posenc's own cases fix theirs)");
  }
  return cmd_generate(a.sel, a.out, a.no_catalog, a.force);
}

/// " --scheme rope --case 'x'": the generate options of a recorded run, each shell-quoted.
std::string selection_options(const ShardRecord& r) {
  std::string o;
  for (const std::string& w : r.options) o += " " + shell_quote(w);
  return o;
}

/// The refusal of `catalog` when shards of a batch did not finish: each shard with the cases it
/// lacks and the command that reruns it alone.
std::string incomplete_batch_message(const fs::path& data, const std::vector<ShardGap>& gaps) {
  std::string m = "catalog --data " + data.string() + ": incomplete, no catalog.json written: " +
                  std::to_string(gaps.size()) + " shard(s) of a sharded generate did not finish:";
  std::string rerun;
  for (const ShardGap& g : gaps) {
    const std::string shard = std::to_string(g.shard.shard_index) + "/" +
                              std::to_string(g.shard.shard_count);
    m += "\n  shard " + shard + " of `generate" + selection_options(g.shard) + "`: " +
         std::to_string(g.missing.size()) + " case(s) missing (";
    for (std::size_t k = 0; k < g.missing.size() && k < 3; ++k) m += (k ? ", " : "") + g.missing[k];
    if (g.missing.size() > 3) m += " and " + std::to_string(g.missing.size() - 3) + " more";
    m += ")";
    rerun += "\n  posenc generate" + selection_options(g.shard) + " --shard " + shard +
             " --no-catalog --out " + shell_quote(data.string());
  }
  return m + "\nrerun each alone (generation is idempotent per case), then `posenc catalog` again:" + rerun;
}

int run_catalog(const tools::CatalogArgs& a) {
  const fs::path data(a.data);
  if (!fs::is_directory(data)) {
    throw UsageError("catalog --data " + data.string() + ": no such directory");
  }
  OutputRule rule(a.force);  // reads the case files in data's scheme folders
  for (const auto& d : fs::directory_iterator(data)) {
    if (d.is_directory()) rule.add_reads_below(d.path(), 1);
  }
  rule.check_file(data / "catalog.json", OutputKind::kCatalog);
  const DirectoryLock lock(data, DirectoryLock::Mode::kExclusive);
  // The merge of a sharded generate: refused while a recorded shard's cases are missing; the
  // records go once the catalog is written.
  const std::vector<ShardGap> gaps = shard_gaps(data);
  if (!gaps.empty()) throw UsageError(incomplete_batch_message(data, gaps));
  write_catalog(data, rule, shard_record_origins(data));
  shard_records_remove(data, rule);
  return kExitPass;
}

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

/// Runs the subcommand that was parsed (exactly one: main requires it).
int dispatch(const CLI::App& app, const tools::CommandLine& c, int argc, char** argv) {
  const std::string sub = app.get_subcommands().front()->get_name();
  if (sub == "list") {
    CaseSelection sel = c.list.sel;
    if (!c.list.shard.empty()) parse_shard(c.list.shard, &sel.shard_index, &sel.shard_count);
    if (c.list.level != "1" && c.list.level != "2") {
      throw UsageError("--level must be 1 or 2 (got \"" + c.list.level + "\")");
    }
    if (c.list.level == "2") return cmd_list_level2(c.list, sel);
    if (!c.list.config.empty())
      throw UsageError("list --config needs --level 2 (it lists a model's level-2 cases)");
    return cmd_list(sel, c.list.format);
  }
  if (sub == "show") return cmd_show(c.show.which, c.show.data, c.show.format);
  if (sub == "generate") return run_generate(c.generate);
  if (sub == "catalog") return run_catalog(c.catalog);
  if (sub == "verify") return run_verify(c.verify, argc, argv);
  if (sub == "diagnose") return run_diagnose(c.diagnose, argc, argv);
  if (sub == "check") return run_check(c.check, argc, argv);
  if (sub == "oracle") return tools::run_oracle_command(c.oracle);
  if (sub == "constants") return tools::run_constants_command(c.constants);
  if (sub == "bench") return tools::cmd_bench(c.bench);
  if (sub == "engine") {
    const tools::EngineArgs& e = c.engine;
    return cmd_engine(e.which, e.data, e.out, e.mistake, e.pipeline, e.format, e.force);
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "posenc: reference values, golden files and verification for transformer positional "
      "encodings.\n\nExit codes: 0 all pass, 1 at least one mismatch, 2 usage or input error, 3 "
      "(verify) nothing judged but negative controls whose given stages cannot tell "
      "(INCONCLUSIVE).\n"
      "Typical use:\n  posenc check                      verify posenc's own kernels against the "
      "catalog\n"
      "  posenc list                       list the golden cases\n"
      "  posenc verify golden/data --actual OUT_DIR   check an engine's outputs\n"
      "  posenc generate --config config.json --out DIR   golden cases for your own model"};
  app.require_subcommand(1);
  app.footer(input_limits_help());
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  tools::CommandLine cmd;
  tools::add_commands(app, &cmd);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitPass : kExitUsage;
  }
  // A run ended by SIGINT, SIGTERM or SIGHUP removes its temporary files first.
  golden::install_interrupt_cleanup();
  try {
    return dispatch(app, cmd, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "posenc: error: " << e.what() << '\n';
    return kExitUsage;
  }
}
