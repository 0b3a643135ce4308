// The committed catalog, read side: golden/data/catalog.json listing every case with the SHA-256
// of its two files (golden/data/<scheme>/<case_id>.json + .safetensors), and a case loaded or
// opened from its files for verification. Knows no scheme: golden/cases/catalog.hpp writes the
// generated cases.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"
#include "golden/verify/tensor_source.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// $POSENC_DATA if set, else <source tree>/golden/data.
std::filesystem::path default_data_dir();

struct CatalogEntry {
  std::string id, scheme, result;
  std::string manifest, tensors;  // paths relative to the data directory
  std::string manifest_sha256, tensors_sha256;
  /// Which command wrote the case: "" for posenc's own cases (`posenc generate` of the
  /// registry: the only files a later `generate` may remove as stale), "generate --config",
  /// "generate --level 2", or "found" (a golden case in the folder no posenc run of this
  /// catalog wrote). Written only when not empty.
  std::string origin;
};

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

}  // namespace posenc::golden
