#include "golden/cases/catalog.hpp"

#include "golden/format/limits.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/errors.hpp"
#include "optimized/common/mutant.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;

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

nlohmann::json mistake_detection(const SchemeEntry& scheme, const GoldenCase& c) {
  nlohmann::json out = nlohmann::json::object();
  const auto& m = c.manifest;
  std::uint64_t spilled = 0;
  for (const auto& s : c.spilled) spilled += s.bytes;
  if (m.value("result", std::string("valid")) == "invalid" || m.contains("trace") ||
      spilled > kMistakeDetectionMaxSpilledBytes || POSENC_MUTANT("golden_catalog_mistake_detection_dropped")) {
    return out;
  }
  const CaseSpec spec = case_spec_from_json(m, m.value("id", std::string()));
  std::vector<Tensor> all = c.tensors;
  for (const auto& s : c.spilled) all.push_back(spilled_tensor_read(s));
  const TensorMap golden = tensor_map(std::move(all));
  for (const auto& mistake : scheme.mistakes()) {
    TensorMap run;
    try {
      EngineOptions eo;
      eo.mistake = mistake;
      run = scheme.run_engine(spec, golden, eo);
    } catch (const std::exception&) {
      continue;  // a mistake this case's engine cannot make (e.g. a scaling mistake on a plain case)
    }
    for (const auto& p : profiles()) {
      std::vector<std::string> seen;
      bool applies = false;
      for (const auto& t : spec.expected) {
        auto it = run.find(t.name);
        if (it == run.end()) continue;
        TensorMap one;
        one.emplace(t.name, it->second);
        VerifyOptions o;
        o.profile = p.name;
        const CaseReport r = verify_case(spec, golden, one, o);
        applies |= judged(r.status);
        if (r.status == Verdict::kFail) seen.push_back(t.name);
      }
      if (applies && !seen.empty()) out[p.name][mistake] = seen;
    }
  }
  return out;
}

GoldenCase generate_case(const SchemeEntry& scheme, const std::string& id) {
  GoldenCase c = scheme.generate(id);
  nlohmann::json d = mistake_detection(scheme, c);
  if (!d.empty()) c.manifest["mistake_detection"] = std::move(d);
  return c;
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
