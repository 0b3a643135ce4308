// The three golden-catalog tests every scheme runs (called from each <scheme>_test.cpp):
//   FilesAreUpToDate       regenerating every case reproduces the committed files byte for
//                          byte, and catalog.json holds their SHA-256
//   OptimizedPassesVerify  the scheme's built-in engine (its optimized kernels) passes every
//                          case with the strict profile, every stage present
//   EngineMistakesAreCaught  each deliberate engine mistake fails every case (unless declared invisible)
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/catalog.hpp"
#include "golden/format.hpp"
#include "golden/registry.hpp"
#include "golden/verify.hpp"

namespace posenc::properties {

inline void expect_golden_files_up_to_date(const std::string& slug, std::size_t min_cases) {
  const auto dir = golden::default_data_dir();
  const auto& scheme = golden::scheme_by_slug(slug);
  const auto rows = scheme.cases();
  ASSERT_GE(rows.size(), min_cases);
  for (const auto& row : rows) {
    const auto f = golden::case_files(scheme.generate(row.id));
    const auto committed_m = golden::read_file(dir / slug / (row.id + ".json"));
    const auto committed_t = golden::read_file(dir / slug / (row.id + ".safetensors"));
    EXPECT_TRUE(committed_m == std::vector<std::uint8_t>(f.manifest_text.begin(), f.manifest_text.end()))
        << row.id << ".json differs from a fresh generation: run `posenc generate`";
    EXPECT_TRUE(committed_t == f.tensors)
        << row.id << ".safetensors differs from a fresh generation: run `posenc generate`";
  }
  for (const auto& f : std::filesystem::directory_iterator(dir / slug)) {
    const std::string stem = f.path().stem().string();
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.id == stem; }))
        << f.path() << " belongs to no case: run `posenc generate --scheme " << slug << "`";
  }
  std::size_t n = 0;
  for (const auto& e : golden::catalog_read(dir)) {
    if (e.scheme != slug) continue;
    ++n;
    EXPECT_EQ(golden::sha256_hex(golden::read_file(dir / e.manifest)), e.manifest_sha256) << e.id;
    EXPECT_EQ(golden::sha256_hex(golden::read_file(dir / e.tensors)), e.tensors_sha256) << e.id;
  }
  EXPECT_EQ(n, rows.size()) << "catalog.json does not list every " << slug << " case";
}

/// Runs fn(case spec, golden tensors, scheme) for every case of the scheme.
template <class Fn>
void for_each_golden_case(const std::string& slug, Fn fn) {
  const auto dir = golden::default_data_dir();
  const auto& scheme = golden::scheme_by_slug(slug);
  for (const auto& row : scheme.cases()) {
    const auto lc = golden::load_case(dir / slug / (row.id + ".json"));
    fn(lc, scheme);
  }
}

inline void expect_optimized_passes_verify(const std::string& slug) {
  for_each_golden_case(slug, [](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    const auto out = s.run_engine(lc.spec, lc.golden, {});
    const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, true});
    EXPECT_EQ(r.status, "PASS")
        << golden::format_case_text(r, true);
    EXPECT_EQ(r.n_checked(), static_cast<int>(lc.spec.expected.size())) << lc.spec.id;
  });
}

/// Every mistake must fail every case, unless `allowed_pass(case, mistake)` says the mistake is
/// invisible for that case (e.g. a position offset cannot change relative scores).
template <class AllowedPass>
void expect_engine_mistakes_caught(const std::string& slug, AllowedPass allowed_pass) {
  for_each_golden_case(slug, [&](const golden::LoadedCase& lc, const golden::SchemeEntry& s) {
    for (const auto& mistake : s.mistakes()) {
      const auto out = s.run_engine(lc.spec, lc.golden, {mistake});
      const auto r = golden::verify_case(lc.spec, lc.golden, out, {"strict", {}, true});
      if (allowed_pass(lc.spec.id, mistake)) continue;
      EXPECT_EQ(r.status, "FAIL") << lc.spec.id << " with mistake " << mistake;
    }
  });
}

}  // namespace posenc::properties
