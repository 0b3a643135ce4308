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
#include "tools/posenc_common.hpp"
#include "tools/posenc_constants.hpp"
#include "tools/posenc_oracle.hpp"
#include "tools/posenc_plan.hpp"
#include "tools/posenc_report.hpp"


namespace fs = std::filesystem;
using nlohmann::json;
using namespace posenc;
using namespace posenc::golden;

using namespace posenc::tools;

namespace {

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
  if (sub == "generate") {
    tools::GenerateArgs a = c.generate;
    a.out_given = a.out_option != nullptr && a.out_option->count() > 0;
    return run_generate(a);
  }
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

