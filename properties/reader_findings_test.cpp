// Regression tests for what the fuzzers (fuzz/) and the sanitizer pass (tools/sanitize.sh)
// found in the readers. Each finding gets the input that showed it, reduced by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "golden/cases/catalog.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/format/manifest.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() /
                     ("posenc_reader_findings_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// The GoldenFileError message of read(), or a test failure naming what was thrown instead.
std::string golden_file_error(const std::function<void()>& read) {
  try {
    read();
  } catch (const GoldenFileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a GoldenFileError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

// fuzz_catalog found it: a JSON number beyond double's range is nlohmann's out_of_range, not a
// parse_error; the readers let it escape, so the CLI said "[json.exception.out_of_range.406]
// number overflow parsing '1e999'" without naming the file. Now it is "<file>: invalid JSON".
TEST(ReaderFindings, JsonNumberOverflowIsInvalidJsonNamingTheFile) {
  const fs::path d = scratch_dir("overflow");
  write_text(d / "catalog.json", R"({"schema": "posenc-catalog", "version": 1e999, "cases": []})");
  const std::string catalog = golden_file_error([&] { catalog_read(d); });
  EXPECT_EQ(catalog.rfind((d / "catalog.json").string() + ": invalid JSON: ", 0), 0u) << catalog;

  write_text(d / "case.json", R"({"schema": "posenc-golden", "version": 2, "seed": 4958e9321034})");
  const std::string manifest = golden_file_error([&] { case_spec_read(d / "case.json"); });
  EXPECT_EQ(manifest.rfind((d / "case.json").string() + ": invalid JSON: ", 0), 0u) << manifest;

  write_text(d / "config.json", R"({"rope_theta": 1e999, "head_dim": 64})");
  const std::string config = golden_file_error([&] { rope_config_read(d / "config.json"); });
  EXPECT_EQ(config.rfind((d / "config.json").string() + ": invalid JSON: ", 0), 0u) << config;
  fs::remove_all(d);
}

}  // namespace
}  // namespace posenc::golden
