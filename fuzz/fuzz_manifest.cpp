// libFuzzer target: case_spec_read on arbitrary manifest text (written to a scratch file, as the
// reader takes a path: its JSON parsing is part of what is fuzzed). An accepted manifest's
// tensors must re-serialize (tensor_spec_to_json).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/manifest.hpp"

using namespace posenc;
using namespace posenc::golden;
namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path path =
      fs::temp_directory_path() / ("posenc_fuzz_manifest." + std::to_string(getpid()) + ".json");
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  fuzz::expect_clean("case_spec_read", [&] {
    const CaseSpec spec = case_spec_read(path);
    for (const auto& t : spec.inputs) (void)tensor_spec_to_json(t, false).dump();
    for (const auto& t : spec.expected) (void)tensor_spec_to_json(t, true).dump();
  });
  return 0;
}
