// posenc's command line: every subcommand's options, registered on the CLI11 app into one
// arguments struct per subcommand. Only declarations of options, names, defaults and help texts
// live here; tools/posenc.cpp validates the values and runs the subcommand that was given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "golden/cases/catalog.hpp"
#include "tools/cli_checks.hpp"
#include "tools/bench.hpp"
#include "tools/posenc_constants.hpp"
#include "tools/posenc_oracle.hpp"

namespace posenc::tools {

struct ListArgs {
  golden::CaseSelection sel;
  std::string shard, format = "text", level = "1", config, dtype = "f32";
};

struct ShowArgs {
  std::string which, data = golden::default_data_dir().string(), format = "text";
};

struct GenerateArgs {
  golden::CaseSelection sel;
  std::string shard, out = golden::default_data_dir().string();
  std::string config, positions, layout, dtype = "f32", level = "1";
  bool no_catalog = false, force = false;
  const CLI::Option* out_option = nullptr;  // count() == 0: --out not given
};

struct CatalogArgs {
  std::string data = golden::default_data_dir().string();
  bool force = false;
};

struct VerifyArgs {
  std::vector<std::string> golden, maps;
  std::string actual, profile = "strict", format = "text", report, layer_table;
  bool verbose = false, require_all = false, by_position = false, force = false;
  std::int64_t max_position = -1;  // < 0: every position
};

struct DiagnoseArgs {
  std::vector<std::string> golden;
  std::string actual, profile = "strict", format = "text", report;
  bool verbose = false, force = false;
};

struct CheckArgs {
  golden::CaseSelection sel;
  std::string data = golden::default_data_dir().string(), pipeline = "exact", profile,
              format = "text", keep, report;
  bool force = false;
};

struct EngineArgs {
  std::string which, out, data = golden::default_data_dir().string(), mistake, pipeline = "exact",
                          format = "safetensors";
  bool force = false;
};

/// Every subcommand's arguments; parsing fills those of the subcommand given.
struct CommandLine {
  ListArgs list;
  ShowArgs show;
  GenerateArgs generate;
  CatalogArgs catalog;
  VerifyArgs verify;
  DiagnoseArgs diagnose;
  CheckArgs check;
  EngineArgs engine;
  OracleArgs oracle;
  ConstantsArgs constants;
  BenchOptions bench;
};

/// Registers one subcommand on `app`; its options fill `a`.
CLI::App* add_list_command(CLI::App& app, ListArgs* a);
CLI::App* add_show_command(CLI::App& app, ShowArgs* a);
CLI::App* add_generate_command(CLI::App& app, GenerateArgs* a);
CLI::App* add_catalog_command(CLI::App& app, CatalogArgs* a);
CLI::App* add_verify_command(CLI::App& app, VerifyArgs* a);
CLI::App* add_diagnose_command(CLI::App& app, DiagnoseArgs* a);
CLI::App* add_check_command(CLI::App& app, CheckArgs* a);
CLI::App* add_engine_command(CLI::App& app, EngineArgs* a);

/// Registers every subcommand on `app`, in the order `posenc --help` lists them.
void add_commands(CLI::App& app, CommandLine* c);

}  // namespace posenc::tools
