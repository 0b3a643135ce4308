// posenc: the command-line program. Subcommands list, show, generate, catalog, verify, check,
// engine. Exit codes: 0 all pass, 1 at least one mismatch, 2 usage or input error.
// No scheme-specific code here: schemes are reached through golden/registry.hpp.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "golden/catalog.hpp"
#include "golden/format.hpp"
#include "golden/registry.hpp"
#include "golden/verify.hpp"
#include "reference/common/errors.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace posenc;
using namespace posenc::golden;

namespace {

constexpr int kExitPass = 0, kExitMismatch = 1, kExitUsage = 2;

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

void check_profile(const std::string& p) {
  for (const auto& n : profile_names()) {
    if (n == p) return;
  }
  std::string known;
  for (const auto& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("--profile must be one of " + known + " (got " + p + ")");
}

/// Resolves a case argument: a manifest path, or a case id looked up in the data directory.
fs::path manifest_for(const std::string& arg, const fs::path& data) {
  if (fs::is_regular_file(arg)) return arg;
  for (const auto& e : catalog_read(data)) {
    if (e.id == arg) return data / e.manifest;
  }
  throw UsageError("no case \"" + arg + "\" in " + (data / "catalog.json").string() +
                   " and no such manifest file (try `posenc list`)");
}

/// Checks both files of a catalog entry against the catalog's SHA-256.
void check_catalog_hashes(const fs::path& data, const CatalogEntry& e) {
  for (auto [rel, sha] : {std::pair{e.manifest, e.manifest_sha256}, std::pair{e.tensors, e.tensors_sha256}}) {
    const auto bytes = read_file(data / rel);
    if (sha256_hex(bytes) != sha) {
      throw GoldenFileError((data / rel).string() +
                            ": SHA-256 differs from catalog.json (modified or corrupted file; "
                            "regenerate with `posenc generate`)");
    }
  }
}

/// Golden arguments of verify: manifests, directories (all manifests below) or catalog.json.
std::vector<fs::path> expand_golden(const std::vector<std::string>& args) {
  std::vector<fs::path> out;
  for (const auto& a : args) {
    const fs::path p(a);
    if (fs::is_directory(p)) {
      if (fs::exists(p / "catalog.json")) {
        for (const auto& e : catalog_read(p)) out.push_back(p / e.manifest);
        continue;
      }
      std::vector<fs::path> found;
      for (const auto& f : fs::recursive_directory_iterator(p)) {
        if (f.is_regular_file() && f.path().extension() == ".json" &&
            f.path().filename() != "catalog.json") {
          found.push_back(f.path());
        }
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) throw UsageError(a + ": directory holds no golden manifest");
      out.insert(out.end(), found.begin(), found.end());
    } else if (p.filename() == "catalog.json") {
      for (const auto& e : catalog_read(p.parent_path())) out.push_back(p.parent_path() / e.manifest);
    } else if (fs::is_regular_file(p)) {
      out.push_back(p);
    } else {
      throw UsageError(a + ": no such golden manifest or directory");
    }
  }
  return out;
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
    if (f.is_regular_file() && (f.path().extension() == ".npy" || f.path().extension() == ".safetensors")) {
      files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    for (auto& [k, v] : read_actual_file(f)) m.insert_or_assign(k, std::move(v));
  }
  return m;
}

/// Finds an engine's output for one case (README "Verifying an engine").
TensorMap actual_for(const fs::path& actual, const std::string& id, std::size_t n_cases) {
  if (fs::is_regular_file(actual)) {
    if (n_cases > 1) {
      throw UsageError("--actual " + actual.string() + " is one file but " +
                       std::to_string(n_cases) + " cases were given: pass a directory holding "
                       "<case_id>.safetensors files");
    }
    return read_actual_file(actual);
  }
  if (!fs::is_directory(actual)) throw UsageError("--actual " + actual.string() + ": no such file or directory");
  if (fs::is_regular_file(actual / (id + ".safetensors"))) {
    return read_actual_file(actual / (id + ".safetensors"));
  }
  if (fs::is_directory(actual / id)) return read_actual_dir(actual / id);
  if (n_cases == 1) {
    TensorMap m = read_actual_dir(actual);
    if (!m.empty()) return m;
  }
  throw GoldenFileError(actual.string() + ": no output for case " + id + " (looked for " + id +
                        ".safetensors, " + id + "/*.npy|*.safetensors)");
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

int exit_code_of(const std::vector<CaseReport>& reports) {
  int rc = kExitPass;
  for (const auto& r : reports) {
    if (r.status == "ERROR") return kExitUsage;
    if (r.status == "FAIL") rc = kExitMismatch;
  }
  return rc;
}

void print_reports(const std::vector<CaseReport>& reports, const std::string& format, bool verbose,
                   const std::string& profile) {
  if (format == "json") {
    json arr = json::array();
    for (const auto& r : reports) arr.push_back(case_report_json(r));
    json j = {{"profile", profile}, {"cases", arr}};
    std::cout << j.dump(1) << '\n';
    return;
  }
  int pass = 0, fail = 0, err = 0;
  for (const auto& r : reports) {
    std::cout << format_case_text(r, verbose);
    pass += r.status == "PASS";
    fail += r.status == "FAIL";
    err += r.status == "ERROR";
  }
  std::cout << "verify: " << pass << " passed, " << fail << " failed";
  if (err) std::cout << ", " << err << " errors";
  std::cout << '\n';
}

// ---- subcommands ---------------------------------------------------------------------------

int cmd_list(const CaseSelection& sel, const std::string& format) {
  check_format(format);
  const auto cases = select_cases(sel);
  if (format == "json") {
    json arr = json::array();
    for (const auto& [s, row] : cases) {
      arr.push_back({{"id", row.id}, {"scheme", s->slug}, {"description", row.description}});
    }
    std::cout << arr.dump(1) << '\n';
    return kExitPass;
  }
  for (const auto& [s, row] : cases) std::printf("%-48s %s\n", row.id.c_str(), row.description.c_str());
  std::printf("%zu cases\n", cases.size());
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
  if (m.contains("positions")) {
    std::cout << "  positions    ";
    for (const auto& p : m["positions"]) std::cout << p["position"].get<long long>() << ' ';
    std::cout << "\n";
  }
  std::cout << "  inputs\n";
  for (const auto& t : lc.spec.inputs) {
    std::cout << "    " << t.name << "  " << dtype_short(t.dtype) << " " << json(t.shape).dump() << "\n";
  }
  std::cout << "  expected (check: bound per profile)\n";
  for (const auto& t : lc.spec.expected) {
    std::cout << "    " << t.name << "  " << t.stage << "  " << dtype_short(t.dtype) << " "
              << json(t.shape).dump() << "  " << t.check.kind << " " << json(t.check.bounds).dump()
              << "\n";
  }
  if (m.contains("flags")) std::cout << "  flags        " << m["flags"].dump() << "\n";
  return kExitPass;
}

void write_catalog_from_files(const fs::path& out) {
  std::vector<CatalogEntry> entries;
  for (const auto& [s, row] : select_cases(CaseSelection{})) {
    CatalogEntry e;
    e.id = row.id;
    e.scheme = s->slug;
    e.manifest = s->slug + "/" + row.id + ".json";
    e.tensors = s->slug + "/" + row.id + ".safetensors";
    if (!fs::exists(out / e.manifest) || !fs::exists(out / e.tensors)) continue;
    const auto mb = read_file(out / e.manifest);
    e.manifest_sha256 = sha256_hex(mb);
    e.tensors_sha256 = sha256_hex(read_file(out / e.tensors));
    e.result = json::parse(mb.begin(), mb.end()).value("result", std::string("valid"));
    entries.push_back(e);
  }
  write_text_atomic(out / "catalog.json", catalog_text(entries));
  std::fprintf(stderr, "catalog: %zu cases in %s\n", entries.size(), (out / "catalog.json").c_str());
}

int cmd_generate(const CaseSelection& sel, const fs::path& out, bool no_catalog) {
  const auto cases = select_cases(sel);
  if (cases.empty()) throw UsageError("no case matches the selection (try `posenc list`)");
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto t1 = std::chrono::steady_clock::now();
    const auto& [s, row] = cases[i];
    const CaseFiles f = case_files(s->generate(row.id));
    write_case(out, s->slug, row.id, f);
    bytes += f.tensors.size() + f.manifest_text.size();
    std::fprintf(stderr, "[%zu/%zu] %s  %.2f s\n", i + 1, cases.size(), row.id.c_str(), seconds_since(t1));
  }
  std::fprintf(stderr, "generated %zu cases, %zu bytes, in %.2f s\n", cases.size(), bytes, seconds_since(t0));
  // A whole scheme was regenerated: remove its files whose case no longer exists.
  if (sel.case_regex.empty() && sel.shard_count == 1) {
    std::set<std::string> slugs, keep;
    for (const auto& [sch, row] : cases) {
      slugs.insert(sch->slug);
      keep.insert(row.id);
    }
    for (const auto& slug : slugs) {
      if (!fs::is_directory(out / slug)) continue;
      for (const auto& f : fs::directory_iterator(out / slug)) {
        const std::string stem = f.path().stem().string();
        if (f.is_regular_file() && !keep.count(stem)) {
          std::fprintf(stderr, "removed stale %s\n", f.path().c_str());
          fs::remove(f.path());
        }
      }
    }
  }
  if (!no_catalog) write_catalog_from_files(out);
  return kExitPass;
}

int cmd_verify(const std::vector<std::string>& golden_args, const fs::path& actual,
               const VerifyOptions& opt, const std::string& format, bool verbose) {
  check_format(format);
  check_profile(opt.profile);
  const auto manifests = expand_golden(golden_args);
  std::vector<CaseReport> reports;
  for (const auto& mp : manifests) {
    CaseReport r;
    try {
      const LoadedCase lc = load_case(mp);
      r.id = lc.spec.id;
      const TensorMap act = actual_for(actual, lc.spec.id, manifests.size());
      r = verify_case(lc.spec, lc.golden, act, opt);
    } catch (const std::exception& e) {
      if (r.id.empty()) r.id = mp.stem().string();
      r.status = "ERROR";
      r.profile = opt.profile;
      r.message = e.what();
    }
    reports.push_back(std::move(r));
  }
  print_reports(reports, format, verbose, opt.profile);
  return exit_code_of(reports);
}

int cmd_check(const CaseSelection& sel, const fs::path& data, const std::string& profile,
              const std::string& format, const fs::path& keep) {
  check_format(format);
  check_profile(profile);
  std::set<std::string> wanted;
  for (const auto& [s, row] : select_cases(sel)) wanted.insert(row.id);
  const auto entries = catalog_read(data);
  fs::path work = keep;
  bool remove_work = false;
  if (work.empty()) {
    work = fs::temp_directory_path() / ("posenc-check-" + std::to_string(::getpid()));
    remove_work = true;
  }
  fs::create_directories(work);
  std::vector<CaseReport> reports;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& e : entries) {
    if (!wanted.count(e.id)) continue;
    CaseReport r;
    r.id = e.id;
    r.scheme = e.scheme;
    r.profile = profile;
    try {
      check_catalog_hashes(data, e);
      const LoadedCase lc = load_case(data / e.manifest);
      const SchemeEntry& s = scheme_by_slug(lc.spec.scheme);
      // Through files, exactly as an external engine: inputs read from the golden file,
      // outputs written as safetensors, read back, verified.
      const TensorMap out = s.run_engine(lc.spec, lc.golden, EngineOptions{});
      std::vector<Tensor> ts;
      for (const auto& [k, v] : out) ts.push_back(v);
      const fs::path f = work / (e.id + ".safetensors");
      write_file_atomic(f, safetensors_encode(ts));
      r = verify_case(lc.spec, lc.golden, tensor_map(safetensors_read(f)), VerifyOptions{profile, {}, true});
    } catch (const std::exception& ex) {
      r.status = "ERROR";
      r.message = ex.what();
    }
    reports.push_back(std::move(r));
  }
  if (remove_work) fs::remove_all(work);
  if (reports.empty()) throw UsageError("no catalog case matches the selection");
  if (format == "json") {
    print_reports(reports, format, false, profile);
    return exit_code_of(reports);
  }
  std::printf("posenc check: optimized kernels vs the golden catalog (%s), profile %s\n",
              data.c_str(), profile.c_str());
  std::printf("%-46s %-8s %-9s %-14s %s\n", "case", "checked", "worst", "error/bound", "result");
  int pass = 0, fail = 0;
  for (const auto& r : reports) {
    const TensorReport* worst = nullptr;
    for (const auto& t : r.tensors) {
      if (t.status != "PASS" && t.status != "FAIL") continue;
      if (!worst || t.ratio() > worst->ratio()) worst = &t;
    }
    std::printf("%-46s %d/%-6zu %-9s %-14.3f %s\n", r.id.c_str(), r.n_checked(), r.tensors.size(),
                worst ? worst->name.c_str() : "-", worst ? worst->ratio() : 0.0, r.status.c_str());
    if (r.status != "PASS") {
      if (!r.message.empty()) std::printf("    %s\n", r.message.c_str());
      std::cout << format_case_text(r, false);
    }
    pass += r.status == "PASS";
    fail += r.status != "PASS";
  }
  std::printf("check: %d passed, %d failed (%.1f s)\n", pass, fail, seconds_since(t0));
  return exit_code_of(reports);
}

int cmd_engine(const std::string& which, const fs::path& data, const fs::path& out,
               const std::string& mistake, const std::string& format) {
  if (format != "safetensors" && format != "npy") {
    throw UsageError("--format must be safetensors or npy (got " + format + ")");
  }
  const LoadedCase lc = load_case(manifest_for(which, data));
  const SchemeEntry& s = scheme_by_slug(lc.spec.scheme);
  const TensorMap res = s.run_engine(lc.spec, lc.golden, EngineOptions{mistake});
  if (format == "npy") {
    for (const auto& [k, v] : res) write_file_atomic(out / (k + ".npy"), npy_encode(v));
  } else {
    std::vector<Tensor> ts;
    for (const auto& [k, v] : res) ts.push_back(v);
    write_file_atomic(out, safetensors_encode(ts));
  }
  std::fprintf(stderr, "engine: %s -> %s%s\n", lc.spec.id.c_str(), out.c_str(),
               mistake.empty() ? "" : (" (deliberate mistake: " + mistake + ")").c_str());
  return kExitPass;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "posenc: reference values, golden files and verification for transformer positional "
      "encodings.\n\nExit codes: 0 all pass, 1 at least one mismatch, 2 usage or input error.\n"
      "Typical use:\n  posenc check                      verify posenc's own kernels against the catalog\n"
      "  posenc list                       list the golden cases\n"
      "  posenc verify golden/data --actual OUT_DIR   check an engine's outputs"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");

  std::string data_str = default_data_dir().string();
  CaseSelection sel;
  std::string shard, format = "text", profile = "strict";

  auto add_selection = [&](CLI::App* sub) {
    sub->add_option("--scheme", sel.scheme, "Only cases of this scheme slug (e.g. rope)");
    sub->add_option("--case", sel.case_regex, "Only case ids matching this regular expression");
  };

  auto* list = app.add_subcommand("list", "List the golden cases of every scheme");
  add_selection(list);
  list->add_option("--format", format, "text or json");

  auto* show = app.add_subcommand("show", "Show one case: parameters, conventions, tensors, checks");
  std::string show_case;
  show->add_option("CASE", show_case, "Case id or manifest path")->required();
  show->add_option("--data", data_str, "Golden data directory (default: the source tree's)");
  show->add_option("--format", format, "text or json (json prints the manifest)");

  auto* gen = app.add_subcommand("generate", "Generate golden files (manifest + safetensors) from the oracle");
  std::string out_str = default_data_dir().string();
  bool no_catalog = false;
  add_selection(gen);
  gen->add_option("--out", out_str, "Output directory (default: the source tree's golden/data)");
  gen->add_option("--shard", shard, "Generate only shard i of n (i/n, 0 <= i < n) for batch fan-out");
  gen->add_flag("--no-catalog", no_catalog, "Do not rewrite catalog.json (use `posenc catalog` after all shards)");

  auto* cat = app.add_subcommand("catalog", "Rebuild catalog.json from the case files present in a directory");
  cat->add_option("--data", data_str, "Golden data directory");

  auto* ver = app.add_subcommand("verify", "Check an engine's outputs against golden cases");
  std::vector<std::string> golden_args, maps;
  std::string actual_str;
  bool verbose = false, require_all = false;
  ver->add_option("GOLDEN", golden_args, "Manifests, case directories or catalog.json")->required();
  ver->add_option("--actual", actual_str,
                  "Engine output: a .safetensors or .npy file (one case), or a directory with "
                  "<case_id>.safetensors or <case_id>/<tensor>.npy")->required();
  ver->add_option("--profile", profile, "Tolerance profile: strict or fp32-angles");
  ver->add_option("--format", format, "text or json");
  ver->add_option("--map", maps, "Rename: golden_name=engine_name (repeatable)");
  ver->add_flag("--require-all", require_all, "Fail a case when any expected tensor is missing");
  ver->add_flag("-v,--verbose", verbose, "Print the worst element of passing tensors too");

  auto* chk = app.add_subcommand(
      "check", "Run posenc's own optimized kernels on the catalog through files and verify them");
  std::string keep_str;
  add_selection(chk);
  chk->add_option("--data", data_str, "Golden data directory");
  chk->add_option("--profile", profile, "Tolerance profile");
  chk->add_option("--format", format, "text or json");
  chk->add_option("--keep", keep_str, "Keep the engine output files in this directory");

  auto* eng = app.add_subcommand(
      "engine", "Run posenc's optimized kernel on one case as an engine would; write its outputs");
  std::string eng_case, eng_out, mistake, eng_format = "safetensors";
  eng->add_option("CASE", eng_case, "Case id or manifest path")->required();
  eng->add_option("--out", eng_out, "Output .safetensors file (or directory for --format npy)")->required();
  eng->add_option("--data", data_str, "Golden data directory");
  eng->add_option("--mistake", mistake,
                  "Deliberate bug, to see verify fail: pairing, offset, fp32-angles, "
                  "double-rotation, sin-sign");
  eng->add_option("--format", eng_format, "safetensors or npy");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitPass : kExitUsage;
  }
  try {
    if (!shard.empty()) parse_shard(shard, &sel.shard_index, &sel.shard_count);
    const fs::path data(data_str);
    if (*list) return cmd_list(sel, format);
    if (*show) return cmd_show(show_case, data, format);
    if (*gen) return cmd_generate(sel, out_str, no_catalog);
    if (*cat) {
      write_catalog_from_files(data);
      return kExitPass;
    }
    if (*ver) {
      VerifyOptions opt{profile, parse_maps(maps), require_all};
      return cmd_verify(golden_args, actual_str, opt, format, verbose);
    }
    if (*chk) return cmd_check(sel, data, profile, format, keep_str);
    if (*eng) return cmd_engine(eng_case, data, eng_out, mistake, eng_format);
  } catch (const std::exception& e) {
    std::cerr << "posenc: error: " << e.what() << '\n';
    return kExitUsage;
  }
  return kExitUsage;
}
