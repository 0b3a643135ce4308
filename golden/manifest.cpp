#include "golden/manifest.hpp"

#include <bit>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "reference/common/errors.hpp"

namespace posenc::golden {

double CheckSpec::bound_for(const std::string& profile) const {
  auto it = bounds.find(profile);
  if (it != bounds.end()) return it->second;
  return bounds.at("strict");
}

double CheckSpec::phase_eps_for(const std::string& profile) const {
  auto it = phase_eps.find(profile);
  return it == phase_eps.end() ? 0.0 : it->second;
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw GoldenFileError(source + ": " + what);
}

DType dtype_from(const std::string& s, const std::string& source) {
  for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI64, DType::kI32}) {
    if (s == dtype_short(t)) return t;
  }
  bad(source, "unknown dtype \"" + s + "\"");
}

const nlohmann::json& need(const nlohmann::json& j, const char* key, const std::string& source,
                           const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(source, where + ": missing key \"" + key + "\"");
  return j.at(key);
}

std::string need_string(const nlohmann::json& j, const char* key, const std::string& source,
                        const std::string& where) {
  const auto& v = need(j, key, source, where);
  if (!v.is_string()) bad(source, where + ": \"" + key + "\" must be a string");
  return v.get<std::string>();
}

TensorSpec tensor_from(const nlohmann::json& j, bool expected, const std::string& source) {
  TensorSpec t;
  t.name = need_string(j, "name", source, "tensor");
  const std::string where = "tensor \"" + t.name + "\"";
  t.dtype = dtype_from(need_string(j, "dtype", source, where), source);
  t.stage = j.value("stage", std::string(expected ? "" : "input"));
  try {
    t.shape = shape_of(need(j, "shape", source, where));
  } catch (const nlohmann::json::exception&) {
    bad(source, where + ": shape must be a list of non-negative integers");
  }
  t.sha256 = j.value("sha256", std::string());
  if (!expected) return t;
  const auto& c = need(j, "check", source, where);
  t.check.kind = need_string(c, "kind", source, where + " check");
  if (t.check.kind != "exact" && t.check.kind != "ulp" && t.check.kind != "conditioned") {
    bad(source, where + ": unknown check kind \"" + t.check.kind + "\"");
  }
  try {
    t.check.bounds = need(c, "bounds", source, where).get<std::map<std::string, double>>();
    if (c.contains("phase_eps")) {
      t.check.phase_eps = c.at("phase_eps").get<std::map<std::string, double>>();
    }
  } catch (const nlohmann::json::exception&) {
    bad(source, where + ": check bounds must map profile names to numbers");
  }
  if (!t.check.bounds.count("strict")) bad(source, where + ": check has no \"strict\" bound");
  const auto comp = j.value("companions", nlohmann::json::object());
  t.exact = comp.value("exact", std::string());
  t.cond = comp.value("cond", std::string());
  t.phase = comp.value("phase", std::string());
  if (t.check.kind != "exact" && t.exact.empty()) {
    bad(source, where + ": a " + t.check.kind + " check needs an \"exact\" companion");
  }
  if (t.check.kind == "conditioned" && t.cond.empty()) {
    bad(source, where + ": a conditioned check needs a \"cond\" companion");
  }
  for (const auto& a : j.value("axes", nlohmann::json::array())) {
    AxisSpec ax;
    ax.name = a.value("name", std::string());
    ax.positions = a.value("positions", std::string());
    if (a.contains("pair_map")) ax.pair_map = a.at("pair_map").get<std::vector<int>>();
    if (a.contains("labels")) ax.labels = a.at("labels").get<std::vector<std::string>>();
    t.axes.push_back(std::move(ax));
  }
  if (!t.axes.empty() && t.axes.size() != t.shape.size()) {
    bad(source, where + ": axes has " + std::to_string(t.axes.size()) + " entries for rank " +
                    std::to_string(t.shape.size()));
  }
  return t;
}

}  // namespace

std::vector<std::int64_t> shape_of(const nlohmann::json& j) {
  std::vector<std::int64_t> s = j.get<std::vector<std::int64_t>>();
  for (auto v : s) {
    if (v < 0) throw nlohmann::json::type_error::create(302, "negative dimension", &j);
  }
  return s;
}

CaseSpec case_spec_from_json(const nlohmann::json& m, const std::string& source) {
  if (!m.is_object()) bad(source, "manifest must be a JSON object");
  if (need_string(m, "schema", source, "manifest") != kSchemaName) {
    bad(source, "schema is not \"" + std::string(kSchemaName) + "\"");
  }
  const auto& ver = need(m, "version", source, "manifest");
  if (!ver.is_number_integer() || ver.get<int>() != kSchemaVersion) {
    bad(source, "unsupported schema version " + ver.dump() + " (this posenc reads version " +
                    std::to_string(kSchemaVersion) + ")");
  }
  CaseSpec c;
  c.manifest = m;
  c.id = need_string(m, "id", source, "manifest");
  c.scheme = need_string(m, "scheme", source, "manifest");
  c.variant = m.value("variant", std::string());
  c.result = m.value("result", std::string("valid"));
  for (const auto& t : need(m, "inputs", source, "manifest")) {
    c.inputs.push_back(tensor_from(t, false, source));
  }
  for (const auto& t : need(m, "expected", source, "manifest")) {
    c.expected.push_back(tensor_from(t, true, source));
  }
  if (c.expected.empty()) bad(source, "manifest lists no expected tensor");
  return c;
}

CaseSpec case_spec_read(const std::filesystem::path& manifest_path) {
  const auto bytes = read_file(manifest_path);
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::parse_error& e) {
    bad(manifest_path.string(), std::string("invalid JSON: ") + e.what());
  }
  return case_spec_from_json(m, manifest_path.string());
}

nlohmann::json tensor_spec_to_json(const TensorSpec& t, bool expected) {
  nlohmann::json j;
  j["name"] = t.name;
  j["stage"] = t.stage;
  j["dtype"] = std::string(dtype_short(t.dtype));
  j["shape"] = t.shape;
  j["sha256"] = t.sha256;
  if (!expected) return j;
  j["check"] = {{"kind", t.check.kind}, {"bounds", t.check.bounds}};
  if (!t.check.phase_eps.empty()) j["check"]["phase_eps"] = t.check.phase_eps;
  nlohmann::json comp = nlohmann::json::object();
  if (!t.exact.empty()) comp["exact"] = t.exact;
  if (!t.cond.empty()) comp["cond"] = t.cond;
  if (!t.phase.empty()) comp["phase"] = t.phase;
  j["companions"] = comp;
  if (!t.axes.empty()) {
    nlohmann::json axes = nlohmann::json::array();
    for (const auto& a : t.axes) {
      nlohmann::json ja = {{"name", a.name}};
      if (!a.positions.empty()) ja["positions"] = a.positions;
      if (!a.pair_map.empty()) ja["pair_map"] = a.pair_map;
      if (!a.labels.empty()) ja["labels"] = a.labels;
      axes.push_back(ja);
    }
    j["axes"] = axes;
  }
  return j;
}

std::string manifest_text(const nlohmann::json& m) { return m.dump(1) + "\n"; }

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
