#include "golden/cases/catalog.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <re2/re2.h>

#include "golden/cases/plan_manifest.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

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
  const std::unique_ptr<AtomicFile> f = rule.open(dir / e.tensors, OutputKind::kGoldenTensors);
  const WrittenFile w = safetensors_write(*f, c.tensors, c.spilled,
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

namespace {

/// The entry of out/<scheme>/<id>.{json,safetensors} when both are regular files (not links)
/// and the manifest is a golden manifest of posenc; nullopt otherwise.
std::optional<CatalogEntry> found_entry(const FolderPtr& folder, const std::string& scheme,
                                        const std::string& id) {
  struct ::stat st {};
  const std::string mname = id + ".json", tname = id + ".safetensors";
  if (!folder || !folder->entry_stat(mname, &st) || !S_ISREG(st.st_mode) ||
      !folder->entry_stat(tname, &st) || !S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  const InputFile mf(folder->fd(), mname, (folder->path() / mname).string());
  if (!is_own_output(mf, OutputKind::kGoldenManifest)) return std::nullopt;
  CatalogEntry e;
  e.id = id;
  e.scheme = scheme;
  e.manifest = scheme + "/" + mname;
  e.tensors = scheme + "/" + tname;
  e.manifest_sha256 = sha256_file(mf);
  e.tensors_sha256 = sha256_file(InputFile(folder->fd(), tname, (folder->path() / tname).string()));
  const nlohmann::json m = read_json_file(mf);
  e.result = m.is_object() ? m.value("result", std::string("valid")) : "valid";
  return e;
}

/// out's catalog as posenc wrote it, by manifest and tensors path; empty when there is none
/// (or it cannot be read: then nothing is stale).
std::map<std::string, CatalogEntry> previous_catalog(const fs::path& out) {
  std::map<std::string, CatalogEntry> by_file;
  try {
    if (!is_own_output(out / "catalog.json", OutputKind::kCatalog)) return by_file;
    for (const CatalogEntry& e : catalog_read(out)) {
      by_file[e.manifest] = e;
      by_file[e.tensors] = e;
    }
  } catch (const std::exception&) {
    by_file.clear();
  }
  return by_file;
}

}  // namespace

std::size_t catalog_write_from_files(const fs::path& out, const OutputRule& rule,
                                     const std::map<std::string, std::string>& origins) {
  rule.check_dir(out);
  const std::map<std::string, CatalogEntry> before = previous_catalog(out);
  std::vector<CatalogEntry> entries;
  std::set<std::string> listed;
  std::map<std::string, FolderPtr> folders;
  auto folder_of = [&](const std::string& scheme) -> const FolderPtr& {
    auto it = folders.find(scheme);
    if (it == folders.end()) it = folders.emplace(scheme, rule.folder(out / scheme)).first;
    return it->second;
  };
  for (const auto& [s, row] : select_cases(CaseSelection{})) {
    if (auto e = found_entry(folder_of(s->slug), s->slug, row.id)) {
      listed.insert(e->manifest);
      entries.push_back(std::move(*e));
    }
  }
  std::vector<std::pair<std::string, std::string>> others;
  for (const auto& sch : schemes()) {
    const FolderPtr& f = folder_of(sch.slug);
    if (!f) continue;
    for (const std::string& name : f->names()) {
      if (name.size() > 5 && name.ends_with(".json") && !listed.count(sch.slug + "/" + name)) {
        others.emplace_back(sch.slug, name.substr(0, name.size() - 5));
      }
    }
  }
  std::sort(others.begin(), others.end());
  for (const auto& [scheme, id] : others) {
    auto e = found_entry(folder_of(scheme), scheme, id);
    if (!e) continue;
    if (auto o = origins.find(id); o != origins.end() && !o->second.empty()) {
      e->origin = o->second;
    } else if (auto b = before.find(e->manifest); b != before.end() && !b->second.origin.empty()) {
      e->origin = b->second.origin;
    } else {
      e->origin = "found";
    }
    entries.push_back(std::move(*e));
  }
  // plan.json files of the folder are listed with their SHA-256 (golden/cases/plan_manifest.hpp).
  rule.write_text(out / "catalog.json", OutputKind::kCatalog,
                  catalog_text_with_plans(catalog_text(entries), out));
  return entries.size();
}

StaleSweep sweep_stale(const fs::path& out, const OutputRule& rule, const std::set<std::string>& slugs,
                       const std::set<std::string>& ids_now) {
  StaleSweep r;
  rule.check_dir(out);
  if (const FolderPtr top = rule.folder(out)) r.temps += sweep_dead_temps(*top);
  const std::map<std::string, CatalogEntry> before = previous_catalog(out);
  for (const std::string& slug : slugs) {
    const FolderPtr f = rule.folder(out / slug);
    if (!f) continue;
    r.temps += sweep_dead_temps(*f);
    for (const std::string& name : f->names()) {
      const std::string rel = slug + "/" + name;
      struct ::stat st {};
      if (!f->entry_stat(name, &st)) continue;
      const std::string stem = fs::path(name).stem().string();
      if (name.starts_with(".posenc.") && name.ends_with(".tmp")) continue;  // a live run's
      if ((name.ends_with(".json") || name.ends_with(".safetensors")) && ids_now.count(stem)) continue;
      const auto b = before.find(rel);
      std::string why;
      if (!S_ISREG(st.st_mode)) {
        why = std::string("not a regular file: ") + (S_ISLNK(st.st_mode) ? "a symbolic link" : file_type_name(st.st_mode));
      } else if (b == before.end()) {
        why = "not written by posenc";
      } else if (!b->second.origin.empty()) {
        why = "a case of `" + (b->second.origin == "found" ? std::string("another run") : "posenc " + b->second.origin) + "`";
      } else {
        const std::string& sha = rel == b->second.manifest ? b->second.manifest_sha256 : b->second.tensors_sha256;
        const InputFile in(f->fd(), name, (f->path() / name).string());
        if (sha256_file(in) != sha) {
          why = "changed since posenc wrote it";
        } else if (::unlinkat(f->fd(), name.c_str(), 0) == 0) {
          r.removed.push_back(rel);
          continue;
        } else {
          why = std::string("cannot remove: ") + std::strerror(errno);
        }
      }
      r.kept.push_back(rel + " (" + why + ")");
    }
  }
  return r;
}

struct CaseMatcher::Impl {
  std::unique_ptr<re2::RE2> re;
};

CaseMatcher::CaseMatcher(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  if (pattern.empty()) return;
  if (pattern.size() > kMaxCasePatternBytes) {
    throw InvalidArgument("--case " + pattern.substr(0, 40) + "...: the pattern has " +
                          std::to_string(pattern.size()) + " characters, more than the " +
                          std::to_string(kMaxCasePatternBytes) + " a --case pattern may have");
  }
  re2::RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(8 << 20);
  impl_->re = std::make_unique<re2::RE2>(pattern, o);
  if (!impl_->re->ok()) {
    throw InvalidArgument("--case " + pattern + ": not a valid regular expression (" +
                          impl_->re->error() + ")");
  }
}

CaseMatcher::~CaseMatcher() = default;

bool CaseMatcher::matches(const std::string& id) const {
  return !impl_->re || re2::RE2::PartialMatch(id, *impl_->re);
}

std::vector<std::pair<const SchemeEntry*, CaseRow>> select_cases(const CaseSelection& sel) {
  const CaseMatcher match(sel.case_regex);
  if (!sel.scheme.empty()) scheme_by_slug(sel.scheme);  // validates the slug
  std::vector<std::pair<const SchemeEntry*, CaseRow>> all;
  for (const auto& s : schemes()) {
    if (!sel.scheme.empty() && s.slug != sel.scheme) continue;
    for (auto& row : s.cases()) {
      if (!match.matches(row.id)) continue;
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


ShardRecord level1_shard_record(const CaseSelection& sel) {
  ShardRecord r;
  r.level = 1;
  r.shard_index = sel.shard_index;
  r.shard_count = sel.shard_count;
  if (!sel.scheme.empty()) r.options.insert(r.options.end(), {"--scheme", sel.scheme});
  if (!sel.case_regex.empty()) r.options.insert(r.options.end(), {"--case", sel.case_regex});
  CaseSelection whole = sel;
  whole.shard_index = 0;
  whole.shard_count = 1;
  const auto all = select_cases(whole);
  std::vector<std::uint64_t> costs;
  for (const auto& [sch, row] : all) costs.push_back(case_cost(sch->slug, row.id));
  const std::vector<int> shard = balanced_shards(costs, sel.shard_count);
  for (std::size_t k = 0; k < all.size(); ++k) r.cases.push_back({all[k].first->slug, all[k].second.id, shard[k]});
  return r;
}

void shard_records_remove(const fs::path& dir, const OutputRule& rule) {
  rule.check_dir(dir);
  const FolderPtr f = rule.folder(dir / kShardRecordDir);
  if (!f) return;
  for (const std::string& name : f->names()) {
    struct ::stat st {};
    if (f->entry_stat(name, &st) && S_ISREG(st.st_mode)) ::unlinkat(f->fd(), name.c_str(), 0);
  }
  if (const FolderPtr top = rule.folder(dir)) ::unlinkat(top->fd(), kShardRecordDir, AT_REMOVEDIR);
}

fs::path shard_record_path(const fs::path& dir, const ShardRecord& r) {
  const std::string key = shard_batch_key(r);
  const std::string hash = sha256_hex(std::span<const std::uint8_t>(
      reinterpret_cast<const std::uint8_t*>(key.data()), key.size()));
  return dir / kShardRecordDir /
         (hash.substr(0, 16) + "-" + std::to_string(r.shard_index) + "-of-" +
          std::to_string(r.shard_count) + ".json");
}

std::vector<ShardRecord> read_shard_records(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(dir / kShardRecordDir, ec))) {
    for (const auto& f : fs::directory_iterator(dir / kShardRecordDir)) {
      if (f.path().extension() == ".json") files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::set<std::string> slugs;
  for (const auto& sch : schemes()) slugs.insert(sch.slug);
  std::vector<ShardRecord> out;
  for (const auto& f : files) out.push_back(shard_record_from_json(read_json_file(f), f.string(), slugs));
  return out;
}

std::map<std::string, std::string> shard_record_origins(const fs::path& dir) {
  std::map<std::string, std::string> o;
  for (const ShardRecord& r : read_shard_records(dir)) {
    if (r.level != 2) continue;
    for (const ShardRecordCase& c : r.cases) o[c.id] = "generate --level 2";
  }
  return o;
}

std::vector<ShardGap> shard_gaps(const fs::path& dir) {
  // One check per recorded selection and shard count, however many of its shards recorded it.
  std::map<std::string, ShardRecord> batches;  // by batch key (shard_batch_key) and shard count
  for (const ShardRecord& r : read_shard_records(dir)) {
    batches.emplace(shard_batch_key(r), r);
  }
  auto present = [&](const std::string& scheme, const std::string& id) {
    return fs::is_regular_file(case_manifest_path(dir, scheme, id)) &&
           fs::is_regular_file(case_tensors_path(dir, scheme, id));
  };
  std::vector<ShardGap> gaps;
  for (const auto& [key, r] : batches) {
    for (int i = 0; i < r.shard_count; ++i) {
      ShardGap g;
      g.shard = r;
      g.shard.shard_index = i;
      for (const ShardRecordCase& c : r.cases) {
        if (c.shard == i && !present(c.scheme, c.id)) g.missing.push_back(c.id);
      }
      if (!g.missing.empty()) gaps.push_back(std::move(g));
    }
  }
  return gaps;
}

}  // namespace posenc::golden
