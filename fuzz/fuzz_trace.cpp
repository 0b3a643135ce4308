// libFuzzer target: the per-scheme manifest schema and the KV trace validator
// (golden/verify/manifest_check.hpp) on arbitrary manifest text, parsed in memory. Its seeds are
// committed kv_cache manifests (fuzz/corpus/trace/). A manifest the validator accepts must be
// replayable as verify and the kv_cache engine read it: every step's keys of the right type, its
// tensors in the manifest's lists; a JSON exception there is a finding (expect_clean aborts).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/manifest.hpp"
#include "golden/verify/manifest_check.hpp"

using namespace posenc;
using namespace posenc::golden;

namespace {

/// What verify's trace report and the kv_cache engine read of an accepted trace.
void replay_reads(const CaseSpec& spec) {
  std::set<std::string> expected, inputs;
  for (const auto& t : spec.expected) expected.insert(t.name);
  for (const auto& t : spec.inputs) inputs.insert(t.name);
  const auto& p = spec.manifest.at("params");
  const std::int64_t rows = p.at("cache_rows").get<std::int64_t>();
  fuzz::require(rows >= 1, "cache_rows >= 1");
  int index = -1;
  for (const auto& js : spec.manifest.at("trace").at("steps")) {
    fuzz::require(js.at("index").get<int>() == ++index, "step indexes 0, 1, 2, ...");
    const std::string sn = js.at("name").get<std::string>();
    for (const auto& n : js.at("expected"))
      fuzz::require(expected.count(n.get<std::string>()) == 1, "listed expected tensor");
    for (const auto& n : js.at("inputs"))
      fuzz::require(inputs.count(n.get<std::string>()) == 1, "listed input tensor");
    if (js.at("kind").get<std::string>() == "shift") {
      const auto keep = js.at("n_keep").get<std::int64_t>(),
                 discard = js.at("n_discard").get<std::int64_t>();
      fuzz::require(keep >= 0 && discard >= 1 && keep <= rows && discard <= rows - keep,
                    "shift within the cache");
      continue;
    }
    fuzz::require(js.at("columns").get<std::int64_t>() >= 1, "columns >= 1");
    fuzz::require(inputs.count(sn + ".q") && inputs.count(sn + ".k") && inputs.count(sn + ".v"),
                  "q, k, v");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json m = nlohmann::json::parse(data, data + size, nullptr, false);
  if (m.is_discarded()) return 0;
  CaseSpec spec;
  try {
    spec = case_spec_from_json(m, "fuzz.json");
  } catch (const GoldenFileError&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "case_spec_from_json: unexpected exception: %s\n", e.what());
    std::abort();
  }
  bool accepted = false;
  fuzz::expect_clean("check_manifest_schema", [&] {
    check_manifest_schema(spec, "fuzz.json");
    accepted = true;
  });
  if (accepted && spec.scheme == "kv_cache")
    fuzz::expect_clean("replay_reads", [&] { replay_reads(spec); });
  return 0;
}
