#include "golden/cases/catalog.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

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

nlohmann::json control_detection(const SchemeEntry& scheme, const GoldenCase& c) {
  nlohmann::json out = nlohmann::json::object();
  const auto& m = c.manifest;
  if (m.value("result", std::string("valid")) != "invalid" ||
      POSENC_MUTANT("golden_catalog_control_detection_dropped")) {
    return out;
  }
  const CaseSpec spec = case_spec_from_json(m, m.value("id", std::string()));
  std::vector<Tensor> all = c.tensors;
  for (const auto& s : c.spilled) all.push_back(spilled_tensor_read(s));
  const TensorMap golden = tensor_map(std::move(all));
  // The right convention: the scheme's engine without a mistake on the exact pipeline
  // (posenc's kernels, within strict's budget of the oracle of the right convention).
  const TensorMap run = scheme.run_engine(spec, golden, EngineOptions{});
  for (const auto& p : profiles()) {
    std::vector<std::string> telling;
    bool applies = false;
    for (const auto& t : spec.expected) {
      auto it = run.find(t.name);
      if (it == run.end()) continue;
      TensorMap one;
      one.emplace(t.name, it->second);
      VerifyOptions o;
      o.profile = p.name;
      const CaseReport r = verify_case(spec, golden, one, o);
      const auto tr_it = std::find_if(r.tensors.begin(), r.tensors.end(),
                                      [&](const TensorReport& x) { return x.name == t.name; });
      if (tr_it == r.tensors.end() || !judged(tr_it->status)) continue;
      applies = true;
      const TensorReport& tr = *tr_it;
      // Two budgets apart: no output within one budget of the right values lies within one
      // budget of the wrong ones (the two conventions' budgets are the case's, nearly equal).
      const bool tells = tr.kind == CheckKind::kExact ? tr.n_over > 0 : tr.max_ratio > 2.0;
      if (tells) telling.push_back(t.name);
    }
    if (applies) out[p.name] = telling;
  }
  return out;
}

void add_detection(const SchemeEntry& scheme, GoldenCase& c) {
  nlohmann::json d = mistake_detection(scheme, c);
  if (!d.empty()) c.manifest["mistake_detection"] = std::move(d);
  nlohmann::json cd = control_detection(scheme, c);
  if (!cd.empty()) c.manifest["control_detection"] = std::move(cd);
}

GoldenCase generate_case(const SchemeEntry& scheme, const std::string& id) {
  GoldenCase c = scheme.generate(id);
  add_detection(scheme, c);
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
  std::vector<std::pair<const SchemeEntry*, CaseRow>> all;
  for (const auto& s : schemes()) {
    if (!sel.scheme.empty() && s.slug != sel.scheme) continue;
    for (auto& row : s.cases()) {
      if (!sel.case_regex.empty() && !std::regex_search(row.id, re)) continue;
      all.emplace_back(&s, std::move(row));
    }
  }
  if (sel.shard_count == 1) return all;
  std::vector<std::uint64_t> costs;
  for (const auto& [s, row] : all) costs.push_back(case_cost(s->slug, row.id));
  const std::vector<int> shard = balanced_shards(costs, sel.shard_count);
  std::vector<std::pair<const SchemeEntry*, CaseRow>> out;
  for (std::size_t k = 0; k < all.size(); ++k) {
    if (shard[k] == sel.shard_index) out.push_back(std::move(all[k]));
  }
  return out;
}

namespace {

struct CostRow {
  const char* scheme;
  const char* id;
  std::uint64_t cost;
};
constexpr CostRow kCaseCosts[] = {
#include "golden/cases/case_costs.inc"
};

std::uint64_t median(std::vector<std::uint64_t> v) {
  if (v.empty()) return 1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::uint64_t case_cost(const std::string& scheme, const std::string& id) {
  static const auto table = [] {
    std::map<std::pair<std::string, std::string>, std::uint64_t> t;
    for (const CostRow& r : kCaseCosts) t[{r.scheme, r.id}] = r.cost;
    return t;
  }();
  if (const auto it = table.find({scheme, id}); it != table.end()) return it->second;
  std::vector<std::uint64_t> same, every;
  for (const CostRow& r : kCaseCosts) {
    every.push_back(r.cost);
    if (scheme == r.scheme) same.push_back(r.cost);
  }
  return median(same.empty() ? every : same);
}

std::vector<int> balanced_shards(const std::vector<std::uint64_t>& costs, int shard_count) {
  if (shard_count < 1) throw_invalid("balanced_shards", "shard_count must be >= 1", shard_count);
  std::vector<std::size_t> order(costs.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return costs[a] > costs[b]; });
  std::vector<std::uint64_t> load(static_cast<std::size_t>(shard_count), 0);
  std::vector<int> shard(costs.size(), 0);
  for (const std::size_t k : order) {
    const auto lightest = std::min_element(load.begin(), load.end());  // the first on a tie
    shard[k] = static_cast<int>(lightest - load.begin());
    *lightest += costs[k];
  }
  return shard;
}

namespace {

nlohmann::json shard_record_json(const ShardRecord& r) {
  nlohmann::json j;
  j["schema"] = "posenc-shard";
  j["level"] = r.level;
  j["scheme"] = r.sel.scheme;
  j["case"] = r.sel.case_regex;
  j["shard"] = std::to_string(r.sel.shard_index) + "/" + std::to_string(r.sel.shard_count);
  if (r.level == 2) {
    j["options"] = r.options;
    nlohmann::json cases = nlohmann::json::array();
    for (const ShardRecordCase& c : r.cases) cases.push_back({c.scheme, c.id, c.shard});
    j["cases"] = std::move(cases);
  }
  return j;
}

/// What identifies a batch: level 1 its selection; level 2 its options and case list.
std::string shard_batch_key(const ShardRecord& r) {
  std::string key = std::to_string(r.level) + "\n" + r.sel.scheme + "\n" + r.sel.case_regex;
  if (r.level == 2) {
    key += "\n" + r.options;
    for (const ShardRecordCase& c : r.cases) key += "\n" + c.scheme + "/" + c.id + "@" + std::to_string(c.shard);
  }
  return key;
}

/// Reads a level-2 record's "options" and "cases" ([scheme, id, shard] each).
void read_level2_cases(const nlohmann::json& j, ShardRecord* r, const std::function<GoldenFileError(const std::string&)>& bad) {
  if (!j.contains("options") || !j["options"].is_string()) throw bad("\"options\" must be a string");
  r->options = j["options"].get<std::string>();
  if (!j.contains("cases") || !j["cases"].is_array()) throw bad("\"cases\" must be an array");
  for (const auto& c : j["cases"]) {
    if (!c.is_array() || c.size() != 3 || !c[0].is_string() || !c[1].is_string() || !c[2].is_number_integer() ||
        c[2].get<std::int64_t>() < 0 || c[2].get<std::int64_t>() >= r->sel.shard_count) {
      throw bad("each of \"cases\" must be [scheme, id, shard] with 0 <= shard < " +
                std::to_string(r->sel.shard_count));
    }
    r->cases.push_back({c[0].get<std::string>(), c[1].get<std::string>(), c[2].get<int>()});
  }
}

}  // namespace

fs::path shard_record_path(const fs::path& dir, const ShardRecord& r) {
  const std::string key = shard_batch_key(r);
  const std::string hash = sha256_hex(std::span<const std::uint8_t>(
      reinterpret_cast<const std::uint8_t*>(key.data()), key.size()));
  return dir / kShardRecordDir /
         (hash.substr(0, 16) + "-" + std::to_string(r.sel.shard_index) + "-of-" +
          std::to_string(r.sel.shard_count) + ".json");
}

std::string shard_record_text(const ShardRecord& r) { return shard_record_json(r).dump(2) + "\n"; }

std::vector<ShardRecord> read_shard_records(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::is_directory(dir / kShardRecordDir)) {
    for (const auto& f : fs::directory_iterator(dir / kShardRecordDir)) {
      if (f.path().extension() == ".json") files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<ShardRecord> out;
  for (const auto& f : files) {
    const nlohmann::json j = read_json_file(f);
    auto bad = [&](const std::string& what) -> GoldenFileError {
      return GoldenFileError(f.string() + ": not a shard record of posenc: " + what);
    };
    if (!j.is_object() || j.value("schema", "") != "posenc-shard") throw bad("no \"schema\": \"posenc-shard\"");
    for (const char* k : {"scheme", "case", "shard"}) {
      if (!j.contains(k) || !j[k].is_string()) throw bad(std::string("\"") + k + "\" must be a string");
    }
    if (!j.contains("level") || !j["level"].is_number_integer()) throw bad("\"level\" must be an integer");
    ShardRecord r;
    r.level = j["level"].get<int>();
    if (r.level != 1 && r.level != 2) {
      throw GoldenFileError(f.string() + ": \"level\" is " + std::to_string(r.level) +
                            ", a catalog level this posenc does not generate (it knows levels 1 and 2)");
    }
    r.sel.scheme = j["scheme"].get<std::string>();
    r.sel.case_regex = j["case"].get<std::string>();
    try {
      parse_shard(j["shard"].get<std::string>(), &r.sel.shard_index, &r.sel.shard_count);
    } catch (const InvalidArgument& e) {
      throw bad(e.what());
    }
    if (r.level == 2) read_level2_cases(j, &r, bad);
    out.push_back(r);
  }
  return out;
}

std::vector<ShardGap> shard_gaps(const fs::path& dir) {
  // One check per recorded selection and shard count, however many of its shards recorded it.
  std::map<std::string, ShardRecord> batches;  // by batch key (shard_batch_key) and shard count
  for (const ShardRecord& r : read_shard_records(dir)) {
    batches.emplace(shard_batch_key(r) + "\n" + std::to_string(r.sel.shard_count), r);
  }
  auto present = [&](const std::string& scheme, const std::string& id) {
    return fs::is_regular_file(case_manifest_path(dir, scheme, id)) &&
           fs::is_regular_file(case_tensors_path(dir, scheme, id));
  };
  std::vector<ShardGap> gaps;
  for (const auto& [key, r] : batches) {
    for (int i = 0; i < r.sel.shard_count; ++i) {
      ShardGap g;
      g.shard = r;
      g.shard.sel.shard_index = i;
      if (r.level == 2) {
        for (const ShardRecordCase& c : r.cases) {
          if (c.shard == i && !present(c.scheme, c.id)) g.missing.push_back(c.id);
        }
      } else {
        for (const auto& [s, row] : select_cases(g.shard.sel)) {
          if (!present(s->slug, row.id)) g.missing.push_back(row.id);
        }
      }
      if (!g.missing.empty()) gaps.push_back(std::move(g));
    }
  }
  return gaps;
}

}  // namespace posenc::golden
