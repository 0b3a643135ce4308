// `posenc generate` (a catalog selection, --config, --level 2), `posenc list --level 2` and
// `posenc catalog`: tools/posenc_common.hpp.
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
  if (!a.out_given) {
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

}  // namespace

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

int run_generate(tools::GenerateArgs a) {
  if (!a.shard.empty()) parse_shard(a.shard, &a.sel.shard_index, &a.sel.shard_count);
  if (a.level != "1" && a.level != "2") throw UsageError("--level must be 1 or 2 (got \"" + a.level + "\")");
  if (a.level == "2" && !a.layout.empty()) throw UsageError("generate --level 2 takes no --layout (level 2 sweeps text RoPE models)");
  if (a.level == "2") return cmd_generate_level2(a);
  if (!a.config.empty()) {
    if (!a.out_given) {
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

}  // namespace posenc::tools
