// The committed catalog, write side: the files of a generated case written into a catalog folder
// (golden/data/<scheme>/<case_id>.json + .safetensors), and the registry's cases selected by
// scheme, id and shard. Reading the catalog and loading a case: golden/verify/catalog.hpp.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"
#include "golden/format/output_path.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/catalog.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// Encoded files of one case (bit-reproducible), in memory (spilled tensors read back).
struct CaseFiles {
  std::string manifest_text;
  std::vector<std::uint8_t> tensors;
};
CaseFiles case_files(const GoldenCase& c);

/// dir/<scheme>/<id>.json and dir/<scheme>/<id>.safetensors: where write_case puts a case.
std::filesystem::path case_manifest_path(const std::filesystem::path& dir, const std::string& scheme,
                                         const std::string& id);
std::filesystem::path case_tensors_path(const std::filesystem::path& dir, const std::string& scheme,
                                        const std::string& id);
/// Writes the two files of a case atomically under dir/<scheme>/ (through `rule`: OutputKind
/// kGoldenTensors and kGoldenManifest) and returns its entry.
CatalogEntry write_case(const std::filesystem::path& dir, const std::string& scheme,
                        const std::string& id, const CaseFiles& f,
                        const OutputRule& rule = OutputRule());
/// The same files, the tensors streamed to disk chunk by chunk (safetensors_write: memory is the
/// in-memory tensors, never the encoded file or the spilled ones); *bytes = both files' sizes.
CatalogEntry write_case(const std::filesystem::path& dir, const std::string& scheme,
                        const std::string& id, const GoldenCase& c, const OutputRule& rule = OutputRule(),
                        std::uint64_t* bytes = nullptr);

/// Every case of every scheme (in registry order), filtered.
struct CaseSelection {
  std::string scheme;      // "" = all
  std::string case_regex;  // "" = all; std::regex_search on the id
  int shard_index = 0, shard_count = 1;
};
std::vector<std::pair<const SchemeEntry*, CaseRow>> select_cases(const CaseSelection& sel);

/// Parses "i/n" (0 <= i < n); InvalidArgument otherwise.
void parse_shard(const std::string& text, int* index, int* count);

}  // namespace posenc::golden
