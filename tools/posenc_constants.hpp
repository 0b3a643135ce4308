// `posenc constants`: the names and numbers other languages must agree with (hard positions,
// profiles, pipelines, schemes and their mistake names), printed from the tables the C++ code
// uses. python/posenc/constants.json is this command's output, committed; the ctest
// `python.constants` fails when the two drift apart.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace posenc::tools {

struct ConstantsArgs {
  std::string format = "json";
};

/// Registers the subcommand; its options fill `a`.
CLI::App* add_constants_command(CLI::App& app, ConstantsArgs* a);
/// Prints the constants to stdout; InvalidArgument (exit 2 in main) on a bad --format.
int run_constants_command(const ConstantsArgs& a);

}  // namespace posenc::tools
