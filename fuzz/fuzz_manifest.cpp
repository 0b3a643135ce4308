// libFuzzer target: a manifest's text, parsed as case_spec_read does, then validated by
// case_spec_from_json. An accepted manifest's tensors must re-serialize (tensor_spec_to_json).
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/manifest.hpp"

using namespace posenc;
using namespace posenc::golden;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Invalid JSON is case_spec_read's GoldenFileError ("invalid JSON"); only parsed text goes on.
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  fuzz::expect_clean("case_spec_from_json", [&] {
    const CaseSpec spec = case_spec_from_json(j, "fuzz.json");
    for (const auto& t : spec.inputs) (void)tensor_spec_to_json(t, false).dump();
    for (const auto& t : spec.expected) (void)tensor_spec_to_json(t, true).dump();
  });
  return 0;
}
