// `posenc bench`: the optimized kernels' speed as ratios to ceilings measured in the same run
// (docs/performance.md). Not a test: nothing here passes or fails on a number.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace posenc::tools {

struct BenchOptions {
  std::string threads = "1,2";       // comma list of OpenMP thread counts
  std::string format = "text";       // text or json
  bool smoke = false;                // tiny sizes, one repetition, no catalog or 1 GB runs
  std::vector<std::string> kernels;  // groups to run (empty: all)
  std::string plot;                  // SVG file to write (empty: none)
  int repeat = 0;                    // repetitions per row (0: 5, or 1 with --smoke)
};

/// Registers the `bench` subcommand and its options on `app`.
CLI::App* add_bench_subcommand(CLI::App& app, BenchOptions* o);

/// Runs the bench; returns the exit code (2 on a usage error, with the message on stderr).
int cmd_bench(const BenchOptions& o);

}  // namespace posenc::tools
