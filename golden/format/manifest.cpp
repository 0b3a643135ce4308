#include "golden/format/manifest.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "golden/format/limits.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

std::string to_string(CheckKind kind) {
  switch (kind) {
    case CheckKind::kExact: return "exact";
    case CheckKind::kUlp: return "ulp";
    case CheckKind::kConditioned: return "conditioned";
  }
  return "exact";
}

std::optional<CheckKind> parse_check_kind(std::string_view name) {
  for (CheckKind k : {CheckKind::kExact, CheckKind::kUlp, CheckKind::kConditioned}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

const ProfileBudget& CheckSpec::profile(const std::string& name) const {
  auto it = profiles.find(name);
  if (it == profiles.end()) throw_invalid("CheckSpec::profile", "unknown profile", name);
  return it->second;
}

namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw GoldenFileError(source + ": " + what);
}

DType dtype_from(const std::string& s, const std::string& source, const std::string& where) {
  for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI64, DType::kI32}) {
    if (s == dtype_short(t)) return t;
  }
  bad(source, where + ": unknown dtype \"" + s + "\"");
}

const Json& need(const Json& j, const char* key, const std::string& source,
                 const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(source, where + ": missing key \"" + key + "\"");
  return j.at(key);
}

std::string need_string(const Json& j, const char* key, const std::string& source,
                        const std::string& where, bool non_empty = true) {
  const auto& v = need(j, key, source, where);
  if (!v.is_string()) bad(source, where + ": \"" + key + "\" must be a string");
  std::string s = v.get<std::string>();
  if (non_empty && s.empty()) bad(source, where + ": \"" + key + "\" must not be empty");
  return s;
}

bool is_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string need_sha(const Json& j, const std::string& source, const std::string& where) {
  std::string s = need_string(j, "sha256", source, where);
  if (!is_sha256(s)) bad(source, where + ": \"sha256\" must be 64 lower-case hex digits");
  return s;
}

std::vector<std::int64_t> need_shape(const Json& j, const std::string& source,
                                     const std::string& where) {
  try {
    return shape_of(need(j, "shape", source, where));
  } catch (const Json::exception&) {
    bad(source, where + ": shape must be a list of non-negative integers");
  }
}

double need_number(const Json& j, const char* key, const std::string& source,
                   const std::string& where) {
  const auto& v = need(j, key, source, where);
  if (!v.is_number()) bad(source, where + ": \"" + key + "\" must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(source, where + ": \"" + key + "\" must be finite");
  return d;
}

ProfileBudget budget_from(const Json& j, CheckKind kind, const std::string& source,
                          const std::string& where) {
  ProfileBudget b;
  if (!j.is_object()) bad(source, where + " must be an object");
  if (j.contains("not_applicable")) {
    b.applies = false;
    b.not_applicable = need_string(j, "not_applicable", source, where);
    return b;
  }
  b.bound = need_number(j, "bound", source, where);
  if (j.contains("ulps")) {
    if (kind != CheckKind::kConditioned) bad(source, where + ": only a conditioned check has \"ulps\"");
    b.ulps = need_number(j, "ulps", source, where);
  }
  if (j.contains("extra")) {
    if (kind == CheckKind::kExact) bad(source, where + ": an exact check has no extra budget");
    b.extra = need_string(j, "extra", source, where);
  }
  if (kind == CheckKind::kExact) {
    if (b.bound != 0.0) bad(source, where + ".bound must be 0 for an exact check (got " + j.at("bound").dump() + ")");
  } else if (!POSENC_MUTANT("format_manifest_bound_unchecked")) {
    if (b.bound < 0.0) bad(source, where + ".bound must be >= 0 (got " + j.at("bound").dump() + ")");
    if (b.ulps < 0.0) bad(source, where + ".ulps must be >= 0 (got " + j.at("ulps").dump() + ")");
    if (b.bound == 0.0 && b.ulps == 0.0 && b.extra.empty()) {
      bad(source, where + ": a budget needs a positive bound, ulps or an extra");
    }
  }
  if (j.contains("saturated")) {
    try {
      for (const auto& e : j.at("saturated")) {
        b.saturated[e.at(0).get<std::int64_t>()] = e.at(1).get<double>();
      }
    } catch (const Json::exception&) {
      bad(source, where + ".saturated must be a list of [position, share] pairs");
    }
  }
  if (j.contains("note")) b.note = need_string(j, "note", source, where, false);
  return b;
}

TensorSpec tensor_from(const Json& j, bool expected, const std::string& source,
                       const std::string& where0) {
  TensorSpec t;
  t.name = need_string(j, "name", source, where0);
  const std::string where = where0 + " \"" + t.name + "\"";
  t.dtype = dtype_from(need_string(j, "dtype", source, where), source, where);
  t.stage = expected ? need_string(j, "stage", source, where) : j.value("stage", std::string("input"));
  t.shape = need_shape(j, source, where);
  t.sha256 = need_sha(j, source, where);
  if (!expected) return t;
  const auto& c = need(j, "check", source, where);
  const std::string kind = need_string(c, "kind", source, where + " check");
  const std::optional<CheckKind> parsed = parse_check_kind(kind);
  if (!parsed) {
    bad(source, where + ": unknown check kind \"" + kind + "\"");
  }
  t.check.kind = *parsed;
  if (t.check.kind != CheckKind::kExact && !dtype_is_float(t.dtype)) {
    bad(source, where + ": a " + kind + " check needs a float dtype");
  }
  const auto& pj = need(c, "profiles", source, where + " check");
  if (!pj.is_object()) bad(source, where + ": check.profiles must be an object");
  for (const auto& [name, v] : pj.items()) {
    if (canonical_profile(name) != name) {
      bad(source, where + ": check.profiles has unknown profile \"" + name + "\" (known: " +
                      profile_list_text() + ")");
    }
    t.check.profiles[name] = budget_from(v, t.check.kind, source, where + " check.profiles." + name);
  }
  for (const auto& p : profiles()) {
    if (!t.check.profiles.count(p.name) && !POSENC_MUTANT("format_manifest_profile_missing_allowed")) {
      bad(source, where + ": check.profiles has no entry for profile \"" + p.name +
                      "\" (a budget or not_applicable)");
    }
  }
  const auto& comp = need(j, "companions", source, where);
  if (!comp.is_object()) bad(source, where + ": companions must be an object");
  for (const auto& [role, v] : comp.items()) {
    const std::string w = where + " companions." + role;
    CompanionSpec cs;
    cs.role = role;
    cs.name = need_string(v, "name", source, w);
    cs.dtype = dtype_from(need_string(v, "dtype", source, w), source, w);
    cs.sha256 = need_sha(v, source, w);
    if (!dtype_is_float(cs.dtype)) bad(source, w + ": a companion must have a float dtype");
    t.companions.push_back(cs);
  }
  auto companion = [&](const std::string& role) -> const CompanionSpec* {
    for (const auto& cs : t.companions) {
      if (cs.role == role) return &cs;
    }
    return nullptr;
  };
  if (const auto* e = companion("exact")) t.exact = e->name;
  if (const auto* e = companion("cond")) t.cond = e->name;
  if (t.check.kind != CheckKind::kExact && t.exact.empty()) {
    bad(source, where + ": a " + kind + " check needs an \"exact\" companion");
  }
  if (t.check.kind == CheckKind::kConditioned && t.cond.empty()) {
    bad(source, where + ": a conditioned check needs a \"cond\" companion");
  }
  for (auto& [name, b] : t.check.profiles) {
    if (b.extra.empty()) continue;
    const std::string& extra = b.extra;  // clang 14 (the fuzz build) cannot capture a binding
    const bool listed = std::any_of(t.companions.begin(), t.companions.end(), [&](const CompanionSpec& cs) {
      return cs.role.rfind("extra.", 0) == 0 && cs.name == extra;
    });
    if (!listed) {
      bad(source, where + ": check.profiles." + name + ".extra names \"" + b.extra +
                      "\", which is not one of its extra.* companions");
    }
  }
  for (const auto& a : j.value("alternatives", Json::array())) {
    AlternativeSpec alt;
    alt.name = need_string(a, "name", source, where + " alternatives");
    alt.description = need_string(a, "description", source, where + " alternatives");
    const auto* e = companion("alt." + alt.name + ".exact");
    if (!e) bad(source, where + ": alternative \"" + alt.name + "\" has no alt." + alt.name + ".exact companion");
    alt.exact = e->name;
    if (t.check.kind == CheckKind::kConditioned) {
      const auto* cc = companion("alt." + alt.name + ".cond");
      if (!cc) bad(source, where + ": alternative \"" + alt.name + "\" has no alt." + alt.name + ".cond companion");
      alt.cond = cc->name;
    }
    t.alternatives.push_back(alt);
  }
  for (const auto& a : j.value("axes", Json::array())) {
    AxisSpec ax;
    try {
      ax.name = a.value("name", std::string());
      ax.positions = a.value("positions", std::string());
      if (a.contains("pair_map")) ax.pair_map = a.at("pair_map").get<std::vector<int>>();
      if (a.contains("labels")) ax.labels = a.at("labels").get<std::vector<std::string>>();
    } catch (const Json::exception&) {
      bad(source, where + ": malformed axes entry");
    }
    t.axes.push_back(std::move(ax));
  }
  if (!t.axes.empty() && t.axes.size() != t.shape.size()) {
    bad(source, where + ": axes has " + std::to_string(t.axes.size()) + " entries for rank " +
                    std::to_string(t.shape.size()));
  }
  return t;
}

}  // namespace

std::vector<std::int64_t> shape_of(const Json& j) {
  std::vector<std::int64_t> s = j.get<std::vector<std::int64_t>>();
  for (auto v : s) {
    if (v < 0) throw Json::type_error::create(302, "negative dimension", &j);
  }
  return s;
}

bool is_plain_file_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    if (c == '/' || c == '\\' || c == '\0') return false;
  }
  return true;
}

CaseSpec case_spec_from_json(const Json& m, const std::string& source) {
  if (!m.is_object()) bad(source, "manifest must be a JSON object");
  if (need_string(m, "schema", source, "manifest") != kSchemaName) {
    bad(source, "schema is not \"" + std::string(kSchemaName) + "\"");
  }
  const auto& ver = need(m, "version", source, "manifest");
  if ((!ver.is_number_integer() || ver.get<int>() != kSchemaVersion) &&
      !POSENC_MUTANT("format_manifest_version_unchecked")) {
    bad(source, "unsupported schema version " + ver.dump() + " (this posenc reads version " +
                    std::to_string(kSchemaVersion) + "; regenerate with `posenc generate`)");
  }
  const auto& gen = need(m, "generator", source, "manifest");
  need_string(gen, "name", source, "manifest generator");
  need_string(gen, "version", source, "manifest generator");
  CaseSpec c;
  c.manifest = m;
  c.id = need_string(m, "id", source, "manifest");
  c.scheme = need_string(m, "scheme", source, "manifest");
  c.variant = need_string(m, "variant", source, "manifest", false);
  c.result = need_string(m, "result", source, "manifest");
  if (c.result != "valid" && c.result != "acceptable" && c.result != "invalid" &&
      !POSENC_MUTANT("format_manifest_result_unchecked")) {
    bad(source, "manifest: \"result\" must be valid, acceptable or invalid (got \"" + c.result + "\")");
  }
  const auto& level = need(m, "level", source, "manifest");
  if (!level.is_number_integer() || level.get<int>() < 1) {
    bad(source, "manifest: \"level\" must be an integer >= 1");
  }
  if (!POSENC_MUTANT("format_manifest_description_optional")) need_string(m, "description", source, "manifest");
  c.tensors_file = need_string(m, "tensors_file", source, "manifest", false);
  if (!is_plain_file_name(c.tensors_file) && !POSENC_MUTANT("format_manifest_path_unchecked")) {
    bad(source, "manifest: \"tensors_file\" must be a plain file name in the manifest's folder "
                "(no path separators, not . or ..; got \"" + c.tensors_file + "\")");
  }
  const auto& ins = need(m, "inputs", source, "manifest");
  const auto& exs = need(m, "expected", source, "manifest");
  if (!ins.is_array()) bad(source, "manifest: \"inputs\" must be a list");
  if (!exs.is_array()) bad(source, "manifest: \"expected\" must be a list");
  for (std::size_t i = 0; i < ins.size(); ++i) {
    c.inputs.push_back(tensor_from(ins[i], false, source, "inputs[" + std::to_string(i) + "]"));
  }
  for (std::size_t i = 0; i < exs.size(); ++i) {
    c.expected.push_back(tensor_from(exs[i], true, source, "expected[" + std::to_string(i) + "]"));
  }
  if (c.expected.empty()) bad(source, "manifest lists no expected tensor");
  std::set<std::string> names;
  auto unique = [&](const std::string& n) {
    if (!names.insert(n).second) bad(source, "manifest names tensor \"" + n + "\" twice");
  };
  for (const auto& t : c.inputs) unique(t.name);
  for (const auto& t : c.expected) {
    unique(t.name);
    for (const auto& cs : t.companions) unique(cs.name);
  }
  for (const auto& d : m.value("detection", Json::array())) {
    DetectionSpec ds;
    ds.flag = need_string(d, "flag", source, "manifest detection");
    try {
      ds.stages = d.at("stages").get<std::vector<std::string>>();
    } catch (const Json::exception&) {
      bad(source, "manifest detection \"" + ds.flag + "\": stages must be a list of names");
    }
    ds.blind = d.value("blind", std::string());
    c.detection.push_back(std::move(ds));
  }
  if (m.contains("mistake_detection")) {
    const Json& md = m.at("mistake_detection");
    if (!md.is_object()) bad(source, "manifest mistake_detection must be an object {profile: {mistake: [stages]}}");
    for (const auto& [profile, mistakes] : md.items()) {
      if (canonical_profile(profile) != profile) {
        bad(source, "manifest mistake_detection has unknown profile \"" + profile + "\" (known: " + profile_list_text() + ")");
      }
      if (!mistakes.is_object()) bad(source, "manifest mistake_detection \"" + profile + "\" must map mistakes to stages");
      for (const auto& [mistake, stages] : mistakes.items()) {
        try {
          c.mistake_stages[profile][mistake] = stages.get<std::vector<std::string>>();
        } catch (const Json::exception&) {
          bad(source, "manifest mistake_detection \"" + profile + "\" \"" + mistake + "\": stages must be a list of names");
        }
        for (const auto& st : c.mistake_stages[profile][mistake]) {
          if (!std::any_of(c.expected.begin(), c.expected.end(), [&](const TensorSpec& t) { return t.name == st; })) {
            bad(source, "manifest mistake_detection \"" + profile + "\" \"" + mistake + "\" names stage \"" + st +
                            "\", which is not an expected tensor");
          }
        }
      }
    }
  }
  if (m.contains("control_detection")) {
    const Json& cd = m.at("control_detection");
    if (!cd.is_object())
      bad(source, "manifest control_detection must be an object {profile: [stages]}");
    for (const auto& [profile, stages] : cd.items()) {
      if (canonical_profile(profile) != profile) {
        bad(source, "manifest control_detection has unknown profile \"" + profile +
                        "\" (known: " + profile_list_text() + ")");
      }
      try {
        c.control_stages[profile] = stages.get<std::vector<std::string>>();
      } catch (const Json::exception&) {
        bad(source,
            "manifest control_detection \"" + profile + "\": stages must be a list of names");
      }
      for (const auto& st : c.control_stages[profile]) {
        if (!std::any_of(c.expected.begin(), c.expected.end(),
                         [&](const TensorSpec& t) { return t.name == st; })) {
          bad(source, "manifest control_detection \"" + profile + "\" names stage \"" + st +
                          "\", which is not an expected tensor");
        }
      }
    }
  }
  return c;
}

CaseSpec case_spec_read(const std::filesystem::path& manifest_path) {
  return case_spec_from_json(read_json_file(manifest_path), manifest_path.string());
}

Json tensor_spec_to_json(const TensorSpec& t, bool expected) {
  Json j;
  j["name"] = t.name;
  j["stage"] = t.stage;
  j["dtype"] = std::string(dtype_short(t.dtype));
  j["shape"] = t.shape;
  j["sha256"] = t.sha256;
  if (!expected) return j;
  Json prof = Json::object();
  for (const auto& [name, b] : t.check.profiles) {
    Json jb;
    if (!b.applies) {
      jb["not_applicable"] = b.not_applicable;
    } else {
      jb["bound"] = b.bound;
      if (b.ulps != 0.0) jb["ulps"] = b.ulps;
      if (!b.extra.empty()) jb["extra"] = b.extra;
      if (!b.saturated.empty()) {
        Json sat = Json::array();
        for (const auto& [pos, share] : b.saturated) sat.push_back({pos, share});
        jb["saturated"] = sat;
      }
      if (!b.note.empty()) jb["note"] = b.note;
    }
    prof[name] = jb;
  }
  j["check"] = {{"kind", to_string(t.check.kind)}, {"profiles", prof}};
  Json comp = Json::object();
  for (const auto& cs : t.companions) {
    comp[cs.role] = {{"name", cs.name}, {"dtype", std::string(dtype_short(cs.dtype))},
                     {"sha256", cs.sha256}};
  }
  j["companions"] = comp;
  if (!t.alternatives.empty()) {
    Json alts = Json::array();
    for (const auto& a : t.alternatives) alts.push_back({{"name", a.name}, {"description", a.description}});
    j["alternatives"] = alts;
  }
  if (!t.axes.empty()) {
    Json axes = Json::array();
    for (const auto& a : t.axes) {
      Json ja = {{"name", a.name}};
      if (!a.positions.empty()) ja["positions"] = a.positions;
      if (!a.pair_map.empty()) ja["pair_map"] = a.pair_map;
      if (!a.labels.empty()) ja["labels"] = a.labels;
      axes.push_back(ja);
    }
    j["axes"] = axes;
  }
  return j;
}

std::string manifest_text(const Json& m) { return m.dump(1) + "\n"; }

std::string hex_bits_f64(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx",
                static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v)));
  return buf;
}

std::string hex_bits_f32(float v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", std::bit_cast<std::uint32_t>(v));
  return buf;
}

}  // namespace posenc::golden
