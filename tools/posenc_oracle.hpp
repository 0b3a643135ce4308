// `posenc oracle rope`: the mp50 oracle values and one profile's per-element budgets of one call
// of a user's RoPE kernel, as .npy files (python/posenc/properties.py drives it).
#pragma once
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace posenc::tools {

struct OracleArgs {
  std::string scheme, positions, layout = "half_split", q, k, out, profile = "fp32";
  int head_dim = 0, rotary_dim = 0, heads = 0, kv_heads = 0;
  double base = 10000.0;
  int num_buckets = 32;             // t5
  std::int64_t max_distance = 128;  // t5
  bool causal = false;              // t5 (default bidirectional)
  bool force = false;               // replace files in --out that are not .npy files
};

/// Registers the subcommand; its options fill `a`.
CLI::App* add_oracle_command(CLI::App& app, OracleArgs* a);
/// Writes the files; InvalidArgument / GoldenFileError (exit 2 in main) on bad input.
int run_oracle_command(const OracleArgs& a);

}  // namespace posenc::tools
