// posenc's command line: every subcommand's options, registered on the CLI11 app into one
// arguments struct per subcommand. Only declarations of options, names, defaults and help texts
// live here; tools/posenc.cpp validates the values and runs the subcommand that was given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "golden/cases/catalog.hpp"
#include "tools/posenc_args.hpp"
#include "tools/cli_checks.hpp"
#include "tools/bench.hpp"
#include "tools/posenc_constants.hpp"
#include "tools/posenc_oracle.hpp"

namespace posenc::tools {

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
