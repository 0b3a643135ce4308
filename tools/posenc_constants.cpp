#include "tools/posenc_constants.hpp"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "golden/cases/hard_positions.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/errors.hpp"

namespace posenc::tools {

namespace {

nlohmann::json constants_json() {
  using nlohmann::json;
  json hard = json::array();
  for (const auto& h : golden::hard_positions()) hard.push_back({{"position", h.m}, {"why", h.why}});
  json profiles = json::array();
  for (const auto& p : golden::profiles()) {
    profiles.push_back(
        {{"name", p.name}, {"aliases", p.aliases}, {"pipeline", p.pipeline}, {"summary", p.summary}});
  }
  json schemes = json::array();
  for (const auto& s : golden::schemes()) {
    schemes.push_back({{"slug", s.slug}, {"summary", s.summary}, {"mistakes", s.mistakes()}});
  }
  return {{"schema", "posenc-constants"},
          {"version", 1},
          {"hard_positions", hard},
          {"profiles", profiles},
          {"pipelines", golden::pipelines::names()},
          {"schemes", schemes}};
}

}  // namespace

CLI::App* add_constants_command(CLI::App& app, ConstantsArgs* a) {
  auto* c = app.add_subcommand(
      "constants",
      "Print the names and numbers other languages share with posenc: hard positions, profiles, "
      "pipelines, schemes and their mistake names (python/posenc/constants.json is this output)");
  c->add_option("--format", a->format, "json (the only format: a file other tools read)");
  return c;
}

int run_constants_command(const ConstantsArgs& a) {
  if (a.format != "json") {
    throw_invalid("posenc constants", "--format must be json", a.format);
  }
  std::cout << constants_json().dump(1) << '\n';
  return 0;
}

}  // namespace posenc::tools
