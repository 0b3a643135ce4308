// The arguments of each posenc subcommand, as parsing fills them (tools/posenc_cli.hpp registers
// the options). Apart from CLI11, so the subcommands' files (tools/posenc_common.hpp) compile
// without it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"

namespace CLI {
class Option;
}  // namespace CLI

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
  const CLI::Option* out_option = nullptr;  // the --out option (tools/posenc_cli.cpp)
  bool out_given = false;                   // --out was given (set from out_option after parsing)
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

}  // namespace posenc::tools
