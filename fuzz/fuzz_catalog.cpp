// libFuzzer target: catalog_read on arbitrary catalog.json text (written to a scratch folder,
// as the reader takes a folder). Accepted entries must name files inside the folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "golden/verify/catalog.hpp"

using namespace posenc;
using namespace posenc::golden;
namespace fs = std::filesystem;

namespace {
fs::path scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("posenc_fuzz_catalog." + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path dir = scratch();
  if (std::FILE* f = std::fopen((dir / "catalog.json").c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  fuzz::expect_clean("catalog_read", [&] {
    for (const auto& e : catalog_read(dir)) {
      for (const std::string& rel : {e.manifest, e.tensors}) {
        const fs::path p = (dir / rel).lexically_normal();
        fuzz::require(p.parent_path().parent_path() == dir.lexically_normal() &&
                          p.filename() != "..",
                      "a catalog entry names <scheme>/<file> inside the folder");
      }
    }
  });
  return 0;
}
