#include "golden/verify/catalog.hpp"

#include <cstdlib>
#include <set>

#include "golden/format/limits.hpp"
#include "golden/verify/manifest_check.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;

fs::path default_data_dir() {
  if (const char* env = std::getenv("POSENC_DATA"); env && *env) return fs::path(env);
#ifdef POSENC_SOURCE_DIR
  return fs::path(POSENC_SOURCE_DIR) / "golden" / "data";
#else
  return fs::path("golden") / "data";
#endif
}

std::string catalog_text(const std::vector<CatalogEntry>& entries) {
  nlohmann::json j;
  j["schema"] = "posenc-catalog";
  j["version"] = kSchemaVersion;
  j["generator"] = {{"name", kGeneratorName}, {"version", kGeneratorVersion}};
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json c = {{"id", e.id},
                        {"scheme", e.scheme},
                        {"result", e.result},
                        {"manifest", e.manifest},
                        {"manifest_sha256", e.manifest_sha256},
                        {"tensors", e.tensors},
                        {"tensors_sha256", e.tensors_sha256}};
    if (!e.origin.empty()) c["origin"] = e.origin;
    cases.push_back(std::move(c));
  }
  j["cases"] = cases;
  return j.dump(1) + "\n";
}

std::vector<CatalogEntry> catalog_read(const fs::path& dir) {
  const fs::path path = dir / "catalog.json";
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || j.value("schema", "") != "posenc-catalog") {
    throw GoldenFileError(path.string() + ": not a posenc catalog (schema != posenc-catalog)");
  }
  std::vector<CatalogEntry> out;
  std::set<std::string> ids;
  auto relative_file = [&](const std::string& id, const std::string& rel) {
    // "<scheme>/<file>": a relative path of two plain names, never leaving the folder
    const auto slash = rel.find('/');
    if (slash == std::string::npos || !is_plain_file_name(rel.substr(0, slash)) ||
        !is_plain_file_name(rel.substr(slash + 1))) {
      throw GoldenFileError(path.string() + ": case \"" + id + "\" names file \"" + rel +
                            "\"; catalog files must be <scheme>/<file name> inside the catalog folder");
    }
  };
  try {
    for (const auto& c : j.at("cases")) {
      CatalogEntry e;
      e.id = c.at("id").get<std::string>();
      e.scheme = c.at("scheme").get<std::string>();
      e.result = c.value("result", std::string("valid"));
      e.manifest = c.at("manifest").get<std::string>();
      e.tensors = c.at("tensors").get<std::string>();
      e.manifest_sha256 = c.at("manifest_sha256").get<std::string>();
      e.tensors_sha256 = c.at("tensors_sha256").get<std::string>();
      e.origin = c.value("origin", std::string());
      if (!ids.insert(e.id).second && !POSENC_MUTANT("golden_catalog_duplicates_allowed")) {
        throw GoldenFileError(path.string() + ": case \"" + e.id + "\" is listed twice");
      }
      relative_file(e.id, e.manifest);
      relative_file(e.id, e.tensors);
      out.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw GoldenFileError(path.string() + ": malformed catalog entry: " + e.what());
  }
  return out;
}

void check_catalog_entry(const fs::path& data, const CatalogEntry& e) {
  for (auto [rel, sha] : {std::pair{e.manifest, e.manifest_sha256}, std::pair{e.tensors, e.tensors_sha256}}) {
    if (sha256_file(data / rel) != sha && !POSENC_MUTANT("golden_catalog_hash_unchecked")) {
      throw GoldenFileError((data / rel).string() +
                            ": SHA-256 differs from catalog.json (modified or corrupted file; "
                            "regenerate with `posenc generate`)");
    }
  }
}

void check_catalog_membership(const fs::path& manifest_path) {
  if (POSENC_MUTANT("golden_catalog_membership_unchecked")) return;
  std::error_code ec;
  const fs::path m = fs::weakly_canonical(manifest_path, ec);
  if (ec) return;  // reading the manifest reports it
  for (const fs::path& dir : {m.parent_path(), m.parent_path().parent_path()}) {
    if (dir.empty() || !fs::exists(dir / "catalog.json", ec)) continue;
    for (const auto& e : catalog_read(dir)) {
      if (fs::weakly_canonical(dir / e.manifest, ec) == m) {
        check_catalog_entry(dir, e);
        return;
      }
    }
    throw GoldenFileError(manifest_path.string() + ": lies in the catalog folder " + dir.string() +
                          " but " + (dir / "catalog.json").string() +
                          " does not list it; refused (a case of a catalog is checked against the "
                          "catalog's SHA-256: rebuild it with `posenc catalog --data " + dir.string() +
                          "`, or move the case out of the folder)");
  }
}

fs::path tensors_path(const fs::path& manifest_path, const CaseSpec& spec) {
  // case_spec_from_json has checked that tensors_file is a plain name; a symbolic link may
  // still point elsewhere: it must resolve into the manifest's own folder.
  const fs::path dir = manifest_path.parent_path().empty() ? fs::path(".") : manifest_path.parent_path();
  const fs::path p = dir / spec.tensors_file;
  std::error_code ec;
  if (fs::is_symlink(p, ec) && !POSENC_MUTANT("golden_symlink_followed")) {
    const fs::path target = fs::weakly_canonical(p, ec);
    if (ec || target.parent_path() != fs::weakly_canonical(dir, ec)) {
      throw GoldenFileError(manifest_path.string() + ": tensors_file \"" + spec.tensors_file +
                            "\" is a symbolic link leaving the manifest's folder; refused");
    }
  }
  return p;
}

LoadedCase load_case(const fs::path& manifest_path, CatalogCheck catalog) {
  LoadedCase lc;
  lc.manifest_path = manifest_path;
  if (catalog == CatalogCheck::kIfInCatalog) check_catalog_membership(manifest_path);
  lc.spec = case_spec_read(manifest_path);
  check_manifest_schema(lc.spec, manifest_path.string());
  const fs::path tpath = tensors_path(manifest_path, lc.spec);
  std::map<std::string, std::string> meta;
  lc.golden = tensor_map(safetensors_read(tpath, &meta));
  if (auto it = meta.find("posenc_case");
      it != meta.end() && it->second != lc.spec.id && !POSENC_MUTANT("golden_case_metadata_unchecked")) {
    throw GoldenFileError(tpath.string() + ": the file belongs to case \"" + it->second +
                          "\", the manifest is \"" + lc.spec.id + "\"");
  }
  check_golden_tensors(lc.spec, lc.golden, tpath.string());
  MapSource small(lc.golden);
  check_kv_trace_values(lc.spec, small, manifest_path.string());
  return lc;
}

std::unique_ptr<OpenedCase> open_case(const fs::path& manifest_path, CatalogCheck catalog) {
  auto oc = std::make_unique<OpenedCase>();
  oc->manifest_path = manifest_path;
  if (catalog == CatalogCheck::kIfInCatalog) check_catalog_membership(manifest_path);
  oc->spec = case_spec_read(manifest_path);
  check_manifest_schema(oc->spec, manifest_path.string());
  oc->tensors_path = tensors_path(manifest_path, oc->spec);
  oc->golden.add_safetensors(oc->tensors_path);
  const auto& meta = oc->golden.metadata();
  if (auto it = meta.find("posenc_case");
      it != meta.end() && it->second != oc->spec.id && !POSENC_MUTANT("golden_case_metadata_unchecked")) {
    throw GoldenFileError(oc->tensors_path.string() + ": the file belongs to case \"" + it->second +
                          "\", the manifest is \"" + oc->spec.id + "\"");
  }
  oc->golden.start_golden_check(oc->spec, oc->tensors_path.string());
  if (oc->spec.scheme == "kv_cache") {
    // The trace's integer tensors, read apart from the streaming (hashed) source; finish()
    // still checks the file's SHA-256 before the report is used.
    FileSource small;
    small.add_safetensors(oc->tensors_path);
    check_kv_trace_values(oc->spec, small, manifest_path.string());
  }
  return oc;
}

}  // namespace posenc::golden
