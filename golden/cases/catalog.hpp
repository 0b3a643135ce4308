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

/// Which stages show each of the scheme's engine mistakes under each profile (manifest
/// "mistake_detection": {profile: {mistake: [stages]}}), measured: the scheme's engine runs
/// every mistake on the exact pipeline, and each stage of its output, given alone, is judged
/// with every profile that applies; a stage shows the mistake when verify fails it. Only
/// mistakes some stage shows are listed. verify reads it to say when the stages an engine gave
/// cannot see a mistake at that profile's resolution although other stages can (the
/// resolution gap of 16-bit targets: docs/verifying.md). Empty for negative controls, traces
/// and cases whose tensors spilled to disk exceed kMistakeDetectionMaxSpilledBytes (a long
/// call's scores: too large to judge 5 profiles x every mistake at generation).
inline constexpr std::uint64_t kMistakeDetectionMaxSpilledBytes = std::uint64_t{64} << 20;
nlohmann::json mistake_detection(const SchemeEntry& scheme, const GoldenCase& c);
/// scheme.generate(id) with its manifest's "mistake_detection" (the one way cases are generated
/// for the catalog, `posenc generate` and the up-to-date tests).
GoldenCase generate_case(const SchemeEntry& scheme, const std::string& id);

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
