// The committed catalog: golden/data/<scheme>/<case_id>.json + .safetensors, and
// golden/data/catalog.json listing every case with the SHA-256 of both files.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"
#include "golden/format/output_path.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// $POSENC_DATA if set, else <source tree>/golden/data.
std::filesystem::path default_data_dir();

struct CatalogEntry {
  std::string id, scheme, result;
  std::string manifest, tensors;  // paths relative to the data directory
  std::string manifest_sha256, tensors_sha256;
};

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
std::string catalog_text(const std::vector<CatalogEntry>& entries);
/// catalog.json of a data directory; GoldenFileError on malformed JSON, a case listed twice, or
/// a file path that is not <scheme>/<file name>.
std::vector<CatalogEntry> catalog_read(const std::filesystem::path& dir);

/// Checks both files of a catalog entry against the catalog's SHA-256; GoldenFileError naming the
/// file otherwise.
void check_catalog_entry(const std::filesystem::path& data, const CatalogEntry& e);

/// A manifest inside a catalog folder (catalog.json in the manifest's own folder or in its
/// parent, the <data>/<scheme>/<file> layout) must be listed there, and both files of its entry
/// must have the catalog's SHA-256 (check_catalog_entry), whichever way the manifest was named.
/// GoldenFileError naming the manifest and the catalog otherwise: an unlisted manifest in a
/// catalog folder is refused, not judged. Nothing to check when neither folder has a catalog.
void check_catalog_membership(const std::filesystem::path& manifest_path);

/// Whether load_case / open_case run check_catalog_membership: kDone when the caller has
/// checked the case's catalog entry itself (a catalog argument), not to hash the files twice.
enum class CatalogCheck { kIfInCatalog, kDone };

/// A case loaded for verification: parsed manifest and all golden tensors, integrity-checked
/// (tensors_file inside the manifest's folder, every tensor listed with its SHA-256), its catalog
/// entry when it lies in a catalog folder, and its scheme's schema (golden/verify/manifest_check.hpp).
struct LoadedCase {
  CaseSpec spec;
  TensorMap golden;
  std::filesystem::path manifest_path;
};
LoadedCase load_case(const std::filesystem::path& manifest_path,
                     CatalogCheck catalog = CatalogCheck::kIfInCatalog);

/// A case opened for streaming verification (`posenc verify` without --report): the parsed
/// manifest and the header of its tensors file, checked against the manifest by name, dtype and
/// shape (and the file's case metadata) as load_case does; the tensor data stays on disk and is
/// hashed while verify reads it. finish() hashes what was not read and refuses a tensor whose
/// SHA-256 differs from the manifest's (load_case's check, done last): call it before using
/// the report.
struct OpenedCase {
  CaseSpec spec;
  FileSource golden;
  std::filesystem::path manifest_path, tensors_path;
  void finish() { golden.finish_golden_check(spec, tensors_path.string()); }
};
std::unique_ptr<OpenedCase> open_case(const std::filesystem::path& manifest_path,
                                      CatalogCheck catalog = CatalogCheck::kIfInCatalog);

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
