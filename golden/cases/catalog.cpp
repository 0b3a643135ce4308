#include "golden/cases/catalog.hpp"

#include <cstdlib>
#include <set>

#include "golden/format/limits.hpp"
#include "golden/verify/manifest_check.hpp"
#include "reference/common/errors.hpp"
#include "tools/mutants/mutant.hpp"

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

CaseFiles case_files(const GoldenCase& c) {
  CaseFiles f;
  std::vector<Tensor> all = c.tensors;
  for (const auto& s : c.spilled) all.push_back(spilled_tensor_read(s));
  f.tensors = safetensors_encode(all, {{"posenc_case", c.manifest.value("id", "")}});
  f.manifest_text = manifest_text(c.manifest);
  return f;
}

fs::path case_manifest_path(const fs::path& dir, const std::string& scheme, const std::string& id) {
  return dir / scheme / (id + ".json");
}

fs::path case_tensors_path(const fs::path& dir, const std::string& scheme, const std::string& id) {
  return dir / scheme / (id + ".safetensors");
}

CatalogEntry write_case(const fs::path& dir, const std::string& scheme, const std::string& id,
                        const CaseFiles& f, const OutputRule& rule) {
  CatalogEntry e;
  e.id = id;
  e.scheme = scheme;
  e.manifest = scheme + "/" + id + ".json";
  e.tensors = scheme + "/" + id + ".safetensors";
  rule.write(dir / e.tensors, OutputKind::kGoldenTensors, f.tensors);
  rule.write_text(dir / e.manifest, OutputKind::kGoldenManifest, f.manifest_text);
  e.manifest_sha256 = sha256_hex(std::span<const std::uint8_t>(
      reinterpret_cast<const std::uint8_t*>(f.manifest_text.data()), f.manifest_text.size()));
  e.tensors_sha256 = sha256_hex(f.tensors);
  const auto m = nlohmann::json::parse(f.manifest_text);
  e.result = m.value("result", std::string("valid"));
  return e;
}

CatalogEntry write_case(const fs::path& dir, const std::string& scheme, const std::string& id,
                        const GoldenCase& c, const OutputRule& rule, std::uint64_t* bytes) {
  CatalogEntry e;
  e.id = id;
  e.scheme = scheme;
  e.manifest = scheme + "/" + id + ".json";
  e.tensors = scheme + "/" + id + ".safetensors";
  rule.check_file(dir / e.tensors, OutputKind::kGoldenTensors);
  rule.check_file(dir / e.manifest, OutputKind::kGoldenManifest);
  const WrittenFile w = safetensors_write(dir / e.tensors, c.tensors, c.spilled,
                                          {{"posenc_case", c.manifest.value("id", "")}});
  const std::string text = manifest_text(c.manifest);
  rule.write_text(dir / e.manifest, OutputKind::kGoldenManifest, text);
  e.manifest_sha256 = sha256_hex(std::span<const std::uint8_t>(
      reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  e.tensors_sha256 = w.sha256;
  e.result = c.manifest.value("result", std::string("valid"));
  if (bytes) *bytes = w.bytes + text.size();
  return e;
}

std::string catalog_text(const std::vector<CatalogEntry>& entries) {
  nlohmann::json j;
  j["schema"] = "posenc-catalog";
  j["version"] = kSchemaVersion;
  j["generator"] = {{"name", kGeneratorName}, {"version", kGeneratorVersion}};
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& e : entries) {
    cases.push_back({{"id", e.id},
                     {"scheme", e.scheme},
                     {"result", e.result},
                     {"manifest", e.manifest},
                     {"manifest_sha256", e.manifest_sha256},
                     {"tensors", e.tensors},
                     {"tensors_sha256", e.tensors_sha256}});
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

void parse_shard(const std::string& text, int* index, int* count) {
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    std::size_t a = 0, b = 0;
    *index = std::stoi(text.substr(0, slash), &a);
    *count = std::stoi(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw_invalid("parse_shard", "shard must look like i/n with integers", text);
  }
  if (*count < 1 || *index < 0 || *index >= *count) {
    throw_invalid("parse_shard", "shard i/n needs 0 <= i < n", text);
  }
}

std::vector<std::pair<const SchemeEntry*, CaseRow>> select_cases(const CaseSelection& sel) {
  std::regex re;
  if (!sel.case_regex.empty()) {
    try {
      re = std::regex(sel.case_regex);
    } catch (const std::regex_error& e) {
      throw_invalid("select_cases", std::string("case must be a valid regex: ") + e.what(),
                    sel.case_regex);
    }
  }
  if (!sel.scheme.empty()) scheme_by_slug(sel.scheme);  // validates the slug
  std::vector<std::pair<const SchemeEntry*, CaseRow>> out;
  int k = 0;
  for (const auto& s : schemes()) {
    if (!sel.scheme.empty() && s.slug != sel.scheme) continue;
    for (auto& row : s.cases()) {
      if (!sel.case_regex.empty() && !std::regex_search(row.id, re)) continue;
      if (k++ % sel.shard_count != sel.shard_index) continue;
      out.emplace_back(&s, std::move(row));
    }
  }
  return out;
}

}  // namespace posenc::golden
